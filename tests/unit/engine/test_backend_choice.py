"""backend="auto": threads on a CPU; elsewhere only paths verified on that device kind, the
fastest per model as measured (fedlib/engine/verified_paths.json), else the sequential reference."""

import json

import pytest

from fedlib.core.config import BACKENDS
from fedlib.engine import engine
from fedlib.engine.backend_choice import TABLE_PATH, choose_backend, verified_paths
from tests.helpers import tiny_config

TABLE = {"devices": {"cuda": {
    "verified": {"sequential": "ref", "stacked": "passed"},
    "unverified_methods": {"fedmr": "5.8e-3 off"},
    "fastest": {"lenet5": {"backend": "stacked"}, "mobilenetv2": {"backend": "sequential"},
                "resnet18": {"backend": "threads"}},  # measured fastest but never verified
}}}


@pytest.mark.parametrize("model, method, device, expected", [
    ("lenet5", "fedavg", "cpu", "threads"),  # the CPU keeps its choice whatever the table says
    ("mobilenetv2", "fedmr", "cpu", "threads"),
    ("lenet5", "pkd", "cuda", "stacked"),
    ("mobilenetv2", "fedvls", "cuda", "sequential"),
    ("lenet5", "fedmr", "cuda", "sequential"),  # its fast paths failed on CUDA
    ("lenet5", "fedvls+fedmr", "cuda", "sequential"),  # ... also inside a composition
    ("resnet18", "fedavg", "cuda", "sequential"),  # fastest, but not a verified path
    ("vgg9", "fedavg", "cuda", "sequential"),  # never measured
    ("lenet5", "fedavg", "mps", "sequential"),  # a device kind nothing was verified on
])
def test_the_choice(model, method, device, expected):
    assert choose_backend(model, method, device, TABLE) == expected


def test_the_committed_table_reads_the_h200_measurements():
    assert choose_backend("lenet5", "pkd", "cuda") == "stacked"
    assert choose_backend("cnn2", "fedlmd", "cuda") == "threads"  # 2.08 s a round against stacked 2.54 (2026-11-28)
    assert choose_backend("mobilenetv2", "fedvls", "cuda") == "sequential"  # stacked 2.3x slower there
    assert choose_backend("lenet5", "fedmr", "cuda") == "stacked"  # passed equivalence on the second H200 check


def test_the_committed_table_names_only_real_backends_and_verified_fastest_paths():
    table = json.loads(TABLE_PATH.read_text())
    assert table == verified_paths()
    for kind, entry in table["devices"].items():
        assert set(entry["verified"]) <= set(BACKENDS) - {"auto"}, kind
        for model, row in entry["fastest"].items():
            assert row["backend"] in entry["verified"], (kind, model)
            assert min(row["seconds_per_round"], key=row["seconds_per_round"].get) == row["backend"], (kind, model)


def test_the_engine_asks_the_choice_for_auto(monkeypatch):
    asked = []

    def choice(model, method, device_type):
        asked.append((model, method, device_type))
        return "sequential"

    monkeypatch.setattr(engine, "choose_backend", choice)
    server, algorithm = engine.prepare(tiny_config(backend="auto", rounds=1))
    engine.run_round(server, algorithm)
    assert asked == [("mlp", "fedavg", "cpu")]


def test_the_engine_dispatches_through_a_table_of_every_backend_name():
    from fedlib.core.config import BACKENDS as NAMES
    from fedlib.engine.backends import BACKENDS, Backend, backend_named

    assert set(BACKENDS) | {"auto"} == set(NAMES)  # every name a config takes, auto resolved first
    assert all(isinstance(backend, Backend) for backend in BACKENDS.values())
    assert backend_named("threads") is BACKENDS["threads"]
    assert backend_named("no such backend") is BACKENDS["sequential"]  # as the engine's if chain did
