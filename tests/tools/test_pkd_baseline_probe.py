"""The PKD FedAvg-baseline probe reads its pre-registered crossings correctly and starts from the stored run."""

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SPEC = importlib.util.spec_from_file_location("pkd_baseline_run", ROOT / "tools/probes/pkd_fedavg_baseline/run.py")
probe = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(probe)


def test_crossings_are_first_rounds_counted_from_one_and_none_when_never_reached():
    worst = [10.0, 41.0, 39.0, 50.0, 64.9, 65.0]
    assert probe.crossings(worst) == {40: 2, 50: 4, 60: 5, 65: 6, 70: None}


def test_readouts_name_the_class_most_often_worst_over_the_last_ten_rounds():
    rows = [{"class_accuracy": [0.9, 0.5 + i / 100, 0.9 if i < 11 else 0.1]} for i in range(12)]
    out = probe.readouts(rows, ["a", "b", "c"])
    assert out["most_often_worst_71_80"] == ("b", 9)
    assert out["worst_mean_71_80"] == round((sum(50 + i for i in range(2, 11)) + 10) / 10, 2)
    assert out["crossings"][50] == 1 and out["crossings"][60] == 11 and out["crossings"][65] is None


def test_the_base_config_is_the_stored_run_cut_to_80_rounds(tmp_path):
    cfg = probe.base_config(tmp_path)
    assert cfg.rounds == probe.ROUNDS
    assert cfg.replace(rounds=300).hash() == probe.STORED_RUN.name, "the probe starts from the stored run's settings"


def test_an_unknown_variant_is_one_line_and_exit_2(capsys):
    assert probe.main(["--store", "/nonexistent", "--variants", "more_clients"]) == 2
    assert "unknown variant 'more_clients'" in capsys.readouterr().err


def test_a_variant_reports_the_revisions_its_run_trained_with_not_the_current_one(tmp_path):
    import json

    from fedlib import store

    cfg = probe.base_config(tmp_path)
    folder = store.run_dir(cfg)
    folder.mkdir(parents=True)
    meta = {"code_revision": "aaa", "resumes": [{"code_revision": "bbb", "rounds_done": 40}]}
    (folder / "meta.json").write_text(json.dumps(meta))
    assert probe.trained_revisions(cfg) == ["aaa", "bbb"]
