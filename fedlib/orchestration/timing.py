"""Seconds per training image of a run's kind (dataset, model, method) on a device: what the plan
multiplies by each run's work (images trained per round x rounds).

A kind's rate comes from, in this order:

1. its stored runs, trained on the same kind of device (their train seconds over images trained);
2. the dry run's rows (:mod:`fedlib.orchestration.dry_run`, trained on the CPU; CPU plans only): the median
   over the kind's configs;
3. a product of probes: FedAvg's rate on the kind's (dataset, model), times the method's cost
   relative to FedAvg, measured once on :data:`RATIO_KIND` (a method adds teachers, a second
   forward pass or a Fisher pass whatever the network; :func:`probe_method_ratio`). A probe is
   one small timed round
   (:func:`probe_seconds_per_image`, one batch per client) on a stand-in of the data's shape,
   on the sequential path (threads or stacked backends run faster): speed depends on the
   shape, not on the pixels, so data missing here cost nothing. Probes are cached per device
   in ``<cache>/plan_rates.json`` (``$FEDLIB_CACHE``, else ``~/.cache/fedlib``); delete the file
   to measure again.

Rates cover training only (local steps of the sampled clients; evaluation is left out). Probes
are small, so on a machine busy with other work they are noisy (identical steps took two to
three times longer in some seconds than in others on the shared 2-core machine this was written
on): take a plan's hours as an order of magnitude until stored runs or the dry run measure a
kind, and delete the cache to probe again on an idle machine.
"""

from __future__ import annotations

import json
import os
import platform
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Sequence

from fedlib.core import store
from fedlib.core.config import RunConfig

RATIO_KIND = ("cifar10", "cnn2")  # where a method's cost relative to FedAvg is measured
PROBE_CLIENTS = 2  # a probe trains one batch on each of this many clients (more where the method needs them)
RATIO_REPEATS = 2  # a method's ratio to FedAvg: this many probes of each, taken in turn
PROBE_TEST_IMAGES = 10  # a probe evaluates once, on this many test images


def cost_key(cfg: RunConfig) -> tuple[str, str, str]:
    """A run's kind for timing: (dataset, model, method)."""
    return cfg.dataset, cfg.model, cfg.method


def device_label(device: str = "auto") -> str:
    """The device a plan's hours are for, in words: 'cpu (2 threads, x86_64)' or the GPU's name."""
    import torch

    from fedlib.core.engine import resolve_device

    resolved = resolve_device(device)
    if resolved.type == "cuda":
        return torch.cuda.get_device_name(resolved)
    return f"{resolved.type} ({torch.get_num_threads()} threads, {platform.machine()})"


def hours_unit(device: str = "auto") -> str:
    """'GPU-hours' or 'CPU-hours': what a plan on ``device`` counts."""
    from fedlib.core.engine import resolve_device

    return "GPU-hours" if resolve_device(device).type == "cuda" else "CPU-hours"


@dataclass
class Rates:
    """Seconds per training image by kind, each with where it came from (:func:`plan_rates`)."""

    device: str
    cache: "ProbeCache"
    measured: dict[tuple, tuple[float, str]] = field(default_factory=dict)  # kind -> (rate, source)
    probes_run: int = 0
    ratios_assumed: bool = False  # a method without a measured ratio costs as FedAvg (else: unknown)

    def rate(self, cfg: RunConfig) -> float | None:
        """Seconds per image of ``cfg``'s kind; None where neither a measurement nor probes know it."""
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

    def _fedavg_rate(self, dataset: str, model: str) -> float | None:
        measured = self.measured.get((dataset, model, "fedavg"))
        return measured[0] if measured else self.cache.rates.get((dataset, model, "fedavg"))

    def probes_needed(self, configs: Iterable[RunConfig]) -> dict[tuple, RunConfig]:
        """The probes the rates of ``configs`` still lack, each with a config to probe:
        ("rate", dataset, model) for FedAvg there, ("ratio", method) for a method's cost
        (unless ratios are assumed)."""
        needed: dict[tuple, RunConfig] = {}
        for cfg in configs:
            if cost_key(cfg) in self.measured:
                continue
            if self._fedavg_rate(cfg.dataset, cfg.model) is None:
                needed.setdefault(("rate", cfg.dataset, cfg.model), _as_fedavg(cfg))
            if cfg.method != "fedavg" and cfg.method not in self.cache.ratios and not self.ratios_assumed:
                needed.setdefault(("ratio", cfg.method), _on_ratio_kind(cfg))
        return needed

    def run_probes(self, needed: dict[tuple, RunConfig], progress: bool = True) -> None:
        """Run every probe of ``needed`` on this device (a progress bar over them) and cache the results."""
        from tqdm.auto import tqdm

        for key, cfg in tqdm(needed.items(), desc="probing seconds per image", unit="probe",
                             disable=not progress or not needed):
            if key[0] == "rate":
                self.cache.store("rates", "|".join(cost_key(cfg)), probe_seconds_per_image(cfg, self.device))
            else:
                self.cache.store("ratios", cfg.method, probe_method_ratio(cfg, self.device))
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
               probe: bool = True, dry_run_csv: str | os.PathLike | None = None, progress: bool = True,
               probe_ratios: bool = True) -> Rates:
    """Rates for every kind of ``configs``: measured ones (their stored runs, then the dry run's
    CSV), the rest from probes (cached; those the unstored runs still lack are run now when
    ``probe``). Without ``probe_ratios`` a method whose ratio to FedAvg no probe has measured yet
    counts as costly as FedAvg (a notebook's own plan: one probe per (dataset, model), seconds)."""
    from fedlib.core.engine import resolve_device

    rates = Rates(device=device, cache=ProbeCache.for_device(device), ratios_assumed=not probe_ratios)
    device_type = resolve_device(device).type
    kinds = {cost_key(c) for c in configs}
    if dry_run_csv is not None and device_type == "cpu":
        rates.measured.update({k: (r, "dry run") for k, r in dry_run_rates(dry_run_csv).items() if k in kinds})
    rates.measured.update({k: (r, "stored runs") for k, r in stored_rates(configs, results_dir, device_type).items()})
    if probe:
        to_run = [c for c in configs if not store.is_stored(c, results_dir)]
        rates.run_probes(rates.probes_needed(to_run), progress)
    return rates


def stored_rates(configs: Iterable[RunConfig], results_dir: str | os.PathLike | None, device_type: str
                 ) -> dict[tuple, float]:
    """Seconds per training image of the stored runs among ``configs`` (working store, then the
    reference store) trained on ``device_type``, averaged by kind."""
    samples: dict[tuple, list[float]] = {}
    for cfg in {c.hash(): c for c in configs}.values():
        record = _complete_record(cfg, results_dir)
        if record is None or not _trained_on(record, device_type):
            continue
        summary = record.read_summary()
        if summary.get("train_seconds") and summary.get("rounds_run"):
            per_round = summary["train_seconds"] / summary["rounds_run"]
            samples.setdefault(cost_key(cfg), []).append(per_round / images_per_round(cfg))
    return {key: statistics.fmean(values) for key, values in samples.items()}


def _complete_record(cfg: RunConfig, results_dir) -> store.RunRecord | None:
    return store.served_record(cfg, results_dir)


def _trained_on(record: store.RunRecord, device_type: str) -> bool:
    """Whether the run trained on ``device_type`` (a run without a record of its device counts)."""
    try:
        device = str(record.read_meta().get("device") or "")
    except (OSError, ValueError):
        device = ""
    return not device or device.split(":")[0] == device_type


def dry_run_rates(csv_path: str | os.PathLike) -> dict[tuple, float]:
    """The median seconds per image of the dry run's ok rows, by kind."""
    from fedlib.orchestration.dry_run import read_rows

    samples: dict[tuple, list[float]] = {}
    for row in read_rows(csv_path).values():
        try:
            rate = float(row["seconds_per_image"])
        except (TypeError, ValueError):
            continue
        if row["status"] == "ok" and rate > 0:
            samples.setdefault((row["dataset"], row["model"], row["method"]), []).append(rate)
    return {key: statistics.median(values) for key, values in samples.items()}


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
    """Seconds per training image of ``cfg``'s kind from a probe: one round (two for methods
    whose first round differs, ``Algorithm.short_run``) of one local epoch of
    one batch on each of ``clients`` clients (IID), on a stand-in of the data's shape, on the
    sequential path; the fastest client's rate (the least disturbed by a busy machine, and not
    the first, whose step warms the kernels up). None if the probe fails."""
    from fedlib.orchestration import dry_run

    probe = _probe_config(cfg, device, clients)
    if probe is None:
        return None
    row = dry_run.run_one(probe, stand_in=True, images_per_client=cfg.batch_size, device=device,
                          test_images=PROBE_TEST_IMAGES, tidy=False)
    rates = [s / n for s, n in zip(row.get("client_seconds", []), row.get("client_images", [])) if n]
    return min(rates) if row["status"] == "ok" and rates else None


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
    seconds per image by (dataset, model) and each method's ratio to FedAvg."""

    path: Path
    device: str
    rates: dict[tuple, float]
    ratios: dict[str, float]

    @classmethod
    def for_device(cls, device: str = "auto") -> "ProbeCache":
        path = _cache_root() / "plan_rates.json"
        label = device_label(device)
        entry = _read_json(path).get(label, {})
        rates = {tuple(k.split("|")): v for k, v in entry.get("rates", {}).items()}
        return cls(path, label, rates, dict(entry.get("ratios", {})))

    def store(self, table: str, key: str, value: float | None) -> None:
        """Record ``value`` under ``table`` ("rates" or "ratios"); None (a failed probe) is not
        cached, so the next plan tries again."""
        if value is None:
            return
        if table == "rates":
            self.rates[tuple(key.split("|"))] = value
        else:
            self.ratios[key] = value
        everything = _read_json(self.path)
        everything.setdefault(self.device, {}).setdefault(table, {})[key] = value
        self.path.parent.mkdir(parents=True, exist_ok=True)
        store.write_json(self.path, everything)


def _cache_root() -> Path:
    return Path(os.environ.get("FEDLIB_CACHE") or Path.home() / ".cache" / "fedlib")


def _read_json(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
