"""tools/rerender_check.py: committed tables are grouped by the render that makes them, each
render's command renders only into a scratch folder, and the comparison tells a changed number
from the same number printed another way."""

import json
from pathlib import Path

from tools import rerender_check

INDEX = {
    "a_accuracy.csv": {"notebook": "notebooks/a.ipynb", "profile": "paper", "parameters": {"seeds": [0]}},
    "a_vs_paper.csv": {"notebook": "notebooks/a.ipynb", "profile": "paper", "parameters": {"seeds": [0]}},
    "a_other_seeds.csv": {"notebook": "notebooks/a.ipynb", "profile": "paper", "parameters": {"seeds": [0, 1]}},
    "b_fig.csv": {"notebook": "notebooks/b.ipynb", "profile": "lesson", "parameters": {}},
    "b_fig.md": {"notebook": "notebooks/b.ipynb", "profile": "lesson", "parameters": {}},
}


def test_tables_of_one_notebook_and_parameters_render_together():
    groups = rerender_check.renders(INDEX, [])
    assert sorted(map(sorted, groups.values())) == [["a_accuracy.csv", "a_vs_paper.csv"], ["a_other_seeds.csv"],
                                                    ["b_fig.csv"]]
    assert list(rerender_check.renders(INDEX, ["b_"]).values()) == [["b_fig.csv"]]


def test_a_render_is_render_only_into_the_scratch_folder_with_the_recorded_parameters(tmp_path):
    [render] = [r for r, tables in rerender_check.renders(INDEX, []).items() if tables == ["a_other_seeds.csv"]]
    command = render.command(tmp_path, threads=1)
    assert "--render-only" in command and "--publish" not in command
    assert command[command.index("--tables") + 1] == str(tmp_path / "tables")
    assert command[command.index("--only") + 1] == "a"
    assert command[command.index("-p") + 1:command.index("-p") + 3] == ["seeds", json.dumps([0, 1])]


def _write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def test_compare_tells_same_text_same_numbers_and_a_changed_number(tmp_path):
    committed = _write(tmp_path / "c.csv", "method,acc\nfedavg,0.5\nfedlmd,0.75\n")
    assert rerender_check.compare(committed, _write(tmp_path / "same.csv", committed.read_text())) == "same"
    printed = _write(tmp_path / "printed.csv", "method,acc\nfedavg,0.50\nfedlmd,0.750\n")
    assert rerender_check.compare(committed, printed) == "numbers equal"
    changed = _write(tmp_path / "changed.csv", "method,acc\nfedavg,0.5\nfedlmd,0.7501\n")
    assert rerender_check.compare(committed, changed).startswith("DIFFERS (largest numeric difference 0.0001")
    renamed = _write(tmp_path / "renamed.csv", "method,acc\nfedavg,0.5\nfedntd,0.75\n")
    assert "text cells differ" in rerender_check.compare(committed, renamed)
    assert rerender_check.compare(committed, tmp_path / "absent.csv").startswith("missing")
