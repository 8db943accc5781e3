"""A partition in words is written in one place (issue 46): fedlib.reporting.settings.partition_words,
which the figure titles (plots.partition_label), the tables (settings.setting_words) and the command
line's listings (listing.partition_label) call."""

from fedlib.commands import listing
from fedlib.core.config import RunConfig
from fedlib.reporting import plots
from fedlib.reporting.settings import partition_words, setting_words


def test_partition_words_for_a_reader_and_compact():
    assert partition_words("dirichlet", beta=0.05) == "Dir(β=0.05)"
    assert partition_words("dirichlet", beta="0.05") == "Dir(β=0.05)"  # the text of a setting label
    assert partition_words("quantity", classes_per_client=2) == "quantity skew, 2 classes per client"
    assert partition_words("shards", shards_per_client=2) == "shards, 2 per client"
    assert partition_words("iid") == "IID"
    assert partition_words("dirichlet", beta=1e-5, compact=True) == "dirichlet(1e-05)"
    assert partition_words("quantity", classes_per_client=2, quantity_split="official", compact=True) == \
        "quantity(s=2,official)"
    assert partition_words("pathological", classes_per_client=1, compact=True) == "pathological(c=1)"
    assert partition_words("balanced", compact=True) == "balanced"


def test_every_caller_writes_what_partition_words_writes():
    for partition in ("iid", "dirichlet", "shards", "quantity", "pathological", "balanced", "natural"):
        cfg = RunConfig(partition=partition, beta=0.1, shards_per_client=3, classes_per_client=2)
        fields = {"beta": cfg.beta, "shards_per_client": 3, "classes_per_client": 2}
        assert plots.partition_label(cfg) == partition_words(partition, **fields)
        assert listing.partition_label(cfg) == partition_words(partition, **fields, compact=True)
    assert setting_words("partition=dirichlet;beta=0.1;metric=min") == f"{partition_words('dirichlet', beta=0.1)}, metric=min"
