"""Speed options validated against the fp32, NCHW reference: channels-last layout and bf16 autocast.

channels_last must reproduce the reference to float tolerance (it only reorders memory);
bf16 changes the numbers (hence it is hashed) but must stay close to fp32 after a round.
"""

import warnings

import pytest
import torch

from fedlib.core.registry import method_class
from fedlib.engine import engine
from fedlib.errors import FedlibError
from tests.helpers import one_round, tiny_config
from tests.unit.engine import test_backend_equivalence as equivalence


pytestmark = pytest.mark.usefixtures("one_thread")


LENET_ROUND = dict(model="lenet5", clients=3, max_train_samples=240, max_test_samples=100, rounds=1,
                   local_epochs=2, batch_size=16, lr=0.02, momentum=0.9, weight_decay=1e-4, seed=5)


def max_difference(a: dict, b: dict) -> float:
    return max(float((a[k].float() - b[k].float()).abs().max()) for k in a)


def test_channels_last_is_a_location_field_and_precision_is_hashed_only_when_not_fp32():
    cfg = tiny_config(LENET_ROUND)
    assert cfg.replace(channels_last=True).hash() == cfg.hash()
    assert "precision" not in cfg.hashed_fields(), "the default must leave existing hashes unchanged"
    assert cfg.replace(precision="bf16").hash() != cfg.hash()
    with pytest.raises(FedlibError, match="precision"):
        tiny_config(LENET_ROUND, precision="fp8")


@pytest.mark.parametrize("method, args", [("fedavg", {}), ("fedlmd", {}), ("fedvls", {"variant": "official"})])
def test_channels_last_matches_the_reference(method, args):
    cfg = tiny_config(LENET_ROUND, method=method, method_args=args)
    reference, ref_metrics = one_round(cfg, evaluate=True)
    state, metrics = one_round(cfg.replace(channels_last=True), evaluate=True)
    assert max_difference(reference, state) < 1e-5
    assert metrics["accuracy"] == pytest.approx(ref_metrics["accuracy"], abs=0.011)  # one test image of 100


def test_channels_last_really_changes_the_layout():
    server, _ = engine.prepare(tiny_config(LENET_ROUND, channels_last=True))
    conv = next(p for p in server.model.parameters() if p.dim() == 4 and p.shape[1] > 1)  # 6 -> 16 channels
    batch, _ = next(server.data.client(0).train_batches(16, 1, torch.Generator().manual_seed(0)))
    assert conv.is_contiguous(memory_format=torch.channels_last) and not conv.is_contiguous()
    assert batch.is_contiguous(memory_format=torch.channels_last)


@pytest.mark.parametrize("method, args", [("fedavg", {}), ("fedlmd", {})])
@pytest.mark.parametrize("backend", ["sequential", "stacked"])
def test_bf16_stays_close_to_fp32_but_is_not_fp32(method, args, backend):
    cfg = tiny_config(LENET_ROUND, method=method, method_args=args)
    reference, ref_metrics = one_round(cfg, evaluate=True)
    state, metrics = one_round(cfg.replace(precision="bf16", backend=backend), evaluate=True)
    difference = max_difference(reference, state)
    scale = max(float(v.abs().max()) for v in reference.values() if v.is_floating_point())
    assert 0 < difference < 0.02 * scale, (difference, scale)
    assert metrics["loss"] == pytest.approx(ref_metrics["loss"], rel=0.05)
    assert all(v.dtype == reference[k].dtype for k, v in state.items()), "weights stay fp32"



@pytest.mark.parametrize("method, args", equivalence.CASES, ids=equivalence.IDS)
def test_every_method_trains_channels_last_to_the_nchw_numbers(method, args):
    """channels_last is not hashed, so a method that reads parameters by memory order (or fails on a
    channels-last weight, as FedCurv's flat parameter vector once did) would be a wrong or lost run."""
    cfg = equivalence.config(method, args, "sequential")
    reference = equivalence.sequential_rounds(cfg)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        differences, _, _ = equivalence.resynced_rounds(cfg.replace(channels_last=True), reference)
    assert max(differences) < equivalence.TOLERANCE, differences
    kept_nchw = any("trains in the NCHW layout" in str(w.message) for w in caught)
    assert kept_nchw == method_class(method).layout_sensitive  # FedMR: 0.07 apart after one round otherwise
