"""One canonical form per config (one hash per computation), meaningless method arguments
refused when the config is made, and config-level bad input as one line."""

import pytest

from fedlib.commands import cli
from fedlib.core.config import RunConfig
from fedlib.errors import FedlibError
from tests.helpers import tiny_config


def test_a_whole_number_method_argument_and_its_float_share_a_hash():
    as_int = RunConfig(method="fedprox", method_args={"mu": 1})
    as_float = RunConfig(method="fedprox", method_args={"mu": 1.0})
    assert as_int.hash() == as_float.hash()
    assert as_int.method_args == {"mu": 1.0} and isinstance(as_int.method_args["mu"], float)


def test_the_command_line_and_python_share_a_hash():
    ns = cli._build_parser().parse_args(["run", "--method", "fedprox", "--method-arg", "mu=1", "--lr", "1"])
    from_cli = cli.config_from_args(ns)
    from_python = RunConfig(method="fedprox", method_args={"mu": 1}, lr=1, local_epochs=5, momentum=0.9,
                            weight_decay=1e-5)
    assert from_cli.hash() == from_python.hash()


def test_whole_numbers_in_float_fields_are_floats():
    cfg = RunConfig(lr=1, beta=1, momentum=0, participation=1)
    assert cfg.hash() == RunConfig(lr=1.0, beta=1.0, momentum=0.0, participation=1.0).hash()
    assert all(isinstance(getattr(cfg, name), float) for name in ("lr", "beta", "momentum", "participation"))


@pytest.mark.parametrize("lr", [1e308, float("inf"), 10 ** 400])
def test_a_learning_rate_float32_cannot_hold_is_one_line(lr):
    with pytest.raises(FedlibError, match="lr must be a number") as caught:
        RunConfig(lr=lr)
    assert "\n" not in str(caught.value)


def test_pkd_that_never_leaves_its_warmup_is_refused():
    with pytest.raises(FedlibError, match="never leaves its warm-up of warmup_rounds=20"):
        tiny_config(method="pkd", rounds=20)
    tiny_config(method="pkd", rounds=21)
    tiny_config(method="pkd", rounds=3, method_args={"warmup_rounds": 2})


def test_a_switch_round_never_reached_is_refused():
    with pytest.raises(FedlibError, match="switch_round=3 is never reached in 3 rounds"):
        tiny_config(method="fedlmd_tf", method_args={"switch_round": 3})
    tiny_config(method="fedlmd_tf", method_args={"switch_round": 2})


def test_fedlc_tau_zero_is_refused():
    with pytest.raises(FedlibError, match=r"fedlc argument tau=0.0 is outside its allowed range \(0, inf\)"):
        tiny_config(method="fedlc", method_args={"tau": 0})


def test_replace_with_an_unknown_field_is_one_line():
    with pytest.raises(FedlibError, match=r"unknown RunConfig field\(s\) \['nosuch'\]"):
        RunConfig().replace(nosuch=1)


@pytest.mark.parametrize("text, says", [
    ("lr: [0.1\n", "invalid YAML"),
    ("lr: 0.1\nlr: 0.2\n", "key 'lr' is given twice"),
    ("rounds: 3\n\tlr: 0.1\n", "not tabs"),
    ("- 1\n- 2\n", "must be a mapping"),
])
def test_from_yaml_bad_input_is_one_line(text, says):
    with pytest.raises(FedlibError, match=says) as caught:
        RunConfig.from_yaml(text)
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize("value", [float("inf"), "1e999", float("nan")])
def test_a_non_finite_method_argument_is_refused(value):
    with pytest.raises(FedlibError, match="outside its allowed range"):
        RunConfig(method="fedprox", method_args={"mu": value})


@pytest.mark.parametrize("given, stored", [
    ("fedprox+fedlmd", "fedlmd+fedprox"), ("fedavgm+fedprox+fedlmd", "fedlmd+fedprox+fedavgm"),
    ("fedavgm+fedlmd", "fedlmd+fedavgm"), ("fedexp+fedvls", "fedvls+fedexp"), ("fedsam+feded", "fedvls+fedsam"),
])
def test_a_combination_in_any_order_is_one_run_spelt_as_the_stored_runs_are(given, stored):
    cfg = RunConfig(dataset="digits", model="mlp", method=given)
    assert cfg.method == stored
    assert cfg.hash() == RunConfig(dataset="digits", model="mlp", method=stored).hash()


def test_a_combination_with_moon_keeps_its_order():
    # MOON's setup draws its projection head from the global random stream: a part before it changes the head
    assert RunConfig(dataset="digits", model="mlp", method="scaffold+moon").method == "scaffold+moon"
    assert RunConfig(dataset="digits", model="mlp", method="moon+scaffold").method == "moon+scaffold"


@pytest.mark.parametrize("dataset, options, cap, test_cap", [
    ("digits", {}, 100000, None), ("digits", {}, 1437, 360), ("digits", {"test_size": 797}, 1000, None),
    ("digits", {"split": "holdout_10"}, 1437, None), ("synthetic", {}, 10 ** 6, 200),
])
def test_a_cap_on_a_bundled_dataset_that_caps_nothing_is_no_cap(dataset, options, cap, test_cap):
    cfg = RunConfig(dataset=dataset, model="mlp", dataset_options=options, max_train_samples=cap,
                    max_test_samples=test_cap)
    assert (cfg.max_train_samples, cfg.max_test_samples) == (None, None)
    assert cfg.hash() == RunConfig(dataset=dataset, model="mlp", dataset_options=options).hash()


def test_a_cap_on_digits_that_caps_keeps_its_own_hash():
    assert RunConfig(dataset="digits", model="mlp", max_train_samples=1436).max_train_samples == 1436
    assert RunConfig(dataset="digits", model="mlp", max_test_samples=359).max_test_samples == 359
