"""The numbers the papers report, transcribed into ``fedlib/reporting/paper_results/`` (issue 5).

Comparison notebooks read the paper's numbers from here, never from literals. Each CSV holds
one paper table with the columns ``paper, table, method, dataset, setting, value, std, note``;
``conventions.csv`` records how each paper evaluates (best over rounds, final round, ...).
The folder's README.md explains the ``setting`` vocabulary.
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterable

import pandas as pd

from fedlib.errors import FedlibError, one_of

RESULTS_DIR = Path(__file__).resolve().parent / "paper_results"
COLUMNS = ["paper", "table", "method", "dataset", "setting", "value", "std", "note"]
PAPERS = ("feded", "fedvls", "pkd", "fedlmd", "fedcsd")
_ROMAN = {"I": 1, "II": 2, "III": 3, "IV": 4, "V": 5,
          "VI": 6, "VII": 7, "VIII": 8, "IX": 9, "X": 10}


def table_files() -> list[Path]:
    """Every transcribed table's CSV, sorted by name."""
    return sorted(path for path in RESULTS_DIR.glob("*_table*.csv"))


def read_table_file(path: Path) -> pd.DataFrame:
    """One table CSV with text columns kept as text and ``value``/``std`` as floats."""
    text_columns = {name: str for name in COLUMNS if name not in ("value", "std")}
    frame = pd.read_csv(path, dtype=text_columns, keep_default_na=False,
                        na_values={"value": [""], "std": [""]})
    frame["value"] = frame["value"].astype(float)
    frame["std"] = frame["std"].astype(float)
    return frame


def load_paper_results(paper: str | None = None, table: int | str | None = None) -> pd.DataFrame:
    """All transcribed numbers, optionally only one paper's and/or one table's.

    ``table`` may be an int (3), a string ("3") or FedCSD's roman numeral ("III"). ``value`` is
    in percent as printed, except PKD Tables 9-10 ``metric=cost_u`` rows (units U; ``inf`` =
    target not reached) and FedLMD Table 3 ``metric=speedup`` rows (times). ``std`` is NaN where
    the paper gives none.
    """
    if paper is not None and paper not in PAPERS:
        raise one_of("paper", paper, PAPERS)
    frames = [read_table_file(path) for path in table_files()]
    results = pd.concat(frames, ignore_index=True)
    if paper is not None:
        results = results[results["paper"] == paper]
    if table is not None:
        results = results[results["table"] == str(_table_number(table))]
        if results.empty:
            raise FedlibError(f"no transcribed table {table!r} for paper {paper!r}; "
                              f"see fedlib/reporting/paper_results/README.md for the tables there are")
    return results.reset_index(drop=True)


def conventions() -> pd.DataFrame:
    """Each paper's evaluation convention: ``paper, evaluation, seeds, notes``."""
    frame = pd.read_csv(RESULTS_DIR / "conventions.csv", dtype={"paper": str, "evaluation": str,
                                                                 "notes": str})
    frame["seeds"] = frame["seeds"].astype("Int64")  # empty where the paper does not say
    return frame


def parse_setting(setting: str) -> dict[str, str]:
    """Split a ``setting`` string such as ``partition=dirichlet;beta=0.05`` into a dict."""
    pairs = [item.split("=", 1) for item in setting.split(";") if item]
    if any(len(pair) != 2 for pair in pairs):
        raise FedlibError(f"bad setting {setting!r}; expected key=value pairs joined by ';'")
    return dict(pairs)


def setting_field(settings: Iterable[str], key: str) -> list[str | None]:
    """The value of ``key`` in each ``setting`` string (None where a setting lacks it):
    ``target_min`` of ``...;metric=cost_u;target_min=40`` is ``"40"``."""
    return [parse_setting(setting).get(key) for setting in settings]


def setting_values(settings: Iterable[str], key: str, **having: str) -> list[str]:
    """The distinct values of ``key``, in order of first appearance, among the settings that
    hold every ``having`` field: PKD Table 9's target columns are
    ``setting_values(paper["setting"], "target_min", metric="cost_u")``."""
    values = []
    for setting in settings:
        fields = parse_setting(setting)
        if key in fields and all(fields.get(name) == str(value) for name, value in having.items()):
            values.append(fields[key])
    return list(dict.fromkeys(values))


def _table_number(table: int | str) -> int:
    """Accept 3, "3" or "III" (FedCSD numbers its tables in roman numerals)."""
    text = str(table).strip()
    if text.upper() in _ROMAN:
        return _ROMAN[text.upper()]
    if text.isdigit() and int(text) > 0:
        return int(text)
    raise FedlibError(f"bad table {table!r}; give a table number such as 3, '3' or 'III'")
