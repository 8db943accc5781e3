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


def one_line(error: object, limit: int | None = 200, *, kind: bool = True) -> str:
    """An error (or warning, or message) as one line: ``'TypeName: first line of its message'``.

    The single place fedlib turns an error into one line, for tables, summaries, notes and the
    messages :func:`explain` builds. The first non-empty line of the message is kept, stripped;
    ``kind=False`` leaves the type name out (it stands alone when the message is empty); the
    whole line is cut to ``limit`` characters (``None``: not cut). A non-exception (a string, a
    warning's message) has no type name to give.
    """
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    first = lines[0] if lines else ""
    name = type(error).__name__ if isinstance(error, BaseException) else ""
    text = (f"{name}: {first}" if kind and name and first else first or name)
    return text[:limit] if limit is not None else text


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
    """:func:`one_line` without the type name, whitespace collapsed (its type if no message)."""
    return " ".join(one_line(error, None, kind=False).split())


def _yaml_problem(error: BaseException) -> str | None:
    """A YAML error's problem and where it is ('found character that cannot start any token
    (line 3, column 1)'), or None for an error without a position."""
    problem, mark = getattr(error, "problem", None), getattr(error, "problem_mark", None)
    if not problem or mark is None:
        return None
    return f"{problem} (line {mark.line + 1}, column {mark.column + 1})"
