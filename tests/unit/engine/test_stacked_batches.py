"""The stacked path's batches drawn for all clients at once are, bit for bit, the per-client draw.

Both draws read each client's own keyed generator in the same order (epoch order, then the
augmentation's numbers), so the tensors must be equal, not close; and a stacked round trained on
either draw must end with the same tensors.
"""

import warnings

import pytest
import torch

from fedlib.algorithms.client_training import seeded_batches
from fedlib.core.state import keyed_seed, sample_clients
from fedlib.datasets.augment import AUGMENTATIONS
from fedlib.engine import engine
from fedlib.engine.backends import stacked, stacked_batches
from fedlib.engine.backends.stacked_batches import draw_per_client, draw_together, together_reason
from tests.helpers import tiny_config

pytestmark = pytest.mark.usefixtures("one_thread")

# CIFAR-shaped synthetic images, eight Dir(0.3) clients of unequal sizes; batch 8 leaves partial
# last batches, so steps mix a full-size group with smaller ones.
IMAGES = dict(dataset="synthetic", dataset_options={"image_shape": (3, 32, 32), "train_per_class": 12,
                                                    "test_per_class": 2},
              partition="dirichlet", beta=0.3, clients=8, batch_size=8, local_epochs=2, seed=5)


def _iterators(server, cfg, clients):
    """Each client's batches from its keyed generator, as client_setup makes them."""
    return [seeded_batches(server.data.client(k), cfg.batch_size, cfg.local_epochs, keyed_seed(cfg.seed, 0, k))
            for k in clients]


def _assert_same_groups(old, new):
    assert [m for m, _, _ in old] == [m for m, _, _ in new]
    for (_, x_old, y_old), (_, x_new, y_new) in zip(old, new):
        assert x_old.shape == x_new.shape and x_old.stride() == x_new.stride()
        assert x_old.dtype == x_new.dtype and torch.equal(x_old, x_new)
        assert torch.equal(y_old, y_new)


@pytest.mark.parametrize("augmentation", sorted(AUGMENTATIONS))
@pytest.mark.parametrize("channels_last", [False, True])
def test_drawing_all_clients_at_once_is_the_per_client_draw(augmentation, channels_last):
    cfg = tiny_config(IMAGES, augmentation=augmentation, channels_last=channels_last)
    server, _ = engine.prepare(cfg)
    clients = list(range(cfg.clients))
    steps = [server.data.client(k).steps_per_epoch(cfg.batch_size) * cfg.local_epochs for k in clients]
    clients = [k for _, k in sorted(zip(steps, clients), key=lambda s: -s[0])]  # as the stack orders them
    steps = sorted(steps, reverse=True)
    old, new = _iterators(server, cfg, clients), _iterators(server, cfg, clients)
    assert together_reason(new) is None
    mixed = 0
    for t in range(steps[0]):
        active = sum(1 for s in steps if s > t)
        groups = draw_together(new, active)
        _assert_same_groups(draw_per_client(old, active), groups)
        mixed += len(groups) > 1
    assert steps[0] > 2 and active < cfg.clients and mixed > 0  # several steps, shrinking stack, partial batches


def test_batches_that_cannot_be_drawn_at_once_are_drawn_per_client():
    cfg = tiny_config(IMAGES, augmentation="crop_flip")
    server, _ = engine.prepare(cfg)
    plain = [iter(list(_iterators(server, cfg, [k])[0])) for k in range(2)]
    assert together_reason(plain) == "a client's batches are not TrainBatches"
    groups = stacked_batches.draw_batches(plain, 2)
    _assert_same_groups(draw_per_client(_iterators(server, cfg, [0, 1]), 2), groups)


@pytest.mark.parametrize("augmentation", ["crop_flip_cutout", "crop_flip_autoaugment"])
def test_a_stacked_round_on_the_joint_draw_is_the_round_on_the_per_client_draw(monkeypatch, augmentation):
    cfg = tiny_config(IMAGES, model="cnn2", augmentation=augmentation, local_epochs=1, backend="stacked")

    def one_round():
        server, algorithm = engine.prepare(cfg)
        algorithm.begin_round(server)
        server.round_clients = sample_clients(cfg.seed, 0, cfg.clients, cfg.participation)
        with warnings.catch_warnings():
            warnings.simplefilter("error", UserWarning)  # fedavg stays stacked
            return stacked.train_round(server, algorithm, server.round_clients, cfg.lr)

    new = one_round()
    start = engine.prepare(cfg)[0].model.state_dict()
    assert max(float((new[0].state[k] - v).abs().max()) for k, v in start.items()) > 1e-3  # it trained
    monkeypatch.setattr(stacked, "draw_batches", draw_per_client)
    old = one_round()
    assert [u.client_id for u in new] == [u.client_id for u in old]
    for a, b in zip(new, old):
        assert a.num_steps == b.num_steps and a.state.keys() == b.state.keys()
        assert all(torch.equal(a.state[k], b.state[k]) for k in a.state)
