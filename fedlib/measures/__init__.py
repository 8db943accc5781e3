"""Measures: plain tensor functions that a method and an analysis can both use.

Per-class accuracies, spreads and distances (:mod:`.metrics`) and PKD's weak classes found from
confusion and feature statistics (:mod:`.weak_classes`). No model, run or store appears here:
the layer may import only the ground floor (``fedlib.errors``), so the methods in
``fedlib.algorithms`` can import it without climbing.
"""
