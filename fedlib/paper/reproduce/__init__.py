"""Execute the paper notebooks with papermill: ``python -m fedlib.paper.reproduce``.

Each ``notebooks/<stem>.ipynb`` is run with the chosen profile's name (smoke, quick or paper)
and the values given on the command line (device, folders, ``-p NAME VALUE``); the notebook
applies ``profiles/<stem>.yaml`` itself (:mod:`fedlib.reporting.notebook`), so papermill, JupyterLab and
this runner run the same settings. The executed copy goes to ``output/<profile>/``, and so do
the figures and tables unless ``--publish`` writes them to the committed ``figures/`` and
``tables/`` (and records what produced each file). A failing notebook does not stop the
others, and the summary names every failure.

Exit status: 0 all ran, 1 some notebook failed, 2 bad options (one line on stderr).

papermill and jupyter are imported inside the functions that need them: importing fedlib must
work where only the training stack is installed (the GPU machines have no jupyter).

One concept per module:

- :mod:`.selection` -- the notebooks, profile and parameters one call selects, checked
- :mod:`.kernel` -- the Jupyter kernel and the environment the kernels inherit
- :mod:`.runner` -- the papermill runner: each notebook executed, render-only skips, the summary
- :mod:`.output_index` -- publishing: what produced each committed figure and table
- :mod:`.declared` -- the runs the notebooks declare, without executing them: plan, dry run, executor
- :mod:`.notebook_listing` -- ``--list``: each notebook's paper figure or table, data and cost
- :mod:`.command_line` -- the options and ``main``; ``__main__`` runs it

Every public name is re-exported here (``reproduce.main``, ``reproduce.run_notebooks``,
``reproduce.declared_runs``). A module reads the names of its own module, so a test that
monkeypatches one patches the module that owns or reads it (``command_line.run_notebooks``).
"""

from __future__ import annotations

from fedlib.paper.reproduce.command_line import build_parser, main
from fedlib.paper.reproduce.declared import (Declarations, declared_grids, declared_profile_runs, declared_runs,
                                             default_dry_run_csv, dry_run_notebooks, execute_declared_runs,
                                             notebook_runs, plan_notebooks)
from fedlib.paper.reproduce.kernel import QUIET_KERNEL, default_kernel
from fedlib.paper.reproduce.notebook_listing import PER_DATASET_GRIDS, format_listing
from fedlib.paper.reproduce.output_index import index_outputs, publish_note, render_index
from fedlib.paper.reproduce.runner import (NotebookRun, format_run, format_summary, portable_parameters,
                                           render_skip_reason, run_notebooks)
from fedlib.paper.reproduce.selection import (OVERRIDE_NAMES, STANDARD_PROFILES, build_overrides,
                                              check_parameter_names, declared_parameters, find_notebooks,
                                              parse_parameters, user_parameters)
from fedlib.reporting.notebook import load_profiles  # callers take it from here with build_overrides
