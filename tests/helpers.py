"""Plain helpers the test modules share (fixtures are in conftest.py): the tiny run configs, a
quiet engine run, one round of training, reading a notebook, a notebook's parameters and grid
under one of its profiles."""

import json
import warnings
from pathlib import Path

import torch

from fedlib.core.config import RunConfig
from fedlib.engine import engine

# A run that trains in seconds on the CPU: synthetic data, an MLP, four Dir(0.5) clients, three rounds.
TINY_RUN = dict(dataset="synthetic", model="mlp", partition="dirichlet", beta=0.5, clients=4, rounds=3,
                local_epochs=1, batch_size=32, lr=0.05, momentum=0.5, seed=1, device="cpu")


def tiny_config(*presets: dict, **changes) -> RunConfig:
    """TINY_RUN updated by each preset in turn, then by ``changes``: the last one given wins."""
    fields = dict(TINY_RUN)
    for preset in presets:
        fields.update(preset)
    fields.update(changes)
    return RunConfig(**fields)


def quiet_run(cfg: RunConfig, root, **kwargs):
    """``engine.run`` storing into ``root``, with no progress bar and warnings silenced."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return engine.run(cfg, results_dir=root, progress=False, **kwargs)


def one_round(cfg: RunConfig, evaluate: bool = False) -> tuple[dict, dict]:
    """Round 0 of ``cfg``: a copy of the global model's state after it and the round's metrics, with
    the new model's test metrics added when ``evaluate``."""
    server, algorithm = engine.prepare(cfg)
    metrics = engine.run_round(server, algorithm)
    if evaluate:
        metrics.update(engine.evaluate(server.model, server.data))
    return {k: v.detach().clone() for k, v in server.model.state_dict().items()}, metrics


def load_notebook(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def planted_confusion() -> torch.Tensor:
    """FashionMNIST-like: {0, 6} and {2, 4, 6} confuse each other, 7 <-> 9 a little."""
    confusion = torch.full((10, 10), 0.005)
    for a, b, value in [(0, 6, 0.10), (6, 0, 0.12), (2, 4, 0.08), (4, 2, 0.09), (2, 6, 0.07),
                        (6, 2, 0.08), (4, 6, 0.09), (6, 4, 0.08), (7, 9, 0.03), (9, 7, 0.02)]:
        confusion[a, b] = value
    accuracy = torch.tensor([0.8, 0.99, 0.8, 0.95, 0.8, 0.97, 0.6, 0.95, 0.97, 0.96])
    confusion.diagonal().copy_(accuracy)
    return confusion


ROOT = Path(__file__).resolve().parents[1]


def notebook_parameters(stem: str, profile: str, tmp_path: Path) -> dict:
    """The parameters notebook ``stem`` runs with under ``profile``, as ``reproduce.sh`` passes them
    (stores and output folders under ``tmp_path``)."""
    from fedlib.paper import plan
    from fedlib.paper.reproduce import build_overrides, load_profiles

    overrides = build_overrides(profile, "cpu", None, tmp_path / "results", tmp_path / "figures", tmp_path / "tables")
    passed = {**load_profiles(ROOT / "profiles", stem)[profile], **overrides}
    return plan.notebook_parameters(ROOT / "notebooks" / f"{stem}.ipynb", passed)


def declared(stem: str, profile: str, tmp_path: Path) -> list[RunConfig]:
    """The runs notebook ``stem`` declares under ``profile`` (its grid function's)."""
    from fedlib.paper import plan

    return plan.declared_configs(ROOT / "notebooks" / f"{stem}.ipynb", notebook_parameters(stem, profile, tmp_path))


def differing_fields(a: RunConfig, b: RunConfig) -> set[str]:
    """The fields that define the numbers (the hashed ones) in which two runs differ."""
    first, second = a.hashed_fields(), b.hashed_fields()
    return {name for name in first if first[name] != second[name]}
