"""The data layer: what a run reads, before any model or method sees it.

Datasets as uint8 tensors and where they are found (:mod:`.data`, the entry point; the
:class:`Dataset` type and its re-splits in :mod:`.dataset`, what is known of each dataset before
loading in :mod:`.catalogue`, one record per dataset, the readers of each file layout in
:mod:`.loaders`, the datasets that need no files and stand-ins in :mod:`.generated`), where the engine gets them
(:mod:`.sources`: the files, or stand-ins handed in by a dry run or a benchmark), the check that a run reads
the full, unaltered data (:mod:`.data_check`), the split of a training set among clients
(:mod:`.partition`) and device-side augmentation (:mod:`.augment`). It sits on the ground floor
(``fedlib.errors``, ``fedlib.yaml_input``) and may import nothing else of fedlib.
"""
