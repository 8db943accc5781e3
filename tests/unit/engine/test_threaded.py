"""The threaded path (clients of a round on several CPU threads) agrees with the sequential one.

Every client runs exactly the sequential computation on a private model, so parameters and
round metrics agree to float tolerance (one intra-op thread per worker may pick other kernels
than the default thread count).
"""

import warnings

import pytest
import torch

from fedlib.algorithms.client_training import fit_client
from fedlib.engine import engine
from fedlib.engine.backends import stacked, threaded
from tests.helpers import one_round, tiny_config

PKD_ARGS = {"warmup_rounds": 0, "expert_rounds": 1, "groups": [[0, 1], [2, 3, 4]]}


pytestmark = pytest.mark.usefixtures("two_threads")


LENET_ROUND = dict(model="lenet5", beta=0.3, max_train_samples=200, max_test_samples=60, rounds=1,
                   batch_size=16, lr=0.01, weight_decay=1e-3, seed=3)


@pytest.mark.parametrize("method, args", [
    ("fedavg", {}), ("fedprox", {"mu": 0.1}), ("fedvls", {"variant": "official"}), ("fedlmd", {}),
    ("fedcsd", {"mu": 0.5, "tau": 4.0}), ("pkd", PKD_ARGS),
])
def test_threads_match_sequential(method, args):
    cfg = tiny_config(LENET_ROUND, method=method, method_args=args)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)  # no fallback for these methods
        reference, ref_metrics = one_round(cfg)
        state, metrics = one_round(cfg.replace(backend="threads"))
    start = engine.prepare(cfg)[0].model.state_dict()
    assert max(float((reference[k] - start[k]).abs().max()) for k in reference) > 1e-3, "training moved the model"
    for key, value in reference.items():
        assert torch.allclose(value, state[key], atol=1e-5, rtol=0), key
    assert metrics.keys() == ref_metrics.keys()
    assert metrics["clients"] == ref_metrics["clients"] and metrics["local_steps"] == ref_metrics["local_steps"]
    assert torch.get_num_threads() == 2, "the intra-op thread count is restored after the round"


def test_the_round_really_uses_several_threads(monkeypatch):
    seen = set()
    original = fit_client

    def recording(*args, **kwargs):
        import threading

        seen.add(threading.get_ident())
        return original(*args, **kwargs)

    monkeypatch.setattr(threaded, "fit_client", recording)
    one_round(tiny_config(LENET_ROUND, backend="threads", clients=6))
    assert len(seen) == 2


def test_unsafe_rounds_fall_back_with_one_warning():
    stacked._WARNED.clear()
    cfg = tiny_config(LENET_ROUND, backend="threads", method="fedsam", max_train_samples=80)
    with pytest.warns(UserWarning, match="overrides the 'train_step' hook"):
        engine.run(cfg, use_store=False, progress=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)  # said once
        engine.run(cfg, use_store=False, progress=False)


def test_dropout_and_hooks_are_reasons_to_fall_back():
    server, algorithm = engine.prepare(tiny_config(LENET_ROUND, model="vgg9", max_train_samples=80))
    assert "dropout" in threaded.fallback_reason(server, algorithm, [])
    server, algorithm = engine.prepare(tiny_config(LENET_ROUND))
    assert threaded.fallback_reason(server, algorithm, []) is None
    assert "hooks" in threaded.fallback_reason(server, algorithm, [object()])


def test_auto_picks_threads_on_a_cpu_and_falls_back_silently(monkeypatch):
    used = []
    monkeypatch.setattr(threaded, "train_round", lambda *a, **k: used.append("threads") or [])
    server, algorithm = engine.prepare(tiny_config(LENET_ROUND, backend="auto"))
    engine._train_clients(server, algorithm, [0, 1], 0.01, [])
    assert used == ["threads"]
    monkeypatch.undo()
    stacked._WARNED.clear()
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        engine.run(tiny_config(LENET_ROUND, method="fedsam", backend="auto", max_train_samples=80), use_store=False,
                   progress=False)


def test_hooks_keep_the_sequential_path():
    class Watch:
        clients = []

        def on_client_end(self, server, ctx, model, update):
            self.clients.append(ctx.client_id)

    watch = Watch()
    server, algorithm = engine.prepare(tiny_config(LENET_ROUND, backend="auto"))
    metrics = engine.run_round(server, algorithm, hooks=[watch])
    assert watch.clients == metrics["clients"], "every client seen, in order"
