"""A render-only cell that reads "not run" because the caller left a setting out names the stored run
that differs only in that setting (store.near_misses, experiments.near_miss_lines)."""

import warnings

from fedlib import store
from fedlib.orchestration import experiments
from tests.helpers import quiet_run, tiny_config


def test_a_left_out_setting_is_named_with_the_stored_run(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("FEDLIB_REFERENCE", "off")
    stored = tiny_config(rounds=2, min_client_size=2)
    quiet_run(stored, tmp_path)
    asked = stored.replace(min_client_size=1)  # the same run with the setting at another value
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        results = experiments.run_all([asked], results_dir=tmp_path, progress=False, render_only=True)
    assert results[0].summary.get("not_run")
    out = capsys.readouterr().out
    assert "1 of 1 runs are in no store" in out
    assert f"run {stored.hash()} differs from it only in min_client_size 2 (asked: 1)" in out


def test_other_methods_seeds_and_far_runs_are_no_near_miss(tmp_path, monkeypatch):
    monkeypatch.setenv("FEDLIB_REFERENCE", "off")
    stored = tiny_config(rounds=2)
    quiet_run(stored, tmp_path)
    records = store.stored_records(tmp_path)
    assert [r.folder.name for r in records] == [stored.hash()]
    assert store.near_runs(stored, records) == [], "the run itself differs in nothing"
    assert store.near_runs(stored.replace(seed=2), records) == []
    assert store.near_runs(stored.replace(method="fedprox"), records) == []
    three_apart = stored.replace(lr=0.01, batch_size=16, local_epochs=2)
    assert store.near_runs(three_apart, records) == []
    assert len(store.near_runs(three_apart, records, most=3)) == 1
    two_apart = stored.replace(lr=0.01, batch_size=16)
    (record, differences), = store.near_runs(two_apart, records)
    assert differences == {"batch_size": (32, 16), "lr": (0.05, 0.01)}


def test_method_arguments_are_compared_one_by_one():
    a = tiny_config(method="fedprox", method_args={"mu": 0.01})
    b = a.replace(method_args={"mu": 0.1})
    assert store.field_differences(b, a) == {"method_args.mu": (0.01, 0.1)}


def test_nothing_is_printed_when_no_stored_run_is_near(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("FEDLIB_REFERENCE", "off")
    quiet_run(tiny_config(rounds=2), tmp_path)
    assert experiments.near_miss_lines([tiny_config(rounds=2, seed=5)], tmp_path) == []
