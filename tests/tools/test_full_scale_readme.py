"""tools/full_scale_readme.py: README.md's full-scale tables are generated from the committed tables.

Only committed files are read (README.md, tables/paper/, reference_results/, the profiles); nothing trains.
"""

import re
import shutil
import statistics

import pandas as pd
import pytest

from tools import full_scale_readme as fsr


@pytest.fixture(scope="module")
def blocks():
    """The generated blocks, rendered once for the module."""
    return fsr.render()


def test_the_committed_readme_is_up_to_date(blocks):
    assert fsr.check(fsr.README, blocks) is None


@pytest.mark.parametrize("ours, paper, paper_std, fedavg, expected", [
    (97.0, 98.0, 0.2, (96.0, 97.0), fsr.REPRODUCED),  # within the paper's std + 1.5
    (96.3, 98.0, 0.2, (96.0, 97.0), fsr.REPRODUCED),  # 1.7 = 0.2 + 1.5: the edge counts
    (96.5, 98.0, None, (96.0, 97.0), fsr.REPRODUCED),  # no std: 1.5 alone
    ((96.40, 96.45, 96.5), 98.0, None, ((99.0, 98.9, 99.1), 97.0), fsr.NOT_REPRODUCED),  # no std, 1.51 off, FedAvg order broken
    ((90.69, 90.2, 91.1), 95.59, 0.05, ((95.58, 95.3, 95.9), 96.69), fsr.ORDERING),  # below FedAvg in both
    ((89.09, 88.5, 89.6), 95.56, 0.12, ((95.30, 95.1, 95.5), 94.77), fsr.NOT_REPRODUCED),  # above in the paper only
    ((95.16, 94.1, 96.2), 93.39, 0.21, ((95.37, 94.3, 96.4), 94.77), fsr.ORDERING_UNDECIDED),  # seeds overlap
    (90.69, 95.59, 0.05, (95.58, 96.69), fsr.ORDERING_UNDECIDED),  # one seed a side: no interval
    ((90.69, 91.0), 95.59, 0.05, ((90.8, 90.9), 95.59), fsr.ORDERING),  # level in the paper, undecided in ours
    (93.0, 96.0, 0.4, None, fsr.NOT_REPRODUCED),  # FedAvg itself, too far off
    (93.0, 96.0, 0.4, (None, 94.0), fsr.NO_BASELINE),  # our FedAvg not run: the ordering is unknown
])
def test_the_verdict_rule(ours, paper, paper_std, fedavg, expected):
    assert fsr.verdict(ours, paper, paper_std, fedavg) == expected


def test_a_stale_readme_is_detected(tmp_path, blocks):
    text = fsr.README.read_text(encoding="utf-8")
    for name in ("fedvls_table1", "pkd_table1"):
        block = fsr.block_of(text, name)
        ours = next(row.split("|")[3].strip() for row in block.splitlines() if row.startswith("| FedAvg"))
        number = re.search(r"\d+\.\d\d", ours).group()  # the first number of FedAvg's first "ours" cell
        typo = f"{float(number) + 0.01:.2f}"
        stale = tmp_path / f"README_{name}.md"
        stale.write_text(fsr.replace_block(text, name, block.replace(number, typo, 1)), encoding="utf-8")
        message = fsr.check(stale, blocks)
        assert message is not None and f"its {name} table differs" in message and "\n" not in message
    assert fsr.main(["--check", "--readme", str(tmp_path / "README_fedvls_table1.md")]) == 1


def test_write_fills_the_blocks_and_leaves_the_prose(tmp_path, blocks):
    readme = tmp_path / "README.md"
    begin, end = fsr.markers("pkd_table1")
    readme.write_text(f"prose 1.23\n{begin}\nold\n{end}\nmore prose\n", encoding="utf-8")
    fsr.write(readme, {"pkd_table1": blocks["pkd_table1"]})
    assert readme.read_text(encoding="utf-8") == f"prose 1.23\n{begin}\n{blocks['pkd_table1']}\n{end}\nmore prose\n"


def _stored_seeds(tmp_path, monkeypatch, cells):
    """The FedVLS tables with each MNIST cell of ``cells`` ({(method, beta): best accuracies (%) of
    seeds 0, 1, ...}) stored as those runs, the committed CSV holding their mean and population std."""
    tables = tmp_path / "tables"
    shutil.copytree(fsr.TABLES, tables)
    frame = pd.read_csv(tables / "fedvls_table1_vs_paper.csv")
    for (method, beta), values in cells.items():
        row = ((frame["method"] == method) & (frame["dataset"] == "mnist")
               & frame["setting"].str.endswith(f"beta={beta}"))
        std = round(statistics.pstdev(values), 2) if len(values) > 1 else float("nan")
        frame.loc[row, ["ours", "ours_std"]] = [round(statistics.fmean(values), 2), std]
    frame.to_csv(tables / "fedvls_table1_vs_paper.csv", index=False)
    real = fsr.stored_summaries

    def summaries(configs):
        values = cells.get((configs[0].method, configs[0].beta)) if configs and configs[0].dataset == "mnist" else None
        if values is None:
            return real(configs)
        return [{"best_accuracy": v / 100, "seed": cfg.seed} for v, cfg in zip(values, configs)]

    monkeypatch.setattr(fsr, "TABLES", tables)
    monkeypatch.setattr(fsr, "stored_summaries", summaries)
    return tables


def _fedavg_seeds(tmp_path, monkeypatch, values):
    """The FedVLS tables with FedAvg Dir(0.05) stored as seeds of ``values`` (best accuracy, %)."""
    return _stored_seeds(tmp_path, monkeypatch, {("fedavg", 0.05): values})


def test_a_cell_of_several_seeds_shows_mean_std_and_its_seed_count(tmp_path, monkeypatch):
    cells = {("fedavg", 0.05): [94.9, 95.1, 95.3], ("fedlc", 0.05): [80.0], ("fedprox", 0.05): [94.0, 95.0]}
    tables = _stored_seeds(tmp_path, monkeypatch, cells)  # one cell per seed count, whatever the store holds
    frame = pd.read_csv(tables / "fedvls_table1_vs_paper.csv")
    run_cells = int(frame.loc[frame["dataset"] == "mnist", "ours"].notna().sum())
    block = fsr.fedvls_block()
    assert "| FedAvg Dir(β=0.05) | 94.77 ± 0.44 | 95.10 ± 0.16 (3 seeds) | +0.33 | reproduced |" in block
    assert "| FedProx Dir(β=0.05) | 94.95 ± 0.24 | 94.50 ± 0.50 (2 seeds) |" in block
    assert "Ours mixes seed counts" in block
    single = re.search(r"(\d+) cells? one run \(seed 0\)", block)
    several = re.search(r"(\d+) cells? the mean ± population std over 3 seeds \(0, 1, 2\)", block)
    others = re.findall(r"(\d+) cells? the mean ± population std over 2 seeds \([\d, ]+\)", block)
    assert single and several and others and int(several[1]) >= 1
    assert int(single[1]) + int(several[1]) + sum(map(int, others)) == run_cells  # each cell counted once


def test_a_store_of_three_seeds_everywhere_says_so_in_one_sentence(tmp_path, monkeypatch):
    frame = pd.read_csv(fsr.TABLES / "fedvls_table1_vs_paper.csv")
    run = frame[(frame["dataset"] == "mnist") & frame["ours"].notna()]
    beta = run["setting"].str.extract(r"beta=([\d.]+)")[0].astype(float)
    seeds = {(m, b): [x - 0.5, x, x + 0.5] for m, b, x in zip(run["method"], beta, run["ours"])}
    _stored_seeds(tmp_path, monkeypatch, seeds)
    block = fsr.fedvls_block()
    assert "Ours mixes seed counts" not in block
    assert "each cell with a number is the mean ± population std over 3 seeds (0, 1, 2)" in block


def test_a_table_that_disagrees_with_the_reference_store_stops_the_tool(tmp_path, monkeypatch):
    tables = _fedavg_seeds(tmp_path, monkeypatch, [94.9, 95.1, 95.3])
    frame = pd.read_csv(tables / "fedvls_table1_vs_paper.csv")
    frame.loc[frame["ours"] == 95.1, "ours_std"] = float("nan")  # as if published from one seed
    frame.to_csv(tables / "fedvls_table1_vs_paper.csv", index=False)
    with pytest.raises(fsr.StaleTable, match="fedavg partition=dirichlet;beta=0.05.*3 run"):
        fsr.fedvls_block()


def test_worst_classes_read_as_names_and_a_missing_one_is_left_out(tmp_path, monkeypatch):
    tables = tmp_path / "tables"
    shutil.copytree(fsr.TABLES, tables)
    worst = pd.read_csv(tables / "pkd_table1_4_worst_class.csv")
    worst = worst[worst["dataset"] == "mnist"]  # digit names only: pandas would read them as numbers
    worst.loc[(worst["label"] == "pkd") & (worst["table"] == 1) & worst["setting"].str.endswith("clients=10"),
              "paper"] = None  # a paper that names no worst class here
    worst.to_csv(tables / "pkd_table1_4_worst_class.csv", index=False)
    monkeypatch.setattr(fsr, "TABLES", tables)
    rows = {line.split(" | ")[0]: line for line in fsr.pkd_block().splitlines() if line.startswith("| ")}
    assert "| 99.73 / 99.28 / 98.31, worst 9 | 99.74 / 99.01 / 98.61, worst 9 |" in rows["| FedAvg, MNIST, 10 clients"]
    assert "| 99.73 / 99.32 / 98.71 | 99.59 / 99.04 / 98.41, worst 9 |" in rows["| PKD, MNIST, 10 clients"]


def test_the_pkd_block_lists_only_the_cells_run_and_names_the_others_in_one_line():
    cells = fsr.pkd_cells()
    block = fsr.pkd_block()
    rows = {cell: line for cell, line in _rows(block).items() if cell != "cell"}  # the header left out
    not_run = [c for c in cells if c.ours is None and not c.diverged]
    assert len(rows) == len(cells) - len(not_run) > 0
    assert not any(fsr.NOT_RUN in line for line in rows.values())
    last = block.splitlines()[-1]
    assert last.startswith("Not run: ") == bool(not_run)
    for cell in not_run:
        assert fsr._setting_text(cell.column) in last and fsr.display_name(cell.method) in last
    if not_run:
        assert "CIFAR-10 (100 clients)" in last  # a comma-free name, so the list reads unambiguously


def test_the_parameters_a_table_was_published_with_choose_its_runs(tmp_path, monkeypatch):
    import json

    tables = tmp_path / "tables"
    shutil.copytree(fsr.TABLES, tables)
    index = json.loads((tables / "index.json").read_text())
    index["fedvls_table1_vs_paper.csv"]["parameters"] = {"betas": [0.5], "seeds": [0, 1]}
    (tables / "index.json").write_text(json.dumps(index))
    monkeypatch.setattr(fsr, "TABLES", tables)
    runs = fsr.declared_runs(fsr.FEDVLS_NOTEBOOK)
    assert {setting for _, dataset, setting in runs if dataset == "mnist"} == {"partition=dirichlet;beta=0.5"}
    assert all([cfg.seed for cfg in configs] == [0, 1] for configs in runs.values())


def test_two_configs_of_one_cell_and_seed_are_refused_not_counted_as_seeds(monkeypatch):
    declare = fsr.fedvls.table1_4_dirichlet

    def with_a_second_lambda(params):
        configs = declare(params)
        vls = next(c for c in configs if c.method == "fedvls")
        return [*configs, vls.replace(method_args={**vls.method_args, "lam": 1.0})]

    monkeypatch.setattr(fsr.fedvls, "table1_4_dirichlet", with_a_second_lambda)
    cell = "fedvls mnist partition=dirichlet;beta=0.5"
    with pytest.raises(fsr.StaleTable, match=rf"{cell} holds 4 configs of seeds \[0, 1, 2, 0\]"):
        fsr.declared_runs(fsr.FEDVLS_NOTEBOOK)


def _diverge(tmp_path, monkeypatch, notebook, cell, seed):
    """Copies of the tables and of the reference store in which ``cell`` (method, dataset,
    setting) of ``notebook`` has its run of ``seed`` diverged and its committed numbers NaN, as
    a table republished from that store says; returns the tables' folder."""
    tables, store = tmp_path / "tables", tmp_path / "reference_results"
    shutil.copytree(fsr.TABLES, tables)
    shutil.copytree(fsr.STORE, store)
    monkeypatch.setattr(fsr, "TABLES", tables)
    monkeypatch.setattr(fsr, "STORE", store)
    config = next(c for c in fsr.declared_runs(notebook)[cell] if c.seed == seed)
    record = fsr.RunRecord(store / config.hash())
    assert record.complete  # a stored run of the committed table, now diverged
    record.write_summary({**record.read_summary(), "diverged": True})
    record.seal()  # stored that way, not edited afterwards
    source = tables / fsr.SOURCES[notebook]
    frame = pd.read_csv(source)
    method, dataset, setting = cell
    cell_setting = frame["setting"].str.replace(r";metric=\w+$", "", regex=True)  # PKD: one row per metric
    row = (frame["method"] == method) & (frame["dataset"] == dataset) & (cell_setting == setting)
    frame.loc[row, ["ours", "ours_std", "difference"]] = float("nan")
    frame.to_csv(source, index=False)
    return tables


def _rows(block):
    """The block's table rows by their cell."""
    return {line.split(" | ")[0][2:]: line for line in block.splitlines() if line.startswith("| ")}


FEDAVG_005 = ("fedavg", "mnist", "partition=dirichlet;beta=0.05")


def test_a_cell_with_a_diverged_seed_shows_no_number_and_says_diverged(tmp_path, monkeypatch):
    already = sum(1 for cell in fsr.fedvls_cells() if cell.diverged)  # the store's own (FedGF at Dir(0.05))
    _diverge(tmp_path, monkeypatch, fsr.FEDVLS_NOTEBOOK, FEDAVG_005, seed=2)
    block = fsr.fedvls_block()
    rows = _rows(block)
    assert rows["FedAvg Dir(β=0.05)"] == "| FedAvg Dir(β=0.05) | 94.77 ± 0.44 | diverged (seed 2) |  | diverged (1 of 3 seeds) |"
    assert rows["FedProx Dir(β=0.05)"].endswith(f"| {fsr.REPRODUCED} |")  # within the tolerance: no FedAvg needed
    assert rows["FedLC Dir(β=0.05)"].endswith(f"| {fsr.FEDAVG_DIVERGED} |")  # its ordering needs FedAvg's number
    diverged = already + 1
    assert f"{diverged} cell{'s' * (diverged > 1)} with a diverged seed show{'s' * (diverged == 1)} no number." in block
    assert "over 3 seeds" in block  # FedVLS Dir(0.05) still has its three seeds
    assert "FedAvg at" not in block.split("Not run:")[-1]  # diverged is not "not run"


def test_a_number_committed_for_a_cell_with_a_diverged_seed_is_stale(tmp_path, monkeypatch):
    tables = _diverge(tmp_path, monkeypatch, fsr.FEDVLS_NOTEBOOK, FEDAVG_005, seed=2)
    shutil.copy(fsr.ROOT / "tables" / "paper" / "fedvls_table1_vs_paper.csv", tables)  # the mean over 3 seeds
    with pytest.raises(fsr.StaleTable, match=r"beta=0\.05: the committed table says 95\.37 ± 1\.03, its 3 run\(s\) "
                                             r"in reference_results/ give diverged \(1 diverged\)"):
        fsr.fedvls_block()


def test_a_diverged_pkd_cell_shows_no_class_accuracies(tmp_path, monkeypatch):
    _diverge(tmp_path, monkeypatch, fsr.PKD_NOTEBOOK, ("fedavg", "mnist", "partition=balanced;clients=10"), seed=0)
    block = fsr.pkd_block()
    assert _rows(block)["FedAvg, MNIST, 10 clients"] == \
        "| FedAvg, MNIST, 10 clients | 99.73 / 99.28 / 98.31, worst 9 | diverged (seed 0) |  | diverged (1 of 1 seed) |"
    assert _rows(block)["PKD, MNIST, 10 clients"].endswith(f"| {fsr.REPRODUCED} |")
    assert "Ours: each cell with a number is one run (seed 0). 1 cell with a diverged seed shows no number." in block


def test_the_verdict_counts_the_diverged_seeds_of_the_stored_ones():
    cell = fsr.Cell("fedavg", "Dir(0.1)", 96.0, None, None, None, seeds=(0,), diverged=(1, 2))
    assert fsr.diverged_verdict(cell) == "diverged (2 of 3 seeds)"
    assert fsr.ours_text(cell, "ignored") == "diverged (seed 1, 2)"


def test_fedlmd_table3_judges_accuracy_shows_speedup_and_leaves_a_method_the_paper_lacks_unjudged():
    every = fsr.fedlmd_cells()
    cells = {c.method: c for c in every if c.column == "MNIST, shards, s=2"}  # a column with all four run
    assert cells["fedlmd_tf"].paper is None and cells["fedlmd_tf"].verdict == fsr.NOT_IN_PAPER
    assert cells["fedavg"].verdict in (fsr.REPRODUCED, fsr.NOT_REPRODUCED)  # FedAvg has no ordering to keep
    assert re.search(r"\(\d+\.\d\dx\)$", cells["fedlmd"].ours_text)  # the speedup beside the accuracy
    # the columns name their partition in the reporting layer's words, the one place a setting is written
    assert {c.column.split(", ", 1)[1] for c in every} <= {"shards, s=2", "Dir(β=0.05)"}
    assert all(c.verdict in ("", fsr.NOT_IN_PAPER) for c in every if c.ours_text == fsr.NOT_RUN)  # nothing judged unrun


def test_the_fedlmd_block_lists_only_the_cells_run_and_names_the_others_in_the_not_run_line():
    cells = fsr.fedlmd_cells()
    block = fsr.fedlmd_block()
    rows = {cell: line for cell, line in _rows(block).items() if cell != "cell"}
    unrun = [c for c in cells if c.ours is None]
    assert len(rows) == len(cells) - len(unrun) > 0
    assert not any(fsr.NOT_RUN in line for line in rows.values())
    last = block.splitlines()[-1]
    assert ("in the columns run, " in last) == bool(unrun)
    for cell in unrun:
        assert f"{fsr.display_name(cell.method)} at {cell.column}" in last
