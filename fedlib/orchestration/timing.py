"""What a run costs on a device, before it trains: the plan's hours.

A run's seconds are modelled as its rounds x (the training images of a round x the seconds per
training image of its kind + the test images of an evaluation x the seconds per test image of
its (dataset, model), once per ``eval_every`` rounds) (:meth:`Rates.run_seconds`). A kind is
(dataset, model, method). Its rate comes from, in this order:

1. its stored runs, trained on the same kind of device (their train seconds, which include the
   evaluations, over the images trained);
2. steady-state probes of this machine: FedAvg's rate on the kind's (dataset, model), times the
   method's cost relative to FedAvg, measured once on :data:`RATIO_KIND` (a method adds
   teachers, a second forward pass or a Fisher pass whatever the network;
   :func:`probe_method_ratio`), plus the evaluation's rate (:func:`probe_eval_seconds_per_image`).
   A probe trains :data:`STEADY_STEPS` batches on each of two clients (one, where a step
   takes half a second or more: :func:`probe_seconds_per_image`), enough that a client's fixed
   costs weigh a few per cent as in a full-scale round, on a stand-in of the data's shape: speed
   depends on the shape, not on the pixels, so data missing here cost nothing.

Probes are kept per device (the CPU's model and the thread count are part of its name,
:func:`device_label`) in ``<cache>/plan_rates.json`` (``$FEDLIB_CACHE``, else
``~/.cache/fedlib``); delete the file to measure again. :data:`COMMITTED_RATES` holds the probes
of the machines the project's plans were printed on, used where the cache lacks an entry for
the same device name, so that a plan on such a machine probes nothing.

The dry run's rows are not a rate: one round of a 160-image slice times fixed costs (model
build, evaluation, the first step's warm-up) over very few images, 40 to 2,000 times the
steady-state seconds per image. The model leaves out per-run costs (reading and decoding the
data: about a minute for the CIFAR-10 JPEG folder, seconds for the rest) and per-round server
work. Held against the project's stored full-scale runs in ``tests/unit/orchestration/test_cost_model.py``.
On a machine busy with other work a probe is slower: delete the cache and plan again on an
idle machine.
"""

from __future__ import annotations

import json
import os
import platform
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Sequence

from fedlib import store
from fedlib.core.config import RunConfig
from fedlib.folders import env_folder
from fedlib.store.provenance import cpu_model

RATIO_KIND = ("cifar10", "cnn2")  # where a method's cost relative to FedAvg is measured
PROBE_CLIENTS = 2  # a probe trains on each of this many clients (more where the method needs them)
RATIO_REPEATS = 2  # a method's ratio to FedAvg: this many probes of each, taken in turn
PROBE_TEST_IMAGES = 10  # a training probe evaluates once, on this many test images
STEADY_STEPS = 24  # local steps a probe client trains: its fixed costs then weigh a few per cent
LONG_STEP_SECONDS = 0.5  # a step at least this long dwarfs a client's fixed costs: one batch is a steady probe
EVAL_PROBE_IMAGES = 2000  # an evaluation probe times the model over at most this many images
EVAL_PROBE_SECONDS = 3.0  # ... or for about this long
PROBE_ORDER = ("rate", "eval", "ratio")  # the kinds of probe, in the order a plan runs them
COMMITTED_RATES = Path(__file__).with_name("measured_rates.json")


def cost_key(cfg: RunConfig) -> tuple[str, str, str]:
    """A run's kind for timing: (dataset, model, method)."""
    return cfg.dataset, cfg.model, cfg.method


def device_label(device: str = "auto") -> str:
    """The device a plan's hours are for, in words: 'cpu (1 thread, AMD EPYC, x86_64)' or the GPU's name."""
    import torch

    from fedlib.engine.engine import resolve_device

    resolved = resolve_device(device)
    if resolved.type == "cuda":
        return torch.cuda.get_device_name(resolved)
    threads = torch.get_num_threads()
    return f"{resolved.type} ({threads} thread{'s' if threads != 1 else ''}, {cpu_model()}, {platform.machine()})"


def hours_unit(device: str = "auto") -> str:
    """'GPU-hours' or 'CPU-hours': what a plan on ``device`` counts."""
    from fedlib.engine.engine import resolve_device

    return "GPU-hours" if resolve_device(device).type == "cuda" else "CPU-hours"


@dataclass
class Rates:
    """Seconds per training image by kind and per test image by (dataset, model), each with
    where it came from (:func:`plan_rates`)."""

    device: str
    cache: "ProbeCache"
    measured: dict[tuple, tuple[float, str]] = field(default_factory=dict)  # kind -> (rate, source)
    probes_run: int = 0
    ratios_assumed: bool = False  # a method without a measured ratio costs as FedAvg (else: unknown)
    ratio_repeats: int = RATIO_REPEATS  # probes of each side of a ratio (one will do on a quiet machine)

    def rate(self, cfg: RunConfig) -> float | None:
        """Seconds per training image of ``cfg``'s kind; None where neither a measurement nor probes know it."""
        return self.rate_and_source(cfg)[0]

    def rate_and_source(self, cfg: RunConfig) -> tuple[float | None, str]:
        if cost_key(cfg) in self.measured:
            return self.measured[cost_key(cfg)]
        base = self._fedavg_rate(cfg.dataset, cfg.model)
        ratio = 1.0 if cfg.method == "fedavg" else self.cache.ratios.get(cfg.method)
        if base is not None and ratio is None and self.ratios_assumed:
            return base, "probe (method as costly as FedAvg)"
        if base is None or ratio is None:
            return None, "unknown"
        return base * ratio, "probe" if cfg.method == "fedavg" else "probes"

    def run_seconds(self, cfg: RunConfig) -> float | None:
        """Seconds ``cfg`` will take: rounds x (training images x seconds per training image +
        evaluated test images x seconds per test image); None without a training rate. A rate
        from stored runs includes their evaluations already."""
        rate, source = self.rate_and_source(cfg)
        if rate is None:
            return None
        seconds = cfg.rounds * images_per_round(cfg) * rate
        if source != "stored runs":
            seconds += evaluated_images(cfg) * (self.cache.evals.get((cfg.dataset, cfg.model)) or 0.0)
        return seconds

    def _fedavg_rate(self, dataset: str, model: str) -> float | None:
        measured = self.measured.get((dataset, model, "fedavg"))
        return measured[0] if measured else self.cache.rates.get((dataset, model, "fedavg"))

    def probes_needed(self, configs: Iterable[RunConfig]) -> dict[tuple, RunConfig]:
        """The probes the rates of ``configs`` still lack, each with a config to probe:
        ("rate", dataset, model) for FedAvg there, ("eval", dataset, model) for its evaluation,
        ("ratio", method) for a method's cost (unless ratios are assumed)."""
        needed: dict[tuple, RunConfig] = {}
        for cfg in configs:
            if cost_key(cfg) in self.measured:
                continue
            if self._fedavg_rate(cfg.dataset, cfg.model) is None:
                needed.setdefault(("rate", cfg.dataset, cfg.model), _as_fedavg(cfg))
            if (cfg.dataset, cfg.model) not in self.cache.evals:
                needed.setdefault(("eval", cfg.dataset, cfg.model), _as_fedavg(cfg))
            if cfg.method != "fedavg" and cfg.method not in self.cache.ratios and not self.ratios_assumed:
                needed.setdefault(("ratio", cfg.method), _on_ratio_kind(cfg))
        return needed

    def run_probes(self, needed: dict[tuple, RunConfig], progress: bool = True) -> None:
        """Run every probe of ``needed`` on this device (a progress bar over them) and cache each
        result as it comes: FedAvg's rates first, then the evaluations, then the methods' ratios
        (a probing stopped part way keeps the rates every estimate needs)."""
        from tqdm.auto import tqdm

        ordered = sorted(needed.items(), key=lambda item: PROBE_ORDER.index(item[0][0]))
        for key, cfg in tqdm(ordered, desc="probing seconds per image", unit="probe",
                             disable=not progress or not needed):
            if key[0] == "rate":
                self.cache.store("rates", "|".join(cost_key(cfg)), probe_seconds_per_image(cfg, self.device))
            elif key[0] == "eval":
                self.cache.store("evals", f"{cfg.dataset}|{cfg.model}", probe_eval_seconds_per_image(cfg, self.device))
            else:
                self.cache.store("ratios", cfg.method, probe_method_ratio(cfg, self.device, self.ratio_repeats))
            self.probes_run += 1

    def sources(self, configs: Iterable[RunConfig]) -> dict[str, int]:
        """How many kinds of ``configs`` took their rate from each source."""
        counts: dict[str, int] = {}
        for cfg in {cost_key(c): c for c in configs}.values():
            source = self.rate_and_source(cfg)[1]
            counts[source] = counts.get(source, 0) + 1
        return counts


def _as_fedavg(cfg: RunConfig) -> RunConfig:
    return cfg.replace(method="fedavg", method_args={})


def _on_ratio_kind(cfg: RunConfig) -> RunConfig:
    return cfg.replace(dataset=RATIO_KIND[0], model=RATIO_KIND[1], dataset_options={}, max_train_samples=None,
                       max_test_samples=None)


def plan_rates(configs: Sequence[RunConfig], results_dir: str | os.PathLike | None = None, device: str = "auto",
               probe: bool = True, progress: bool = True, probe_ratios: bool = True,
               states: dict[str, store.RunState] | None = None) -> Rates:
    """Rates for every kind of ``configs``: measured ones (their stored runs), the rest from
    steady-state probes (cached or committed; those the unstored runs still lack are run now
    when ``probe``). Without ``probe_ratios`` a method whose ratio to FedAvg no probe has
    measured yet counts as costly as FedAvg (a notebook's own plan: two probes per (dataset,
    model), seconds). ``states``: each config's :func:`fedlib.store.run_state` by hash, when the
    caller asked already (else the store is asked here, once per config)."""
    from fedlib.engine.engine import resolve_device

    states = store.run_states(configs, results_dir) if states is None else states
    rates = Rates(device=device, cache=ProbeCache.for_device(device), ratios_assumed=not probe_ratios)
    device_type = resolve_device(device).type
    rates.measured.update({k: (r, "stored runs") for k, r in stored_rates(configs, results_dir, device_type,
                                                                                    states).items()})
    if probe:
        to_run = [c for c in configs if not states[c.hash()].stored]
        rates.run_probes(rates.probes_needed(to_run), progress)
    return rates


def committed_gpu_rates(configs: Sequence[RunConfig], results_dir: str | os.PathLike | None = None,
                        states: dict[str, store.RunState] | None = None) -> dict[str, Rates]:
    """GPU name -> rates for ``configs`` on that card, probing nothing: the card's committed probes
    (:data:`COMMITTED_RATES`) and the stored runs trained on CUDA (any card); a method whose ratio the
    card lacks counts as FedAvg. What a plan on a CPU prints beside its CPU-hours."""
    from fedlib.engine.engine import resolve_device

    if resolve_device("auto").type == "cuda":
        return {}  # a plan on a GPU machine measures its own card
    stored = None
    gpus = {}
    for label, entry in _read_json(COMMITTED_RATES).get("devices", {}).items():
        if label.startswith("cpu"):
            continue
        if stored is None:
            stored = {k: (r, "stored runs") for k, r in stored_rates(configs, results_dir, "cuda", states).items()}
        gpus[label] = Rates(device="cuda", cache=ProbeCache.from_entry(COMMITTED_RATES, label, entry),
                            measured=dict(stored), ratios_assumed=True)
    return gpus


def stored_rates(configs: Iterable[RunConfig], results_dir: str | os.PathLike | None, device_type: str,
                 states: dict[str, store.RunState] | None = None) -> dict[tuple, float]:
    """Seconds per training image of the stored runs among ``configs`` (the record a store serves
    each from) trained on ``device_type``, averaged by kind. ``states``: as :func:`plan_rates`."""
    samples: dict[tuple, list[float]] = {}
    unique = {c.hash(): c for c in configs}
    states = store.run_states(unique.values(), results_dir) if states is None else states
    for key, cfg in unique.items():
        record = store.stored_record(cfg, states[key], results_dir)
        if record is None or not _trained_on(record, device_type):
            continue
        summary = record.read_summary()
        if summary.get("train_seconds") and summary.get("rounds_run"):
            per_round = summary["train_seconds"] / summary["rounds_run"]
            samples.setdefault(cost_key(cfg), []).append(per_round / images_per_round(cfg))
    return {key: statistics.fmean(values) for key, values in samples.items()}


def _trained_on(record: store.RunRecord, device_type: str) -> bool:
    """Whether the run trained on ``device_type`` (a run without a record of its device counts)."""
    try:
        device = str(record.read_meta().get("device") or "")
    except (OSError, ValueError):
        device = ""
    return not device or device.split(":")[0] == device_type


def data_shape(cfg: RunConfig):
    """The published shape (sizes, channels, image size, classes) of ``cfg``'s dataset and split."""
    from fedlib.datasets import data

    return data.dataset_shape(cfg.dataset, **data.split_option(cfg.dataset_options)[1])


def evaluated_images(cfg: RunConfig) -> float:
    """Test images a whole run evaluates: its test set (or subset) once every ``eval_every`` rounds."""
    shape = data_shape(cfg)
    test = min(cfg.max_test_samples or shape.test_size, shape.test_size)
    return test * -(-cfg.rounds // max(1, cfg.eval_every))


def images_per_round(cfg: RunConfig) -> float:
    """Training images one round works through: sampled clients' share x local epochs x training set."""
    from fedlib.core.state import sample_clients

    sampled = len(sample_clients(cfg.seed, 0, cfg.clients, cfg.participation))
    return sampled / cfg.clients * cfg.local_epochs * train_images(cfg)


def train_images(cfg: RunConfig) -> int:
    """The training-set size of ``cfg`` (its subset, its split), from the dataset's published size."""
    from fedlib.datasets import data

    split, options = data.split_option(cfg.dataset_options)
    shape = data.dataset_shape(cfg.dataset, **options)
    size = {"holdout_10": (1 - data.HOLDOUT_FRACTION) * shape.train_size,
            "pooled_75_25": data.POOLED_TRAIN_FRACTION * (shape.train_size + shape.test_size),
            "pooled_75_25_train_eval": data.POOLED_TRAIN_FRACTION * (shape.train_size + shape.test_size),
            }.get(split, shape.train_size)
    return min(int(size), cfg.max_train_samples or int(size))


# ---------------------------------------------------------------------- probes
def probe_seconds_per_image(cfg: RunConfig, device: str = "auto", clients: int = PROBE_CLIENTS) -> float | None:
    """Seconds per training image of ``cfg``'s kind at steady state, on a stand-in of the data's
    shape, on the sequential path: one round (two for methods whose first round differs,
    ``Algorithm.short_run``) of one local epoch on each of ``clients`` clients (IID); the fastest
    client's rate (the least disturbed by a busy machine, and not the first, whose steps warm the
    kernels up). Each client trains one batch; where a step takes less than
    :data:`LONG_STEP_SECONDS`, the probe trains again with :data:`STEADY_STEPS` batches a client,
    so that a client's fixed costs (its copy of the model, its optimiser) weigh a few per cent as
    in a full-scale round. None if the probe fails."""
    rate = _client_rate(cfg, device, clients, batches=1)
    if rate is not None and rate * cfg.batch_size < LONG_STEP_SECONDS:
        rate = _client_rate(cfg, device, clients, batches=STEADY_STEPS)
    return rate


def _client_rate(cfg: RunConfig, device: str, clients: int, batches: int) -> float | None:
    """The fastest client's seconds per image in a probe round of ``batches`` batches a client."""
    from fedlib.orchestration import dry_run

    probe = _probe_config(cfg, device, clients)
    if probe is None:
        return None
    row = dry_run.run_one(probe, stand_in=True, images_per_client=batches * cfg.batch_size, device=device,
                          test_images=PROBE_TEST_IMAGES, tidy=False)
    rates = [s / n for s, n in zip(row.get("client_seconds", []), row.get("client_images", [])) if n]
    return min(rates) if row["status"] == "ok" and rates else None


def probe_eval_seconds_per_image(cfg: RunConfig, device: str = "auto", images: int = EVAL_PROBE_IMAGES,
                                 seconds: float = EVAL_PROBE_SECONDS) -> float | None:
    """Seconds per test image of one evaluation of ``cfg``'s (dataset, model): the model in eval
    mode over stand-in images of the data's shape in the engine's test batches
    (:func:`fedlib.core.state.eval_batch_size`), one untimed batch first, then batches until
    ``images`` images or ``seconds`` seconds (at least two batches); the median batch. None if
    the model cannot be built."""
    import time

    import torch

    from fedlib.core.state import eval_batch_size
    from fedlib.engine.engine import resolve_device
    from fedlib.errors import FedlibError
    from fedlib.models import build_model

    shape = data_shape(cfg)
    target = resolve_device(device)
    try:
        model = build_model(cfg.model, shape.num_classes, shape.channels, shape.image_size).to(target).eval()
    except (FedlibError, RuntimeError, ValueError):
        return None
    size = (min(images, eval_batch_size(target)), shape.channels, shape.image_size, shape.image_size)
    batch = torch.randn(*size, device=target)
    times: list[float] = []
    with torch.no_grad():
        model(batch).argmax(1)  # warm-up
        while len(times) < 2 or (len(times) * len(batch) < images and sum(times) < seconds):
            started = time.perf_counter()
            model(batch).argmax(1)
            if target.type == "cuda":
                torch.cuda.synchronize(target)
            times.append(time.perf_counter() - started)
    return statistics.median(times) / len(batch)


def probe_method_ratio(cfg: RunConfig, device: str = "auto", repeats: int = RATIO_REPEATS) -> float | None:
    """How many times FedAvg's seconds per image ``cfg``'s method takes on ``cfg``'s (dataset,
    model): probes of FedAvg and of the method taken in turn, ``repeats`` times each, so that a
    machine busy with other work slows both alike; the ratio of their fastest. None if one fails."""
    fedavg, method = [], []
    for _ in range(repeats):
        fedavg.append(probe_seconds_per_image(_as_fedavg(cfg), device))
        method.append(probe_seconds_per_image(cfg, device))
    fedavg, method = [r for r in fedavg if r], [r for r in method if r]
    return min(method) / min(fedavg) if fedavg and method else None


def _probe_config(cfg: RunConfig, device: str, clients: int) -> RunConfig | None:
    """``cfg`` with ``clients`` clients, all sampled, IID; more clients where the method needs them."""
    from fedlib.errors import FedlibError

    for count in (clients, 2 * clients, 4 * clients, 8 * clients):
        try:
            return cfg.replace(clients=count, participation=1.0, partition="iid", min_client_size=0,
                               max_train_samples=None, device=device)
        except FedlibError:
            continue
    return None


@dataclass
class ProbeCache:
    """Probe results of one device, kept in ``<cache>/plan_rates.json`` between plans: FedAvg's
    seconds per training image by (dataset, model, "fedavg"), each method's ratio to FedAvg, and
    seconds per test image by (dataset, model). Entries the cache lacks are read from
    :data:`COMMITTED_RATES` when it holds the same device."""

    path: Path
    device: str
    rates: dict[tuple, float]
    ratios: dict[str, float]
    evals: dict[tuple, float] = field(default_factory=dict)

    @classmethod
    def for_device(cls, device: str = "auto") -> "ProbeCache":
        path = _cache_root() / "plan_rates.json"
        label = device_label(device)
        committed = _read_json(COMMITTED_RATES).get("devices", {}).get(label, {})
        mine = _read_json(path).get(label, {})
        entry = {table: {**committed.get(table, {}), **mine.get(table, {})} for table in ("rates", "ratios", "evals")}
        return cls.from_entry(path, label, entry)

    @classmethod
    def from_entry(cls, path: Path, label: str, entry: dict) -> "ProbeCache":
        """The cache of one device's entry as the JSON files hold it ("dataset|model" keys)."""
        return cls(path, label, {tuple(k.split("|")): v for k, v in entry.get("rates", {}).items()},
                   dict(entry.get("ratios", {})), {tuple(k.split("|")): v for k, v in entry.get("evals", {}).items()})

    def store(self, table: str, key: str, value: float | None) -> None:
        """Record ``value`` under ``table`` ("rates", "evals" or "ratios"); None (a failed probe) is
        not cached, so the next plan tries again."""
        if value is None:
            return
        if table == "ratios":
            self.ratios[key] = value
        else:
            getattr(self, table)[tuple(key.split("|"))] = value
        everything = _read_json(self.path)
        everything.setdefault(self.device, {}).setdefault(table, {})[key] = value
        self.path.parent.mkdir(parents=True, exist_ok=True)
        store.write_json(self.path, everything)


def _cache_root() -> Path:
    return env_folder("FEDLIB_CACHE") or Path.home() / ".cache" / "fedlib"


def _read_json(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
