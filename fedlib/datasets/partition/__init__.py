"""How the training set is split over clients.

:func:`make_partition` turns a label array into a :class:`Partition`: one array of train-set
indices per client plus the (clients x classes) count matrix every label-skew method needs.
Every random choice comes from ``np.random.default_rng(seed)``, so the same inputs always give
the same partition. Clients are disjoint; they cover the train set except where a scheme says
otherwise (``balanced`` drops leftovers, ``natural`` may sample groups) or ``global_balance`` is set.

Schemes (facts from the papers and their authors' code: docs/facts.md#partitions):

- ``iid``          shuffle, split as evenly as possible.
- ``dirichlet``    FedVLS code: per class Dir(beta) over clients, clients already holding
                   >= N/num_clients samples get nothing more; redraw until every client has
                   >= min_size samples.
- ``shards``       FedNTD: shards_per_client equal shards of one class each.
- ``quantity``     FedVLS "s": classes_per_client classes each, unequal amounts; consecutive
                   clients share the same classes. ``quantity_split`` says how a class is cut
                   between its holders: ``symmetric`` (default) or the code's ``official`` rule.
- ``pathological`` PKD: classes_per_client classes each, equal amounts, every class held by
                   the same number of clients.
- ``balanced``     PKD local class-balanced: every client holds the same count of every class.
- ``natural``      one client per group id (writer, domain).

``global_balance`` (PKD Sec. 4.1: every class has the same total over the clients) first keeps the
smallest class count of every class, then lets the scheme split what is left; see
:func:`globally_balanced`. ``balanced`` is globally balanced by construction and ignores it;
``natural`` refuses it.

Within a client the indices are sorted ascending; data loaders are expected to shuffle.
One module per scheme (:mod:`.iid`, :mod:`.dirichlet`, :mod:`.shards`, :mod:`.quantity`,
:mod:`.pathological`, :mod:`.balanced`, :mod:`.natural`), each holding its ``split`` function, its
name and the RunConfig settings it reads; the :class:`Partition` type and the checks they share in
:mod:`.base`; :func:`make_partition` and the table of schemes in :mod:`.make`. The public names are
importable from here. Drawing a partition is :func:`fedlib.reporting.partition_plot.plot_partition`.
"""

from fedlib.datasets.partition.base import Partition
from fedlib.datasets.partition.make import (FIELDS_READ, PARTITIONS, SCHEME_SETTINGS, SCHEMES, check_global_balance,
                                            globally_balanced, make_partition, scheme_inputs)
from fedlib.datasets.partition.pathological import pathological_holders
from fedlib.datasets.partition.quantity import QUANTITY_SPLITS, official_quantity_sizes, quantity_holders

__all__ = ["FIELDS_READ", "PARTITIONS", "QUANTITY_SPLITS", "SCHEME_SETTINGS", "SCHEMES", "Partition",
           "check_global_balance", "globally_balanced", "make_partition", "official_quantity_sizes",
           "pathological_holders", "quantity_holders", "scheme_inputs"]
