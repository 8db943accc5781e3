"""The dataset option ``standardise: false``: pixels / 255 fed as they are, a run of its own."""

import pytest
import torch

from fedlib.core.config import RunConfig
from fedlib.datasets.data import check_dataset_options, dataset_shape, load_dataset, stand_in_dataset
from fedlib.engine.run_data import load_run_dataset
from fedlib.errors import FedlibError


def test_unstandardised_data_have_mean_zero_and_std_one_on_every_channel_and_the_same_pixels():
    standard = load_dataset("digits")
    unit = load_dataset("digits", standardise=False)
    assert unit.mean == (0.0,) and unit.std == (1.0,)
    assert standard.mean != unit.mean, "the default standardises"
    assert torch.equal(unit.train_x, standard.train_x), "the stored uint8 pixels do not change"


def test_stand_ins_take_the_option_too():
    unit = stand_in_dataset("cifar10", 20, 10, standardise=False)
    assert unit.mean == (0.0, 0.0, 0.0) and unit.std == (1.0, 1.0, 1.0)
    assert stand_in_dataset("cifar10", 20, 10).mean != unit.mean


def test_the_option_is_its_own_run_and_leaves_the_shape_alone():
    assert RunConfig(dataset_options={"standardise": False}).hash() != RunConfig().hash()
    assert dataset_shape("fashion_mnist", standardise=False) == dataset_shape("fashion_mnist")
    cfg = RunConfig(dataset="digits", model="mlp", dataset_options={"standardise": False})
    assert load_run_dataset(cfg).std == (1.0,)


@pytest.mark.parametrize("value", ["no", 0, None])
def test_a_value_that_is_not_true_or_false_is_one_line(value):
    with pytest.raises(FedlibError, match="standardise must be true or false"):
        check_dataset_options("mnist", {"standardise": value})
