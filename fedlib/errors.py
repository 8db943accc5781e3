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
    return FedlibError(f"unknown {kind} {name!r}; valid {kind}s: {choices}")


def one_line(error: object) -> str:
    """An error or warning as one line: its type and the first line of its message (200
    characters at most), for tables and summaries that report many at once."""
    text = str(error).strip()
    first = text.splitlines()[0] if text else ""
    kind = type(error).__name__ if isinstance(error, BaseException) else ""
    return (f"{kind}: {first}" if kind and first else kind or first)[:200]
