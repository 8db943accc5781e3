"""The transcribed paper numbers (fedlib/reporting/paper_results) are well formed and load correctly."""

import csv
import math

import pandas as pd
import pytest

from fedlib.errors import FedlibError
from fedlib.reporting.paper_numbers import (COLUMNS, PAPERS, RESULTS_DIR, conventions, load_paper_results,
                                  parse_setting, table_files)

# Every table issue 5 names, as (paper, table number); FedVLS's round table is its Table 16.
EXPECTED_TABLES = (
    [("feded", n) for n in range(1, 8)] + [("fedvls", n) for n in (1, 2, 3, 4, 5, 6, 16)]
    + [("pkd", n) for n in range(1, 11)] + [("fedlmd", n) for n in range(1, 6)]
    + [("fedcsd", n) for n in range(1, 5)])
KEY = ["paper", "table", "method", "dataset", "setting"]
METHOD_CHARS = set("abcdefghijklmnopqrstuvwxyz0123456789_+")


@pytest.fixture(scope="module")
def results() -> pd.DataFrame:
    return load_paper_results()


def test_every_named_table_has_its_file():
    names = {path.name for path in table_files()}
    expected = {f"{paper}_table{number}.csv" for paper, number in EXPECTED_TABLES}
    assert expected <= names, f"missing: {sorted(expected - names)}"


@pytest.mark.parametrize("path", table_files(), ids=lambda path: path.name)
def test_file_has_exactly_the_columns_and_its_own_rows(path):
    with open(path, newline="") as handle:
        rows = list(csv.reader(handle))
    assert rows[0] == COLUMNS
    assert len(rows) > 1 and all(len(row) == len(COLUMNS) for row in rows)
    paper, number = path.stem.split("_table")
    assert {(row[0], row[1]) for row in rows[1:]} == {(paper, number)}


def test_key_columns_non_empty_and_names_well_formed(results):
    for column in ["paper", "table", "method", "dataset", "setting"]:
        assert (results[column].str.strip() != "").all(), column
    assert set(results["paper"]) == set(PAPERS)
    assert all(set(method) <= METHOD_CHARS for method in results["method"])
    assert all(parse_setting(setting)["partition"] for setting in results["setting"])


def test_value_numeric_std_numeric_or_empty(results):
    assert results["value"].notna().all()
    finite = results["value"].replace(math.inf, math.nan).dropna()
    assert ((finite >= 0) & (finite <= 100)).all()
    # inf only marks PKD cost targets a method never reached
    infinite = results[results["value"] == math.inf]
    assert (infinite["setting"].str.contains("metric=cost_u")).all()
    assert (results["std"].dropna() >= 0).all()


def test_no_duplicate_keys(results):
    duplicated = results[results.duplicated(KEY, keep=False)]
    assert duplicated.empty, duplicated[KEY].to_string()


def test_percent_values_have_two_decimals_at_most():
    # catches run-together numbers such as the garbled '68.0318' in the FedVLS text
    for path in table_files():
        for row in csv.DictReader(open(path, newline="")):
            if row["value"] != "inf":
                assert len(row["value"].partition(".")[2]) <= 2, (path.name, row)


def _cell(paper, table, method, dataset, setting):
    rows = load_paper_results(paper, table)
    match = rows[(rows["method"] == method) & (rows["dataset"] == dataset)
                 & (rows["setting"] == setting)]
    assert len(match) == 1, (paper, table, method, dataset, setting)
    return match.iloc[0]


@pytest.mark.parametrize("paper,table,method,dataset,setting,value,std", [
    ("pkd", 1, "fedavg", "fashion_mnist", "partition=balanced;clients=10;metric=min", 68.4, None),
    ("pkd", 1, "pkd", "fashion_mnist", "partition=balanced;clients=10;metric=min", 76.6, None),
    ("pkd", 3, "pkd", "mnist", "partition=pathological;classes_per_client=1;clients=10;metric=min",
     68.38, None),
    ("pkd", 9, "pkd", "fashion_mnist", "partition=balanced;clients=10;metric=cost_u;target_min=70",
     76.1, None),
    ("feded", 1, "fedvls", "cifar10", "partition=dirichlet;beta=0.05", 75.71, 0.28),
    ("feded", 1, "fedavg", "tinyimagenet", "partition=dirichlet;beta=0.5", 47.02, 0.40),
    ("feded", 2, "fedntd", "cifar10", "partition=quantity;s=2", 67.35, 0.19),
    ("fedvls", 1, "fedgf", "cifar100", "partition=dirichlet;beta=0.05", 64.48, None),
    ("fedvls", 3, "fedlmd", "cifar10", "partition=dirichlet;beta=0.05;model=resnet32", 68.04, None),
    ("fedvls", 5, "fedvls", "cifar10",
     "partition=dirichlet;beta=0.05;distill=true;suppress=false", 71.53, None),
    ("fedvls", 6, "fedvls+fedsam", "tinyimagenet", "partition=dirichlet;beta=0.05", 48.12, None),
    ("feded", 4, "fedntd", "cifar10", "partition=dirichlet;beta=0.05;round=60", 66.48, None),
    ("fedlmd", 3, "fedlmd", "cifar10", "partition=shards;s=2;metric=speedup", 3.64, None),
    ("fedlmd", 3, "scaffold", "cinic10", "partition=dirichlet;beta=0.1", 25.19, None),
    ("fedlmd", 5, "fedlmd+fedavgm", "cifar10", "partition=dirichlet;beta=0.5", 71.50, None),
    ("fedcsd", "I", "fedcsd", "femnist", "partition=dirichlet;beta=0.01", 94.83, None),
    ("fedcsd", "IV", "fedcsd", "cifar100", "partition=dirichlet;beta=5;mask_type=hard",
     69.61, None),
])
def test_spot_checks(paper, table, method, dataset, setting, value, std):
    row = _cell(paper, table, method, dataset, setting)
    assert row["value"] == pytest.approx(value)
    assert (math.isnan(row["std"]) if std is None else row["std"] == pytest.approx(std))


def test_worst_class_and_not_reached_notes():
    worst = _cell("pkd", 4, "fedavg", "cifar10",
                  "partition=dirichlet;beta=0.5;clients=10;metric=min")
    assert worst["note"] == "worst=Dog"
    missed = _cell("pkd", 10, "fedprox", "fashion_mnist",
                   "partition=dirichlet;beta=0.5;clients=20;metric=cost_u;target_min=60")
    assert missed["value"] == math.inf and "not reached" in missed["note"]


def test_paper_and_table_filters():
    assert set(load_paper_results("pkd")["paper"]) == {"pkd"}
    assert len(load_paper_results("fedcsd", "III")) == len(load_paper_results("fedcsd", 3)) == 6
    with pytest.raises(FedlibError, match="unknown paper 'pkdd'"):
        load_paper_results("pkdd")
    with pytest.raises(FedlibError, match="no transcribed table"):
        load_paper_results("fedlmd", 9)
    with pytest.raises(FedlibError, match="bad table"):
        load_paper_results("fedlmd", "first")


def test_conventions_cover_every_paper():
    table = conventions()
    assert list(table.columns) == ["paper", "evaluation", "seeds", "notes"]
    assert set(table["paper"]) == set(PAPERS)
    assert set(table["evaluation"]) <= {"best_over_rounds", "final_round", "last_k_average"}
    by_paper = table.set_index("paper")
    assert by_paper.loc["fedvls", "evaluation"] == "best_over_rounds"
    assert by_paper.loc["pkd", "evaluation"] == "final_round"
    assert by_paper.loc["fedvls", "seeds"] == 3


def test_readme_lists_every_file():
    readme = (RESULTS_DIR / "README.md").read_text()
    for path in table_files():
        assert path.name in readme


# Methods the papers compare against that fedlib does not implement (README, "method").
NOT_IN_REGISTRY = {"fedmr", "fedconcat", "fedgf", "cutout", "feature_augmentation", "fedntd_tf"}


def test_methods_use_registry_names(results):
    from fedlib.core.registry import method_names
    known = set(method_names()) | NOT_IN_REGISTRY
    parts = {part for method in results["method"] for part in method.split("+")}
    assert parts <= known, sorted(parts - known)
