"""Orchestration: many runs at once, and what they will cost.

A grid's runs trained or served as frames (:mod:`.experiments`), the grid executor with its
local and Ray pools (:mod:`.executor`, its pools in :mod:`.pools`, the job each runs in
:mod:`.training_job`), the one kind of worker process that it and the dry run
start (:mod:`.workers`), thread and GPU shares per run (:mod:`.resources`),
seconds per image for a plan (:mod:`.timing`), the dry run of each declared config
(:mod:`.dry_run`, its rows in :mod:`.dry_run_rows`, the memory it measures in :mod:`.peak_memory`)
and the check of every declared partition (:mod:`.partition_check`). It may
import the analyses' layer and everything below it, never reporting, the paper layer or the
command line.
"""
