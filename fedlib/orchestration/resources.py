"""What one run may use: CPU threads, and a share of a GPU.

A process trains with torch's intra-op threads; the ``threads`` backend turns them into worker
threads, one client each. Several runs side by side on one machine must split the cores between
them, or each would start a thread per core and they would all fight for the same cores. The
budget of one run is the cores this process may use (its CPU affinity: a SLURM allocation or a
container limit, not the machine's core count) divided by the runs sharing them, at least one;
``$FEDLIB_THREADS`` (or an explicit ``threads``) overrides it.

On a GPU, small models leave most of the card idle, so several of their runs share one. Ray
tasks ask for a fixed share per model (:func:`gpu_share`); local workers are packed onto the
cards by each run's estimated GPU memory (:func:`run_gpu_bytes`, :func:`place_run`), and no more
runs on a card than measured throughput says pay (:func:`runs_per_gpu`): memory alone would put
twenty MobileNetV2 runs on an H200, whose host-bound steps would then queue for the same cores.
"""

from __future__ import annotations

import os

THREADS_ENV = "FEDLIB_THREADS"
# models small enough that several runs share one GPU (each takes this fraction of it)
SMALL_MODELS = ("mlp", "lenet5", "lenet5_classic", "simple_cnn", "cnn2", "convnet_s")
SMALL_MODEL_GPU_SHARE = 0.25


def available_cores() -> int:
    """The CPU cores this process may run on (its affinity mask where the OS has one)."""
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return max(1, os.cpu_count() or 1)


def thread_budget(workers: int = 1, threads: int | None = None) -> int:
    """Intra-op threads for one of ``workers`` runs sharing this machine: ``threads`` if given,
    else what an edge set (:func:`set_default_threads`, from ``$FEDLIB_THREADS``), else the
    available cores divided by ``workers`` (at least 1)."""
    if threads is None:
        threads = _DEFAULT_THREADS
    if threads is not None:
        check_threads(threads)
        return threads
    return max(1, available_cores() // max(1, workers))


def check_threads(threads: int) -> None:
    """One line for a thread count below 1 or above the machine's logical CPUs (more threads than
    CPUs never speeds a run up, and a huge count makes OpenBLAS fail inside scikit-learn's import)."""
    from fedlib.errors import FedlibError

    limit = max(1, os.cpu_count() or 1, available_cores())
    if not 1 <= threads <= limit:
        raise FedlibError(f"threads must be between 1 and the {limit} logical CPUs of this machine, got {threads}")


def set_thread_budget(workers: int = 1, threads: int | None = None) -> int:
    """Set torch's intra-op threads to :func:`thread_budget`; returns the count set."""
    import torch

    count = thread_budget(workers, threads)
    if torch.get_num_threads() != count:
        torch.set_num_threads(count)
    return count


def cap_threads() -> int:
    """Lower torch's intra-op threads to the budget of one run when it would oversubscribe the
    available cores (torch counts the machine's cores, not a container's or SLURM's share);
    the threads an edge set (``$FEDLIB_THREADS``) set it exactly. A lower count set by the caller is kept."""
    import torch

    if _DEFAULT_THREADS is not None:
        return set_thread_budget()
    budget = thread_budget()
    if torch.get_num_threads() > budget:
        torch.set_num_threads(budget)
    return torch.get_num_threads()


def apply_thread_budget(threads: int | None = None) -> int:
    """What a run entry point (``fedlib run``, ``experiments.run_all``, the reference-run tool)
    trains under: exactly ``threads`` when given (:func:`set_thread_budget`), else
    :func:`cap_threads`; returns torch's intra-op thread count."""
    if threads is not None:
        return set_thread_budget(threads=threads)
    return cap_threads()


_DEFAULT_THREADS: int | None = None  # this process's threads per run, set by an edge (orchestration.environment)


def set_default_threads(threads: int | None) -> int | None:
    """The intra-op threads every run of this process trains with unless told otherwise (None:
    the available cores); returns the setting before."""
    global _DEFAULT_THREADS
    before, _DEFAULT_THREADS = _DEFAULT_THREADS, threads
    return before


def threads_from(text: str | None) -> int | None:
    """``$FEDLIB_THREADS``'s value (None or blank: unset) as a thread count; another value is one line."""
    value = (text or "").strip()
    if not value:
        return None
    try:
        return int(value)
    except ValueError:
        from fedlib.errors import FedlibError

        raise FedlibError(f"${THREADS_ENV} must be a whole number of threads, got {value!r}") from None


def gpu_share(model: str) -> float:
    """The fraction of one GPU a run of ``model`` is given: a quarter for the small models of
    :data:`SMALL_MODELS` (four share a card), a whole card for the rest."""
    return SMALL_MODEL_GPU_SHARE if model in SMALL_MODELS else 1.0


# ---------------------------------------------------------------------- GPU memory of a run
GPU_CONTEXT_BYTES = 768 << 20  # CUDA context, cuBLAS/cuDNN workspaces and allocator slack, per process
GPU_USABLE_SHARE = 0.9  # of a card's memory that packed runs may reserve together


def run_gpu_bytes(cfg) -> int:
    """Estimated GPU memory of one run of ``cfg``: the process's CUDA context, its dataset (uint8,
    on the device whole), the global and working models, and the clients it trains at once (the
    round's clients on the stacked path, else one) with their parameters, gradients, momentum and
    one batch of activations (:func:`fedlib.engine.backends.stacked.bytes_per_client`)."""
    import torch

    from fedlib.core.state import sample_clients
    from fedlib.datasets import data
    from fedlib.engine.backend_choice import choose_backend
    from fedlib.engine.backends import stacked
    from fedlib.models import build_model

    options = {k: v for k, v in cfg.dataset_options.items() if k != "split"}
    shape = data.dataset_shape(cfg.dataset, **options)
    pixels = shape.channels * shape.image_size ** 2
    train = min(shape.train_size, cfg.max_train_samples or shape.train_size)
    test = min(shape.test_size, cfg.max_test_samples or shape.test_size)
    model = build_model(cfg.model, shape.num_classes, in_channels=shape.channels, image_size=shape.image_size)
    sample = torch.zeros(1, shape.channels, shape.image_size, shape.image_size)
    per_client = stacked.bytes_per_client(model, sample, cfg.batch_size)
    model_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
    backend = choose_backend(cfg.model, cfg.method, "cuda") if cfg.backend == "auto" else cfg.backend
    at_once = len(sample_clients(cfg.seed, 0, cfg.clients, cfg.participation)) if backend == "stacked" else 1
    return GPU_CONTEXT_BYTES + (train + test) * pixels + 2 * model_bytes + at_once * per_client


# an extra run on a card must add at least this share of one run's images per second
MIN_ADDED_THROUGHPUT = 0.1


def runs_per_gpu(model: str, table: dict | None = None, device_type: str = "cuda") -> int | None:
    """The most runs of ``model`` worth putting side by side on one card: the largest count measured
    (``packing`` in ``fedlib/engine/verified_paths.json``, or ``table``) up to which each added run
    still adds :data:`MIN_ADDED_THROUGHPUT` of one run's throughput; beyond the counts measured nothing
    is known, so never more. A model without measurements takes the smallest cap of those measured;
    None when nothing is measured on ``device_type`` (memory and the workers decide)."""
    from fedlib.engine.backend_choice import verified_paths

    packing = (table if table is not None else verified_paths()).get("devices", {}).get(device_type, {}).get("packing", {})
    caps = {name: _throughput_cap(entry["throughput_by_runs"]) for name, entry in packing.items()}
    if not caps:
        return None
    return caps.get(model, min(caps.values()))


def _throughput_cap(throughput_by_runs: dict[str, float]) -> int:
    """The last count in a measured series (runs -> multiple of one run) reached with each added run
    still adding at least :data:`MIN_ADDED_THROUGHPUT`."""
    series = sorted((int(runs), value) for runs, value in throughput_by_runs.items())
    cap = series[0][0]
    for (runs, value), (more, higher) in zip(series, series[1:]):
        if (higher - value) / (more - runs) < MIN_ADDED_THROUGHPUT:
            break
        cap = more
    return cap


def place_run(need: int, reserved: list[int], capacity: list[int]) -> int | None:
    """The GPU (index) with the most room left that still holds ``need`` bytes on top of what is
    ``reserved`` there, out of ``capacity`` per GPU; None when no GPU has room."""
    room = [cap - used for cap, used in zip(capacity, reserved)]
    fitting = [gpu for gpu, left in enumerate(room) if left >= need]
    return max(fitting, key=lambda gpu: room[gpu]) if fitting else None


def gpu_capacities(count: int) -> list[int]:
    """Bytes packed runs may reserve on each of the first ``count`` GPUs (:data:`GPU_USABLE_SHARE`
    of each card's memory)."""
    import torch

    return [int(torch.cuda.get_device_properties(gpu).total_memory * GPU_USABLE_SHARE) for gpu in range(count)]
