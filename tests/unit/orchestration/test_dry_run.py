"""fedlib.orchestration.dry_run: one round of each config on a slice of its data (a stand-in where it is missing)."""

import numpy as np
import pytest
import torch

from fedlib.core.config import RunConfig, hash_with_unread_settings
from fedlib.datasets import data
from fedlib.errors import FedlibError
from fedlib.orchestration import dry_run


def sample(data_dir: str) -> dict[str, tuple[RunConfig, list[str]]]:
    """A fixed sample of different datasets, models, methods and partitions; every dataset but
    the bundled ones is looked for in the empty ``data_dir``, so it runs on a stand-in."""
    common = dict(rounds=100, local_epochs=5, batch_size=32, device="auto", data_dir=data_dir)
    configs = [
        RunConfig(dataset="digits", model="mlp", method="fedavg", clients=10, **common),
        RunConfig(dataset="synthetic", model="lenet5", method="pkd", partition="pathological", classes_per_client=1,
                  method_args={"warmup_rounds": 20, "expert_rounds": 25}, **common),
        RunConfig(dataset="cifar100", model="cnn2", method="fedntd", partition="shards", clients=50,
                  participation=0.2, augmentation="crop_flip_cutout", **common),
        RunConfig(dataset="office_caltech10", model="cnn2", method="fedcsd", partition="natural", clients=4, **common),
        RunConfig(dataset="femnist", model="lenet5", method="fedconcat", partition="natural", clients=12,
                  dataset_options={"digits_only": True}, **common),
        RunConfig(dataset="fashion_mnist", model="mlp", method="fedgf", partition="dirichlet", beta=0.05,
                  clients=10, **common),
        # 3 clients x 2 shards cannot split 10 classes evenly: the partitioner refuses, the dry run goes on
        RunConfig(dataset="digits", model="mlp", method="fedavg", partition="shards", clients=3, **common),
    ]
    return {cfg.hash(): (cfg, ["table_a"]) for cfg in configs}


def test_a_sample_of_configs_runs_one_round_each(tmp_path, capsys):
    empty = tmp_path / "no_data"
    empty.mkdir()
    configs = sample(str(empty))
    csv_path = tmp_path / "dry_run.csv"
    frame = dry_run.dry_run(configs, csv_path, jobs=0, progress=False).set_index("dataset", drop=False)
    assert len(frame) == len(configs) and csv_path.exists()
    bad = frame[frame["partition"] == "shards"].set_index("method").loc[["fedavg"]]
    assert bad["status"].tolist() == ["error"] and "divisible" in bad["error"].iloc[0]
    good = frame[~frame["hash"].isin(bad["hash"])]
    assert (good["status"] == "ok").all(), good[["method", "error"]].to_string()
    assert good.set_index("dataset")["data"].to_dict() == {
        "digits": "real", "synthetic": "real", "cifar100": "stand-in", "office_caltech10": "stand-in",
        "femnist": "stand-in", "fashion_mnist": "stand-in"}
    for column in ("peak_rss_mb", "parameters", "seconds_per_image", "images"):
        assert (good[column].astype(float) > 0).all(), column
    notes = good.set_index("method")["note"]
    assert "no warm-up" in notes["pkd"] and "classifier round" in notes["fedconcat"] and "2 rounds" in notes["fedgf"]
    assert good.set_index("method")["rounds"].astype(int).to_dict()["fedconcat"] == 2
    text = dry_run.format_dry_run(frame, csv_path)
    assert "dry run: 6 ok, 1 errors, 4 on stand-in data (7 configs)" in text
    assert text.count("\nerror: ") == 1


def test_worker_processes_isolate_configs_and_stop_runaways(tmp_path):
    digits = {h: job for h, job in sample(str(tmp_path)).items() if job[0].dataset == "digits"}  # one worker
    csv_path = tmp_path / "dry_run.csv"
    frame = dry_run.dry_run(digits, csv_path, jobs=1, progress=False).set_index("partition")
    assert frame.loc["dirichlet", "status"] == "ok" and float(frame.loc["dirichlet", "peak_rss_mb"]) > 0
    assert frame.loc["shards", "status"] == "error"
    first = dict(list(digits.items())[:1])
    late = dry_run.dry_run(first, tmp_path / "late.csv", jobs=1, timeout_s=0.01, progress=False)
    assert late["error"].str.startswith("timed out after").all(), "a runaway config is stopped"


def test_a_dry_run_resumes_from_its_csv(tmp_path, monkeypatch):
    ran = []

    def fake_run_one(cfg):
        ran.append(cfg.hash())
        return {"status": "ok" if cfg.method != "fedgf" else "error", "data": "real", "error": ""}

    monkeypatch.setattr(dry_run, "run_one", fake_run_one)
    configs = sample(str(tmp_path))
    csv_path = tmp_path / "dry_run.csv"
    first = dry_run.dry_run(configs, csv_path, jobs=0, limit=3, progress=False)
    assert len(first) == 3 and len({configs[h][0].method for h in ran}) == 3, "limit: 3 configs, 3 methods"
    ran.clear()
    everything = dry_run.dry_run(configs, csv_path, jobs=0, progress=False)
    assert len(everything) == len(configs) and len(ran) == len(configs) - 3, "the first three are not run again"
    ran.clear()
    dry_run.dry_run(configs, csv_path, jobs=0, progress=False)
    assert ran == [], "nothing runs twice"
    dry_run.dry_run(configs, csv_path, jobs=0, retry_errors=True, progress=False)
    assert [configs[h][0].method for h in ran] == ["fedgf"], "--retry-errors runs the failed config again"
    assert len(dry_run.read_rows(csv_path)) == len(configs), "its new row replaces the old one"


def test_the_dry_run_copy_keeps_what_defines_the_run():
    cfg = RunConfig(dataset="cifar10", model="resnet8", method="pkd", partition="dirichlet", beta=0.05, clients=100,
                    participation=0.1, rounds=300, local_epochs=5, augmentation="crop_flip_cutout",
                    method_args={"warmup_rounds": 20, "expert_rounds": 25, "lam": 0.5}, device="cuda")
    dry, note = dry_run.dry_run_config(cfg)
    assert (dry.rounds, dry.local_epochs, dry.device) == (1, 1, "cpu")
    assert dry.method_args == {"warmup_rounds": 0, "expert_rounds": 1, "lam": 0.5} and "no warm-up" in note
    kept = ("dataset", "model", "method", "partition", "beta", "clients", "participation", "augmentation",
            "batch_size", "lr", "seed")
    assert all(getattr(dry, name) == getattr(cfg, name) for name in kept)
    sliced = dry_run.choose_slice(dry, real=False)
    # Dir(0.05) over 100 clients leaves some client under 10 samples on any small slice
    assert (sliced.max_train_samples, sliced.min_client_size, sliced.max_test_samples) == (12800, 1, 20)


def test_a_stand_in_has_the_shape_of_the_dataset_it_stands_in_for():
    femnist = data.stand_in_dataset("femnist", 120, 30, groups=12, digits_only=True)
    assert femnist.image_shape == (1, 28, 28) and femnist.num_classes == 10
    assert len(np.unique(femnist.train_groups)) == 12 and len(femnist.train_y) == 120
    office = data.stand_in_dataset("office_caltech10", 40, 20)
    assert office.image_shape == (3, 32, 32) and office.group_names == list(data.OFFICE_DOMAINS)
    tiny = data.stand_in_dataset("tinyimagenet", 400, 200)
    assert tiny.image_shape == (3, 64, 64) and tiny.num_classes == 200 and tiny.train_y.bincount().min() == 2
    assert data.dataset_shape("cifar100", image_size=64).image_size == 64
    with pytest.raises(FedlibError, match="dataset"):
        data.stand_in_dataset("imagenet", 10, 10)


def test_peak_memory_sees_torch_tensors():
    with dry_run.PeakMemory() as peak:
        block = torch.ones(64 * 2 ** 20 // 4 * 4)  # 256 MB of float32
        del block
    assert peak.megabytes >= 256


def test_a_csv_with_older_columns_is_brought_up_to_date_when_appended_to(tmp_path):
    csv_path = tmp_path / "dry_run.csv"
    csv_path.write_text("hash,dataset,status\nabc,mnist,ok\n")
    dry_run.append_row(csv_path, {"hash": "def", "dataset": "cifar10", "status": "error", "error": "boom"})
    rows = dry_run.read_rows(csv_path)
    assert csv_path.read_text().splitlines()[0] == ",".join(dry_run.CSV_COLUMNS)
    assert (rows["abc"]["dataset"], rows["abc"]["error"]) == ("mnist", "")
    assert (rows["def"]["status"], rows["def"]["error"]) == ("error", "boom")


def test_configs_that_differ_only_in_their_seed_share_one_row(tmp_path, monkeypatch):
    ran = []
    monkeypatch.setattr(dry_run, "run_one", lambda cfg: ran.append(cfg.seed) or {"status": "ok", "data": "real"})
    base = RunConfig(dataset="digits", model="mlp", clients=4, rounds=1)
    configs = {cfg.hash(): (cfg, [stem]) for cfg, stem in [(base.replace(seed=2), "b"), (base.replace(seed=0), "a"),
                                                            (base.replace(seed=1), "a"), (base.replace(lr=0.1), "c")]}
    csv_path = tmp_path / "dry_run.csv"
    frame = dry_run.dry_run(configs, csv_path, jobs=0, progress=False)
    assert sorted(ran) == [0, 0] and len(frame) == 2, "one row for seeds 0-2, one for the other learning rate"
    row = frame.set_index("hash").loc[base.hash()]
    assert (row["seeds"], row["notebooks"]) == ("0 1 2", "a;b")
    assert "2 ok, 0 errors, 0 on stand-in data (2 configs; 4 declared" in dry_run.summary_line(frame)
    ran.clear()
    every = dry_run.dry_run(configs, tmp_path / "every.csv", jobs=0, progress=False, every_seed=True)
    assert sorted(ran) == [0, 0, 1, 2] and len(every) == 4


def test_a_group_whose_other_seed_was_run_before_is_not_run_again(tmp_path, monkeypatch):
    ran = []
    monkeypatch.setattr(dry_run, "run_one", lambda cfg: ran.append(cfg.seed) or {"status": "ok", "data": "real"})
    base = RunConfig(dataset="digits", model="mlp", clients=4, rounds=1)
    csv_path = tmp_path / "dry_run.csv"
    dry_run.dry_run({base.replace(seed=1).hash(): (base.replace(seed=1), ["a"])}, csv_path, jobs=0, progress=False,
                    every_seed=True)
    configs = {cfg.hash(): (cfg, ["a"]) for cfg in (base.replace(seed=s) for s in (0, 1))}
    frame = dry_run.dry_run(configs, csv_path, jobs=0, progress=False)
    assert ran == [1] and frame["seeds"].tolist() == ["0 1"]


def test_rows_written_under_an_older_config_hash_are_not_run_again(tmp_path, monkeypatch, capsys):
    ran = []
    monkeypatch.setattr(dry_run, "run_one", lambda cfg: ran.append(cfg.seed) or {"status": "ok", "data": "real"})
    iid = RunConfig(dataset="digits", model="mlp", clients=4, rounds=1, partition="iid", beta=0.1)
    old = hash_with_unread_settings(iid)
    assert old != iid.hash(), "iid does not read beta: today's hash leaves it out"
    csv_path = tmp_path / "dry_run.csv"
    dry_run.append_row(csv_path, {"hash": old, "dataset": "digits", "status": "ok", "seconds": 1.5})
    frame = dry_run.dry_run({iid.hash(): (iid, ["a"])}, csv_path, jobs=0, progress=False)
    assert ran == [] and frame["hash"].tolist() == [iid.hash()] and frame["seconds"].tolist() == ["1.5"]
    assert list(dry_run.read_rows(csv_path)) == [iid.hash()], "the file itself is rewritten"
    assert "1 rows written under an older config hash" in capsys.readouterr().out


def test_every_declared_partition_is_drawn_over_the_full_training_set(tmp_path):
    from fedlib.orchestration import partition_check

    digits = RunConfig(dataset="digits", model="mlp", partition="dirichlet", beta=0.05, clients=10, rounds=1)
    configs = {cfg.hash(): (cfg, ["nb"]) for cfg in [
        digits, digits.replace(method="fedprox"),  # the same partition: drawn once, for 2 configs
        digits.replace(seed=1),
        digits.replace(clients=150, min_client_size=10),  # 1,437 digits cannot give 150 clients 10 each
        RunConfig(dataset="cifar100", model="cnn2", data_dir=str(tmp_path))]}  # no CIFAR-100 there
    frame = partition_check.check_partitions(configs, tmp_path / "p.csv", progress=False)
    assert len(frame) == 4 and (tmp_path / "p.csv").exists()
    ok = frame[frame["status"] == "ok"]
    assert sorted(ok["configs"]) == [1, 2] and (ok["smallest_client"] >= digits.min_client_size).all()
    assert (ok["fewest_classes"] >= 1).all() and (ok["largest_client"] > ok["smallest_client"]).all()
    assert frame.set_index("dataset").loc["cifar100", "status"] == "data missing here"
    error = frame[frame["status"] == "error"]
    assert len(error) == 1 and error["clients"].tolist() == [150]
    text = partition_check.format_partitions(frame)
    assert "3 of 4 drawn over the full training set (2 ok, 1 errors), 1 not checked" in text
    assert text.count("partition error: digits dirichlet clients=150") == 1


def test_settings_a_scheme_does_not_read_do_not_make_another_draw(tmp_path):
    from fedlib.orchestration import partition_check

    iid = RunConfig(dataset="digits", model="mlp", partition="iid", clients=5, rounds=1)
    configs = {cfg.hash(): (cfg, ["nb"]) for cfg in [iid, iid.replace(beta=0.1, method="fedprox"),
                                                      iid.replace(partition="dirichlet", beta=0.1)]}
    frame = partition_check.check_partitions(configs, progress=False)
    assert sorted(zip(frame["partition"], frame["configs"])) == [("dirichlet", 1), ("iid", 2)]


def test_a_worker_whose_parent_is_gone_leaves_without_a_traceback():
    import multiprocessing

    from fedlib.orchestration.dry_run import measure_row
    from fedlib.orchestration.workers import serve

    parent, child = multiprocessing.Pipe()
    parent.close()  # the dry run was killed: the worker's next receive finds nobody
    serve(child, measure_row, 1, None)  # returns; before, EOFError escaped and printed into the dry run's log


def test_the_dry_run_takes_the_cheapest_models_first():
    from fedlib.core.config import RunConfig
    from fedlib.orchestration.dry_run import cheapest_first, forward_flops

    heavy = RunConfig(dataset="cifar10", model="mobilenetv2", method="fedavg")
    light = RunConfig(dataset="mnist", model="mlp", method="fedavg")
    middle = RunConfig(dataset="cifar10", model="cnn2", method="fedprox")
    configs = {cfg.hash(): (cfg, ["nb"]) for cfg in (heavy, light, middle)}
    assert forward_flops(light) < forward_flops(middle) < forward_flops(heavy)
    assert cheapest_first(list(configs), configs) == [light.hash(), middle.hash(), heavy.hash()]


def test_a_model_that_cannot_be_built_for_its_data_is_ranked_last_not_fatal():
    from fedlib.orchestration.dry_run import cheapest_first

    light = RunConfig(dataset="mnist", model="mlp", method="fedavg")
    unbuildable = RunConfig(dataset="synthetic", model="lenet5", method="fedavg",
                            dataset_options={"image_shape": [1, 4, 4]})  # lenet5 needs >= 12x12
    configs = {cfg.hash(): (cfg, ["nb"]) for cfg in (unbuildable, light)}
    assert cheapest_first(list(configs), configs) == [light.hash(), unbuildable.hash()]  # its row reports the error


def test_the_dry_run_and_the_executor_schedule_through_one_loop(tmp_path, monkeypatch):
    """Both hand their jobs to scheduler.schedule; the dry run on a LocalPool with its job, timeout
    and rule for a new worker, a result its pool marks died (a death, an overrun) becoming an error row."""
    from fedlib.orchestration import executor, pools, scheduler
    from tests.helpers import tiny_config

    pools_seen = []

    def one_loop(queue, pool, collected, **options):  # no process is started: every job "dies"
        pools_seen.append(pool)
        for job in list(queue):
            options.get("started", lambda job: None)(job)
            collected(job, {"status": "died", "error": "timed out after 5 s"})

    monkeypatch.setattr(scheduler, "schedule", one_loop)
    digits = {h: job for h, job in sample(str(tmp_path)).items() if job[0].dataset == "digits"}
    frame = dry_run.dry_run(digits, tmp_path / "dry_run.csv", jobs=2, timeout_s=5, progress=False)
    assert len(pools_seen) == 1, "the dry run schedules through the shared loop"
    pool = pools_seen[0]
    assert isinstance(pool, pools.LocalPool) and pool.job_function is dry_run.measure_row and pool.timeout_s == 5
    assert pool.replace is dry_run._needs_new_worker and pool.gpus == 0 and pool.size == 2
    assert sorted(frame["hash"]) == sorted(digits) and (frame["status"] == "error").all()
    assert (frame["error"] == "timed out after 5 s").all()

    outcomes = executor.execute([tiny_config()], executor="local", workers=1, threads=1, results_dir=tmp_path / "r",
                                retries=0, progress=False)
    assert len(pools_seen) == 2 and isinstance(pools_seen[1], pools.LocalPool), "so does the executor"
    assert pools_seen[1].job_function is executor.train_one and pools_seen[1].timeout_s is None
    assert [o.status for o in outcomes] == ["failed"] and outcomes[0].error.startswith("timed out after 5 s")


class _FakeWorker:
    """Stands in for a spawned worker: counts the configs it is given."""

    def __init__(self, threads, gpu, job=None):
        self.gpu, self.job, self.last, self.jobs, self.reserved, self.stopped = gpu, None, None, 0, 0, False

    def give(self, cfg):
        self.job = self.last = cfg
        self.jobs += 1

    def alive(self):
        return True

    def stop(self):
        self.stopped = True


def test_a_dry_run_worker_measures_one_kind_and_at_most_jobs_per_worker_configs(monkeypatch):
    from fedlib.orchestration import pools

    monkeypatch.setattr(pools, "LocalWorker", _FakeWorker)
    monkeypatch.setattr(dry_run, "JOBS_PER_WORKER", 3)
    pool = pools.LocalPool(1, 1, dry_run.measure_row, timeout_s=60, replace=dry_run._needs_new_worker,
                           use_gpus=False)
    mlp = RunConfig(dataset="digits", model="mlp", device="auto")
    kinds = [mlp, mlp.replace(method="fedprox"), mlp.replace(seed=1), mlp.replace(seed=2),  # 4th: a new worker
             mlp.replace(model="lenet5"), mlp.replace(dataset="synthetic", model="lenet5")]  # new kinds: new workers
    workers = []
    for cfg in kinds:
        pool.submit(cfg)
        worker = pool.workers[0]
        assert worker.job is cfg, "sent as it is: no GPU placed, the device left to the dry run"
        workers.append(worker)
        worker.job = None  # finished
    assert [workers.index(w) for w in workers] == [0, 0, 0, 3, 4, 5]
    assert all(w.stopped for w in workers[:-1]) and not workers[-1].stopped and len(pool.workers) == 1
