"""tools/reference_runs.py: run selection and the thread budget it trains under."""

import pytest
import torch

from fedlib.errors import FedlibError

from tools import reference_runs


def test_it_applies_the_thread_budget_asked_for_and_lists_the_runs(capsys):
    before = torch.get_num_threads()
    try:
        assert reference_runs.main(["pkd_table1_4_class_accuracy", "--profile", "smoke", "--methods", "fedavg",
                                    "--threads", "1", "--dry-run"]) == 0
        assert torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(before)
    out = capsys.readouterr().out
    assert "runs selected, 1 torch threads" in out
    listed = [line for line in out.splitlines() if line.startswith(("to run:", "in the reference store:"))]
    assert listed and all(" fedavg " in line for line in listed)


def test_a_where_field_no_run_has_is_one_line_and_a_parameter_override_reaches_the_selection(capsys):
    with pytest.raises(FedlibError, match="--where table: not a run field"):
        reference_runs.main(["pkd_table1_4_class_accuracy", "--profile", "smoke", "--where", "table=1", "--dry-run"])
    assert reference_runs.main(["pkd_table1_4_class_accuracy", "--profile", "smoke", "--methods", "pkd",
                                "--param", "pkd_student_init='fresh'", "--dry-run"]) == 0
    fresh = [line for line in capsys.readouterr().out.splitlines() if line.startswith("to run:")]
    assert fresh, "PKD from fresh weights is a run no store holds"
