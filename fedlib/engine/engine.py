"""The federated loop: sample clients, train them locally, aggregate, evaluate, checkpoint.

The top of the run. The engine knows nothing about any particular method; it calls the hooks of
:class:`fedlib.algorithms.base.Algorithm`, trains the round's clients on the config's backend
(one of :data:`fedlib.engine.backends.BACKENDS`: sequential, threads, stacked, graphed) and keeps the run in the results store (:mod:`fedlib.store`), resuming from its checkpoint.
Its state and randomness are those of :mod:`fedlib.core.state`: every client of round r sees the
same seeds whether the run was interrupted or not. The data a run reads are
:mod:`fedlib.engine.run_data`'s, its evaluation :mod:`fedlib.engine.evaluation`'s.

At about 570 lines it stays one module on purpose: :func:`run` from a config to a result
(served, trained or resumed, stored, checked) is one concept, read top to bottom.
"""

from __future__ import annotations

import math
import os
import sys
import time
import warnings
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Sequence

import torch
from torch import Tensor, nn

from fedlib import __version__, store
from fedlib.algorithms.base import Algorithm, ClientUpdate, Observer, notify
from fedlib.core import determinism
from fedlib.core.config import RunConfig
from fedlib.core.registry import build_algorithm, method_class
from fedlib.core.state import FederatedData, ServerState, build_run_model, sample_clients
from fedlib.datasets.augment import augment_spec, default_augmentation
from fedlib.datasets.data_check import counts
from fedlib.datasets.partition import make_partition
from fedlib.datasets.sources import FILES, DataSource
from fedlib.engine import model_source
from fedlib.engine.backend_choice import choose_backend
from fedlib.engine.backends import backend_named, stacked
from fedlib.engine.evaluation import MAX_REPORTED_GROUPS, evaluate  # noqa: F401 - engine.evaluate, as before
from fedlib.engine.run_data import (  # noqa: F401 - the run's data, importable from the engine as before
    _DATASET_CACHE, _SOURCE_FINGERPRINTS, check_served_data, forget_datasets, load_run_dataset, source_fingerprint)
from fedlib.errors import FedlibError, one_line
from fedlib.folders import check_environment, env_folder
from fedlib.store import provenance


# ====================================================================== devices and data
def resolve_device(name: str = "auto") -> torch.device:
    """'auto' -> cuda when available, else cpu; a CUDA request without CUDA is a clear error."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name.startswith("cuda") and not torch.cuda.is_available():
        raise FedlibError(f"device {name!r} requested but CUDA is not available; use --device cpu")
    if name.startswith("mps") and not (getattr(torch.backends, "mps", None) and torch.backends.mps.is_available()):
        raise FedlibError(f"device {name!r} requested but Apple's MPS is not available; use --device cpu")
    return torch.device(name)


def fp32_on_cuda(device: torch.device) -> None:
    """On CUDA, compute float32 as float32: turn off TF32 (10-bit mantissa) in cuDNN convolutions
    (on by default on NVIDIA GPUs) and cuBLAS matmuls, so a GPU run does the fp32 arithmetic its
    config hash stands for (bf16 autocast has its own hash). The flags are process-wide."""
    if device.type == "cuda":
        torch.backends.cudnn.allow_tf32 = False
        torch.backends.cuda.matmul.allow_tf32 = False


def precision_flags(device: torch.device) -> dict[str, bool]:
    """``{"tf32": ..., "deterministic": ...}`` for a CUDA device: whether TF32 may compute float32
    ops, and whether deterministic kernels are on (:mod:`fedlib.core.determinism`); {} for others."""
    if device.type != "cuda":
        return {}
    return {"tf32": bool(torch.backends.cudnn.allow_tf32 or torch.backends.cuda.matmul.allow_tf32),
            "deterministic": torch.are_deterministic_algorithms_enabled()}


# ====================================================================== one round
def local_work(updates: list[ClientUpdate], local_epochs: int) -> dict[str, int]:
    """The local training a round did, counted over its clients: ``local_steps`` (optimiser steps
    taken) and ``local_samples`` (forward + backward sample passes: each client walks its n_k
    samples once per epoch, on both training paths). Tables 9-10 of PKD count cost from these."""
    return {"local_steps": sum(u.num_steps for u in updates),
            "local_samples": local_epochs * sum(u.num_samples for u in updates)}


def _train_clients(server: ServerState, algorithm: Algorithm, clients: list[int], lr: float,
                   hooks: Sequence[Observer]) -> list[ClientUpdate]:
    """The round's local training on the config's backend ("auto": threads on a CPU, elsewhere the
    fastest path verified there, :mod:`fedlib.engine.backend_choice`); the fast paths fall back to the
    sequential one inside."""
    backend = server.cfg.backend
    if backend == "auto":
        backend = choose_backend(server.cfg.model, server.cfg.method, server.device.type)
    return backend_named(backend).train_round(server, algorithm, clients, lr, hooks)


def run_round(server: ServerState, algorithm: Algorithm, hooks: Sequence[Observer] = ()) -> dict[str, Any]:
    """One communication round; returns the round's training-side metrics."""
    cfg = server.cfg
    algorithm.begin_round(server)
    clients = sample_clients(cfg.seed, server.round, cfg.clients, cfg.participation)
    server.round_clients = clients
    notify(hooks, "on_round_start", server, clients)
    lr = cfg.lr * cfg.lr_decay ** server.round
    updates = _train_clients(server, algorithm, clients, lr, hooks)
    server.model.load_state_dict(algorithm.aggregate(server, updates))
    algorithm.end_round(server, updates)
    metrics = {"round": server.round, "clients": clients, "lr": lr}
    metrics.update(local_work(updates, cfg.local_epochs))
    metrics.update(algorithm.round_metrics(server, updates))
    notify(hooks, "on_round_end", server, updates, metrics)
    return metrics


# ====================================================================== the run
@dataclass
class RunResult:
    """A finished run: its config, per-round metrics and summary (and the store folder), and how
    this call got it (``origin``): ``"trained"`` from round 0, ``"resumed"`` from a checkpoint,
    ``"served"`` from a store as it was stored, or ``"not run"`` (a placeholder while rendering only)."""

    config: RunConfig
    rounds: list[dict]
    summary: dict
    folder: Any = None
    origin: str = "trained"
    working_store: Any = None  # the working store a served run was asked from: where its model is retrained if needed

    @classmethod
    def not_run(cls, config: RunConfig) -> "RunResult":
        """A placeholder for a config no store holds while rendering only: no rounds, NaN numbers."""
        nan = float("nan")
        return cls(config, [], {"not_run": True, "final_accuracy": nan, "best_accuracy": nan, "best_round": None,
                                "class_accuracy": [], "class_names": []}, origin="not run")

    @property
    def diverged(self) -> bool:
        """Whether training stopped on non-finite weights or test loss (see :func:`run`)."""
        return bool(self.summary.get("diverged", False))

    # A diverged run's accuracies are no result (its model predicts one class, or nothing): the three
    # properties read NaN for it, so that no figure or table takes them for numbers; ``summary`` keeps
    # what the run measured, for the CLI's raw view.
    @property
    def final_accuracy(self) -> float:
        """The final global model's test accuracy (a fraction); NaN for a diverged run."""
        return math.nan if self.diverged else self.summary["final_accuracy"]

    @property
    def best_accuracy(self) -> float:
        """The best test accuracy over the evaluated rounds (a fraction); NaN for a diverged run."""
        return math.nan if self.diverged else self.summary["best_accuracy"]

    @property
    def class_accuracy(self) -> list[float]:
        """The final global model's accuracy per class (fractions); all NaN for a diverged run."""
        values = self.summary["class_accuracy"]
        return [math.nan] * len(values) if self.diverged else values

    @property
    def class_names(self) -> list[str]:
        return self.summary["class_names"]

    def curve(self, key: str = "accuracy") -> "Any":
        """A pandas Series of ``key`` per evaluated round."""
        import pandas as pd

        rows = [r for r in self.rounds if key in r]
        return pd.Series([r[key] for r in rows], index=[r["round"] for r in rows], name=key)

    def global_state(self) -> dict[str, Tensor]:
        """The final global model's state (final.pt of a finished run; the resume checkpoint of a
        partial run, or of a run stored before final.pt existed)."""
        record = model_source.model_record(self, retrain, render_only())  # one committed without it: trained again
        state = record.read_latest() if record else None
        if state is None:
            raise FedlibError(f"no checkpoint or final model stored for run {self.config.hash()} in {self.folder}")
        return state["model"]

    def load_model(self, device: str = "cpu") -> nn.Module:
        """The final global model, ready for analysis: the network the run evaluated.

        For a method that predicts with something other than ``server.model`` (FedConcat's
        concatenated encoders and head: its ``eval_model``), the server is rebuilt from the
        checkpoint and that predictor is returned.
        """
        if method_class(self.config.method).hook_owner("eval_model") is None:
            dataset = load_run_dataset(self.config)
            model = build_run_model(self.config, dataset)
            model.load_state_dict(self.global_state())
            fp32_on_cuda(torch.device(device))
            return model.to(device).eval()
        server, algorithm = prepare(self.config.replace(device=device))
        record = model_source.model_record(self, retrain, render_only()) or store.RunRecord(self.folder)
        _restore(record, server)
        record.note_model_read()
        if server.round == 0:
            raise FedlibError(f"no checkpoint or final model stored for run {self.config.hash()} in {self.folder}")
        return predictor(algorithm, server).eval()


def prepare(cfg: RunConfig, source: DataSource = FILES) -> tuple[ServerState, Algorithm]:
    """Everything a run needs before round 0: data (from ``source``) on the device, partition,
    model, method."""
    device = resolve_device(cfg.device)
    fp32_on_cuda(device)
    determinism.configure(device, cfg.deterministic)
    dataset = load_run_dataset(cfg, source)
    if cfg.clients > len(dataset.train_y):
        raise FedlibError(f"clients ({cfg.clients}) exceeds the training samples ({len(dataset.train_y)})")
    partition = make_partition(cfg.partition, dataset.train_y.numpy(), cfg.clients, dataset.num_classes,
                               cfg.seed, beta=cfg.beta, shards_per_client=cfg.shards_per_client,
                               classes_per_client=cfg.classes_per_client, groups=dataset.train_groups,
                               min_size=cfg.min_client_size, quantity_split=cfg.quantity_split,
                               global_balance=cfg.global_balance)
    aug_name = default_augmentation(cfg.dataset) if cfg.augmentation == "auto" else cfg.augmentation
    layout = memory_layout(cfg)
    data = FederatedData(dataset, partition, augment_spec(aug_name), device, layout, drop_last=cfg.drop_last)
    torch.manual_seed(cfg.seed)
    model = build_run_model(cfg, dataset).to(device, memory_format=layout)
    algorithm = build_algorithm(cfg.method, cfg.method_args, cfg.dataset)
    server = ServerState(cfg=cfg, model=model, data=data, device=device, hparams=algorithm.hp)
    algorithm.setup(server)
    return server, algorithm


def memory_layout(cfg: RunConfig) -> torch.memory_format:
    """channels-last when asked, unless the method's numbers depend on the order of float sums."""
    if not cfg.channels_last:
        return torch.contiguous_format
    if method_class(cfg.method).layout_sensitive:
        warnings.warn(f"{cfg.method} trains in the NCHW layout: its result depends on the order of float sums, "
                      "and channels_last would change it under the same config hash", stacklevel=3)
        return torch.contiguous_format
    return torch.channels_last


def predictor(algorithm: Algorithm, server: ServerState) -> nn.Module:
    """The network a run evaluates: the method's ``eval_model`` (the global model unless the method
    says otherwise, e.g. FedEXP's averaged model, FedConcat's concatenated encoders)."""
    return algorithm.eval_model(server)


def _evaluate_round(server: ServerState, algorithm: Algorithm, metrics: dict) -> None:
    model = predictor(algorithm, server)
    metrics.update(evaluate(model, server.data))


def _summary(cfg: RunConfig, rounds: list[dict], data: FederatedData, seconds: float) -> dict:
    evaluated = [r for r in rounds if "accuracy" in r]
    best = max(evaluated, key=lambda r: r["accuracy"])
    last = evaluated[-1]
    return {
        "config_hash": cfg.hash(),
        "final_accuracy": last["accuracy"],
        "best_accuracy": best["accuracy"],
        "best_round": best["round"],
        "final_loss": last["loss"],
        "class_accuracy": last["class_accuracy"],
        "class_names": list(data.dataset.class_names),
        "partition_counts": data.partition.counts.tolist(),
        "rounds_run": len(rounds),
        "train_seconds": seconds,
    }


def _meta(cfg: RunConfig, server: ServerState) -> dict:
    """meta.json of a run as it starts (a resume keeps it and appends to ``resumes``)."""
    return {"fedlib_version": __version__, "code_revision": provenance.code_revision(),
            "environment": {**provenance.environment(), **precision_flags(server.device),
                            "stack_memory": stacked.stack_memory(server.device)},
            "device": str(server.device),
            "dataset_source": recorded_source(server.data.dataset.source, cfg.data_dir), "seed": cfg.seed,
            "method_hparams": server.hparams, "backend": cfg.backend,
            "data_fingerprint": server.data.dataset.fingerprint, "trained_data": counts(server.data.dataset),
            "data_identity": server.data.dataset.identity}


def recorded_source(source: str, data_dir: str | None) -> str:
    """Where the data came from as meta.json records it: a folder relative to the data folder that
    holds it (``MNIST/raw``), else its name alone, so a committed run names no machine's path; a
    source that is no folder (sklearn's digits, synthetic) as it is."""
    if not Path(source).exists():
        return source
    path = Path(source).resolve()
    cache = env_folder("FEDLIB_CACHE") or Path.home() / ".cache" / "fedlib"
    for root in (data_dir, env_folder("FEDLIB_DATA"), cache / "data"):
        if root is not None and path.is_relative_to(Path(root).resolve()):
            return path.relative_to(Path(root).resolve()).as_posix()
    return path.name


def _checkpoint(record: store.RunRecord, server: ServerState, rounds: list[dict], seconds: float) -> None:
    record.write_rounds(rounds)
    record.write_checkpoint(_state(server, seconds))


def _state(server: ServerState, seconds: float) -> dict:
    """What a checkpoint holds: rounds done, global model, the method's extras, training time."""
    return {"round": server.round, "model": server.model.state_dict(), "extras": server.extras, "seconds": seconds}


def _restore(record: store.RunRecord, server: ServerState) -> tuple[list[dict], float]:
    """Load the resume checkpoint into ``server`` (else the final state of a run killed between
    dropping its checkpoint and writing its summary); returns the rounds logged so far."""
    checkpoint = store.saved_state(record, server.device)
    if checkpoint is None:
        return [], 0.0
    store.restore_server(server, checkpoint)
    rounds = [r for r in record.read_rounds() if r["round"] < server.round]
    if [r["round"] for r in rounds] != list(range(server.round)):  # the metrics log lost rounds
        import warnings

        warnings.warn(f"run folder {record.folder}: the checkpoint is at round {server.round} but the metrics "
                      f"log holds {len(rounds)} of its rounds; restarting the run from round 0", RuntimeWarning,
                      stacklevel=3)
        fresh, _ = prepare(server.cfg)
        server.model.load_state_dict(fresh.model.state_dict())
        server.extras, server.round = fresh.extras, 0
        return [], 0.0
    return rounds, float(checkpoint.get("seconds", 0.0))


_ASK = object()  # run's ``served`` when the caller did not look the config up


def run(cfg: RunConfig, *, hooks: Sequence[Observer] = (), progress: bool = True, use_store: bool = True,
        results_dir: str | os.PathLike | None = None, stop_after: int | None = None,
        source: DataSource = FILES, render_only: bool | None = None, served: Any = _ASK) -> RunResult:
    """Run ``cfg`` (or return it from a store that holds it complete: the reference store when it
    does, whatever the working store holds, else the working store; see ``store.served_record``).

    ``stop_after`` ends the run after that many rounds without writing a summary, as a crash
    would; calling ``run`` again resumes from the last checkpoint. With ``hooks``, a config already
    in the store (complete or partial) is recomputed from round 0 without touching the store, so
    the hooks see every round; a new config is computed once and stored. While it trains, the
    run holds its store folder (a second process on the same config is refused with one line).
    A run whose global model turns non-finite, or whose test loss does, stops there and is stored
    with ``diverged=true``; a stored diverged run warns whenever it is served.

    ``source`` is where the images come from: the files, or stand-ins for a dry run or a
    benchmark; a run on stand-ins is never stored nor served (``use_store=False``).

    ``render_only``: runs come from the stores only, a run that would train raises :class:`NotRun`
    (None: this process's mode, :func:`render_only`, which a notebook's set-up sets).

    ``served`` is what ``store.served_record(cfg, results_dir)`` returned to a caller that already
    asked (:func:`fedlib.orchestration.experiments.run_all`), so the store is not asked again; by
    default ``run`` asks.
    """
    if use_store and not source.real:
        raise FedlibError(f"a run on {source.describe()} is never stored: pass use_store=False")
    check_environment()  # $FEDLIB_DATA, $FEDLIB_CACHE, ...: a blank one is one line, ~ the home folder
    record = store.RunRecord(store.run_dir(cfg, results_dir)) if use_store else None
    if not use_store or hooks:
        served = None
    elif served is _ASK:
        served = store.served_record(cfg, results_dir)
    if served is not None:  # the reference store's run when it holds one (read-only, metrics only)
        working = results_dir if results_dir is not None else cfg.results_dir  # where its model is retrained if asked
        return replace(_served(cfg, served, progress), working_store=working)
    if use_store and (_RENDER_ONLY if render_only is None else render_only):
        why = "must be recomputed for a recording hook" if hooks else "is in no store"
        raise NotRun(f"run {cfg.hash()} ({cfg.method} on {cfg.dataset}, seed {cfg.seed}) {why} "
                     "and runs are rendered only (reproduce --render-only)")
    if record is not None and hooks and (record.folder / "config.json").exists():
        record = None  # hooks must see every round: recompute beside the stored run, leaving it untouched
    if record is None:
        with determinism.restored(), determinism.explained():
            return _train(cfg, None, None, hooks, progress, stop_after, source)
    with record.claim() as claim:
        if record.complete and not hooks:  # finished by the previous holder while we waited
            return _served(cfg, store.served_record(cfg, results_dir) or record, progress)
        with determinism.restored(), determinism.explained():
            return _train(cfg, record, claim, hooks, progress, stop_after)


def retrain(cfg: RunConfig, results_dir) -> RunResult:
    """Train ``cfg`` into the working store ``results_dir`` even where the reference store serves it."""
    return run(cfg, results_dir=results_dir, served=None)


class NotRun(FedlibError):
    """A config that neither store holds, asked for while rendering only (nothing trains)."""


RENDER_ONLY_ENV = "FEDLIB_RENDER_ONLY"  # how reproduce --render-only tells its kernels; read at their set-up
_RENDER_ONLY = False  # this process's mode: set by an edge (set_render_only), never read from the environment


def render_only() -> bool:
    """Whether this process's runs come from the stores only: the mode an edge set with
    :func:`set_render_only` (``reproduce --render-only``; in its kernels, the notebook's set-up,
    ``fedlib.reporting.notebook.apply_profile``, from $FEDLIB_RENDER_ONLY). Off unless set."""
    return _RENDER_ONLY


def set_render_only(on: bool) -> bool:
    """Make runs in this process come from the stores only (``on``) or train as usual; returns
    the mode before, for a caller that puts it back."""
    global _RENDER_ONLY
    before, _RENDER_ONLY = _RENDER_ONLY, bool(on)
    return before


def _train(cfg: RunConfig, record: store.RunRecord | None, claim, hooks: Sequence[Observer], progress: bool,
           stop_after: int | None, source: DataSource = FILES) -> RunResult:
    """Train from round 0 or from the record's last checkpoint, and store the summary."""
    server, algorithm = prepare(cfg, source)
    rounds, seconds = ([], 0.0) if record is None else _restore(record, server)
    origin = "resumed" if server.round > 0 else "trained"
    if record is not None and server.round > 0:
        _say(_resume_message(cfg, server.round, record.folder), progress)
    if record is not None:
        record.discard_partial_writes()
        record.write_config(cfg)
        _write_meta(record, cfg, server)
    diverged = server.round > 0 and _diverged(server.model, rounds[-1] if rounds else {})
    with _progress_bar(cfg, server.round, progress) as bar:  # closed (its line cleared) on Ctrl-C too
        while server.round < cfg.rounds and not diverged:
            if stop_after is not None and server.round >= stop_after:
                return RunResult(cfg, rounds, {}, record.folder if record else None, origin)
            started = time.perf_counter()
            metrics = run_round(server, algorithm, list(hooks))
            finite = _all_finite(server.model)
            if not finite or (server.round + 1) % cfg.eval_every == 0 or server.round + 1 == cfg.rounds:
                _evaluate_round(server, algorithm, metrics)
            diverged = _diverged(server.model, metrics, finite)
            if diverged:
                metrics["diverged"] = True
            seconds += time.perf_counter() - started
            metrics["seconds"] = seconds
            rounds.append(metrics)
            server.round += 1
            if record is not None:
                claim.heartbeat()
                _checkpoint(record, server, rounds, seconds)
            _advance(bar, metrics)
            if diverged:
                _warn_diverged(cfg, server.round - 1)
    if not any("accuracy" in r for r in rounds):  # resumed after the last round, before its evaluation
        _evaluate_round(server, algorithm, rounds[-1])
    summary = _summary(cfg, rounds, server.data, seconds)
    summary["method_hparams"] = algorithm.hp
    summary["diverged"] = diverged
    if record is not None:
        _store_finished(record, claim, server, rounds, summary)
    return RunResult(cfg, rounds, summary, record.folder if record else None, origin)


def _store_finished(record: store.RunRecord, claim, server: ServerState, rounds: list[dict], summary: dict) -> None:
    """Keep the final state, drop the resume checkpoint, then write the summary (complete) and
    seal the run's files.

    A kill before the summary leaves final.pt (and perhaps the checkpoint): the rerun restores
    from it and only writes the summary."""
    record.write_final(_state(server, summary["train_seconds"]))
    _check_consistent(record, server, rounds, server.cfg)
    claim.heartbeat()
    record.remove_resume_checkpoint()
    record.write_summary(summary)
    record.seal()  # digest.json, last: any later edit of the run's files is refused


def _write_meta(record: store.RunRecord, cfg: RunConfig, server: ServerState) -> None:
    """meta.json: written as the run starts; a resume keeps its fields (what the start used) and
    appends one entry to its ``resumes`` list, warning when the arithmetic or the code changed.
    A resumed run whose meta.json was lost gets the resume's fields at the top."""
    if server.round == 0:
        record.write_meta(_meta(cfg, server))
        return
    meta = record.read_meta() or _meta(cfg, server)
    entry = {**provenance.resume_entry(server.round, cfg.backend, str(server.device)), **precision_flags(server.device)}
    _warn_changed_arithmetic(cfg, meta, entry)
    _warn_changed_code(cfg, meta, entry)
    record.write_meta({**meta, "resumes": list(meta.get("resumes") or []) + [entry]})


def _arithmetic(stretch: dict) -> tuple:
    """What sets a stretch's float summation order: backend, torch threads, device, TF32 and
    deterministic kernels (from meta.json's top level, or from one of its ``resumes`` entries)."""
    env = stretch.get("environment") or stretch
    return (stretch.get("backend"), env.get("cpu_threads"), stretch.get("device"), env.get("tf32"),
            env.get("deterministic"))


def _describe_arithmetic(arithmetic: tuple) -> str:
    backend, threads, device, tf32, deterministic = arithmetic
    return (f"backend {backend}, {threads} torch threads on {device}" + ("" if tf32 is None else f", tf32 {tf32}")
            + ("" if deterministic is None else f", deterministic {deterministic}"))


def _warn_changed_arithmetic(cfg: RunConfig, meta: dict, entry: dict) -> None:
    """A resumed run whose backend, thread count, device or TF32 setting changed goes on with
    another float summation order: its later rounds match an uninterrupted run only to rounding."""
    import warnings

    now = _arithmetic(entry)
    before = [_arithmetic(s) for s in [meta] + list(meta.get("resumes") or [])]
    changed = list(dict.fromkeys(b for b in before if b != now))
    if changed:
        warnings.warn(f"run {cfg.hash()} resumes after round {entry['rounds_done']} with {_describe_arithmetic(now)}; "
                      f"rounds before were trained with {'; '.join(map(_describe_arithmetic, changed))}, so the rest "
                      "agrees with an uninterrupted run only to float rounding", store.ProvenanceWarning, stacklevel=5)


def _warn_changed_code(cfg: RunConfig, meta: dict, entry: dict) -> None:
    """A resume whose code revision is not the clean one the run started with: its later rounds
    may come from other code."""
    import warnings

    start, now = str(meta.get("code_revision", "unknown")), entry["code_revision"]
    if start != now or not store.is_clean_revision(now):
        warnings.warn(f"run {cfg.hash()} resumes after round {entry['rounds_done']} with code revision {now}; it "
                      f"started with {start}: its rounds may come from different code (meta.json 'resumes' records "
                      "each)", store.ProvenanceWarning, stacklevel=5)


def _stored_result(cfg: RunConfig, record: store.RunRecord) -> RunResult:
    """A complete run from the store, after checking that its files agree with each other and
    with ``cfg``; one line refusing it otherwise. A diverged run is served with a warning."""
    try:
        summary, rounds = record.read_summary(), record.read_rounds()
        stored = record.read_config()
        record.read_meta()  # a damaged meta.json is a corrupt run too
    except (ValueError, KeyError, TypeError, OSError, FedlibError) as exc:
        raise FedlibError(f"stored run {record.folder} is corrupt ({one_line(exc, 160)}); delete the folder to "
                          "recompute it") from None
    problem = store.inconsistency(cfg.hash(), stored, summary, rounds)
    if problem:
        raise FedlibError(f"stored run {record.folder} is inconsistent: {problem}; delete the folder to recompute it")
    if not store.is_sealed(record.folder):
        store.warn_unsealed(record.folder)
    check_served_data(cfg, record)
    if summary.get("diverged"):
        _warn_diverged(cfg, len(rounds) - 1, stored=True)
    return RunResult(cfg, rounds, summary, record.folder, origin="served")


def _check_consistent(record: store.RunRecord, server: ServerState, rounds: list[dict], cfg: RunConfig) -> None:
    """Before the summary is written: the final state, the metrics log and the loop agree."""
    final_round = (record.read_final() or {}).get("round")
    logged = record.read_rounds()
    if not (final_round == server.round == len(rounds) == len(logged)):
        raise FedlibError(f"run {cfg.hash()} in {record.folder}: final state at round {final_round}, "
                          f"{len(logged)} logged rounds and {len(rounds)} trained disagree; not writing a "
                          "summary (delete the folder to recompute)")


def _diverged(model: nn.Module, metrics: dict, finite: bool | None = None) -> bool:
    """A non-finite global model, or a non-finite test loss in an evaluated round."""
    if finite is None:
        finite = _all_finite(model)
    loss = metrics.get("loss")
    return (not finite) or bool(metrics.get("diverged")) or (loss is not None and not math.isfinite(loss))


def _all_finite(model: nn.Module) -> bool:
    """True when every floating-point entry of the model's state is finite."""
    return all(bool(torch.isfinite(v).all()) for v in model.state_dict().values() if v.is_floating_point())


def _warn_diverged(cfg: RunConfig, round_index: int, stored: bool = False) -> None:
    """A run whose global model (or test loss) turned non-finite stops there, is stored as
    diverged, and says so, also every time the store serves it."""
    import warnings

    what = "is a stored run that diverged" if stored else "diverged"
    warnings.warn(f"run {cfg.hash()} ({cfg.method} on {cfg.dataset}) {what} in round {round_index + 1}: "  # counted from 1
                  "non-finite weights or test loss; its accuracies are not results (diverged=true)",
                  RuntimeWarning, stacklevel=4)


def _progress_bar(cfg: RunConfig, start: int, enabled: bool):
    from tqdm.auto import tqdm

    desc = f"{cfg.method} {cfg.dataset}/{cfg.partition} seed {cfg.seed}"
    return tqdm(total=cfg.rounds, initial=start, desc=desc, unit="round", disable=not enabled, leave=False)


def _advance(bar, metrics: dict) -> None:
    if "accuracy" in metrics:
        bar.set_postfix(acc=f"{100 * metrics['accuracy']:.2f}%")
    bar.update(1)


def _say(message: str, enabled: bool) -> None:
    """One line on the progress bar's channel (stderr, above any open bar); nothing when quiet."""
    if enabled:
        from tqdm.auto import tqdm

        tqdm.write(message, file=sys.stderr)


def _served(cfg: RunConfig, record: store.RunRecord, progress: bool) -> RunResult:
    """A complete run from ``record`` (see :func:`_stored_result`), announced when ``progress``."""
    result = _stored_result(cfg, record)
    if progress:
        _say(_served_message(record, result.summary), True)
    return result


def _served_message(record: store.RunRecord, summary: dict) -> str:
    """'served from the store: FOLDER (trained DATE, SECONDS s)'."""
    finished = record.finished_at()
    when = time.strftime("%Y-%m-%d %H:%M", time.localtime(finished)) if finished else "at an unknown time"
    seconds = summary.get("train_seconds")
    took = f", {seconds:.1f} s" if isinstance(seconds, (int, float)) else ""
    return f"served from the store: {record.folder} (trained {when}{took})"


def _resume_message(cfg: RunConfig, rounds_done: int, folder) -> str:
    """Where a resumed run continues, in 1-based rounds."""
    if rounds_done >= cfg.rounds:
        return f"all {cfg.rounds} rounds were trained before; finishing the run ({folder})"
    return f"resuming from round {rounds_done + 1} of {cfg.rounds} ({folder})"
