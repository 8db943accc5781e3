"""How many of an MLP run's 200 feature dimensions (the ReLU output the classifier reads) are ever non-zero.

Usage: FEDLIB_DATA=../shared/datasets python3 tools/probes/fedmr_dead_features/live_features.py STORE HASH [HASH ...]
Reads STORE/HASH/final.pt (the working store keeps it; reference_results/ does not) and the run's config, and
passes the whole test set of the run's dataset through the final global model. Prints one JSON line per run.
"""

import json
import sys
from pathlib import Path

from fedlib import store
from fedlib.core.state import build_run_model
from fedlib.datasets.augment import normalize
from fedlib.datasets.data import load_dataset
from fedlib.measures.metrics import predict


def live_dimensions(results: Path, run: str) -> dict:
    """The run's method, setting and the count of feature dimensions > 0 for at least one test image."""
    record = store.RunRecord(results / run)
    cfg = record.read_config()
    data = load_dataset(cfg.dataset)
    model = build_run_model(cfg, data)
    model.load_state_dict(record.read_final()["model"])
    batches = [(normalize(data.test_x[i:i + 1000], data.mean, data.std), data.test_y[i:i + 1000])
               for i in range(0, len(data.test_y), 1000)]
    features = predict(model, batches).features
    return {"run": run, "method": cfg.method, "beta": cfg.beta, "seed": cfg.seed,
            "live": int((features > 0).any(0).sum()), "dimensions": features.shape[1]}


if __name__ == "__main__":
    for name in sys.argv[2:]:
        print(json.dumps(live_dimensions(Path(sys.argv[1]), name)))
