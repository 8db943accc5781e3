"""tools/snapshot_dry_run.py counts only the rows of configs the profile still declares."""

import pandas as pd

from fedlib.core.config import RunConfig
from fedlib.orchestration import dry_run
from tools import snapshot_dry_run


def test_rows_of_configs_no_longer_declared_are_left_out_and_reported(tmp_path, monkeypatch):
    base = RunConfig(dataset="digits", model="mlp", partition="dirichlet", beta=0.5, clients=4, rounds=1)
    declared = {cfg.hash(): (cfg, ["nb"]) for cfg in
                [base, base.replace(seed=1), base.replace(method="fedprox"), base.replace(beta=0.1)]}
    stale = base.replace(beta=0.3)  # a config the profile declared before its settings changed
    source = tmp_path / "output" / "dry_run"
    source.mkdir(parents=True)
    for cfg, status in ((base, "ok"), (base.replace(method="fedprox"), "error"), (stale, "error")):
        dry_run.append_row(source / "paper.csv", {"hash": cfg.hash(), "dataset": "digits", "method": cfg.method,
                                                  "notebooks": "nb", "status": status, "error": "boom"})
    pd.DataFrame({"status": ["ok"]}).to_csv(source / "paper_partitions.csv", index=False)
    monkeypatch.setattr(snapshot_dry_run, "ROOT", tmp_path)

    target = snapshot_dry_run.snapshot("paper", declared)

    kept = pd.read_csv(target / "paper.csv", dtype=str)
    assert sorted(kept["hash"]) == sorted([base.hash(), base.replace(method="fedprox").hash()])
    readme = (target / "README.md").read_text()
    # 3 rows a full dry run has: the two seeds of `base` share one; 1 stale row dropped
    assert "2 of 3 rows so far (1 rows of configs the profile no longer declares left out)" in readme
    assert "1 ok, 1 errors" in readme and stale.hash() not in readme
    assert "snapshot_dry_run.py --profile paper\n" in readme
