"""The command line: one-line errors with exit status 2, defaults that learn and say where they come
from, store messages, Ctrl-C, and the store's list, show and TensorBoard export."""

import json
import os
import re
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from fedlib.commands import cli, export, listing
from fedlib.core.config import RunConfig
from fedlib.engine import engine
from fedlib.errors import FedlibError
from tests.helpers import quiet_run, tiny_config

REPO = Path(__file__).resolve().parents[3]
main = cli.main


TINY_ARGV = ["run", "--dataset", "synthetic", "--model", "mlp", "--clients", "4", "--rounds", "4",
             "--local-epochs", "1", "--batch-size", "32", "--device", "cpu", "--backend", "sequential"]


# ====================================================================== errors and --json
@pytest.mark.parametrize("argv, fragment", [
    (["run", "--dataset", "imagenet"], "imagenet"),
    (["run", "--beta", "0"], "beta"),
    (["run", "--participation", "2"], "participation"),
    (["run", "--rounds", "zero"], "--rounds"),
    (["run", "--method", "fedprox", "--method-arg", "mu"], "KEY=VALUE"),
    (["run", "--method", "fedprox", "--method-arg", "nu=1"], "nu"),
    (["run", "--partition", "random"], "random"),
    (["run", "--partition", "natural", "--global-balance"], "global_balance"),
    (["launch"], "launch"),
    (["list", "--status", "finished"], "finished"),
    (["list", "--model", "transformer"], "transformer"),
    (["list", "--method", "fedfoo"], "fedfoo"),
    (["list", "--sort", "colour"], "colour"),
    (["show", "ffffffffffff"], "no stored run"),
    (["export", "--to", "mlflow", "--out", "x"], "mlflow"),
])
def test_bad_input_exits_2_with_one_line(argv, fragment, capsys, tmp_path):
    assert main(argv + (["--results", str(tmp_path)] if argv[0] in ("list", "show") else [])) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and fragment in err and "Traceback" not in err


def test_run_json_last_line(tmp_path, capsys):
    argv = ["run", "--dataset", "synthetic", "--model", "mlp", "--clients", "3", "--rounds", "2",
            "--local-epochs", "1", "--batch-size", "32", "--device", "cpu", "--results", str(tmp_path), "--json",
            "--quiet", "--method", "fedprox", "--method-arg", "mu=0.1"]
    assert main(argv) == 0
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert out["config"]["method_args"] == {"mu": 0.1}
    assert [r["round"] for r in out["per_round"]] == [0, 1]  # --json keeps the store's 0-based rounds
    assert 0.0 <= out["final_accuracy"] <= 1.0 and out["best_accuracy"] >= out["final_accuracy"]
    assert len(out["class_accuracy"]) == len(out["class_names"]) == 10
    assert main(["list", "--results", str(tmp_path)]) == 0
    assert out["config_hash"] in capsys.readouterr().out


def test_module_entry_point_reports_errors_without_traceback():
    proc = subprocess.run([sys.executable, "-m", "fedlib", "run", "--clients", "-3"], cwd=REPO,
                          capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert proc.returncode == 2
    assert proc.stderr.strip().count("\n") == 0 and "clients" in proc.stderr


# ====================================================================== --help and defaults
def help_text(argv, capsys, monkeypatch) -> str:
    monkeypatch.setenv("COLUMNS", "120")
    with pytest.raises(SystemExit) as caught:
        main(argv + ["--help"])
    assert caught.value.code == 0
    return " ".join(capsys.readouterr().out.split())  # argparse's line wrapping undone


def test_run_help_lists_every_valid_name(capsys, monkeypatch):
    from fedlib import models
    from fedlib.core.registry import method_names
    from fedlib.datasets import data, partition
    from fedlib.datasets.augment import AUGMENTATIONS

    words = set(re.split(r"[\s,;()]+", help_text(["run"], capsys, monkeypatch)))
    for names in (data.DATASETS, models.MODELS, partition.PARTITIONS, AUGMENTATIONS, method_names(), data.SPLITS):
        assert set(names) <= words, set(names) - words


def test_run_help_shows_defaults_and_where_they_come_from(capsys, monkeypatch):
    text = help_text(["run"], capsys, monkeypatch)
    for option, default in [("--momentum", "0.9"), ("--local-epochs", "5"), ("--weight-decay", "1e-05"),
                            ("--lr", "0.01"), ("--rounds", "20"), ("--batch-size", "50"), ("--seed", "0"),
                            ("--dataset", "fashion_mnist"), ("--method", "fedavg")]:
        after = text[text.index(f" {option} "):]
        assert f"(default: {default})" in after[:after.index(" --", 3)], option
    assert "as in FedVLS, FedLMD, FedNTD and FedCSD" in text  # momentum's source


@pytest.mark.parametrize("command", ["list", "show", "export"])
def test_store_commands_have_help(command, capsys, monkeypatch):
    text = help_text([command], capsys, monkeypatch)
    assert "--results" in text


def test_cli_defaults_are_the_papers_shared_setting():
    ns = cli._build_parser().parse_args(["run"])
    cfg = cli.config_from_args(ns)
    assert (cfg.local_epochs, cfg.momentum, cfg.weight_decay, cfg.lr) == (5, 0.9, 1e-5, 0.01)
    assert RunConfig().momentum == 0.0  # the Python defaults (and the notebooks' stored runs) are unchanged


def test_global_balance_flag_sets_the_config_field():
    parse = cli._build_parser().parse_args
    assert not cli.config_from_args(parse(["run"])).global_balance
    assert cli.config_from_args(parse(["run", "--partition", "pathological", "--global-balance"])).global_balance


def test_no_standardise_and_dataset_split_flags_set_the_dataset_options_together():
    parse = cli._build_parser().parse_args
    assert cli.config_from_args(parse(["run"])).dataset_options == {}
    both = cli.config_from_args(parse(["run", "--no-standardise", "--dataset-split", "pooled_75_25"]))
    assert both.dataset_options == {"split": "pooled_75_25", "standardise": False}


# ====================================================================== run: summary, hint, store messages
def fake_result(final: float, classes: int = 10, best_round: int = 0) -> engine.RunResult:
    cfg = tiny_config(max_train_samples=200)
    summary = {"final_accuracy": final, "best_accuracy": final, "best_round": best_round,
               "class_accuracy": [final] * classes, "class_names": [str(c) for c in range(classes)]}
    return engine.RunResult(cfg, [], summary)


def test_run_summary_counts_rounds_from_1_and_prints_percent():
    lines = cli.run_summary_lines(fake_result(0.4321, best_round=0))
    assert "final accuracy 43.21%" in lines[1] and "(round 1 of 3)" in lines[1]


@pytest.mark.parametrize("final, classes, hinted", [(0.10, 10, True), (0.15, 10, True), (0.16, 10, False),
                                                    (0.015, 100, True), (0.5, 2, True), (0.8, 2, False),
                                                    (float("nan"), 10, False)])
def test_chance_level_hint(final, classes, hinted):
    hint = cli.chance_hint(fake_result(final, classes))
    assert (hint is not None) == hinted
    if hinted:
        assert hint.count("\n") == 0 and "--rounds (3)" in hint and "--max-train-samples (200)" in hint
        assert "--lr" in hint and "chance level" in hint


def test_run_prints_the_hint_after_a_run_at_chance(monkeypatch, capsys):
    monkeypatch.setattr(engine, "run", lambda cfg, **kwargs: fake_result(0.1))
    assert main(TINY_ARGV + ["--quiet", "--no-store"]) == 0
    out = capsys.readouterr().out
    assert "final accuracy 10.00%" in out and out.strip().splitlines()[-1].startswith("hint: 10.00% is chance")


def test_interrupt_resume_and_serve_say_so_in_one_line_each(tmp_path, monkeypatch, capsys):
    argv = TINY_ARGV + ["--results", str(tmp_path)]
    real_round = engine.run_round

    def interrupted_round(server, algorithm, hooks=()):
        if server.round == 2:
            raise KeyboardInterrupt
        return real_round(server, algorithm, hooks)

    monkeypatch.setattr(engine, "run_round", interrupted_round)
    assert main(argv) == 130
    captured = capsys.readouterr()
    line = captured.err.strip().splitlines()[-1]
    assert "checkpointed at round 2 of 4" in line and "Traceback" not in captured.err
    assert "rerun the same command: fedlib run --dataset synthetic" in line and line.endswith(str(tmp_path))
    folder = next(tmp_path.iterdir())
    assert not (folder / "claim.json").exists()  # the claim is released

    monkeypatch.setattr(engine, "run_round", real_round)
    assert main(argv) == 0
    captured = capsys.readouterr()
    assert f"resuming from round 3 of 4 ({folder})" in captured.err
    assert "best" in captured.out and "%" in captured.out

    assert main(argv) == 0
    assert re.search(rf"served from the store: {re.escape(str(folder))} \(trained \d{{4}}-\d\d-\d\d \d\d:\d\d, "
                     r"[\d.]+ s\)", capsys.readouterr().err)
    assert main(argv + ["--quiet"]) == 0
    assert "served" not in capsys.readouterr().err  # --quiet: no store messages


def test_engine_store_messages_only_with_progress(tmp_path, capsys):
    cfg = tiny_config()
    quiet_run(cfg, tmp_path, stop_after=1)
    assert "resuming" not in capsys.readouterr().err
    engine.run(cfg, results_dir=tmp_path, progress=True)
    assert "resuming from round 2 of 3" in capsys.readouterr().err
    quiet_run(cfg, tmp_path)
    assert capsys.readouterr().err == ""
    engine.run(cfg, results_dir=tmp_path, progress=True)
    assert "served from the store" in capsys.readouterr().err


def test_interrupt_before_the_first_checkpoint(tmp_path, monkeypatch, capsys):
    def no_round(server, algorithm, hooks=()):
        raise KeyboardInterrupt

    monkeypatch.setattr(engine, "run_round", no_round)
    assert main(TINY_ARGV + ["--results", str(tmp_path), "--quiet"]) == 130
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "before round 1 was checkpointed" in err


# ====================================================================== list
@pytest.fixture(scope="module")
def store_dir(tmp_path_factory):
    """Four runs: fedavg, fedprox(mu=0.1), the composition fedlmd+fedprox, and a partial one."""
    root = tmp_path_factory.mktemp("store")
    runs = {"fedavg": tiny_config(), "fedprox": tiny_config(method="fedprox", method_args={"mu": 0.1}, lr=0.1),
            "composed": tiny_config(method="fedlmd+fedprox", lr=0.02)}
    for cfg in runs.values():
        quiet_run(cfg, root)
    runs["partial"] = tiny_config(seed=2, rounds=4, lr=0.03)
    quiet_run(runs["partial"], root, stop_after=1)
    for age, cfg in enumerate(runs.values()):  # fedavg oldest ... partial newest
        for path in (root / cfg.hash()).iterdir():
            os.utime(path, (1_700_000_000 + age * 60,) * 2)
    return root, runs


def list_output(argv, capsys) -> list[str]:
    assert main(["list"] + argv) == 0
    return capsys.readouterr().out.rstrip("\n").splitlines()


def test_list_has_a_header_and_aligned_columns_for_composed_methods(store_dir, capsys):
    root, runs = store_dir
    lines = list_output(["--results", str(root)], capsys)
    header = lines[0].split()
    assert header[:4] == ["hash", "status", "size", "method"] and "lr" in header and "momentum" in header
    column = lines[0].index("dataset")
    rows = {line.split()[0]: line for line in lines[1:-1]}
    assert len(rows) == 4 and lines[-1].startswith("4 runs, ")
    for row in rows.values():
        assert row[column:].startswith("synthetic")
    composed = rows[runs["composed"].hash()]
    assert "fedlmd+fedprox" in composed and " done " in composed
    assert "fedprox(mu=0.1)" in rows[runs["fedprox"].hash()]
    assert " 1/4 " in rows[runs["partial"].hash()] and " partial " in rows[runs["partial"].hash()]
    assert re.search(r"\d+\.\d\d%", rows[runs["fedavg"].hash()])


def test_list_default_order_is_newest_first(store_dir, capsys):
    root, runs = store_dir
    lines = list_output(["--results", str(root)], capsys)
    assert [line.split()[0] for line in lines[1:-1]] == [cfg.hash() for cfg in reversed(list(runs.values()))]
    assert "newest first" in lines[-1]


def test_list_sorts_by_a_column(store_dir, capsys):
    root, runs = store_dir
    lines = list_output(["--results", str(root), "--sort", "lr"], capsys)
    order = [line.split()[0] for line in lines[1:-1]]
    by_lr = sorted(runs.values(), key=lambda cfg: cfg.lr)
    assert order == [cfg.hash() for cfg in by_lr]
    lines = list_output(["--results", str(root), "--sort", "best"], capsys)
    best = [float(m) for m in re.findall(r"(\d+\.\d\d)%\s+\d{4}-", "\n".join(lines[1:-1]))]
    assert best == sorted(best, reverse=True) and lines[-2].split()[0] == runs["partial"].hash()  # no value: last


@pytest.mark.parametrize("argv, expected", [
    (["--method", "fedprox"], ["fedprox", "composed"]),
    (["--method", "fedlmd"], ["composed"]),
    (["--method", "fedlmd+fedprox"], ["composed"]),
    (["--status", "partial"], ["partial"]),
    (["--dataset", "synthetic", "--model", "mlp", "--status", "done"], ["fedavg", "fedprox", "composed"]),
])
def test_list_filters(store_dir, capsys, argv, expected):
    root, runs = store_dir
    lines = list_output(["--results", str(root)] + argv, capsys)
    assert sorted(line.split()[0] for line in lines[1:-1]) == sorted(runs[name].hash() for name in expected)
    assert lines[-1].startswith(f"{len(expected)} run") and " of 4 (" in lines[-1]


def test_list_says_when_no_run_matches(store_dir, capsys):
    root, _ = store_dir
    assert list_output(["--results", str(root), "--dataset", "digits"], capsys) == [
        f"no runs match dataset=digits in {root} (4 runs there)"]


@pytest.mark.parametrize("make", [False, True])
def test_an_empty_or_missing_store_prints_one_line(tmp_path, capsys, make):
    root = tmp_path / "nowhere"
    if make:
        root.mkdir()
    lines = list_output(["--results", str(root)], capsys)
    assert len(lines) == 1 and lines[0].startswith(f"no runs in the results store {root}")
    assert ("does not exist" in lines[0]) != make


# ====================================================================== show
def test_show_is_a_readable_summary(store_dir, capsys):
    root, runs = store_dir
    cfg = runs["fedprox"]
    assert main(["show", cfg.hash()[:6], "--results", str(root)]) == 0
    out = capsys.readouterr().out
    summary = json.loads((root / cfg.hash() / "summary.json").read_text())
    assert out.startswith(f"run {cfg.hash()}: done, 3 of 3 rounds")
    assert "fedprox(mu=0.1) on synthetic with mlp, dirichlet(0.5) over 4 clients" in out
    assert "differ from RunConfig's defaults: dataset" not in out and "lr=0.1" in out and "momentum=0.5" in out
    assert "method hyperparameters: mu=0.1" in out
    assert re.search(r"provenance: fedlib \S+, revision \S+.*device cpu, backend \w+.*finished \d{4}-", out)
    assert f"best {listing.percent(summary['best_accuracy'])} (round {summary['best_round'] + 1} of 3)" in out
    assert "worst class:" in out and "per-class accuracy" in out and out.count("%") > 13
    rows = re.findall(r"^\s+(\d+)\s+\d+\.\d\d%\s+\d+\.\d{4}$", out, flags=re.MULTILINE)
    assert rows == ["1", "2", "3"]  # the curve, rounds counted from 1
    assert "{" not in out


def test_show_json_is_the_raw_record(store_dir, capsys):
    root, runs = store_dir
    cfg = runs["fedavg"]
    assert main(["show", cfg.hash(), "--results", str(root), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert set(out) == {"config", "meta", "summary", "status"} and out["status"] == "done" and out["config"]["lr"] == cfg.lr
    assert out["summary"]["best_round"] in (0, 1, 2)  # stored 0-based


def test_show_a_partial_run(store_dir, capsys):
    root, runs = store_dir
    assert main(["show", runs["partial"].hash(), "--results", str(root)]) == 0
    out = capsys.readouterr().out
    assert "partial, 1 of 4 rounds" in out and "resume" in out and "accuracy per round" in out


def test_curve_table_every_k_rounds_keeps_the_last():
    rounds = [{"round": r, "accuracy": r / 30, "loss": 1.0} for r in range(23)]
    lines = listing.curve_lines(rounds, every=5)
    assert [int(line.split()[0]) for line in lines[2:]] == [1, 6, 11, 16, 21, 23]
    assert len(listing.sparkline([0.1, 0.5, 0.9])) == 3


# ====================================================================== export
def read_events(folder: Path) -> list:
    """Every Event in the TFRecord files of ``folder`` (length, CRC, payload, CRC per record)."""
    from tensorboardX.proto import event_pb2

    events = []
    for path in sorted(folder.glob("events.out.tfevents.*")):
        data, offset = path.read_bytes(), 0
        while offset < len(data):
            (length,) = struct.unpack_from("<Q", data, offset)
            events.append(event_pb2.Event.FromString(data[offset + 12: offset + 12 + length]))
            offset += 12 + length + 4
    return events


def scalars(events) -> dict[str, list[tuple[int, float]]]:
    found: dict[str, list] = {}
    for event in events:
        for value in event.summary.value:
            if value.WhichOneof("value") == "simple_value":
                found.setdefault(value.tag, []).append((event.step, value.simple_value))
    return found


def test_export_writes_one_tensorboard_run_per_stored_run(store_dir, tmp_path, capsys):
    from tensorboardX.proto import plugin_hparams_pb2

    root, runs = store_dir
    out = tmp_path / "tb"
    assert main(["export", "--to", "tensorboard", "--out", str(out), "--results", str(root)]) == 0
    assert capsys.readouterr().out.startswith(f"exported 4 runs to {out}")
    cfg = runs["fedprox"]
    folder = out / "fedprox" / "synthetic-mlp" / "dirichlet_0.5" / cfg.hash()
    events = read_events(folder)
    values = scalars(events)
    stored = [json.loads(line) for line in (root / cfg.hash() / "rounds.jsonl").read_text().splitlines()]
    assert [step for step, _ in values["accuracy/test"]] == [1, 2, 3]
    assert values["accuracy/test"][-1][1] == pytest.approx(100 * stored[-1]["accuracy"], abs=1e-4)
    assert len([tag for tag in values if tag.startswith("class_accuracy/")]) == 10
    assert "loss/test" in values and "train/lr" in values and "hparams/best_accuracy" in values
    plugin = [v for e in events for v in e.summary.value if v.tag == "_hparams_/session_start_info"]
    start = plugin_hparams_pb2.HParamsPluginData.FromString(plugin[0].metadata.plugin_data.content)
    hparams = start.session_start_info.hparams
    assert hparams["lr"].number_value == pytest.approx(0.1) and hparams["method"].string_value == "fedprox"
    assert hparams["method.mu"].number_value == pytest.approx(0.1)
    experiment = [v.tag for e in read_events(out) for v in e.summary.value]
    assert experiment == ["_hparams_/experiment"]
    assert (out / "fedlmd+fedprox" / "synthetic-mlp" / "dirichlet_0.5" / runs["composed"].hash()).is_dir()


def test_export_again_replaces_its_own_files_only(store_dir, tmp_path, capsys):
    root, runs = store_dir
    out = tmp_path / "tb"
    argv = ["export", "--out", str(out), "--results", str(root), "--method", "fedlmd"]
    assert main(argv) == 0 and main(argv) == 0
    folder = out / "fedlmd+fedprox" / "synthetic-mlp" / "dirichlet_0.5" / runs["composed"].hash()
    assert len(list(folder.glob("events.out.tfevents.*"))) == 1
    assert [step for step, _ in scalars(read_events(folder))["accuracy/test"]] == [1, 2, 3]
    assert "exported 1 run to" in capsys.readouterr().out


def test_export_without_tensorboard_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "tensorboardX", None)
    monkeypatch.setitem(sys.modules, "torch.utils.tensorboard", None)
    with pytest.raises(FedlibError, match=r"pip install 'fedlib\[export\]'") as caught:
        export.summary_api()
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize("argv, says", [
    (["run", "--dataset", "synthetic", "--model", "mlp", "--method", "fedprox", "--method-arg", "mu=0.1",
      "--method-arg", "mu=0.2"], "given twice"),
    (["run", "--dataset", "synthetic", "--model", "mlp", "--seed", "99999999999999999999999"], "seed must be"),
    (["run", "--dataset", "synthetic", "--model", "mlp", "--rounds", "1", "--device", "mps"], "MPS is not available"),
])
def test_cli_bad_inputs_exit_2_with_one_line(argv, says, capsys):
    assert cli.main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert says in err and len(err.splitlines()) == 1


def test_cli_results_on_a_file_is_one_line(tmp_path, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    argv = ["run", "--dataset", "synthetic", "--model", "mlp", "--rounds", "1", "--quiet", "--results", str(blocker)]
    assert cli.main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert "cannot write the results store" in err and len(err.splitlines()) == 1
