"""The engine: a run from its config to its stored record.

:mod:`.engine` holds the round loop, checkpoint and resume, and serving stored runs; :mod:`.run_data`
the run's data, checked; :mod:`.evaluation` the test-set readings; :mod:`.backends` the ways a
round's clients are trained (one after another, on threads, stacked), which the engine picks by
name from :data:`fedlib.engine.backends.BACKENDS`; :mod:`.backend_choice` what ``backend="auto"``
means on a device kind, from the measured table ``verified_paths.json``.

The engine may import every layer below it (the store, the methods, the run's vocabulary, the
models, the datasets and the measures), never the analyses, orchestration or anything above.
"""
