"""The paper layer: the runs each notebook declares, and reproduce.sh that executes them.

One grid function per notebook that trains (:mod:`.grids`, ``GRIDS`` by notebook name), the
declared runs and their plan (:mod:`.plan`) and the papermill runner behind reproduce.sh
(:mod:`.reproduce`, ``python -m fedlib.paper.reproduce``). It may import reporting and every
layer below it, never the command line.
"""
