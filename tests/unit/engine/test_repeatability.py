"""The same config gives the same bits: run twice, or killed and resumed, on every backend, on the
CPU and (where one is present) on a CUDA GPU with its default deterministic kernels.

A BatchNorm model (resnet8) is among the cases: its running statistics are part of the state that
must repeat (the H200 check of issue 30 found ResNet-18's drifting by 3.0 without deterministic
kernels).
"""

import warnings

import pytest
import torch

from fedlib.engine import engine
from tests.helpers import tiny_config

DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.cuda)]
CASES = [("lenet5", "fedavg", {}), ("resnet8", "fedvls", {"variant": "official"})]

pytestmark = pytest.mark.usefixtures("two_threads")


def config(device: str, backend: str, model: str, method: str, args: dict):
    return tiny_config(model=model, method=method, method_args=args, device=device, backend=backend, rounds=2,
                       max_train_samples=64, max_test_samples=20, batch_size=16, momentum=0.9)


def _train(cfg, root, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return engine.run(cfg, results_dir=root, progress=False, **kwargs)


def _rounds(result) -> list[dict]:
    return [{k: v for k, v in r.items() if k != "seconds"} for r in result.rounds]


def _same_state(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def _backends(device: str) -> list[str]:
    return ["sequential", "threads", "stacked"] if device == "cpu" else ["sequential", "stacked", "graphed"]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("model, method, args", CASES, ids=[m for m, _, _ in CASES])
def test_the_same_config_twice_gives_identical_weights_and_metrics(tmp_path, device, model, method, args):
    for backend in _backends(device):
        cfg = config(device, backend, model, method, args)
        first, second = (_train(cfg, tmp_path / backend / name) for name in ("a", "b"))
        assert _rounds(first) == _rounds(second), backend
        assert _same_state(first.global_state(), second.global_state()), backend


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("model, method, args", CASES, ids=[m for m, _, _ in CASES])
def test_a_killed_run_resumes_to_identical_weights_and_metrics(tmp_path, device, model, method, args):
    for backend in _backends(device):
        cfg = config(device, backend, model, method, args)
        whole = _train(cfg, tmp_path / backend / "whole")
        assert _train(cfg, tmp_path / backend / "killed", stop_after=1).summary == {}
        resumed = _train(cfg, tmp_path / backend / "killed")
        assert _rounds(resumed) == _rounds(whole), backend
        assert _same_state(resumed.global_state(), whole.global_state()), backend


# The options the first GPU checks never repeated on CUDA: MobileNetV2 under FedVLS's AutoAugment,
# bf16 autocast and channels_last with BatchNorm on the stacked path, the threads path, AlexNet's pool.
OPTION_CASES = {
    "mobilenetv2-autoaugment": dict(model="mobilenetv2", method="fedvls", method_args={"variant": "official"},
                                    augmentation="crop_flip_autoaugment", backend="sequential"),
    "resnet8-stacked-bf16": dict(model="resnet8", backend="stacked", precision="bf16"),
    "resnet8-stacked-channels-last": dict(model="resnet8", backend="stacked", channels_last=True),
    "lenet5-threads": dict(model="lenet5", backend="threads"),
    "alexnet": dict(model="alexnet", backend="sequential"),
}
COLOUR_32 = dict(dataset_options={"image_shape": [3, 32, 32]})


@pytest.mark.cuda
@pytest.mark.parametrize("case", OPTION_CASES)
def test_each_option_repeats_bit_for_bit_on_cuda(tmp_path, case):
    cfg = tiny_config(COLOUR_32, OPTION_CASES[case], device="cuda", rounds=2, max_train_samples=64,
                      max_test_samples=20, batch_size=16, momentum=0.9)
    first, second = (_train(cfg, tmp_path / name) for name in ("a", "b"))
    assert _rounds(first) == _rounds(second)
    assert _same_state(first.global_state(), second.global_state())
