"""How often rendering asks the store about a config (issue 46): run_all serving stored runs
should look each config up once, and compute each config object's hash once."""

import collections
import warnings

import pytest

from fedlib import store
from fedlib.core import config as config_module
from fedlib.orchestration import experiments
from fedlib.store import serving
from tests.helpers import tiny_config

LOOKUPS = ("is_stored", "served_record", "reference_record")


def _stored(folder, cfg, accuracy):
    """A complete, sealed run folder of ``cfg`` written by hand (one evaluated round)."""
    record = store.RunRecord(folder)
    record.write_config(cfg)
    record.write_meta({"code_revision": "a" * 40})
    record.write_rounds([{"round": 0, "accuracy": accuracy, "loss": 1.0, "class_accuracy": [accuracy],
                          "seconds": 0.0}])
    record.write_summary({"config_hash": cfg.hash(), "final_accuracy": accuracy, "best_accuracy": accuracy,
                          "best_round": 0, "final_loss": 1.0, "class_accuracy": [accuracy], "class_names": ["0"],
                          "rounds_run": 1, "train_seconds": 1.0, "diverged": False})
    record.seal()
    return record


@pytest.fixture
def counted(monkeypatch):
    """Calls to the store's lookups, per function name and config hash, wherever they are called from."""
    calls = collections.Counter()
    for name in LOOKUPS:
        original = getattr(serving, name)

        def counting(cfg, *args, _name=name, _original=original, **kwargs):
            calls[_name, cfg.hash()] += 1
            return _original(cfg, *args, **kwargs)

        monkeypatch.setattr(serving, name, counting)
        if hasattr(store, name):
            monkeypatch.setattr(store, name, counting)
    return calls


@pytest.fixture
def stores(tmp_path, monkeypatch):
    """Three stored configs: one in the reference store, two in the working store."""
    reference, work = tmp_path / "reference", tmp_path / "work"
    monkeypatch.setenv("FEDLIB_REFERENCE", str(reference))
    configs = [tiny_config(rounds=1, seed=seed) for seed in range(3)]
    _stored(reference / configs[0].hash(), configs[0], 0.5)
    for cfg, accuracy in zip(configs[1:], (0.6, 0.7)):
        _stored(work / cfg.hash(), cfg, accuracy)
    return configs, work


def _render(configs, work):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return experiments.run_all(configs, results_dir=work, progress=False)


def test_run_all_looks_each_config_up_once(stores, counted):
    configs, work = stores
    results = _render(configs, work)
    assert [r.final_accuracy for r in results] == [0.5, 0.6, 0.7]
    for cfg in configs:  # before issue 46: is_stored twice and served_record once (reference_record up to 3 times)
        assert counted["served_record", cfg.hash()] == 1
        assert counted["is_stored", cfg.hash()] == 0
        assert counted["reference_record", cfg.hash()] == 1  # inside served_record


def test_a_repeated_config_is_looked_up_once_and_served_twice(stores, counted):
    configs, work = stores
    results = _render([configs[1], configs[1]], work)
    assert [r.final_accuracy for r in results] == [0.6, 0.6]
    assert counted["served_record", configs[1].hash()] == 1


def test_each_config_object_computes_its_hash_once(stores, monkeypatch):
    configs, work = stores
    fresh = [tiny_config(rounds=1, seed=seed) for seed in range(3)]  # equal configs, nothing cached yet
    computed, alive = collections.Counter(), []
    original = config_module.RunConfig.hashed_fields

    def counting(self):
        computed[id(self)] += 1
        alive.append(self)  # no id reused while counting
        return original(self)

    monkeypatch.setattr(config_module.RunConfig, "hashed_fields", counting)
    results = _render(fresh, work)
    assert [r.final_accuracy for r in results] == [0.5, 0.6, 0.7]
    assert [computed[id(cfg)] for cfg in fresh] == [1, 1, 1]
    assert max(computed.values()) == 1
    assert [cfg.hash() for cfg in fresh] == [cfg.hash() for cfg in configs]


def test_a_cached_hash_follows_an_in_place_edit_of_method_args():
    cfg = tiny_config(rounds=1, method="fedprox")
    before = cfg.hash()
    cfg.method_args["mu"] = 0.5  # frozen fields, but a dict can still be edited in place
    assert cfg.hash() != before
    assert cfg.hash() == tiny_config(rounds=1, method="fedprox", method_args={"mu": 0.5}).hash()
    assert cfg == tiny_config(rounds=1, method="fedprox", method_args={"mu": 0.5})  # the cache is no field


def test_the_executor_asks_the_store_once_per_config(stores, counted):
    """execute looks each config up once (is_stored); the run it trains is not looked up again
    by engine.run in the worker (train_one passes served=None)."""
    from fedlib.orchestration import executor

    configs, work = stores
    new = tiny_config(rounds=1, seed=7)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        outcomes = executor.execute(configs + [new], executor="serial", results_dir=work, progress=False)
    assert [o.status for o in outcomes] == [executor.STORED] * 3 + [executor.DONE]
    for cfg in configs + [new]:  # before issue 46: the trained run was also asked by served_record
        assert counted["is_stored", cfg.hash()] == 1
        assert counted["served_record", cfg.hash()] == 0
