"""One place turns errors into one-line messages (fedlib.errors.explain): fedlib's own, and the
third-party errors bad input is known to raise; anything else keeps its traceback."""

import json

import pytest
import torch
import yaml

from fedlib.errors import FedlibError, explain
from fedlib.reporting import notebook


def raised(action) -> BaseException:
    try:
        action()
    except Exception as error:  # noqa: BLE001 - the error itself is under test
        return error
    raise AssertionError("nothing raised")


@pytest.mark.parametrize("action, says", [
    (lambda: (_ for _ in ()).throw(FedlibError("bad  input\nsecond line")), "bad input"),
    (lambda: yaml.safe_load("a: [1\n"), "invalid YAML: expected ',' or ']'"),
    (lambda: json.loads('{"a": '), "invalid JSON: Expecting value"),
    (lambda: float(10 ** 400), "a number is too large"),
    (lambda: torch.zeros(1).add_(torch.ones(1), alpha=-1e308), "a number is too large"),
])
def test_known_input_errors_become_one_line(action, says):
    line = explain(raised(action))
    assert line is not None and line.startswith(says) and "\n" not in line


def test_an_unknown_error_is_left_to_its_traceback():
    assert explain(KeyError("a bug")) is None and explain(RuntimeError("a bug")) is None


class FakeShell:
    """What notebook._one_line_errors needs of an IPython shell."""

    custom_exceptions = ()

    def set_custom_exc(self, types, handler):
        self.custom_exceptions, self.handler = types, handler

    def _showtraceback(self, etype, value, lines):
        self.shown = lines

    def showtraceback(self, exc_tuple, tb_offset=None):
        self.traceback = exc_tuple


def test_a_notebook_cell_shows_known_errors_in_one_line_and_others_in_full():
    shell = FakeShell()
    notebook._one_line_errors(shell)
    error = raised(lambda: json.loads("{"))
    shell.handler(shell, type(error), error, None)
    assert shell.shown == [f"JSONDecodeError: {explain(error)}"]
    bug = RuntimeError("a bug")
    shell.handler(shell, RuntimeError, bug, None)
    assert shell.traceback[1] is bug


def test_the_cli_leaves_the_warning_format_as_it_found_it():
    import warnings

    from fedlib.commands import cli

    before = warnings.formatwarning
    cli.main(["methods"])
    assert warnings.formatwarning is before


def test_one_line_is_type_and_first_non_empty_line_cut_to_the_limit():
    """fedlib.errors.one_line is the one formatter every table, note and message uses."""
    from fedlib.errors import one_line

    error = ValueError("\n  first line  \nsecond")
    assert one_line(error) == "ValueError: first line"
    assert one_line(error, kind=False) == "first line"
    assert one_line(ValueError()) == "ValueError" and one_line(ValueError(), kind=False) == "ValueError"
    assert one_line("a warning\nmore") == "a warning"
    assert one_line(ValueError("x" * 500)) == ("ValueError: " + "x" * 500)[:200]
    assert one_line(ValueError("x" * 500), 20) == "ValueError: xxxxxxxx"
    assert one_line(ValueError("x" * 500), None) == "ValueError: " + "x" * 500
