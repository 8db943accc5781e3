"""tools/probes/fedvls_authors_code/run.py: its two edits and its results lines, on a tiny fake checkout
(written here: the project holds none of the authors' code, and CI has no clone of it)."""

import importlib.util
import json
from pathlib import Path

import pytest

RUN = Path(__file__).resolve().parents[2] / "tools" / "probes" / "fedvls_authors_code" / "run.py"


def load_run():
    spec = importlib.util.spec_from_file_location("fedvls_authors_code_run", RUN)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def fake_checkout(root: Path, run) -> None:
    """Files holding exactly the texts the edits expect, among filler lines."""
    client = root / run.CLIENT_VLS
    client.parent.mkdir(parents=True)
    client.write_text("class C:\n" + "".join(f"    a{i} = t{i}.cuda()\n" for i in range(5)))
    server = root / run.SERVER_AVG
    server.parent.mkdir(parents=True)
    server.write_text("class S:\n    def train(self):\n        for round in range(3):\n"
                      + "".join(f"            {old.strip()}\n" for old, _, _ in run.FEDAVG_SERVER_EDITS)
                      + "            self.Budget.append(0)\n")


def test_the_edits_apply_once_and_record_a_diff(tmp_path):
    run = load_run()
    fake_checkout(tmp_path, run)
    client_diff = run.edit_client_device(tmp_path)
    server_diff = run.edit_fedavg_server(tmp_path)
    client = (tmp_path / run.CLIENT_VLS).read_text()
    server = (tmp_path / run.SERVER_AVG).read_text()
    assert ".cuda()" not in client and client.count(".to(self.device)") == 5
    assert "self.party2loaders_train[client.id]" in server
    assert "self.compute_accuracy(self.global_model, self.party2loaders_test)" in server
    assert "compute_accuracy_per_class" not in server and "self.test_dl" not in server
    assert "            self.rs_test_acc.append(test_acc)\n" in server
    assert client_diff.startswith(f"--- a/{run.CLIENT_VLS}\n+++ b/{run.CLIENT_VLS}\n")
    assert sum(line.startswith("+") and not line.startswith("+++") for line in client_diff.splitlines()) == 5
    added = [line for line in server_diff.splitlines() if line.startswith("+") and not line.startswith("+++")]
    removed = [line for line in server_diff.splitlines() if line.startswith("-") and not line.startswith("---")]
    assert len(added) == 3 and len(removed) == 2  # two lines changed, one added
    assert len(run.sha256(client_diff)) == 64


def test_a_second_application_is_refused_with_one_clear_line(tmp_path):
    run = load_run()
    fake_checkout(tmp_path, run)
    run.edit_client_device(tmp_path)
    run.edit_fedavg_server(tmp_path)
    for edit in (run.edit_client_device, run.edit_fedavg_server):
        with pytest.raises(run.EditError) as refused:
            edit(tmp_path)
        message = str(refused.value)
        assert "\n" not in message and "7d8163f" in message and "found 0" in message


def test_a_checkout_that_differs_is_refused_and_left_unchanged(tmp_path):
    run = load_run()
    fake_checkout(tmp_path, run)
    client = tmp_path / run.CLIENT_VLS
    client.write_text(client.read_text() + "    b = u.cuda()\n")  # six calls, not five
    before = client.read_text()
    with pytest.raises(run.EditError, match=r"expected 5 occurrence\(s\) of '\.cuda\(\)', found 6"):
        run.edit_client_device(tmp_path)
    assert client.read_text() == before
    with pytest.raises(run.EditError, match="file not found"):
        run.edit_fedavg_server(tmp_path / "elsewhere")


def test_a_results_line_carries_settings_provenance_and_numbers():
    run = load_run()
    argv = run.main_argv("FedVLS", 2, 1, "/data/")
    assert argv[argv.index("-algo") + 1] == "FedVLS" and argv[argv.index("-lam") + 1] == "0.1"
    assert argv[argv.index("-ls") + 1] == "5" and argv[argv.index("-al") + 1] == "0.05"
    assert argv[argv.index("-dev") + 1] == "cpu" and argv[argv.index("-t") + 1] == "1"
    record = {"trial": 0, "their_curve": [0.5, 0.7, 0.6], "their_printed_best": 0.7, "test10k_final": 0.61,
              "heldout25_final": 0.6, "client_sizes": [300, 400], "train_s": 12.34}
    line = run.result_line(method="FedVLS", trial=0, commit="7d8163f" + "0" * 33, rounds=2, trials=1, argv=argv,
                           digests={"client_device": "a" * 64, "fedavg_server": "b" * 64}, record=record)
    assert json.loads(json.dumps(line)) == line
    assert line["scale"] == "reduced" and line["their_best"] == 0.7 and line["their_final"] == 0.6
    assert line["settings"]["rounds"] == 2 and line["settings"]["lamda"] == 0.1 and line["settings"]["threads"] == 1
    assert set(line["edits_sha256"]) == {"client_device", "fedavg_server"}
    full = run.result_line(method="FedAvg", trial=1, commit="c", rounds=50, trials=3, argv=argv, digests={},
                           record=record)
    assert full["scale"] == "full"
