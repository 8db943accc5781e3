"""How often rendering asks the store about a config (issue 46): run_all serving stored runs, a
notebook's plan and the plan of several notebooks should look each config up once, and compute
each config object's hash once."""

import collections
import warnings

import pytest

from fedlib import store
from fedlib.core import config as config_module
from fedlib.orchestration import experiments
from fedlib.paper import plan
from fedlib.reporting import report
from fedlib.store import serving
from tests.helpers import tiny_config

LOOKUPS = ("is_stored", "served_record", "reference_record", "run_state")


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


def _unstored(configs, work):
    """The configs of ``stores`` and one in no store, and one started but not finished."""
    absent, partial = tiny_config(rounds=1, seed=3), tiny_config(rounds=1, seed=4)
    store.RunRecord(work / partial.hash()).write_config(partial)
    return configs + [absent, partial]


@pytest.fixture
def private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("FEDLIB_CACHE", str(tmp_path / "cache"))


def _asked_once(counted, configs):
    for cfg in configs:
        asked = {name: counted[name, cfg.hash()] for name in LOOKUPS}
        assert asked == {"is_stored": 0, "served_record": 0, "reference_record": 1, "run_state": 1}, cfg.seed


def test_a_notebooks_plan_looks_each_config_up_once(stores, counted, private_cache):
    configs, work = stores
    configs = _unstored(configs, work)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        estimate = report.estimate_plan(configs + configs, work, probe=False, device="cpu")
    assert (estimate["runs"], estimate["stored"], estimate["to_run"]) == (5, 3, 2)
    _asked_once(counted, configs)  # before issue 46: is_stored and served_record once each (2 lookups)


def test_the_plan_of_several_notebooks_looks_each_config_up_once(stores, counted, private_cache):
    configs, work = stores
    configs = _unstored(configs, work)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        frame = plan.plan_frame({"a": configs[:3], "b": configs[1:]}, work, probe=False, device="cpu", progress=False)
    assert list(frame["stored"]) == [3, 2, 3] and list(frame["to run"]) == [0, 2, 2]
    _asked_once(counted, configs)  # before issue 46: up to 7 is_stored and 2 served_record per config


def test_run_state_tells_the_four_states_apart(stores):
    configs, work = stores
    configs = _unstored(configs, work)
    states = store.run_states(configs, work)
    assert [states[c.hash()] for c in configs] == [store.RunState.REFERENCE, store.RunState.COMPLETE,
                                                  store.RunState.COMPLETE, store.RunState.ABSENT,
                                                  store.RunState.PARTIAL]
    assert [s.stored for s in states.values()] == [True, True, True, False, False]
    assert [store.stored_record(c, states[c.hash()], work) for c in configs[3:]] == [None, None]
    assert store.stored_record(configs[1], states[configs[1].hash()], work).folder == work / configs[1].hash()
    assert store.stored_record(configs[0], states[configs[0].hash()], work).folder.parent.name == "reference"


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
