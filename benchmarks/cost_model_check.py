"""Hold the plan's cost model against the project's stored full-scale runs.

Every CPU run of the reference store (reference_results/) that a notebook declares under the
paper profile is predicted from the committed steady-state rates of one machine
(fedlib/orchestration/measured_rates.json) with the plan's own model
(:meth:`fedlib.orchestration.timing.Rates.run_seconds`) and set beside the time it recorded
(``train_seconds`` of its summary.json).

The stored runs trained on other machines than the one the rates were measured on, and at one
or two torch threads, often beside another training on the same two cores. One factor per
recorded thread count (the geometric mean of recorded over predicted) says how much faster
their machine was; the model's job is the rest: how a run's cost follows its dataset, model,
method, images and evaluations. Identical work (one config, several seeds) is one group, whose
median recorded time is compared.

    .venv/bin/python -m benchmarks.cost_model_check [--device "cpu (1 thread, AMD EPYC, x86_64)"]
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from fedlib.core.config import RunConfig  # noqa: E402
from fedlib.orchestration import timing  # noqa: E402


def committed_cache(device: str | None = None) -> timing.ProbeCache:
    """The committed rates of ``device`` (default: the first machine in the file) as a probe cache."""
    devices = json.loads(timing.COMMITTED_RATES.read_text())["devices"]
    label = device or next(iter(devices))
    return timing.ProbeCache.from_entry(Path("/nonexistent"), label, devices[label])


def paper_hashes() -> set[str]:
    """Hashes of every run a notebook declares under the paper profile."""
    from fedlib.paper.reproduce.declared import declared_grids
    from fedlib.paper.reproduce.selection import select_notebooks

    notebooks, profiles, overrides, _ = select_notebooks("paper", None, None, None, "cpu", None, None, None, None)
    grids = declared_grids(notebooks, profiles, overrides, progress=False)
    return {cfg.hash() for configs in grids.values() for cfg in configs or []}


def stored_full_scale_runs(reference: Path = ROOT / "reference_results") -> list[dict]:
    """The reference store's CPU runs that the paper profile declares: config, threads, seconds."""
    declared = paper_hashes()
    runs = []
    for summary_path in sorted(reference.glob("*/summary.json")):
        folder = summary_path.parent
        summary, meta = json.loads(summary_path.read_text()), json.loads((folder / "meta.json").read_text())
        stored = json.loads((folder / "config.json").read_text())
        cfg = RunConfig(**{k: v for k, v in stored.items() if k in RunConfig.__dataclass_fields__})
        if cfg.hash() not in declared or not str(meta.get("device", "cpu")).startswith("cpu"):
            continue
        if summary.get("diverged") or not summary.get("train_seconds"):
            continue  # a diverged run stops early; its rounds_run is not the config's
        runs.append({"run": folder.name, "cfg": cfg, "threads": meta.get("environment", {}).get("cpu_threads"),
                     "recorded": float(summary["train_seconds"]), "rounds_run": summary.get("rounds_run")})
    return runs


def comparison(cache: timing.ProbeCache, runs: list[dict]) -> tuple[list[dict], dict[int, float]]:
    """Groups of identical work (config less seed, thread count), each with its predicted and
    median recorded seconds and the ratio after the thread count's machine factor; the factors."""
    rates = timing.Rates(device=cache.device, cache=cache)
    groups: dict[tuple, dict] = {}
    for run in runs:
        cfg = run["cfg"].replace(rounds=run["rounds_run"] or run["cfg"].rounds)
        key = (cfg.replace(seed=0).hash(), run["threads"])
        group = groups.setdefault(key, {"cfg": cfg, "threads": run["threads"], "recorded": [], "runs": []})
        group["recorded"].append(run["recorded"])
        group["runs"].append(run["run"])
    rows = []
    for group in groups.values():
        predicted = rates.run_seconds(group["cfg"])
        if predicted:
            rows.append({**group, "predicted": predicted, "median": statistics.median(group["recorded"])})
    factors = {}
    for threads in {row["threads"] for row in rows}:
        logs = [math.log(r["median"] / r["predicted"]) for r in rows if r["threads"] == threads]
        factors[threads] = math.exp(statistics.fmean(logs))
    for row in rows:
        row["ratio"] = row["median"] / (row["predicted"] * factors[row["threads"]])
        row["spread"] = max(row["recorded"]) / min(row["recorded"])
    return rows, factors


def markdown(rows: list[dict], factors: dict[int, float], device: str) -> str:
    lines = [f"Rates: {device}. Machine factor (recorded / predicted, geometric mean) by recorded thread count: "
             + ", ".join(f"{t} thread(s) {f:.2f}" for t, f in sorted(factors.items())), "",
             "| dataset | model | method | threads | runs | predicted s | x factor | recorded median s | "
             "recorded / model | spread of runs |", "|---|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    for r in sorted(rows, key=lambda r: r["ratio"]):
        cfg = r["cfg"]
        lines.append(f"| {cfg.dataset} | {cfg.model} | {cfg.method} | {r['threads']} | {len(r['recorded'])} | "
                     f"{r['predicted']:,.0f} | {r['predicted'] * factors[r['threads']]:,.0f} | {r['median']:,.0f} | "
                     f"{r['ratio']:.2f} | {r['spread']:.2f}x |")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", help="the committed machine to take rates from (default: the first)")
    args = parser.parse_args(argv)
    cache = committed_cache(args.device)
    rows, factors = comparison(cache, stored_full_scale_runs())
    print(markdown(rows, factors, cache.device))
    return 0


if __name__ == "__main__":
    sys.exit(main())
