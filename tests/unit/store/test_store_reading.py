"""The store as people read it is as strict as the engine: ``fedlib list``/``show``/``export`` call
a run whose files disagree 'damaged' (never 'done'), list a copy of a run once, never trace back on
a damaged file; the reference store is no write target; bad CLI values are one line."""

import json
import shutil

import pytest

from fedlib import store
from fedlib.commands import cli, listing
from fedlib.errors import FedlibError
from fedlib.orchestration import environment
from tests.helpers import quiet_run, tiny_config


@pytest.fixture
def finished(tmp_path, monkeypatch):
    """A finished tiny run in tmp_path/results (reference store off)."""
    monkeypatch.setenv("FEDLIB_REFERENCE", "off")
    result = quiet_run(tiny_config(), tmp_path / "results")
    return result.folder


def status_line(capsys, folder) -> str:
    assert cli.main(["list", "--results", str(folder.parent)]) == 0
    out = capsys.readouterr().out
    return next(line for line in out.splitlines() if line.startswith(folder.name))


def drop_a_round(folder):
    lines = (folder / "rounds.jsonl").read_text().splitlines(keepends=True)
    (folder / "rounds.jsonl").write_text("".join(lines[:1] + lines[2:]))


def edit_config(folder):
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, "lr": 0.5}))


def damage_meta(folder):
    (folder / "meta.json").write_text('{"fedlib_version": ')


def damage_rounds(folder):
    (folder / "rounds.jsonl").write_text((folder / "rounds.jsonl").read_text() + "{not json\n")


def unseal(folder):
    """The run as code before sealing stored it: no digest.json (its files are checked against each other)."""
    (folder / store.DIGEST_FILE).unlink()


def assert_listed_and_shown_damaged(capsys, folder, says: str) -> None:
    """`list`, `show` and `show --json` all call the run damaged, saying ``says``."""
    line = status_line(capsys, folder)
    assert "  damaged  " in line and says in line
    assert cli.main(["show", folder.name, "--results", str(folder.parent)]) == 0
    shown = capsys.readouterr().out
    assert "damaged" in shown.splitlines()[0] and f"DAMAGED: {says}" in shown
    assert cli.main(["show", folder.name, "--results", str(folder.parent), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["status"] == "damaged"


@pytest.mark.parametrize("damage, says", [
    (drop_a_round, "its summary counts 3 rounds but rounds.jsonl holds 2"),
    (edit_config, "its config.json hashes to"),
    (damage_meta, "its meta.json cannot be read"),
    (damage_rounds, "its rounds.jsonl cannot be read"),
])
def test_list_and_show_call_a_damaged_unsealed_run_damaged_in_one_line(finished, capsys, damage, says):
    assert "  done  " in status_line(capsys, finished)
    unseal(finished)
    damage(finished)
    assert_listed_and_shown_damaged(capsys, finished, says)


@pytest.mark.parametrize("damage, says", [
    (drop_a_round, "its rounds.jsonl does not match its digest.json"),
    (edit_config, "its config.json does not match its digest.json"),
    (damage_meta, "its meta.json does not match its digest.json"),
    (damage_rounds, "its rounds.jsonl does not match its digest.json"),
])
def test_list_and_show_call_an_edited_sealed_run_damaged_naming_the_file(finished, capsys, damage, says):
    assert "  done  " in status_line(capsys, finished)
    damage(finished)
    assert_listed_and_shown_damaged(capsys, finished, says)


def test_export_takes_only_sound_runs(finished):
    assert [run.hash for run in listing.sound(listing.stored_runs(finished.parent))] == [finished.name]
    drop_a_round(finished)
    assert listing.sound(listing.stored_runs(finished.parent)) == []


def test_a_copy_under_another_folder_name_is_listed_once(finished, capsys):
    shutil.copytree(finished, finished.parent / "backup-of-the-run")
    runs = listing.stored_runs(finished.parent)
    assert [run.hash for run in runs] == [finished.name]
    assert cli.main(["list", "--results", str(finished.parent)]) == 0
    assert "1 run," in capsys.readouterr().out


def test_a_copy_whose_metrics_differ_is_kept_and_damaged(finished):
    copy = finished.parent / "edited-copy"
    shutil.copytree(finished, copy)
    drop_a_round(copy)
    statuses = {run.hash: run.status for run in listing.stored_runs(finished.parent)}
    assert statuses == {finished.name: "done", "edited-copy": "damaged"}


def test_no_committed_reference_run_reads_as_damaged():
    runs = listing.stored_runs(store.REFERENCE_RESULTS)
    assert runs and [run.hash for run in runs if run.status in ("damaged", "corrupt")] == []


def test_the_reference_store_is_no_write_target_unless_asked(tmp_path, monkeypatch):
    reference = tmp_path / "reference"
    reference.mkdir()
    monkeypatch.setenv("FEDLIB_REFERENCE", str(reference))
    with pytest.raises(FedlibError, match="is the read-only reference store"):
        quiet_run(tiny_config(), reference)
    assert not any(reference.iterdir())
    environment.apply({store.WRITE_REFERENCE_ENV: "1"})  # what an edge reads
    assert quiet_run(tiny_config(), reference).folder.parent == reference


def test_fedlib_run_refuses_the_committed_reference_store(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("FEDLIB_REFERENCE", raising=False)
    argv = ["run", "--dataset", "synthetic", "--model", "mlp", "--rounds", "1", "--quiet",
            "--results", str(store.REFERENCE_RESULTS)]
    assert cli.main(argv) == 2
    assert "read-only reference store" in capsys.readouterr().err


@pytest.mark.parametrize("argv, says", [
    (["run", "--results", ""], "--results '' names no folder"),
    (["list", "--results", ""], "--results '' names no folder"),
    (["show", "abc", "--every", "0"], "--every must be >= 1"),
    (["run", "--dataset", "digits", "--lr", "1e308"], "lr must be a number"),
    (["run", "--dataset", "digits", "--threads", "100000"], "threads must be between 1 and the"),
    (["sweep", "--dataset", "digits", "--workers", "0"], "--workers must be >= 1"),
    (["sweep", "--dataset", "digits", "--grid", "device=cpu,cuda"], "it says where a run happens"),
    (["sweep", "--dataset", "digits", "--grid", "results=a,b"], "it says where a run happens"),
    (["sweep", "--dataset", "digits", "--grid", "workers=1,2"], "an option of the sweep itself"),
    (["sweep", "--dataset", "digits", "--rounds", "5", "--grid", "rounds=2,3"], "--grid rounds and --rounds both set"),
    (["sweep", "--dataset", "digits", "--round=5", "--grid", "rounds=2,3"], "--grid rounds and --rounds both set"),
    (["run", "--method", "fedlc", "--method-arg", "tau=0"], "outside its allowed range"),
    (["run", "--method", "pkd", "--rounds", "5"], "never leaves its warm-up"),
])
def test_bad_command_lines_are_one_line(tmp_path, capsys, monkeypatch, argv, says):
    monkeypatch.chdir(tmp_path)
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert says in err and err.count("\n") == 1, err


@pytest.mark.parametrize("argv, says", [
    (["--workers", "0"], "--workers must be >= 1, got 0"),
    (["--workers", "-2", "--executor", "local"], "--workers must be >= 1, got -2"),
    (["--threads", "100000"], "threads must be between 1 and the"),
    (["--results", ""], "--results '' names no folder"),
])
def test_reproduce_refuses_bad_counts_and_empty_folders_in_one_line(capsys, argv, says):
    from fedlib.paper import reproduce

    assert reproduce.main(["--only", "getting_started", *argv]) == 2
    err = capsys.readouterr().err
    assert says in err and err.count("\n") == 1, err


def test_a_grid_over_an_option_given_nowhere_else_keeps_the_others():
    argv = ["sweep", "--dataset", "digits", "--lr", "0.1", "--grid", "lr-decay=0.9,1"]  # --lr is no --lr-decay
    variants = cli.grid_namespaces(cli._build_parser().parse_args(argv), argv)
    assert [(v.lr, v.lr_decay) for v in variants] == [(0.1, 0.9), (0.1, 1.0)]
