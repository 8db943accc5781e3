"""The committed reference store is read beside the working store, and render-only mode trains
nothing: cells no store holds read "not run", never a stand-in number."""

import json
import warnings

import pandas as pd
import pytest

from fedlib import engine, experiments, store, tables
from fedlib.config import RunConfig
from fedlib.errors import FedlibError


def tiny(**changes) -> RunConfig:
    base = dict(dataset="synthetic", model="mlp", partition="dirichlet", beta=0.5, clients=4, rounds=2,
                local_epochs=1, batch_size=32, lr=0.05, momentum=0.5, seed=1, device="cpu")
    base.update(changes)
    return RunConfig(**base)


@pytest.fixture
def reference(tmp_path, monkeypatch):
    root = tmp_path / "reference"
    monkeypatch.setenv("FEDLIB_REFERENCE", str(root))
    return root


def test_a_published_run_is_served_from_the_reference_store_without_checkpoint(tmp_path, reference):
    cfg = tiny()
    work = tmp_path / "work"
    result = engine.run(cfg, results_dir=work, progress=False)
    folder = store.publish(store.RunRecord(result.folder))
    assert sorted(p.name for p in folder.iterdir()) == sorted(store.REFERENCE_FILES)
    served = engine.run(cfg, results_dir=tmp_path / "fresh", progress=False)  # nothing stored there
    assert served.folder == folder and served.final_accuracy == result.final_accuracy
    assert not (tmp_path / "fresh").exists(), "served, not trained"
    with pytest.raises(FedlibError, match="no checkpoint"):
        served.global_state()
    assert store.is_stored(cfg, tmp_path / "fresh")


def test_an_unfinished_run_cannot_be_published(tmp_path):
    cfg = tiny()
    engine.run(cfg, results_dir=tmp_path, progress=False, stop_after=1)
    with pytest.raises(FedlibError, match="not complete"):
        store.publish(store.RunRecord(tmp_path / cfg.hash()), tmp_path / "reference")


def test_a_tampered_reference_run_is_refused(tmp_path, reference):
    cfg = tiny()
    result = engine.run(cfg, results_dir=tmp_path / "work", progress=False)
    folder = store.publish(store.RunRecord(result.folder))
    config = json.loads((folder / "config.json").read_text())
    config["lr"] = 0.5
    (folder / "config.json").write_text(json.dumps(config))
    with pytest.raises(FedlibError, match="hashes to"):
        engine.run(cfg, results_dir=tmp_path / "fresh", progress=False)


def test_render_only_trains_nothing_and_marks_cells_not_run(tmp_path, reference, monkeypatch):
    stored, missing = tiny(method="fedavg"), tiny(method="fedprox")
    engine.run(stored, results_dir=tmp_path, progress=False)
    monkeypatch.setenv("FEDLIB_RENDER_ONLY", "1")
    with pytest.raises(engine.NotRun):
        engine.run(missing, results_dir=tmp_path, progress=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        results = experiments.run_all([stored, missing], results_dir=tmp_path, progress=False)
    assert not (tmp_path / missing.hash()).exists()
    frame = experiments.results_frame(results)
    frame["label"], frame["setting"] = frame["method"], "s"
    assert frame["not_run"].tolist() == [False, True] and pd.isna(frame["final_accuracy"].iloc[1])
    _, _, text = tables.paper_layout(frame, "final_accuracy")
    assert text.loc["fedprox"].tolist() == [tables.NOT_RUN]
    assert text.loc["fedavg"].iloc[0] not in (tables.NOT_RUN, "-")


def test_the_reference_store_can_be_switched_off(tmp_path, monkeypatch):
    monkeypatch.setenv("FEDLIB_REFERENCE", "off")
    assert store.reference_root() is None and store.reference_record(tiny()) is None
