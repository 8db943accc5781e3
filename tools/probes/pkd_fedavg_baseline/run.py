"""FedAvg at PKD's Fashion-MNIST setting with one unstated choice changed at a time (see README.md).

Prints one JSON line per variant: its changes, config hash, code revision, the worst class per round and
the pre-registered readouts (first round at 40/50/60/65/70 %, mean of rounds 71-80, the most frequent worst
class there). Trains into ``--store``, never the reference store.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path

import torch

from fedlib.core.config import RunConfig
from fedlib.engine import engine
from fedlib.errors import FedlibError
from fedlib import store
from fedlib.store import provenance

ROOT = Path(__file__).resolve().parents[3]
STORED_RUN = ROOT / "reference_results" / "8f104f610687"  # FedAvg, Fashion-MNIST, LeNet-5, 300 rounds, seed 0
ROUNDS = 80
THRESHOLDS = (40, 50, 60, 65, 70)
PAPER_CROSSINGS = {40: 13, 50: 19, 60: 30, 65: 57, 70: None}  # PKD Table 9, FedAvg (None: never)
# variant -> RunConfig changes; those that need code fedlib lacks are named in README.md, not here
VARIANTS = {
    "participation_0.5": {"participation": 0.5},
    "participation_0.2": {"participation": 0.2},
    "unit_inputs": {"dataset_options": {"standardise": False}},
    "classic_lenet5": {"model": "lenet5_classic"},
}


def base_config(store: Path) -> RunConfig:
    """The stored run's config, cut to ROUNDS rounds, trained into ``store`` on the sequential path."""
    fields = json.loads((STORED_RUN / "config.json").read_text())
    fields.update(rounds=ROUNDS, results_dir=str(store), data_dir=None, backend="sequential", device="cpu")
    return RunConfig(**fields)


def trained_revisions(cfg: RunConfig) -> list[str]:
    """The code revisions the variant's run trained with, from its ``meta.json``: the one it started
    with, then each resume's (not this process's, which may be newer)."""
    meta = json.loads((store.run_dir(cfg) / "meta.json").read_text())
    return provenance.trained_revisions(meta)


def crossings(worst: list[float]) -> dict[int, int | None]:
    """The first round (from 1) whose worst-class accuracy (%) reaches each threshold; None: never."""
    return {t: next((i + 1 for i, value in enumerate(worst) if value >= t), None) for t in THRESHOLDS}


def readouts(rounds: list[dict], class_names: list[str]) -> dict:
    """The pre-registered readouts of one run's rounds."""
    worst = [100 * min(r["class_accuracy"]) for r in rounds]
    last = rounds[-10:]
    worst_class = Counter(class_names[min(range(len(r["class_accuracy"])), key=r["class_accuracy"].__getitem__)]
                          for r in last)
    return {"worst_class_per_round": [round(v, 2) for v in worst], "crossings": crossings(worst),
            "worst_mean_71_80": round(sum(worst[-10:]) / len(last), 2),
            "most_often_worst_71_80": worst_class.most_common(1)[0]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", type=Path, help="scratch results store the variants train into")
    parser.add_argument("--variants", default=",".join(VARIANTS), help="comma-separated names (default: all)")
    parser.add_argument("--list", action="store_true", help="print each variant's changes and exit")
    args = parser.parse_args(argv)
    if args.list:
        for name, changes in VARIANTS.items():
            print(name, json.dumps(changes))
        return 0
    names = [n.strip() for n in args.variants.split(",") if n.strip()]
    unknown = [n for n in names if n not in VARIANTS]
    if unknown:
        print(f"error: unknown variant {unknown[0]!r}; valid: {', '.join(VARIANTS)}", file=sys.stderr)
        return 2
    if args.store is None:
        print("error: --store is required (a scratch results folder, not the reference store)", file=sys.stderr)
        return 2
    torch.set_num_threads(1)
    for name in names:
        cfg = base_config(args.store).replace(**VARIANTS[name])
        try:
            result = engine.run(cfg, progress=True)
        except FedlibError as error:
            print(f"error: {name}: {error}", file=sys.stderr)
            return 2
        line = {"variant": name, "changes": VARIANTS[name], "config_hash": cfg.hash(), "seed": cfg.seed,
                "rounds": len(result.rounds), "code_revisions": trained_revisions(cfg),
                "torch_threads": 1, "paper_crossings": PAPER_CROSSINGS,
                **readouts(result.rounds, list(result.summary["class_names"]))}
        print(json.dumps(line), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
