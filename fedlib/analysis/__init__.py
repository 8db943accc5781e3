"""Analyses: the studies behind the papers' figures, read from stored runs or computed beside them.

Class-accuracy gaps and expert activation (:mod:`.class_gap`), client drift (:mod:`.drift`), a
local update's effect (:mod:`.local_update`), PKD's distillation-stage readings
(:mod:`.pkd_readings`) and prediction distributions (:mod:`.prediction_stats`). The layer sits
on the engine: it may import the engine, the store, the methods, the core, the models, the
measures, the data layer and the ground floor, never orchestration, reporting, the paper layer or
the command line.
"""
