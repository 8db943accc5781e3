"""Whether a complete run's files agree: its config.json with the hash it is kept under, its summary
with its round log, and the log with its config's rounds. The engine checks this before serving a
run, ``fedlib list``/``show``/``export`` before calling it done."""

from __future__ import annotations

from typing import Any

from fedlib.core.config import RunConfig


def inconsistency(expected_hash: str, stored: RunConfig, summary: Any, rounds: list[dict]) -> str | None:
    """Why a complete run's files disagree with each other or with the hash it is kept under (None
    when they agree): ``stored`` is its config.json, ``summary`` its summary.json, ``rounds`` its
    rounds.jsonl. A run that did not diverge must hold all of its config's rounds: a shorter one is
    refused, never served as the config's result (nor retrained over its summary). The engine
    checks this before serving a run, ``fedlib list``/``show``/``export`` before calling it done."""
    if stored.hash() != expected_hash:
        return f"its config.json hashes to {stored.hash()}, not {expected_hash}"
    if not isinstance(summary, dict) or summary.get("rounds_run") != len(rounds):
        counted = summary.get("rounds_run") if isinstance(summary, dict) else "?"
        return f"its summary counts {counted} rounds but rounds.jsonl holds {len(rounds)}"
    problem = rounds_problem(rounds)
    if problem:
        return problem
    if len(rounds) > stored.rounds:
        return f"it holds {len(rounds)} rounds but its config {stored.rounds}"
    if len(rounds) < stored.rounds and not summary.get("diverged"):
        return f"it holds {len(rounds)} of its config's {stored.rounds} rounds and did not diverge"
    return None


def rounds_problem(rounds: list) -> str | None:
    """Why a rounds.jsonl log is not rounds 0, 1, 2, ... in order (None when it is)."""
    if not all(isinstance(r, dict) for r in rounds) or [r.get("round") for r in rounds] != list(range(len(rounds))):
        return "rounds.jsonl does not hold rounds 0, 1, 2, ... in order"
    return None
