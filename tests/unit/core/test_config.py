"""RunConfig validation, hashing and round trips (the method registry is tested in
tests/unit/core/test_registry.py)."""

import os

import pytest

from fedlib.commands import cli
from fedlib.core import config
from fedlib.core.config import RunConfig
from fedlib.errors import FedlibError
from tests.helpers import tiny_config


def one_line(exc: pytest.ExceptionInfo) -> str:
    message = str(exc.value)
    assert "\n" not in message
    return message


@pytest.mark.parametrize("changes, fragment", [
    ({"beta": 0.0}, "beta"),
    ({"beta": -1.0}, "beta"),
    ({"participation": 0.0}, "participation"),
    ({"participation": 1.5}, "participation"),
    ({"rounds": 0}, "rounds"),
    ({"clients": 0}, "clients"),
    ({"local_epochs": 0}, "local_epochs"),
    ({"lr": 0.0}, "lr"),
    ({"momentum": 1.0}, "momentum"),
    ({"device": "tpu"}, "device"),
    ({"clients": 50, "max_train_samples": 20}, "max_train_samples"),
])
def test_bad_values_give_one_line(changes, fragment):
    with pytest.raises(FedlibError) as exc:
        RunConfig(**changes)
    assert fragment in one_line(exc)


@pytest.mark.parametrize("field, value, valid", [
    ("dataset", "imagenet", "fashion_mnist"),
    ("model", "transformer", "lenet5"),
    ("method", "fedfoo", "fedavg"),
    ("partition", "random", "dirichlet"),
])
def test_unknown_names_list_the_valid_ones(field, value, valid):
    with pytest.raises(FedlibError) as exc:
        RunConfig(**{field: value})
    message = one_line(exc)
    assert value in message and valid in message


def test_unknown_method_argument_is_rejected():
    with pytest.raises(FedlibError) as exc:
        RunConfig(method="fedprox", method_args={"muu": 0.1})
    assert "muu" in one_line(exc) and "mu" in str(exc.value)


def test_hash_is_stable_and_ignores_location():
    a = RunConfig(seed=3, method_args={})
    b = RunConfig(seed=3, device="cpu", data_dir="/somewhere", results_dir="/elsewhere")
    assert a.hash() == b.hash()
    assert len(a.hash()) == 12
    assert a.hash() != RunConfig(seed=4).hash()
    assert a.hash() != RunConfig(seed=3, lr=0.02).hash()


def test_hash_does_not_depend_on_method_arg_order():
    a = RunConfig(method="fedprox", method_args={"mu": 0.1})
    b = RunConfig(method="fedprox", method_args={"mu": 0.1})
    assert a.hash() == b.hash()
    assert a.hash() != RunConfig(method="fedprox", method_args={"mu": 0.2}).hash()


def test_round_trips_through_dict_json_and_yaml():
    cfg = RunConfig(method="fedprox", method_args={"mu": 0.05}, rounds=7, seed=2)
    assert RunConfig.from_dict(cfg.to_dict()) == cfg
    assert RunConfig.from_yaml(cfg.to_yaml()) == cfg
    with pytest.raises(FedlibError):
        RunConfig.from_dict({"dataset": "mnist", "colour": "red"})


def test_explicit_defaults_and_omitted_arguments_hash_alike():
    assert RunConfig(method="fedprox").hash() == RunConfig(method="fedprox", method_args={"mu": 0.01}).hash()
    assert RunConfig(method="fedprox").hash() != RunConfig(method="fedprox", method_args={"mu": 0.1}).hash()


def test_dataset_options_reach_the_loader_and_enter_the_hash_only_when_given():
    from fedlib.engine.engine import load_run_dataset

    plain = RunConfig(dataset="digits", model="mlp")
    assert "dataset_options" not in plain.hashed_fields(), "stored runs keep their hashes"
    larger = plain.replace(dataset_options={"image_size": 16})
    assert larger.hash() != plain.hash()
    assert load_run_dataset(larger).image_shape == (1, 16, 16)
    assert load_run_dataset(plain).image_shape == (1, 8, 8)
    shaped = RunConfig(dataset="synthetic", model="mlp", dataset_options={"image_shape": [3, 12, 12]})
    assert load_run_dataset(shaped).image_shape == (3, 12, 12), "list-valued options work too"
    assert RunConfig.from_dict(larger.to_dict()) == larger
    with pytest.raises(FedlibError, match="digits_only"):
        RunConfig(dataset="digits", dataset_options={"digits_only": True})


def test_backend_default_is_set_at_an_edge_from_the_environment(monkeypatch):
    monkeypatch.setenv("FEDLIB_BACKEND", "threads")
    assert RunConfig().backend == "auto", "RunConfig never reads the environment"
    try:
        config.set_defaults(**config.defaults_from(os.environ))
        assert RunConfig().backend == "threads"
        assert RunConfig(backend="stacked").backend == "stacked", "a backend given wins"
        assert RunConfig().hash() == RunConfig(backend="sequential").hash(), "where it runs, not what"
    finally:
        config.reset_defaults()
    assert RunConfig().backend == "auto", "the fast path is the default"
    with pytest.raises(FedlibError, match="unknown backend 'gpu'"):
        config.defaults_from({"FEDLIB_BACKEND": "gpu"})
    with pytest.raises(FedlibError, match="unknown backend 'gpu'"):
        config.set_defaults(backend="gpu")
    assert config.defaults_from({"FEDLIB_BACKEND": ""})["backend"] == "auto", "an empty variable is no choice"
    assert config.defaults_from({}) == {"backend": "auto", "deterministic": True}


def test_the_command_line_reads_the_backend_and_puts_the_defaults_back(monkeypatch, capsys, tmp_path):
    monkeypatch.setenv("FEDLIB_BACKEND", "gpu")
    assert cli.main(["run", "--results", str(tmp_path)]) == 2, "a bad value is one line at the edge"
    assert "unknown backend 'gpu'" in capsys.readouterr().err and not any(tmp_path.iterdir())
    monkeypatch.setenv("FEDLIB_BACKEND", "sequential")
    seen = []
    monkeypatch.setattr(cli, "_cmd_run", lambda ns, argv: seen.append(cli.config_from_args(ns).backend) or 0)
    assert cli.main(["run"]) == 0
    assert seen == ["sequential"] and RunConfig().backend == "auto"


@pytest.mark.parametrize("changes, says", [
    ({"clients": "10"}, "clients must be a whole number"),
    ({"lr": "0.1"}, "lr must be a number"),
    ({"rounds": 1.5}, "rounds must be a whole number"),
    ({"device": None}, "device must be a string"),
    ({"seed": 99999999999999999999999}, "seed must be between"),
    ({"seed": -1}, "seed must be between"),
    ({"method_args": "mu=0.1"}, "method_args must be a dict"),
    ({"method": "fedprox", "method_args": {"mu": [1, 2]}}, "fedprox argument mu=[1, 2]"),
    ({"method": "fedprox", "method_args": {"mu": None}}, "fedprox argument mu=None"),
    ({"method": "fedprox", "method_args": {"mu": True}}, "fedprox argument mu=True"),
    ({"drop_last": "yes"}, "drop_last must be True or False"),
    ({"global_balance": "yes"}, "global_balance must be True or False"),
    ({"lr": float("nan")}, "lr must be a number"),
])
def test_bad_config_values_are_one_line_errors(changes, says):
    with pytest.raises(FedlibError) as caught:
        tiny_config(**changes)
    assert says in str(caught.value) and "\n" not in str(caught.value)
