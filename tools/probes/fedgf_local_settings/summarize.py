"""One JSON line per run in a results store: its settings, accuracy per round and FedGF's c and divergence."""

import json
import math
import sys
from pathlib import Path

from fedlib import store


def summary(run: Path) -> dict:
    """The settings and per-round readouts of the run stored in ``run``."""
    record = store.RunRecord(run)
    cfg, rounds = record.read_config(), record.read_rounds()
    accuracy = [round(100 * r["accuracy"], 2) for r in rounds]
    return {"run": run.name, "method": cfg.method, "local_epochs": cfg.local_epochs,
            "momentum": cfg.momentum, "rounds_run": len(rounds),
            "diverged": any(not math.isfinite(r["loss"]) for r in rounds),
            "best": max(accuracy), "best_round": accuracy.index(max(accuracy)) + 1, "accuracy": accuracy,
            "fedgf_c": [r.get("fedgf_c") for r in rounds],
            "fedgf_divergence": [_finite(r.get("fedgf_divergence")) for r in rounds]}


def _finite(value: float | None) -> float | None:
    """``value`` to 4 significant digits, None when absent or not finite (JSON has no NaN)."""
    return None if value is None or not math.isfinite(value) else float(f"{value:.4g}")


if __name__ == "__main__":
    for folder in sorted(Path(sys.argv[1]).iterdir()):
        if (folder / "rounds.jsonl").exists():
            print(json.dumps(summary(folder)))
