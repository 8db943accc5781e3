"""Run the FedVLS authors' released code at the FedVLS Table 1 MNIST cell and record what it gives (issue 48).

Given the user's own clone of krumpguo/FedVLS (the project ships none of its code), this script

1. checks and records the clone's commit (7d8163f unless ``--any-commit``);
2. exports that commit's ``system/`` folder to a scratch folder (the clone stays untouched);
3. makes there exactly two edits, each recorded as a unified diff (written next to the results) and
   its sha256 (in every results line):
   - ``client_device``: the FedVLS client's ``.cuda()`` calls become ``.to(self.device)``, so it runs on
     the run's device (the CPU here);
   - ``fedavg_server``: the released FedAvg server cannot run (its round loop reads
     ``self.party2loaders`` and ``self.test_dl`` and calls ``compute_accuracy_per_class``, none of which
     exist, and it never appends to ``rs_test_acc``, whose max it prints); two lines are changed and one
     added so it trains and evaluates as the FedVLS server does;
4. runs their ``main.py`` (their own MNIST generator inside it: train and test pooled to 70,000
   images, split 75/25, Dir(alpha) redrawn until every client holds >= 256 samples) for each method,
   with their ``-t TRIALS`` loop, single thread, fed from the offline MNIST files;
5. for every (method, trial) writes one JSON line: their metric (the best and last of the per-round
   accuracies their server keeps, scored on the 75 % training pool as their code does), and the accuracy
   of the final global model on the standard MNIST 10k test set and on their held-out 25 %.

The run is observed, not changed: a small driver wraps the servers' ``train`` and the data generator
from outside to keep the per-round list, the final model and the generated loaders, and evaluates with
plain tensor batches with all random states saved and restored, so trial t of the ``-t`` loop draws the
same split, partition and initialisation as an unobserved run would.

    FEDLIB_DATA=/work/shared/datasets OMP_NUM_THREADS=1 .venv/bin/python \
        tools/probes/fedvls_authors_code/run.py --checkout /tmp/fedvls_authors --trials 3 --rounds 50
"""

from __future__ import annotations

import argparse
import difflib
import hashlib
import io
import json
import os
import re
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

EXPECTED_COMMIT = "7d8163f"
HERE = Path(__file__).resolve().parent

# The cell of FedVLS Table 1, MNIST (issue 48): MLP 784-200-200-10 (their `dnn`), 10 clients, all joining,
# E = 5 local epochs, batch 64, lr 0.01, lambda 0.1, Dir(0.05).
CELL = {"dataset": "mnist", "model": "dnn", "num_clients": 10, "local_epochs": 5, "batch_size": 64,
        "lr": 0.01, "lamda": 0.1, "alpha": 0.05, "partition": "noniid", "join_ratio": 1.0, "device": "cpu"}

CLIENT_VLS = "system/flcore/clients/clientvls.py"
SERVER_AVG = "system/flcore/servers/serveravg.py"

# (old, new, how many times old must occur)
CLIENT_DEVICE_EDITS = [(".cuda()", ".to(self.device)", 5)]
FEDAVG_SERVER_EDITS = [
    ("client.train(self.party2loaders[client.id])",
     "client.train(self.party2loaders_train[client.id])", 1),
    ("test_acc, test_loss, test_acc_per_class  = self.compute_accuracy_per_class(self.global_model, self.test_dl)",
     "test_acc, test_loss  = self.compute_accuracy(self.global_model, self.party2loaders_test)", 1),
    ("            print('>> Aggregated global Model Test Accuracy : %f' % test_acc)\n",
     "            print('>> Aggregated global Model Test Accuracy : %f' % test_acc)\n"
     "            self.rs_test_acc.append(test_acc)\n", 1),
]


class EditError(RuntimeError):
    """The checkout does not hold the text an edit expects."""


def apply_edit(root: Path, relpath: str, replacements: list[tuple[str, str, int]]) -> str:
    """Replace each expected text in root/relpath, in place; return the unified diff (a/ b/ paths)."""
    path = Path(root) / relpath
    if not path.is_file():
        raise EditError(f"{relpath}: file not found in the checkout (expected FedVLS at {EXPECTED_COMMIT})")
    before = path.read_text()
    after = before
    for old, new, count in replacements:
        found = after.count(old)
        if found != count:
            raise EditError(f"{relpath}: expected {count} occurrence(s) of {old.strip()!r}, found {found} "
                            f"(expected FedVLS at {EXPECTED_COMMIT}, or already edited)")
        after = after.replace(old, new)
    path.write_text(after)
    return "".join(difflib.unified_diff(before.splitlines(keepends=True), after.splitlines(keepends=True),
                                        fromfile=f"a/{relpath}", tofile=f"b/{relpath}"))


def edit_client_device(root: Path) -> str:
    """The FedVLS client's five .cuda() calls go to the run's device."""
    return apply_edit(root, CLIENT_VLS, CLIENT_DEVICE_EDITS)


def edit_fedavg_server(root: Path) -> str:
    """The FedAvg server's round loop trains and evaluates as the FedVLS server's does (two lines changed, one added)."""
    return apply_edit(root, SERVER_AVG, FEDAVG_SERVER_EDITS)


def sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def checkout_commit(checkout: Path) -> tuple[str, bool]:
    """The clone's HEAD commit and whether its work tree differs from it (it is exported from HEAD anyway)."""
    head = subprocess.run(["git", "-C", str(checkout), "rev-parse", "HEAD"], capture_output=True, text=True,
                          check=True).stdout.strip()
    dirty = subprocess.run(["git", "-C", str(checkout), "status", "--porcelain"], capture_output=True, text=True,
                           check=True).stdout.strip() != ""
    return head, dirty


def export_system(checkout: Path, commit: str, dest: Path) -> None:
    """The committed system/ folder of the clone, written under dest (git archive: HEAD, not the work tree)."""
    tar = subprocess.run(["git", "-C", str(checkout), "archive", "--format=tar", commit, "system"],
                         capture_output=True, check=True).stdout
    with tarfile.open(fileobj=io.BytesIO(tar)) as archive:
        archive.extractall(dest, filter="data")


def main_argv(method: str, rounds: int, trials: int, datadir: str) -> list[str]:
    """Their main.py's command line for the cell."""
    c = CELL
    return ["-data", c["dataset"], "-m", c["model"], "-algo", method, "-gr", str(rounds), "-ls", str(c["local_epochs"]),
            "-lbs", str(c["batch_size"]), "-lr", str(c["lr"]), "-lam", str(c["lamda"]), "-nc", str(c["num_clients"]),
            "-jr", str(c["join_ratio"]), "-al", str(c["alpha"]), "-partition", c["partition"], "-dev", c["device"],
            "-t", str(trials), "-dd", datadir]


def result_line(*, method: str, trial: int, commit: str, rounds: int, trials: int, argv: list[str],
                digests: dict[str, str], record: dict) -> dict:
    """One results line: settings, provenance and the numbers of one (method, trial)."""
    curve = [round(float(a), 6) for a in record["their_curve"]]
    return {
        "probe": "fedvls_authors_code", "method": method, "trial": trial, "commit": commit,
        "scale": "full" if rounds >= 50 else "reduced",
        "settings": dict(CELL, rounds=rounds, trials=trials, threads=1, main_argv=argv),
        "edits_sha256": digests,
        "their_best": max(curve) if curve else None,
        "their_final": curve[-1] if curve else None,
        "their_curve": curve,
        "their_printed_best": record.get("their_printed_best"),
        "test10k_final": record["test10k_final"],
        "heldout25_final": record["heldout25_final"],
        "client_sizes": record["client_sizes"],
        "train_s": round(record["train_s"], 1),
    }


# The driver runs inside the scratch copy: it wraps from outside and then runs their main.py as __main__.
DRIVER = r'''
import json, os, random, runpy, sys, time
import numpy as np
import torch

torch.set_num_threads(1)
out_dir, test_root = sys.argv[1], sys.argv[2]
sys.argv = ["main.py"] + sys.argv[3:]
sys.path.insert(0, os.getcwd())
# packages their code imports that the project's environment lacks: an extra folder, after everything else
if os.environ.get("FEDVLS_DEPS"):
    sys.path.append(os.environ["FEDVLS_DEPS"])
# cv2 is imported by their data_aug_utils.py and never called on this path: an empty stand-in if absent
try:
    import cv2  # noqa: F401
except ImportError:
    import types
    sys.modules["cv2"] = types.ModuleType("cv2")
    print("probe driver: cv2 absent, an empty stand-in module is used (never called on the MNIST path)")

import data.generate_mnist as gen
from flcore.servers.serveravg import FedAvg
from flcore.servers.servervls import FedVLS

captured = {}
original_generate = gen.generate_mnist

def generate(*args, **kwargs):
    loaders = original_generate(*args, **kwargs)
    captured["loaders"] = loaders
    return loaders

gen.generate_mnist = generate


def accuracy(model, x, y, device):
    was_training = model.training
    model.eval()
    correct = 0
    with torch.no_grad():
        for start in range(0, len(y), 1000):
            out = model(x[start:start + 1000].to(device))
            correct += (out.argmax(1).cpu() == y[start:start + 1000]).sum().item()
    model.train(was_training)
    return correct / len(y)


def mnist_test():
    import torchvision, torchvision.transforms as T
    tf = T.Compose([T.ToTensor(), T.Normalize([0.5], [0.5])])
    test = torchvision.datasets.MNIST(root=test_root, train=False, download=False)
    x = torch.stack([tf(test[i][0]) for i in range(len(test))])
    return x, test.targets.clone()


def observed(train):
    def wrapper(self, *args, **kwargs):
        started = time.time()
        train(self, *args, **kwargs)
        states = (random.getstate(), np.random.get_state(), torch.get_rng_state())
        party2loaders, heldout_loader, _pool_loader = captured["loaders"]
        held = heldout_loader.dataset  # their 25 %, a list of (x, y); all of it, no drop_last
        hx = torch.stack([p[0] for p in held]); hy = torch.stack([p[1] for p in held])
        tx, ty = mnist_test()
        record = {"trial": self.times, "their_curve": [float(a) for a in self.rs_test_acc],
                  "test10k_final": accuracy(self.global_model, tx, ty, self.device),
                  "heldout25_final": accuracy(self.global_model, hx, hy, self.device),
                  "client_sizes": [len(party2loaders[i].dataset) for i in range(self.num_clients)],
                  "train_s": time.time() - started}
        torch.save(self.global_model.state_dict(), os.path.join(out_dir, f"final_trial{self.times}.pt"))
        with open(os.path.join(out_dir, "trials.jsonl"), "a") as f:
            f.write(json.dumps(record) + "\n")
        random.setstate(states[0]); np.random.set_state(states[1]); torch.set_rng_state(states[2])
    return wrapper

FedAvg.train = observed(FedAvg.train)
FedVLS.train = observed(FedVLS.train)
runpy.run_path("main.py", run_name="__main__")
'''


def data_root() -> Path:
    """The folder holding MNIST/raw (torchvision layout): $FEDLIB_DATA or /work/shared/datasets."""
    root = Path(os.environ.get("FEDLIB_DATA", "/work/shared/datasets")).resolve()
    if not (root / "MNIST" / "raw" / "t10k-images-idx3-ubyte").is_file():
        sys.exit(f"MNIST not found under {root}/MNIST/raw (set FEDLIB_DATA to the folder holding MNIST/raw)")
    return root


def run_method(system: Path, method: str, rounds: int, trials: int, mnist_root: Path, work: Path, deps=None) -> tuple[list[dict], list[str]]:
    """Their main.py for one method, -t trials; the per-trial records the driver wrote, each with its printed best."""
    out_dir = work / method
    out_dir.mkdir(parents=True)
    # their generator reads MNIST from DATADIR/rawdata with download=True: point that at the offline files
    datadir = work / "datadir"
    datadir.mkdir(exist_ok=True)
    if not (datadir / "rawdata").exists():
        (datadir / "rawdata").symlink_to(mnist_root)
    argv = main_argv(method, rounds, trials, str(datadir) + "/")
    driver = system / "_probe_driver.py"
    driver.write_text(DRIVER)
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", PYTHONUNBUFFERED="1")
    if deps:
        env["FEDVLS_DEPS"] = str(Path(deps).resolve())
    log_path = out_dir / "main.log"
    print(f"[{method}] {' '.join(argv)}  (log: {log_path})", flush=True)
    with open(log_path, "w") as log:
        proc = subprocess.run([sys.executable, str(driver), str(out_dir), str(mnist_root)] + argv,
                              cwd=system, stdout=log, stderr=subprocess.STDOUT, env=env)
    if proc.returncode != 0:
        tail = log_path.read_text().splitlines()[-15:]
        sys.exit(f"[{method}] their main.py failed (rc {proc.returncode}); last lines of {log_path}:\n" + "\n".join(tail))
    log = log_path.read_text()
    printed = [float(v) for v in re.findall(r"Best accuracy\.\n(\S+)", log)]
    records = [json.loads(l) for l in (out_dir / "trials.jsonl").read_text().splitlines()]
    for record, best in zip(records, printed):
        record["their_printed_best"] = best
    return records, argv


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--checkout", required=True, type=Path, help="your clone of krumpguo/FedVLS")
    p.add_argument("--trials", type=int, default=3, help="their -t loop (each trial draws a new split/partition)")
    p.add_argument("--rounds", type=int, default=50)
    p.add_argument("--methods", nargs="+", default=["FedAvg", "FedVLS"], choices=["FedAvg", "FedVLS"])
    p.add_argument("--out", type=Path, default=HERE / "results.jsonl", help="appended to")
    p.add_argument("--scratch", type=Path, default=None, help="scratch folder (default: a new temporary one)")
    p.add_argument("--deps", type=Path, default=None,
                   help="a folder of packages their code imports and this environment lacks (h5py, calmsize), e.g. "
                        "from `pip install --target DIR h5py calmsize`; appended to their sys.path")
    p.add_argument("--any-commit", action="store_true", help=f"run even if HEAD is not {EXPECTED_COMMIT}")
    a = p.parse_args()

    mnist_root = data_root()
    commit, dirty = checkout_commit(a.checkout)
    if not commit.startswith(EXPECTED_COMMIT) and not a.any_commit:
        sys.exit(f"{a.checkout} is at {commit[:12]}, not {EXPECTED_COMMIT} (check out {EXPECTED_COMMIT} or pass --any-commit)")
    if a.scratch is not None:
        Path(a.scratch).mkdir(parents=True, exist_ok=True)  # a scratch folder named but not there yet
    work = Path(tempfile.mkdtemp(prefix="fedvls_authors_", dir=a.scratch))
    export_system(a.checkout, commit, work / "repo")
    root = work / "repo"
    try:
        diffs = {"client_device": edit_client_device(root), "fedavg_server": edit_fedavg_server(root)}
    except EditError as e:
        sys.exit(f"edit refused: {e}")
    digests = {name: sha256(text) for name, text in diffs.items()}
    diff_path = work / "edits.diff"  # their code's lines: kept in the scratch folder, never in this repository
    diff_path.write_text(f"# FedVLS {commit}: the two edits run.py makes (sha256 in each results line)\n"
                         + "".join(f"# {n} sha256 {digests[n]}\n{diffs[n]}" for n in diffs))
    print(f"commit {commit}{' (work tree dirty; HEAD exported)' if dirty else ''}; scratch {work}; diffs {diff_path}")

    for method in a.methods:
        started = time.time()
        records, argv = run_method(root / "system", method, a.rounds, a.trials, mnist_root, work, a.deps)
        wall = time.time() - started
        with open(a.out, "a") as f:
            for record in records:
                line = result_line(method=method, trial=record["trial"], commit=commit, rounds=a.rounds,
                                   trials=a.trials, argv=argv, digests=digests, record=record)
                f.write(json.dumps(line) + "\n")
                print(f"[{method}] trial {line['trial']}: their best {line['their_best']:.4f} (printed "
                      f"{line['their_printed_best']}), final {line['their_final']:.4f}, 10k test "
                      f"{line['test10k_final']:.4f}, held-out 25 % {line['heldout25_final']:.4f}; "
                      f"{wall:.0f} s in all", flush=True)


if __name__ == "__main__":
    main()
