"""A finished run is sealed (digest.json, written last): an edit of any of its files afterwards is
refused in one line naming the file, by the engine, list/show and every reader; runs stored before
sealing are served with a warning until `fedlib migrate` seals them; the reference store is sealed."""

import json
import warnings

import pytest

from fedlib import store
from fedlib.commands import cli
from fedlib.engine import engine
from fedlib.errors import FedlibError
from tests.helpers import quiet_run, tiny_config


@pytest.fixture
def finished(tmp_path, monkeypatch):
    monkeypatch.setenv("FEDLIB_REFERENCE", "off")
    cfg = tiny_config(rounds=3)
    return cfg, quiet_run(cfg, tmp_path / "results").folder


def edit_json(path, **changes):
    path.write_text(json.dumps({**json.loads(path.read_text()), **changes}, indent=2))


def test_a_finished_run_is_sealed_over_its_files(finished):
    _, folder = finished
    sealed = json.loads((folder / store.DIGEST_FILE).read_text())["sha256"]
    assert sorted(sealed) == sorted((*store.REFERENCE_FILES, store.FINAL_FILE))
    assert store.seal_problem(folder) is None


def test_an_edited_summary_is_refused_not_served(finished):
    cfg, folder = finished
    edit_json(folder / "summary.json", final_accuracy=0.99, best_accuracy=0.995)
    with pytest.raises(FedlibError, match=r"its summary\.json does not match its digest\.json"):
        quiet_run(cfg, folder.parent)


def test_an_edited_round_is_refused_not_served(finished):
    cfg, folder = finished
    lines = (folder / "rounds.jsonl").read_text().splitlines()
    lines[1] = json.dumps({**json.loads(lines[1]), "accuracy": 0.999}, sort_keys=True)
    (folder / "rounds.jsonl").write_text("\n".join(lines) + "\n")
    with pytest.raises(FedlibError, match=r"its rounds\.jsonl does not match"):
        quiet_run(cfg, folder.parent)


@pytest.mark.parametrize("name", ["config.json", "meta.json", "rounds.jsonl", "summary.json", "final.pt"])
def test_every_sealed_file_is_checked_where_it_is_read(finished, name):
    _, folder = finished
    path = folder / name
    path.write_bytes(path.read_bytes() + b" ")  # the smallest edit: one byte more
    record = store.RunRecord(folder)
    read = {"config.json": record.read_config, "meta.json": record.read_meta, "rounds.jsonl": record.read_rounds,
            "summary.json": record.read_summary, "final.pt": record.read_final}[name]
    with pytest.raises(FedlibError, match=f"its {name} does not match its digest.json"):
        read()
    assert store.seal_problem(folder).startswith(f"its {name} does not match")


def test_a_deleted_sealed_file_is_missing_but_a_metrics_only_copy_may_lack_the_model(finished):
    _, folder = finished
    (folder / store.FINAL_FILE).unlink()
    assert store.seal_problem(folder) is None, "final.pt is sealed when present, optional otherwise"
    (folder / "meta.json").unlink()
    assert store.seal_problem(folder) == "its meta.json is missing (sealed when the run finished)"


def test_list_names_the_edited_file(finished, capsys):
    _, folder = finished
    edit_json(folder / "summary.json", best_accuracy=0.995)
    assert cli.main(["list", "--results", str(folder.parent)]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith(folder.name))
    assert "  damaged  " in line and "its summary.json does not match its digest.json" in line


def test_an_unsealed_run_is_served_with_a_warning_until_migrate_seals_it(finished, capsys):
    cfg, folder = finished
    (folder / store.DIGEST_FILE).unlink()  # as code before sealing stored it
    with pytest.warns(store.ProvenanceWarning, match="has no digest.json"):
        engine.run(cfg, results_dir=folder.parent, progress=False)
    assert cli.main(["migrate", "--results", str(folder.parent)]) == 0
    assert f"sealed {folder.name}" in capsys.readouterr().out
    assert store.is_sealed(folder) and store.seal_problem(folder) is None
    with warnings.catch_warnings():
        warnings.simplefilter("error", store.ProvenanceWarning)
        engine.run(cfg, results_dir=folder.parent, progress=False)


def test_migrate_never_seals_an_unsealed_run_whose_files_disagree(finished):
    _, folder = finished
    (folder / store.DIGEST_FILE).unlink()
    edit_json(folder / "summary.json", rounds_run=7)
    migration = store.migrate_hashes(folder.parent)
    assert migration.sealed == [] and not store.is_sealed(folder)
    assert "not sealed: its summary counts 7 rounds" in migration.left[0][1]


def test_publishing_seals_the_copy_and_refuses_an_edited_run(finished, tmp_path, monkeypatch):
    _, folder = finished
    monkeypatch.setattr(store.publishing, "trained_revisions", lambda meta: ["0" * 40])
    copy = store.publish(store.RunRecord(folder), tmp_path / "reference")
    assert store.is_sealed(copy) and store.seal_problem(copy) is None
    assert not (copy / store.FINAL_FILE).exists()
    edit_json(folder / "summary.json", best_accuracy=0.995)
    with pytest.raises(FedlibError, match="is not published: its summary.json does not match"):
        store.publish(store.RunRecord(folder), tmp_path / "reference")


def test_every_committed_reference_run_is_sealed_and_unedited():
    runs = [r for r in store.list_runs(store.REFERENCE_RESULTS)]
    assert len(runs) > 50
    problems = {r.folder.name: store.seal_problem(r.folder) or ("unsealed" if not store.is_sealed(r.folder) else None)
                for r in runs}
    assert {name: why for name, why in problems.items() if why} == {}


def test_deleting_the_summary_does_not_open_the_metrics_to_edits(finished):
    cfg, folder = finished
    (folder / "summary.json").unlink()  # as a kill while finishing would leave it
    lines = (folder / "rounds.jsonl").read_text().splitlines()
    lines[-1] = json.dumps({**json.loads(lines[-1]), "accuracy": 0.999}, sort_keys=True)
    (folder / "rounds.jsonl").write_text("\n".join(lines) + "\n")
    with pytest.raises(FedlibError, match="its rounds.jsonl does not match"):
        quiet_run(cfg, folder.parent)
