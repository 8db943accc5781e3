"""benchmarks/gpu_check.py's parts run on a CPU with --tiny (the smoke of the GPU check), so the
script is known to work before a GPU is lent; gpu_check.sh joins them into a results file."""

import pytest

from benchmarks import gpu_check
from fedlib.core.config import RunConfig
from fedlib.engine import engine
from fedlib.errors import FedlibError

pytestmark = pytest.mark.usefixtures("one_thread")


def test_the_machine_part_names_torch_and_the_cublas_setting():
    text = gpu_check.part_env("cpu", tiny=True)
    assert text.startswith("## Machine") and "torch " in text and "CUBLAS_WORKSPACE_CONFIG=:4096:8" in text


@pytest.mark.parametrize("name", ["a", "b", "c"])
def test_tiny_workloads_are_small_valid_configs_of_the_issue_workloads(name):
    full = gpu_check.workload(name, "cpu", tiny=False) if name == "b" else None
    tiny = gpu_check.workload(name, "cpu", tiny=True)
    assert tiny.max_train_samples <= 400 and tiny.local_epochs == 1  # the tiny stand-ins hold 400
    assert tiny.model == {"a": "mobilenetv2", "b": "cnn2", "c": "lenet5"}[name]
    assert full is None or full.max_train_samples is None, "(b) runs on the full data"


def test_the_checks_source_stands_in_for_cifar10_only_and_is_never_stored(tmp_path):
    source = gpu_check.FullSizeStandIns(("cifar10",), tiny=True)
    dataset = source.load("cifar10")
    assert len(dataset.train_y) == 400 and dataset.image_shape == (3, 32, 32)
    assert len(source.load("digits").train_y) == len(engine.load_run_dataset(RunConfig(dataset="digits")).train_y)
    with pytest.raises(FedlibError, match="never stored"):
        engine.run(RunConfig(dataset="cifar10", rounds=1), source=source, results_dir=tmp_path)


def test_one_run_is_ready_after_its_warm_up_then_trains_on_go_and_reports_its_images(monkeypatch):
    import io

    monkeypatch.setattr("sys.stdin", io.StringIO("go\n"))
    lines = list(gpu_check.part_one_run("cpu", tiny=True))
    assert lines[0] == "ready" and int(lines[1]) > 0


def test_packing_starts_every_run_together_and_counts_one_window():
    rows = list(gpu_check.part_packing("cpu", tiny=True))
    table = [r for r in rows if r.startswith("| 1 |") or r.startswith("| 2 |")]
    assert len(table) == 2 and "finished" not in " ".join(table), rows
    one, two = (float(r.split("|")[4]) for r in table)
    assert one > 0 and two > 0


def test_the_rates_part_probes_rates_before_ratios_once_a_side_and_prints_the_plan(tmp_path, monkeypatch):
    from fedlib.orchestration import timing

    monkeypatch.setenv("FEDLIB_CACHE", str(tmp_path))
    monkeypatch.setattr(timing, "COMMITTED_RATES", tmp_path / "none.json")
    probed = []
    monkeypatch.setattr(timing, "probe_seconds_per_image",
                        lambda cfg, device="auto", clients=2: probed.append(cfg.method) or 0.001)
    monkeypatch.setattr(timing, "probe_eval_seconds_per_image", lambda cfg, device="auto": probed.append("eval") or 1e-4)
    text = "\n".join(gpu_check.part_rates("cpu", tiny=True))
    assert text.startswith("## Plan rates on cpu") and "plan for the 'smoke' profile" in text
    first_ratio = next(i for i, m in enumerate(probed) if m not in ("fedavg", "eval"))
    assert "eval" in probed[:first_ratio] and "eval" not in probed[first_ratio:], "rates and evaluations first"
    ratios = probed[first_ratio - 1:]  # FedAvg, the method, in turn
    assert ratios[0::2] == ["fedavg"] * (len(ratios) // 2) and "fedavg" not in ratios[1::2], "one probe a side"
    assert (tmp_path / "plan_rates.json").exists()


def test_the_profile_and_op_count_parts_print_tables():
    profile = gpu_check.part_profile("cpu", tiny=True)
    assert profile.startswith("## Profile") and "aten::" in profile
    counts = gpu_check.part_opcount("cpu", tiny=True)
    assert "| fedavg | lenet5 |" in counts


def test_a_cuda_part_without_cuda_says_so(capsys):
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    assert gpu_check.main(["--part", "env", "--device", "cuda"]) == 2
    assert "no CUDA device here" in capsys.readouterr().out


def test_test_outcomes_are_counted_from_verbose_pytest_output():
    output = "\n".join([
        "tests/a.py::test_x[cuda] PASSED                 [ 10%]",
        "tests/a.py::test_y[cuda] FAILED                 [ 20%]",
        "tests/b.py::test_z[cuda-fedmr] XFAIL (unverified)  [ 30%]",
        "tests/b.py::test_w[cpu] SKIPPED (needs CUDA)     [ 40%]",
        "tests/c.py::test_v[cuda-stacked-fedcsd-{'variant': 'official'}] PASSED [ 50%]",  # spaces in the id
        "FAILED tests/a.py::test_y[cuda] - AssertionError",
        "=== 1 failed, 1 passed ===",
    ])
    outcomes, failures = gpu_check.count_outcomes(output)
    assert dict(outcomes) == {"PASSED": 2, "FAILED": 1, "XFAIL": 1, "SKIPPED": 1}
    assert failures == ["tests/a.py::test_y[cuda]"]


def test_the_environment_chooses_workload_paths_and_packing_counts(monkeypatch):
    assert list(gpu_check.workload_paths()) == list(gpu_check.WORKLOAD_ORDER)
    monkeypatch.setenv("GPU_CHECK_PATHS", "a=stacked+bf16, sequential+cl; c=naive")
    assert gpu_check.workload_paths() == {"a": ("stacked+bf16", "sequential+cl"), "c": ("naive",)}
    assert gpu_check.packing_counts(tiny=False) == gpu_check.PACKING
    monkeypatch.setenv("GPU_CHECK_PACKING", "4 8")
    assert gpu_check.packing_counts(tiny=True) == (4, 8)
    assert gpu_check.packing_workload() == "c"
    monkeypatch.setenv("GPU_CHECK_PACKING_WORKLOAD", "b")
    assert gpu_check.packing_workload() == "b"
    monkeypatch.setenv("GPU_CHECK_PACKING_WORKLOAD", "d")
    with pytest.raises(SystemExit, match="one of a, b, c"):
        gpu_check.packing_workload()


@pytest.mark.parametrize("name, model, path", [("a", "mobilenetv2", "sequential"), ("b", "cnn2", "threads")])
def test_a_packing_run_of_another_workload_trains_its_model_on_its_path(monkeypatch, name, model, path):
    import io

    from benchmarks import bench

    runs, original = [], bench.round_runner
    monkeypatch.setattr(bench, "round_runner", lambda cfg, p, source: runs.append((cfg.model, p)) or original(cfg, p, source))
    monkeypatch.setenv("GPU_CHECK_PACKING_WORKLOAD", name)
    monkeypatch.setattr("sys.stdin", io.StringIO("go\n"))
    lines = list(gpu_check.part_one_run("cpu", tiny=True))
    assert lines[0] == "ready" and int(lines[1]) > 0
    assert runs == [(model, path)]
