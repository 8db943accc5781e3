"""The one exception type fedlib raises for bad input.

Every user-facing mistake (unknown dataset, impossible partition, missing files, ...) raises
:class:`FedlibError` with a single-line message that says what was wrong and how to fix it.
The CLI prints that line and exits with status 2; notebooks show it as a one-line error.
"""


class FedlibError(ValueError):
    """Bad input or a missing resource, explained in one line."""


def one_of(kind: str, name: str, valid) -> FedlibError:
    """Build the standard 'unknown X' error listing the valid choices."""
    choices = ", ".join(sorted(valid))
    plural = f"{kind}es" if kind.endswith("s") else f"{kind}s"
    return FedlibError(f"unknown {kind} {name!r}; valid {plural}: {choices}")


def one_line(error: object) -> str:
    """An error or warning as one line: its type and the first line of its message (200
    characters at most), for tables and summaries that report many at once."""
    text = str(error).strip()
    first = text.splitlines()[0] if text else ""
    kind = type(error).__name__ if isinstance(error, BaseException) else ""
    return (f"{kind}: {first}" if kind and first else kind or first)[:200]


# Third-party errors a user's input can raise, named by module and type so this module imports
# nothing: (module prefix, type name) -> what the one line says before the error's own first line.
_KNOWN_THIRD_PARTY = {
    ("yaml", "YAMLError"): "invalid YAML",
    ("json", "JSONDecodeError"): "invalid JSON",
}


def explain(error: BaseException) -> str | None:
    """The one line a user sees for ``error``, or None when it is no input error fedlib knows.

    The single place that turns errors into messages: fedlib's own (:class:`FedlibError`, whose
    message is the line), and the third-party errors bad input is known to raise (invalid YAML or
    JSON, a number too large for a float or a thread count, ...). The command line and the
    notebooks call it; an error it does not know keeps its traceback (a bug to report).
    """
    if isinstance(error, FedlibError):
        return _first_line(error)
    for klass in type(error).__mro__:
        label = _KNOWN_THIRD_PARTY.get((klass.__module__.split(".")[0], klass.__name__))
        if label:
            return f"{label}: {_yaml_problem(error) or _first_line(error)}"
    if isinstance(error, OverflowError) or (isinstance(error, RuntimeError) and "without overflow" in str(error)):
        return f"a number is too large ({_first_line(error)}); use a smaller value"
    return None


def _first_line(error: BaseException) -> str:
    """The first non-empty line of ``error``'s message, whitespace collapsed (its type if none)."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    return " ".join(lines[0].split()) if lines else type(error).__name__


def _yaml_problem(error: BaseException) -> str | None:
    """A YAML error's problem and where it is ('found character that cannot start any token
    (line 3, column 1)'), or None for an error without a position."""
    problem, mark = getattr(error, "problem", None), getattr(error, "problem_mark", None)
    if not problem or mark is None:
        return None
    return f"{problem} (line {mark.line + 1}, column {mark.column + 1})"
