"""How many of an MLP run's 200 feature dimensions (the ReLU output the classifier reads) are ever non-zero.

Usage: FEDLIB_DATA=../shared/datasets python3 tools/probes/fedmr_dead_features/live_features.py STORE HASH [HASH ...]
Reads STORE/HASH/final.pt (the working store keeps it; reference_results/ does not) and the run's config, and
passes the whole test set of the run's dataset through the final global model. Prints one JSON line per run.
"""

import json
import sys
from pathlib import Path

import torch

from fedlib.core.models import build_model
from fedlib.datasets.data import load_dataset


def live_dimensions(store: Path, run: str) -> dict:
    """The run's method, setting and the count of feature dimensions > 0 for at least one test image."""
    config = json.loads((store / run / "config.json").read_text())
    data = load_dataset(config["dataset"])
    model = build_model(config["model"], len(data.class_names), in_channels=data.test_x.shape[1],
                        image_size=data.test_x.shape[-1])
    model.load_state_dict(torch.load(store / run / "final.pt", map_location="cpu", weights_only=False)["model"])
    model.eval()
    mean = torch.tensor(data.mean).view(1, -1, 1, 1)
    std = torch.tensor(data.std).view(1, -1, 1, 1)
    with torch.no_grad():
        features = model.body((data.test_x.float() / 255 - mean) / std)
    return {"run": run, "method": config["method"], "beta": config["beta"], "seed": config["seed"],
            "live": int((features > 0).any(0).sum()), "dimensions": features.shape[1]}


if __name__ == "__main__":
    for name in sys.argv[2:]:
        print(json.dumps(live_dimensions(Path(sys.argv[1]), name)))
