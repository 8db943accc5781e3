"""The command line: ``python -m fedlib`` (``fedlib/__main__.py``) and the ``fedlib`` script.

The commands run, sweep, list, show, export, methods and migrate (:mod:`.cli`), the listing of
a store's runs (:mod:`.listing`) and their export to TensorBoard (:mod:`.export`). The top
layer: it may import every other layer, and none imports it.
"""
