"""Retrain runs of the reference store from their stored config and check that the committed code
gives the same numbers, round by round, bit for bit.

    .venv/bin/python tools/verify_reference.py 083fd2adb11f 220f6149b487 --record

A reference run is retrained in a temporary store with the backend and torch thread count its
meta.json records (another thread count sums floats in another order), then every per-round
metric but the wall time is compared with the committed rounds.jsonl. Meant for runs whose
recorded code revision is not a clean commit ('+dirty'), or after a change that should not move
any number. With --record, a run that matches gets reference_results/<hash>/reproduced.json
(the clean revision, environment and date of the check); a run that does not match is reported
with its first differing round and nothing is written: republish it from the clean code.
Run it on the machine kind that trained the run (meta.json: environment); on another, floats differ.
A run trained on CUDA is retrained on CUDA where one is present. A CUDA run trained with
``deterministic=False`` (meta.json: environment.deterministic) is not expected to repeat bit for
bit: it is reported as such, with the largest difference of a per-round number, and never counts as
a failure to reproduce (nor gets reproduced.json).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from fedlib import store  # noqa: E402
from fedlib.core import determinism  # noqa: E402
from fedlib.core.config import RunConfig  # noqa: E402
from fedlib.engine import engine  # noqa: E402
from fedlib.errors import FedlibError  # noqa: E402
from fedlib.orchestration.resources import apply_thread_budget  # noqa: E402

REPRODUCED_FILE = "reproduced.json"
# what verify() finds for one run
IDENTICAL, NOT_EXPECTED, DIFFERS = "identical", "not expected bit-identical", "differs"


def _without_time(rounds: list[dict]) -> list[dict]:
    return [{k: v for k, v in r.items() if k != "seconds"} for r in rounds]


def first_difference(stored: list[dict], retrained: list[dict]) -> str | None:
    """None when the two per-round logs agree on every metric but the wall time, else where they part."""
    a, b = _without_time(stored), _without_time(retrained)
    if len(a) != len(b):
        return f"{len(a)} stored rounds, {len(b)} retrained"
    for index, (x, y) in enumerate(zip(a, b)):
        if x != y:
            keys = sorted(k for k in set(x) | set(y) if x.get(k) != y.get(k))
            return f"round {index + 1}: {', '.join(f'{k} {x.get(k)!r} vs {y.get(k)!r}' for k in keys[:3])}"
    return None


def largest_gap(stored: list[dict], retrained: list[dict]) -> float:
    """The largest absolute difference of a per-round number (lists compared entry by entry) that
    both logs hold; what a non-deterministic run is reported with."""
    def numbers(value) -> list[float]:
        if isinstance(value, bool):
            return []
        if isinstance(value, (int, float)):
            return [float(value)]
        return [x for item in value for x in numbers(item)] if isinstance(value, list) else []

    gaps = [abs(p - q) for x, y in zip(_without_time(stored), _without_time(retrained))
            for key in set(x) & set(y) for p, q in zip(numbers(x[key]), numbers(y[key]))]
    return max(gaps, default=0.0)


def retrain_device(meta: dict) -> str:
    """Where to retrain: on CUDA when the run was trained there and this machine has one, else the CPU."""
    import torch

    return "cuda" if str(meta.get("device", "")).startswith("cuda") and torch.cuda.is_available() else "cpu"


def verify(run_hash: str, reference: Path, record: bool) -> str:
    """Retrain one reference run and compare: IDENTICAL when every round matches, NOT_EXPECTED for a
    run trained with non-deterministic CUDA kernels (reported, not judged), else DIFFERS."""
    folder = reference / run_hash
    if not (folder / "summary.json").exists():
        raise FedlibError(f"{run_hash} is not a finished run of {reference}")
    cfg = RunConfig.from_dict(json.loads((folder / "config.json").read_text()))
    meta = json.loads((folder / "meta.json").read_text())
    threads = meta.get("environment", {}).get("cpu_threads")
    apply_thread_budget(threads)
    started = time.time()
    os.environ["FEDLIB_REFERENCE"] = "off"  # else the run would be served from the store it is checked against
    with tempfile.TemporaryDirectory() as scratch:
        result = engine.run(cfg.replace(device=retrain_device(meta), results_dir=scratch), use_store=True,
                            progress=True, results_dir=scratch)
        meta_now = store.RunRecord(result.folder).read_meta()
    stored = store.RunRecord(folder).read_rounds()
    difference = first_difference(stored, result.rounds)
    took = time.time() - started
    if not determinism.recorded_deterministic(meta):
        print(f"{run_hash} {cfg.method}: not expected bit-identical (trained on {meta.get('device')} with "
              f"deterministic=False); largest per-round difference {largest_gap(stored, result.rounds):.3g} "
              f"({took:.0f} s)", flush=True)
        return NOT_EXPECTED
    if difference is None:
        print(f"{run_hash} {cfg.method}: identical over {len(stored)} rounds ({took:.0f} s, {threads} threads)",
              flush=True)
        if record:
            check = {"identical_rounds": len(stored), "code_revision": meta_now.get("code_revision"),
                     "stored_code_revision": meta.get("code_revision"), "environment": meta_now.get("environment"),
                     "date": datetime.date.today().isoformat(), "tool": "tools/verify_reference.py"}
            (folder / REPRODUCED_FILE).write_text(json.dumps(check, indent=1, sort_keys=True) + "\n")
        return IDENTICAL
    print(f"{run_hash} {cfg.method}: DIFFERS, {difference} ({took:.0f} s)", flush=True)
    return DIFFERS


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("hashes", nargs="+", help="run hashes of the reference store")
    parser.add_argument("--reference", type=Path, default=store.REFERENCE_RESULTS)
    parser.add_argument("--record", action="store_true", help=f"write {REPRODUCED_FILE} beside a run that matches")
    args = parser.parse_args(argv)
    results = [verify(h, args.reference, args.record) for h in args.hashes]
    unjudged = results.count(NOT_EXPECTED)
    print(f"{results.count(IDENTICAL)} of {len(results)} reference runs reproduced bit for bit"
          + (f"; {unjudged} not expected to (trained with deterministic=False)" if unjudged else ""), flush=True)
    return 1 if DIFFERS in results else 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except FedlibError as error:
        print(f"error: {error}", file=sys.stderr)
        sys.exit(2)
