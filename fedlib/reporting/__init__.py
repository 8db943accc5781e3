"""Reporting: what a notebook calls to set itself up and to show its results.

A notebook's parameters and profile (:mod:`.notebook`, checked by :mod:`.parameters`), its plan
and saved tables (:mod:`.report`), our numbers in the papers' layout beside theirs
(:mod:`.tables`, keyed by the setting labels of :mod:`.settings`, PKD's cost in U from
:mod:`.cost_units`, the papers' numbers from ``paper_results/`` read by :mod:`.paper_numbers`), whether each of the paper's claims holds in our numbers
(:mod:`.claims`, reading two methods' seeds through the bootstrap interval of :mod:`.intervals`)
the figure style (:mod:`.plots`) and a partition drawn (:mod:`.partition_plot`). It may import orchestration and
everything below it, never the paper layer or the command line.
"""
