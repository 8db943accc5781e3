"""Deterministic CUDA kernels by default: the opt-out leaves the hash alone, CPU flags are never
touched, and an op without a deterministic kernel is one line naming it and the opt-out."""

import json
import os

import pytest
import torch

from fedlib.commands import cli
from fedlib.core import config, determinism
from fedlib.core.config import RunConfig
from fedlib.engine import engine
from fedlib.errors import FedlibError
from tests.helpers import quiet_run, tiny_config


@pytest.fixture
def deterministic_flag_restored():
    before = torch.are_deterministic_algorithms_enabled()
    yield
    torch.use_deterministic_algorithms(before)


def test_the_opt_out_keeps_every_hash():
    assert RunConfig().hash() == "83519abd8e67"
    assert RunConfig(deterministic=False).hash() == "83519abd8e67"
    assert RunConfig().deterministic is True


@pytest.mark.parametrize("value, expected", [("0", False), ("off", False), ("False", False), ("1", True), ("", True)])
def test_the_environment_sets_the_default_at_an_edge(monkeypatch, value, expected):
    monkeypatch.setenv(determinism.ENV, value)
    assert RunConfig().deterministic is True, "RunConfig never reads the environment"
    try:
        config.set_defaults(**config.defaults_from(os.environ))
        assert RunConfig().deterministic is expected
    finally:
        config.reset_defaults()
    assert RunConfig().deterministic is True


def test_the_cli_opts_out():
    ns = cli._build_parser().parse_args(["run", "--nondeterministic"])
    assert cli.config_from_args(ns).deterministic is False
    assert cli.config_from_args(cli._build_parser().parse_args(["run"])).deterministic is True


def test_cpu_flags_are_left_alone(deterministic_flag_restored):
    torch.use_deterministic_algorithms(False)
    assert determinism.configure(torch.device("cpu"), True) == {}
    assert torch.are_deterministic_algorithms_enabled() is False


def test_the_cublas_workspace_is_set_on_import_of_fedlib_itself():
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k != "CUBLAS_WORKSPACE_CONFIG"}
    code = "import os, fedlib; print(os.environ.get('CUBLAS_WORKSPACE_CONFIG'))"
    printed = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert printed.stdout.strip() == determinism.CUBLAS_SETTING[1]


@pytest.mark.parametrize("deterministic", [True, False])
def test_the_flags_a_run_sets_are_put_back_after_it(deterministic, deterministic_flag_restored):
    torch.use_deterministic_algorithms(False)
    torch.backends.cudnn.benchmark, torch.backends.cudnn.deterministic = False, False
    torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32 = True, True
    with determinism.restored():
        determinism.configure(torch.device("cuda"), deterministic)  # torch sets the flags without a GPU
        engine.fp32_on_cuda(torch.device("cuda"))
        assert torch.are_deterministic_algorithms_enabled() is deterministic
        assert torch.backends.cudnn.benchmark is not deterministic  # the opt-out autotunes
        assert torch.backends.cuda.matmul.allow_tf32 is False
    assert torch.are_deterministic_algorithms_enabled() is False
    assert (torch.backends.cudnn.benchmark, torch.backends.cudnn.deterministic) == (False, False)
    assert torch.backends.cudnn.allow_tf32 and torch.backends.cuda.matmul.allow_tf32


def test_the_engine_trains_inside_the_restoring_block():
    import inspect

    source = inspect.getsource(engine.run)
    assert source.count("determinism.restored(), determinism.explained()") == 2


def test_a_cpu_run_records_no_cuda_flag_and_counts_as_repeatable(tmp_path):
    result = quiet_run(tiny_config(rounds=1), tmp_path)
    meta = json.loads((result.folder / "meta.json").read_text())
    assert "deterministic" not in meta["environment"]
    assert determinism.recorded_deterministic(meta)


@pytest.mark.parametrize("meta, expected", [
    ({"device": "cuda", "environment": {"deterministic": True}}, True),
    ({"device": "cuda:1", "environment": {"deterministic": False}}, False),
    ({"device": "cuda", "environment": {}}, False),  # stored before the flag: drifted on CUDA
    ({"device": "cpu", "environment": {}}, True),
])
def test_recorded_deterministic_reads_meta(meta, expected):
    assert determinism.recorded_deterministic(meta) is expected


def _torch_alert(op: str) -> RuntimeError:
    """The error torch raises for an op without a deterministic kernel (its own message)."""
    from torch._prims_common import alert_not_deterministic

    before = torch.are_deterministic_algorithms_enabled()
    torch.use_deterministic_algorithms(True)
    try:
        alert_not_deterministic(op)
    except RuntimeError as error:
        return error
    finally:
        torch.use_deterministic_algorithms(before)
    raise AssertionError("torch did not raise")


def test_an_op_without_a_deterministic_kernel_is_one_line_naming_it_and_the_opt_out():
    with pytest.raises(FedlibError) as caught:
        with determinism.explained():
            raise _torch_alert("adaptive_avg_pool2d_backward_cuda")
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith("adaptive_avg_pool2d_backward_cuda has no deterministic CUDA kernel")
    assert "--nondeterministic" in message and "FEDLIB_DETERMINISTIC=0" in message


def test_other_runtime_errors_pass_through():
    with pytest.raises(RuntimeError, match="out of memory"):
        with determinism.explained():
            raise RuntimeError("CUDA out of memory")


def test_a_run_explains_the_error(tmp_path, monkeypatch):
    """The engine wraps training: an alert inside a round reaches the caller as a FedlibError."""
    error = _torch_alert("index_put_cuda")

    def failing_round(*args, **kwargs):
        raise error

    monkeypatch.setattr(engine, "run_round", failing_round)
    with pytest.raises(FedlibError, match="^index_put_cuda has no deterministic CUDA kernel"):
        quiet_run(tiny_config(rounds=1), tmp_path)


@pytest.mark.cuda
def test_a_cuda_run_turns_deterministic_kernels_on_and_records_it(tmp_path, deterministic_flag_restored):
    before = torch.backends.cudnn.deterministic
    for flag in (True, False):
        result = quiet_run(tiny_config(rounds=1, device="cuda", deterministic=flag), tmp_path / str(flag))
        meta = json.loads((result.folder / "meta.json").read_text())
        assert meta["environment"]["deterministic"] is flag
        assert torch.backends.cudnn.deterministic is before  # put back after the run


@pytest.mark.parametrize("value, expected", [("YES", True), (" On ", True), ("No", False), ("   ", True), (None, True)])
def test_the_environment_reads_every_spelling_of_a_switch(value, expected):
    assert determinism.switch(value) is expected
    assert config.defaults_from({} if value is None else {determinism.ENV: value})["deterministic"] is expected


@pytest.mark.parametrize("value", ["maybe", "2", "deterministic"])
def test_an_environment_value_that_is_no_switch_is_one_line(monkeypatch, capsys, tmp_path, value):
    monkeypatch.setenv(determinism.ENV, value)
    with pytest.raises(FedlibError, match=f"FEDLIB_DETERMINISTIC='{value}' is no switch"):
        config.defaults_from(os.environ)
    assert cli.main(["run", "--rounds", "1", "--results", str(tmp_path)]) == 2, "the command line reads it"
    assert "is no switch" in capsys.readouterr().err and not any(tmp_path.iterdir()), "one line, no run"
