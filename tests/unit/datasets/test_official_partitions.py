"""The FedVLS authors' data handling, offered as options: their quantity split, their pooled
75/25 MNIST split, and their drop_last client loaders.

Facts (docs/facts.md#quantity, from krumpguo/FedVLS): ``system/dataset_utils.py`` cuts each class of
the "s" partition with ``np.random.randint(max(fair/10, 10/C), high, holders-1)``, high = the class
size on CIFAR-10 and ``fair`` otherwise; ``system/data/generate_mnist.py`` pools MNIST's train and
test sets, keeps 75 % for training and builds its client loaders with ``drop_last=True``.
"""

import math
import warnings

import numpy as np
import pytest
import torch

from fedlib.core.config import RunConfig
from fedlib.datasets.data import SPLITS, Dataset, apply_split, check_dataset_options, make_synthetic
from fedlib.datasets.partition import make_partition, official_quantity_sizes, quantity_holders
from fedlib.engine import engine
from fedlib.errors import FedlibError


class ScriptedRng:
    """Stands in for np.random.Generator: returns the given draws, records the bounds asked for."""

    def __init__(self, *draws: int):
        self.draws = list(draws)
        self.calls: list[tuple[int, int, int]] = []

    def integers(self, low, high, size):
        self.calls.append((low, high, size))
        taken, self.draws = self.draws[:size], self.draws[size:]
        return np.array(taken, dtype=np.int64)


# ----------------------------------------------------------------- quantity split: the rule by hand

@pytest.mark.parametrize("total, holders, classes, bounds, draws, sizes", [
    # CIFAR-100: fair 250, low max(25, 0.1) = 25, high fair = 250 -> randint(25, 250)
    (500, 2, 100, (25, 250), [137], [137, 363]),
    # CIFAR-10: fair 2500, low max(250, 1) = 250, high = the class size -> the second holder may get 1
    (5000, 2, 10, (250, 5000), [4999], [4999, 1]),
    # TinyImageNet, 3 holders: fair 166.67, low int(16.67) = 16, high int(166.67) = 166
    (500, 3, 200, (16, 166), [100, 165], [100, 165, 235]),
    # a tiny class: fair 3.5, low int(max(0.35, 0.1)) = 0, high int(3.5) = 3
    (7, 2, 100, (0, 3), [2], [2, 5]),
    # CIFAR-10 rule, 3 holders overdrawing: slices past the class end are cut short, the last is empty
    (30, 3, 10, (1, 30), [20, 25], [20, 10, 0]),
])
def test_official_sizes_follow_the_codes_arithmetic(total, holders, classes, bounds, draws, sizes):
    rng = ScriptedRng(*draws)
    assert official_quantity_sizes(total, holders, classes, rng) == sizes
    assert rng.calls == [(*bounds, holders - 1)]


def test_official_split_end_to_end_on_forced_draws():
    # 10 classes x 2 samples: fair 1, randint(1, 2) can only give 1, so each holder gets one sample
    labels = np.repeat(np.arange(10), 2)
    partition = make_partition("quantity", labels, 10, 10, seed=0, classes_per_client=2,
                               quantity_split="official")
    expected = np.zeros((10, 10), dtype=np.int64)
    for c, clients in enumerate(quantity_holders(10, 10, 2)):
        expected[clients, c] = 1
    assert np.array_equal(partition.counts, expected)
    assert partition.params["quantity_split"] == "official"
    # 100 classes x 3 samples: fair 1.5, randint(0, 1) can only give 0: first holders get nothing
    labels = np.repeat(np.arange(100), 3)
    partition = make_partition("quantity", labels, 10, 100, seed=5, classes_per_client=20,
                               quantity_split="official")
    assert partition.sizes().tolist() == [0, 60] * 5


def test_official_split_rejects_classes_too_small_for_its_range():
    labels = np.repeat(np.arange(5), 4)  # 5 classes, 2 holders each: fair 2, randint(int(10/5), 2) is empty
    with pytest.raises(FedlibError, match="symmetric"):
        make_partition("quantity", labels, 10, 5, seed=0, classes_per_client=1, quantity_split="official")
    with pytest.raises(FedlibError, match="unknown quantity_split"):
        make_partition("quantity", labels, 10, 5, seed=0, classes_per_client=1, quantity_split="paper")


# ----------------------------------------------------------------- quantity split: the statistics

def split_statistics(split: str, seeds=range(10)) -> tuple[float, float]:
    """Mean share of a class held by its first holder, and the odd/even client size ratio, on
    CIFAR-100-like labels (100 classes x 500, 10 clients, s = 20), pooled over seeds."""
    labels = np.repeat(np.arange(100), 500)
    shares, odd, even = [], 0, 0
    for seed in seeds:
        partition = make_partition("quantity", labels, 10, 100, seed=seed, classes_per_client=20,
                                   quantity_split=split)
        first = [holders[0] for holders in quantity_holders(10, 100, 20)]
        shares += [partition.counts[k, c] / 500 for c, k in enumerate(first)]
        odd += partition.sizes()[1::2].sum()
        even += partition.sizes()[0::2].sum()
    return float(np.mean(shares)), odd / even


def test_official_split_matches_the_codes_statistics():
    share, ratio = split_statistics("official")
    # randint(25, 250): mean first share 137 / 500 = 0.274, odd/even 363 / 137 = 2.65
    assert share == pytest.approx(0.274, abs=0.02)
    assert ratio == pytest.approx(2.65, abs=0.2)


def test_default_split_keeps_even_shares():
    share, ratio = split_statistics("symmetric")
    assert share == pytest.approx(0.50, abs=0.02)
    assert ratio == pytest.approx(1.0, abs=0.1)


def test_quantity_split_is_a_config_option_hashed_only_when_set():
    plain = RunConfig(partition="quantity")
    assert "quantity_split" not in plain.hashed_fields(), "stored runs keep their hashes"
    assert RunConfig(partition="quantity", quantity_split="symmetric").hash() == plain.hash()
    official = RunConfig(partition="quantity", quantity_split="official")
    assert official.hash() != plain.hash()
    with pytest.raises(FedlibError, match="unknown quantity_split"):
        RunConfig(quantity_split="paper")


def test_quantity_split_reaches_the_partition():
    cfg = RunConfig(dataset="synthetic", model="mlp", partition="quantity", classes_per_client=2,
                    quantity_split="official", device="cpu")
    server, _ = engine.prepare(cfg)
    assert server.data.partition.params["quantity_split"] == "official"


# ----------------------------------------------------------------- the pooled 75/25 split

def numbered_dataset(n_train: int = 90, n_test: int = 31) -> Dataset:
    """A tiny dataset whose group ids number the samples: train 0..n_train-1, then test."""
    base = make_synthetic(num_classes=2, train_per_class=n_train // 2 + 1, test_per_class=n_test // 2 + 1,
                          image_shape=(1, 4, 4))
    return Dataset(name="numbered", train_x=base.train_x[:n_train], train_y=base.train_y[:n_train],
                   test_x=base.test_x[:n_test], test_y=base.test_y[:n_test], class_names=["a", "b"],
                   mean=(0.5,), std=(0.25,), train_groups=np.arange(n_train),
                   test_groups=n_train + np.arange(n_test))


def test_pooled_split_sizes_cover_the_pool_and_are_disjoint():
    pooled = apply_split(numbered_dataset(), "pooled_75_25", seed=0)
    assert len(pooled.train_y) == math.floor(0.75 * 121) == 90
    assert len(pooled.test_y) == 31
    ids = np.concatenate([pooled.train_groups, pooled.test_groups])
    assert sorted(ids.tolist()) == list(range(121))  # disjoint, and covers train + test
    assert pooled.test_groups.max() < 121 and pooled.train_groups.min() >= 0
    assert set(pooled.test_groups) != set(range(90, 121)), "the old test set is not the new one"


def test_pooled_split_is_deterministic_per_seed():
    a, b = (apply_split(numbered_dataset(), "pooled_75_25", seed=4) for _ in range(2))
    assert np.array_equal(a.train_groups, b.train_groups) and torch.equal(a.train_x, b.train_x)
    c = apply_split(numbered_dataset(), "pooled_75_25", seed=5)
    assert not np.array_equal(a.train_groups, c.train_groups)


def test_train_eval_split_tests_on_the_training_part():
    data = numbered_dataset()
    pooled = apply_split(data, "pooled_75_25", seed=1)
    train_eval = apply_split(data, "pooled_75_25_train_eval", seed=1)
    assert np.array_equal(train_eval.train_groups, pooled.train_groups)
    assert torch.equal(train_eval.test_x, pooled.train_x) and torch.equal(train_eval.test_y, pooled.train_y)
    assert apply_split(data, "standard", seed=1) is data


def test_split_is_a_dataset_option_for_every_dataset():
    for name in ("mnist", "digits", "synthetic", "femnist"):
        for split in SPLITS:
            check_dataset_options(name, {"split": split})
    with pytest.raises(FedlibError, match="unknown split"):
        check_dataset_options("mnist", {"split": "pooled"})
    assert RunConfig(dataset_options={"split": "standard"}).hash() == RunConfig().hash()
    assert RunConfig(dataset_options={"split": "pooled_75_25"}).hash() != RunConfig().hash()


def test_run_dataset_is_pooled_with_the_run_seed():
    cfg = RunConfig(dataset="digits", model="mlp", dataset_options={"split": "pooled_75_25"}, seed=2)
    dataset = engine.load_run_dataset(cfg)
    assert (len(dataset.train_y), len(dataset.test_y)) == (1347, 450)  # 1797 digits
    again = engine.load_run_dataset(cfg.replace(seed=3))
    assert not torch.equal(dataset.train_y, again.train_y)


# ----------------------------------------------------------------- drop_last

def drop_last_config(**changes) -> RunConfig:
    # Dir(0.3) over 300 samples: 4 clients of different sizes, batch 16 leaves partial batches
    base = dict(dataset="synthetic", model="lenet5", partition="dirichlet", beta=0.3, clients=4,
                max_train_samples=300, max_test_samples=100, rounds=1, local_epochs=2, batch_size=16,
                lr=0.01, momentum=0.5, seed=3, device="cpu", drop_last=True)
    base.update(changes)
    return RunConfig(**base)


def test_drop_last_yields_full_batches_only():
    server, _ = engine.prepare(drop_last_config())
    for k in range(4):
        client = server.data.client(k)
        sizes = [len(y) for _, y in client.train_batches(16, 2, torch.Generator().manual_seed(0))]
        assert sizes == [16] * (2 * (client.num_samples // 16))
        assert client.steps_per_epoch(16) == client.num_samples // 16
    assert any(server.data.client(k).num_samples % 16 for k in range(4))


def test_drop_last_is_hashed_only_when_set():
    assert "drop_last" not in RunConfig().hashed_fields()
    assert RunConfig(drop_last=True).hash() != RunConfig().hash()
    with pytest.raises(FedlibError, match="drop_last"):
        RunConfig(drop_last="yes")


@pytest.mark.parametrize("method", ["fedavg", "fedvls"])
def test_drop_last_steps_agree_on_sequential_and_stacked_paths(method, torch_threads):
    torch_threads(1)
    cfg = drop_last_config(method=method)
    seq_server, seq_alg = engine.prepare(cfg)
    sizes = [seq_server.data.client(k).num_samples for k in range(4)]
    seq_metrics = engine.run_round(seq_server, seq_alg)
    stk_server, stk_alg = engine.prepare(cfg.replace(backend="stacked"))
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)  # the stacked path really ran
        stk_metrics = engine.run_round(stk_server, stk_alg)
    expected = sum(2 * (n // 16) for n in sizes)
    assert expected < sum(2 * math.ceil(n / 16) for n in sizes)
    assert seq_metrics["local_steps"] == stk_metrics["local_steps"] == expected
    for key, value in seq_server.model.state_dict().items():
        assert torch.allclose(value.float(), stk_server.model.state_dict()[key].float(), atol=1e-5), key
