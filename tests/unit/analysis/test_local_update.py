"""fedlib.analysis.local_update: class roles, the telling client, and one local update from a global model."""

import dataclasses

import numpy as np
import pytest
import torch

from fedlib import store
from fedlib.analysis import local_update as local_update_module
from fedlib.analysis.local_update import LocalUpdateResult, accuracy_by_role, class_roles, local_update, telling_client
from fedlib.core.config import RunConfig
from fedlib.engine.engine import evaluate, prepare, run_round
from fedlib.errors import FedlibError

BASE = RunConfig(dataset="digits", model="mlp", partition="dirichlet", beta=0.1, clients=4, rounds=2,
                 local_epochs=1, batch_size=32, lr=0.05, device="cpu")


@pytest.fixture(scope="module")
def global_state():
    """A global model trained for two FedAvg rounds (no store involved)."""
    server, algorithm = prepare(BASE)
    for _ in range(BASE.rounds):
        run_round(server, algorithm)
        server.round += 1
    return {k: v.clone() for k, v in server.model.state_dict().items()}


def test_class_roles_use_the_uniform_share_as_threshold():
    counts = np.array([0, 30, 1500, 2000, 0, 0, 0, 0, 0, 70])  # n_k = 3600, share 360
    roles = class_roles(counts)
    assert roles == {"majority": [2, 3], "minority": [1, 9], "vacant": [0, 4, 5, 6, 7, 8]}


def test_class_roles_reject_an_empty_client():
    with pytest.raises(FedlibError, match="at least one sample"):
        class_roles(np.zeros(10))


def test_telling_client_prefers_minorities_then_vacancies():
    counts = np.array([[50, 50, 50, 50],  # balanced: no minority, no vacant
                       [100, 5, 0, 0],  # one minority, two vacant
                       [100, 5, 5, 0],  # two minorities, one vacant -> chosen
                       [100, 0, 0, 0]])
    assert telling_client(counts) == 2


@pytest.fixture(scope="module")
def fedavg_result(global_state):
    return local_update(BASE, global_state)


def test_global_and_local_accuracies_are_consistent(global_state, fedavg_result):
    result = fedavg_result
    server, _ = prepare(BASE)
    server.model.load_state_dict(global_state)
    reference = evaluate(server.model, server.data)
    assert result.global_accuracy == pytest.approx(reference["accuracy"], abs=1e-6)
    np.testing.assert_allclose(result.global_class_accuracy, reference["class_accuracy"], atol=1e-6)
    assert result.local_class_accuracy.shape == (BASE.clients, 10)
    np.testing.assert_allclose(result.local_confusion.sum(2), 1.0, atol=1e-9)
    diagonals = np.stack([np.diag(m) for m in result.local_confusion])
    np.testing.assert_allclose(diagonals, result.local_class_accuracy, atol=1e-9)
    assert result.class_counts.sum() == len(server.data.train_y)
    # a local update on a skewed client changes the model: accuracies move away from the global one
    assert not np.allclose(result.local_class_accuracy, result.global_class_accuracy)


def test_one_client_fedavg_aggregates_to_its_own_local_model(global_state):
    cfg = BASE.replace(clients=1)
    result = local_update(cfg, global_state)
    assert result.aggregated_accuracy == pytest.approx(result.local_accuracy[0])
    np.testing.assert_allclose(result.aggregated_class_accuracy, result.local_class_accuracy[0])
    np.testing.assert_allclose(result.mean_local_class_accuracy, result.local_class_accuracy[0])


@pytest.mark.parametrize("method", ["fedlc", "fedvls"])
def test_any_method_starts_from_the_same_global_model(global_state, fedavg_result, method):
    fedavg = fedavg_result
    other = local_update(BASE.replace(method=method), global_state)
    assert other.method == method
    assert other.global_accuracy == fedavg.global_accuracy
    assert not np.allclose(other.local_class_accuracy, fedavg.local_class_accuracy)
    np.testing.assert_array_equal(other.class_counts, fedavg.class_counts)


def test_repeatable(global_state, fedavg_result):
    first = fedavg_result
    second = local_update(BASE, global_state)
    np.testing.assert_array_equal(first.local_class_accuracy, second.local_class_accuracy)
    assert first.roles(0) == class_roles(first.class_counts[0])


def test_a_state_of_another_model_is_a_clear_error(global_state):
    bad = {k: torch.zeros(1) for k in global_state}
    with pytest.raises(FedlibError, match="does not fit model 'mlp'"):
        local_update(BASE, bad)


def test_accuracy_by_role_averages_each_clients_role_classes():
    result = LocalUpdateResult(
        method="fedavg", class_names=list("abc"), class_counts=np.array([[90, 10, 0], [0, 50, 50]]),
        global_accuracy=0.5, global_class_accuracy=np.array([0.6, 0.4, 0.8]), local_accuracy=np.zeros(2),
        local_class_accuracy=np.array([[1.0, 0.2, 0.0], [0.1, 0.7, 0.9]]), local_confusion=np.zeros((2, 3, 3)),
        aggregated_accuracy=0.5, aggregated_class_accuracy=np.zeros(3))
    table = accuracy_by_role(result)
    # client 0: majority {0}, minority {1}, vacant {2}; client 1: majority {1, 2}, vacant {0}
    assert table["majority"] == pytest.approx({"global": (0.6 + 0.6) / 2, "local": (1.0 + 0.8) / 2, "clients": 2})
    assert table["minority"] == pytest.approx({"global": 0.4, "local": 0.2, "clients": 1})
    assert table["vacant"] == pytest.approx({"global": (0.8 + 0.6) / 2, "local": (0.0 + 0.1) / 2, "clients": 2})


# ---------------------------------------------------------------------- the on-disk cache
def assert_same_result(a: LocalUpdateResult, b: LocalUpdateResult) -> None:
    for item in dataclasses.fields(LocalUpdateResult):
        first, second = getattr(a, item.name), getattr(b, item.name)
        if isinstance(first, np.ndarray):
            assert first.dtype == second.dtype, item.name
            np.testing.assert_array_equal(first, second)
        else:
            assert first == second, item.name


@pytest.fixture
def trainings(monkeypatch, tmp_path):
    """Counts train_client calls (one per client per computed update); an empty reference store."""
    monkeypatch.setenv("FEDLIB_REFERENCE", str(tmp_path / "reference"))
    calls = []
    train = local_update_module.train_client
    monkeypatch.setattr(local_update_module, "train_client", lambda *a, **k: calls.append(1) or train(*a, **k))
    return calls


def test_a_second_call_reads_the_cache_without_training(global_state, fedavg_result, tmp_path, trainings):
    first = local_update(BASE, global_state, results_dir=tmp_path / "results")
    assert len(trainings) == BASE.clients
    [path] = (tmp_path / "results" / "local_update").glob("*.npz")
    assert path == local_update_module.cache_path(BASE, global_state, 0, tmp_path / "results")
    mtime = path.stat().st_mtime_ns
    second = local_update(BASE, global_state, results_dir=tmp_path / "results")
    assert len(trainings) == BASE.clients and path.stat().st_mtime_ns == mtime  # read, not trained nor rewritten
    assert_same_result(first, fedavg_result)
    assert_same_result(second, fedavg_result)
    # cfg.results_dir is the default store; where and how it runs (device, backend) is not in the key
    moved = BASE.replace(results_dir=str(tmp_path / "results"), backend="sequential", deterministic=False)
    assert_same_result(local_update(moved, global_state), fedavg_result)
    assert len(trainings) == BASE.clients


def test_another_global_state_or_round_misses_the_cache(global_state, tmp_path, trainings):
    results = tmp_path / "results"
    local_update(BASE, global_state, results_dir=results)
    local_update(BASE, global_state, round_index=1, results_dir=results)
    changed = {k: v + 1e-3 if v.is_floating_point() else v for k, v in global_state.items()}
    local_update(BASE, changed, results_dir=results)
    assert len(trainings) == 3 * BASE.clients
    assert len(list((results / "local_update").glob("*.npz"))) == 3
    assert local_update(BASE, global_state) is not None and len(trainings) == 4 * BASE.clients  # no store: no cache


def test_a_cache_in_the_reference_store_is_read_and_never_written(global_state, fedavg_result, tmp_path, trainings):
    reference = tmp_path / "reference"
    shipped = local_update_module.cache_path(BASE, global_state, 0, reference)  # reference store's own path
    local_update(BASE, global_state, results_dir=reference)  # a miss there: computed, not written
    assert not shipped.exists() and len(trainings) == BASE.clients
    local_update(BASE, global_state, results_dir=tmp_path / "elsewhere")
    shipped.parent.mkdir(parents=True)
    (tmp_path / "elsewhere" / "local_update" / shipped.name).rename(shipped)  # as a committed cache
    fresh = tmp_path / "fresh-clone-results"
    assert local_update_module.cache_path(BASE, global_state, 0, fresh) == shipped
    assert_same_result(local_update(BASE, global_state, results_dir=fresh), fedavg_result)
    assert len(trainings) == 2 * BASE.clients and not fresh.exists()


def test_a_damaged_cache_is_one_line(global_state, tmp_path, trainings):
    path = local_update_module.cache_path(BASE, global_state, 0, tmp_path)
    store.write_atomic(path, b"not an npz file")
    with pytest.raises(FedlibError, match="cannot read the local-update cache .* delete it to recompute"):
        local_update(BASE, global_state, results_dir=tmp_path)
