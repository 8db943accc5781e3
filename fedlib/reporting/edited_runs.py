"""A run edited away from its profile: what it changed, so its figures never pass for the profile's.

A notebook under a profile runs that profile's settings unless a reader edits the parameters cell
(JupyterLab) or passes ``-p`` values. Such a run is no run of the profile: its ``profile`` is an
:class:`EditedProfile`, still the profile's name for every lookup, holding the edits; the stamp
under its figures names them (``plots.provenance``: ``profile lesson, edited: beta=0.5``) and its
figures and tables go beside the profile's (``notebook.output_folder``: ``output/lesson-edited/``).
"""

from __future__ import annotations

import json

SETTING_FREE = ("profile", "device")  # with the *_dir folders: where and how a run happens, not what it computes


class EditedProfile(str):
    """The name of the profile a run started from, for a run whose settings differ from that
    profile's: equal to the name (so every lookup by profile works unchanged), with ``edits``, each
    parameter the run changed -> the value it ran with."""

    def __new__(cls, name: str, edits: dict):
        self = super().__new__(cls, name)
        self.edits = dict(edits)
        return self

    def __reduce__(self):  # pickled (a worker process) with its edits
        return EditedProfile, (str(self), self.edits)

    def label(self, longest: int = 24) -> str:
        """``lesson, edited: beta=0.5, rounds=60``; a value longer than ``longest`` characters is
        left out (``method_args``), its name kept."""
        shown = {name: value if isinstance(value, str) else repr(value) for name, value in self.edits.items()}
        edits = [f"{name}={text}" if len(text) <= longest else name for name, text in shown.items()]
        return f"{self}, edited: {', '.join(edits)}"


def profile_edits(resolved: dict, profile_run: dict) -> dict:
    """The parameters of ``resolved`` whose value differs from ``profile_run`` (the values the
    profile itself runs with: its section over the parameters cell as shipped), folders, device
    and the profile's name aside; lists and tuples alike."""
    return {name: value for name, value in resolved.items()
            if name not in SETTING_FREE and not name.endswith("_dir") and name in profile_run
            and plain(value) != plain(profile_run[name])}


def plain(value):
    """``value`` as JSON would store it (a tuple reads as a list), for comparing values."""
    try:
        return json.loads(json.dumps(value))
    except (TypeError, ValueError):
        return repr(value)
