"""The engine takes its data source as an argument: a dry run's or a benchmark's stand-ins go in
by value, are cached apart from the files, and never reach a store."""

import pytest

from fedlib.core.config import RunConfig
from fedlib.datasets.sources import FILES, StandIns
from fedlib.engine import engine
from fedlib.errors import FedlibError

pytestmark = pytest.mark.usefixtures("one_thread")

DIGITS = RunConfig(dataset="digits", clients=2, rounds=1, local_epochs=1, batch_size=16, model="mlp")


def test_a_stand_in_is_never_served_to_a_run_that_asked_for_the_files():
    stand_in = engine.load_run_dataset(DIGITS, StandIns(40, 20))
    files = engine.load_run_dataset(DIGITS)
    assert len(stand_in.train_y) == 40
    assert len(files.train_y) == len(FILES.load("digits").train_y) != 40
    assert len(engine.load_run_dataset(DIGITS, StandIns(40, 20)).train_y) == 40  # and back again


def test_a_run_trains_on_the_source_it_is_handed(tmp_path):
    result = engine.run(DIGITS, source=StandIns(40, 20), use_store=False, progress=False, results_dir=tmp_path)
    assert sum(map(sum, result.summary["partition_counts"])) == 40  # the stand-in's 40 images, dealt
    files = engine.run(DIGITS, use_store=False, progress=False, results_dir=tmp_path)
    assert sum(map(sum, files.summary["partition_counts"])) == len(FILES.load("digits").train_y)


def test_a_run_on_stand_ins_refuses_the_store_in_one_line(tmp_path):
    with pytest.raises(FedlibError, match="never stored") as caught:
        engine.run(DIGITS, source=StandIns(40, 20), results_dir=tmp_path)
    assert "\n" not in str(caught.value)
    assert not any(tmp_path.iterdir())


def test_stand_ins_limited_to_some_names_read_the_rest_from_the_files():
    source = StandIns(40, 20, names=("cifar10",))
    assert len(source.load("digits").train_y) == len(FILES.load("digits").train_y)
    assert len(source.load("cifar10").train_y) == 40
    assert StandIns(40, 20) == StandIns(40, 20) and hash(StandIns(40, 20)) == hash(StandIns(40, 20))
