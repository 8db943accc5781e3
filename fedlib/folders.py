"""Folders a user names: a command-line option, a notebook parameter or an environment variable
(``$FEDLIB_RESULTS``, ``$FEDLIB_DATA``, ``$FEDLIB_CACHE``, ``$FEDLIB_REFERENCE``), all read one way.

A blank value names no folder and is one line, not the default (nor a folder named ``' '``); a
leading ``~`` is the home folder, as a shell would read it; a symbolic link that loops is one line.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

from fedlib.errors import FedlibError

FOLDER_ENVS = ("FEDLIB_RESULTS", "FEDLIB_DATA", "FEDLIB_CACHE", "FEDLIB_REFERENCE")


def user_folder(value: str | os.PathLike | None, name: str, has_default: bool = True) -> Path | None:
    """The folder ``value`` names (``name`` is what the message calls it: ``--results``,
    ``results_dir``, ``$FEDLIB_RESULTS``), ``~`` expanded; None stays None. Raises
    :class:`FedlibError` for a blank value (``has_default``: the message says to leave it out
    for the default) or a symbolic link loop."""
    if value is None:
        return None
    text = os.fspath(value)
    if not text.strip():
        default = f"unset {name[1:]}" if name.startswith("$") else f"leave {name} out"
        raise FedlibError(f"{name} {text!r} names no folder; give a folder" +
                          (f", or {default} for the default" if has_default else ""))
    path = Path(os.path.expanduser(text))
    try:
        path.resolve()
    except RuntimeError:  # Python < 3.13 reports a loop as RuntimeError
        raise FedlibError(f"{name} {text}: a symbolic link loop; point it at a folder") from None
    except OSError as exc:
        if exc.errno != errno.ELOOP:
            raise
        raise FedlibError(f"{name} {text}: a symbolic link loop; point it at a folder") from None
    return path


def env_folder(env: str) -> Path | None:
    """The folder environment variable ``env`` names (see :func:`user_folder`); None when unset."""
    return user_folder(os.environ.get(env), f"${env}")


def switched_off(env: str) -> bool:
    """Whether folder variable ``env`` says ``off`` (``FEDLIB_REFERENCE=off``: no reference store)."""
    return os.environ.get(env) == "off"


def check_environment() -> None:
    """Check the folder variables (:data:`FOLDER_ENVS`) that are set, and write each back with its
    ``~`` expanded, so every reader (the dataset loaders, worker processes, notebook kernels)
    sees the folder meant. Raises :class:`FedlibError` for a blank one."""
    for env in FOLDER_ENVS:
        if env == "FEDLIB_REFERENCE" and switched_off(env):
            continue
        path = env_folder(env)
        if path is not None:
            os.environ[env] = str(path)
