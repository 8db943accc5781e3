"""Several runs per GPU with --executor local: runs are placed by their estimated GPU memory, as
many on a card as fit 90 % of it; the arithmetic runs on the CPU (no GPU, no worker spawned)."""

import pytest

from fedlib.orchestration import pools, resources
from tests.helpers import tiny_config

GIB = 1 << 30


def test_place_run_takes_the_roomiest_gpu_that_fits():
    assert resources.place_run(3 * GIB, [0, 0], [10 * GIB, 12 * GIB]) == 1
    assert resources.place_run(3 * GIB, [0, 10 * GIB], [10 * GIB, 12 * GIB]) == 0
    assert resources.place_run(11 * GIB, [0, 0], [10 * GIB, 12 * GIB]) == 1
    assert resources.place_run(3 * GIB, [8 * GIB, 10 * GIB], [10 * GIB, 12 * GIB]) is None
    assert resources.place_run(1, [], []) is None


def test_estimates_grow_with_model_data_and_stack():
    lenet = tiny_config(dataset="fashion_mnist", model="lenet5", backend="sequential")
    mobilenet = lenet.replace(dataset="cifar10", model="mobilenetv2", batch_size=64)
    stacked_mobilenet = mobilenet.replace(backend="stacked", clients=10)
    small, large, stacked = (resources.run_gpu_bytes(c) for c in (lenet, mobilenet, stacked_mobilenet))
    assert resources.GPU_CONTEXT_BYTES < small < large < stacked
    assert 60000 * 784 < small - resources.GPU_CONTEXT_BYTES, "the dataset lives on the card"
    assert stacked - large > 5 * (large - resources.GPU_CONTEXT_BYTES - 60000 * 3072) / 2, "ten clients at once"
    assert large < 8 * GIB, "MobileNetV2 on CIFAR-10 needs a sliver of an 80 GB card, not all of it"


class _FakeWorker:
    """Stands in for a spawned worker: records its GPU and the run it was given."""

    def __init__(self, threads, gpu, job=None):
        self.gpu, self.job, self.reserved = gpu, None, 0

    def give(self, cfg):
        self.job = cfg

    def alive(self):
        return True

    def stop(self):
        pass


@pytest.fixture
def one_card(monkeypatch):
    """A pool on a machine with one 10 GiB card (9 GiB usable) and 3 GiB per run."""
    monkeypatch.setattr(pools, "local_gpu_count", lambda: 1)
    monkeypatch.setattr(resources, "gpu_capacities", lambda count: [int(10 * GIB * 0.9)] * count)
    monkeypatch.setattr(resources, "run_gpu_bytes", lambda cfg: 3 * GIB)
    monkeypatch.setattr(pools, "LocalWorker", _FakeWorker)
    return pools.LocalPool(workers=8, threads=1)


def test_runs_share_a_card_until_its_memory_is_reserved(one_card):
    pool = one_card
    configs = [tiny_config(seed=s, device="cuda") for s in range(4)]
    for cfg in configs[:3]:
        assert pool.fits(cfg)
        pool.submit(cfg)
    assert pool.reserved == [9 * GIB] and pool.running() == 3
    assert not pool.fits(configs[3]), "a fourth 3 GiB run waits for room on a 9 GiB card"
    assert pool.fits(tiny_config(device="cpu")), "a CPU run needs no room on the card"
    pool._release(pool.workers[0])
    pool.workers[0].job = None
    assert pool.reserved == [6 * GIB] and pool.fits(configs[3])


def test_a_run_larger_than_the_card_runs_alone(one_card, monkeypatch):
    monkeypatch.setattr(resources, "run_gpu_bytes", lambda cfg: 20 * GIB)
    pool = one_card
    assert pool.fits(tiny_config(device="cuda")), "nothing runs: it starts anyway"
    pool.submit(tiny_config(device="cuda"))
    assert pool.workers[0].gpu == 0 and not pool.fits(tiny_config(seed=9, device="cuda"))


def _table(**packing):
    return {"devices": {"cuda": {"packing": {m: {"throughput_by_runs": t} for m, t in packing.items()}}}}


def test_runs_per_gpu_stops_where_an_added_run_adds_little_and_never_past_the_counts_measured():
    series = {"1": 1.0, "2": 1.86, "4": 3.28, "8": 4.03}  # the H200's LeNet-5 readings
    assert resources.runs_per_gpu("lenet5", _table(lenet5=series)) == 8, "4 -> 8 still adds 0.19 a run"
    flat = {"1": 1.0, "2": 1.9, "4": 3.3, "8": 3.5}
    assert resources.runs_per_gpu("lenet5", _table(lenet5=flat)) == 4, "4 -> 8 adds 0.05 a run"
    assert resources.runs_per_gpu("lenet5", _table(lenet5={"1": 1.0, "2": 1.05})) == 1
    assert resources.runs_per_gpu("mobilenetv2", _table(lenet5=series, cnn2=flat)) == 4, "unmeasured: the smallest cap"
    assert resources.runs_per_gpu("lenet5", {"devices": {}}) is None
    assert resources.runs_per_gpu("lenet5") == 8, "the committed table's H200 readings"


def test_a_card_takes_no_more_runs_than_throughput_pays_for_even_with_memory_left(one_card, monkeypatch):
    monkeypatch.setattr(resources, "run_gpu_bytes", lambda cfg: GIB // 4)  # 36 would fit 9 GiB
    monkeypatch.setattr(resources, "runs_per_gpu", lambda model: 2 if model == "lenet5" else None)
    pool = one_card
    lenets = [tiny_config(model="lenet5", seed=s, device="cuda") for s in range(3)]
    for cfg in lenets[:2]:
        assert pool.fits(cfg)
        pool.submit(cfg)
    assert not pool.fits(lenets[2]), "a third LeNet-5 run waits: two is what pays on this card"
    assert pool.fits(tiny_config(model="mlp", device="cuda")), "a model without a cap is placed by memory"
    pool.workers[0].job = None
    assert pool.fits(lenets[2])
