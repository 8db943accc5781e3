"""The teacher's pack answers from real runs: the numbers its answer key quotes for step 1 are
those of the committed lesson runs of getting_started."""

import re
from pathlib import Path

import pytest

from fedlib import store
from fedlib.orchestration import experiments
from fedlib.paper.grids import run_config
from tests.helpers import notebook_parameters

ROOT = Path(__file__).resolve().parents[2]
PACK = ROOT / "teaching" / "README.md"


def answer(number: int) -> str:
    """The text of answer ``number`` of the pack's answer key."""
    key = PACK.read_text(encoding="utf-8").split("### Answer key", 1)[1]
    found = re.search(rf"^{number}\. (.*?)(?=^\d+\. |^## |\Z)", key, flags=re.M | re.S)
    assert found, f"answer {number} missing from {PACK.name}"
    return " ".join(found.group(1).split())


def lesson_summaries(tmp_path: Path) -> dict[str, dict]:
    """Summary of the committed lesson run of each method getting_started compares, built the way
    the notebook builds its configs."""
    p = notebook_parameters("getting_started", "lesson", tmp_path)
    base = run_config(p, dataset=p["dataset"], model=p["model"], partition="dirichlet", beta=p["beta"],
                      clients=p["clients"], rounds=p["rounds"], local_epochs=p["local_epochs"],
                      batch_size=p["batch_size"], lr=p["lr"], momentum=p["momentum"],
                      max_train_samples=p["max_train_samples"], results_dir=str(tmp_path / "results"))
    summaries = {}
    for cfg in experiments.grid(base, method=["fedavg", "fedprox"], seed=p["seeds"][:1]):
        if cfg.method == "fedprox":
            cfg = cfg.replace(method_args={"mu": p["prox_mu"]})
        record = store.served_record(cfg, tmp_path / "results")
        if record is None:
            pytest.skip(f"the lesson run {cfg.hash()} is not committed")
        summaries[cfg.method] = record.read_summary()
    return summaries


def test_answer_one_quotes_the_lesson_runs(tmp_path):
    text = answer(1)
    summaries = lesson_summaries(tmp_path)
    fedavg, fedprox = (100 * summaries[m]["final_accuracy"] for m in ("fedavg", "fedprox"))
    assert f"FedAvg {fedavg:.2f} %, FedProx {fedprox:.2f} % ({fedprox - fedavg:+.2f})" in text
    names = summaries["fedavg"]["class_names"]
    for method in ("fedavg", "fedprox"):
        accuracy = summaries[method]["class_accuracy"]
        weakest = sorted(range(len(names)), key=lambda c: accuracy[c])[:3]
        for c in weakest:
            assert f"'{names[c]}'" in text, f"{method}'s weak class {names[c]} is not in answer 1"
            assert f"{100 * accuracy[c]:.1f}" in text, f"{method}'s {names[c]} at {100 * accuracy[c]:.1f} % is not quoted"


def test_every_question_has_an_answer():
    questions = PACK.read_text(encoding="utf-8").split("### Questions", 1)[1].split("### Answer key", 1)[0]
    count = len(re.findall(r"^\d+\. ", questions, flags=re.M))
    assert count >= 5
    for number in range(1, count + 1):
        assert answer(number)


def test_the_pack_links_resolve():
    for target in re.findall(r"\]\(([^)#]+)", PACK.read_text(encoding="utf-8")):
        if not target.startswith("http"):
            assert (PACK.parent / target).exists(), f"{PACK.name} links to {target}, which does not exist"
