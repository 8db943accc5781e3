"""``--plan`` plans the runs the notebooks would train with the ``-p`` values given (it planned the
profile's runs and ignored them: an estimate for another grid), and ``--dry-run``, whose rows stand
for the profile's configs, refuses ``-p`` in one line instead of ignoring it."""

from fedlib.paper import reproduce


def _plan_runs(capsys, *extra):
    status = reproduce.main(["--plan", "--only", "pkd_table1_4_class_accuracy", *extra])
    out = capsys.readouterr().out
    assert status == 0, out
    total = next(line for line in out.splitlines() if line.strip().startswith("total"))
    return int(total.split()[4])  # the runs column of "total (shared runs once)"


def test_plan_applies_the_p_values(capsys):
    one_seed = _plan_runs(capsys)
    two_seeds = _plan_runs(capsys, "-p", "seeds", "[0, 1]")
    assert two_seeds == 2 * one_seed


def test_dry_run_refuses_p_values_in_one_line(capsys):
    status = reproduce.main(["--dry-run", "--only", "getting_started", "-p", "seeds", "[0, 1]"])
    err = capsys.readouterr().err
    assert status == 2 and "drop -p" in err and len(err.strip().splitlines()) == 1
