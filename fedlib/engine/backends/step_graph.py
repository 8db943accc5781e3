"""A client's local steps replayed from one captured CUDA graph (the ``graphed`` backend's step).

On a GPU, a small model's local step is mostly launch overhead: MobileNetV2's FedVLS step keeps
the card busy for 17.5 of its 43 ms (``benchmarks/RESULTS-gpu.md``). A method that keeps the
method contract's rule 2 (its loss a function of tensors, no host sync) launches the same kernels
on the same buffers at every step; only the batch's values change. So the step can be captured
once as a CUDA graph and replayed: one launch from Python instead of several hundred.

:class:`GraphedSteps` is the per-client step function that does it. The client's first
:data:`WARMUP_STEPS` steps run eagerly: they are real steps of its training, and they create what
the graph then updates in place (the optimiser's momentum buffers, the autograd and cuBLAS state).
The next batch of the full batch size is copied into static buffers, one step is captured (the
forward passes of the model and the teachers, the method's loss and penalty, backward, the
optimiser step) and replayed for that batch and for every later one of the same shape and layout;
any other batch (an epoch's last, smaller one) runs eagerly on the same parameters and buffers.

The warm-up steps are watched for what a replay would not repeat: a host sync (an op that reads
a device value into Python, :data:`SYNC_OPS`), or a step that replaces a value in ``ctx.extras``
(a per-client counter carried from batch to batch, as PKD's firing counts: a replay would keep
reading the tensor of the captured step). Either keeps that client on eager steps, and
:attr:`GraphedSteps.refusal` says why.

How a step is captured is a :class:`Capture`. :class:`CudaGraphCapture` warms up and captures on
a side stream, as CUDA graphs require. A CPU has no graphs: :class:`EagerCapture` keeps the step
as a function and calls it on every replay, which runs the same static-buffer bookkeeping; the
tests hold it to the eager loop bit for bit, and the capture itself is tested only on CUDA.
"""

from __future__ import annotations

from typing import Callable, Protocol

import torch
from torch import Tensor, nn
from torch.utils._python_dispatch import TorchDispatchMode

from fedlib.errors import FedlibError, one_line

# eager steps before the capture: they create the optimiser state the graph updates in place
WARMUP_STEPS = 3
# aten ops that read a device value into Python (a host sync), which a graph cannot replay
SYNC_OPS = frozenset({"_local_scalar_dense", "nonzero", "masked_select", "_unique2", "unique_dim",
                      "unique_consecutive", "equal", "is_nonzero", "repeat_interleave"})

Step = Callable[[], object]


class Capture(Protocol):
    """How :class:`GraphedSteps` runs its warm-up steps and turns a step into a replay."""

    def warm(self, step: Step) -> None:
        """Run one eager warm-up step."""

    def capture(self, step: Step) -> Callable[[], None]:
        """Record ``step`` (without running it) and return what replays it."""


class EagerCapture:
    """On a CPU (no graphs): a warm-up step runs as it is; a 'replay' calls the kept step."""

    def warm(self, step: Step) -> None:
        step()

    def capture(self, step: Step) -> Callable[[], None]:
        return step


class CudaGraphCapture:
    """Warm-up and capture on one side stream of ``device``; a replay is ``CUDAGraph.replay``."""

    def __init__(self, device: torch.device):
        self.device = device
        self.stream = torch.cuda.Stream(device)

    def warm(self, step: Step) -> None:
        current = torch.cuda.current_stream(self.device)
        self.stream.wait_stream(current)
        with torch.cuda.stream(self.stream):
            step()
        current.wait_stream(self.stream)

    def capture(self, step: Step) -> Callable[[], None]:
        graph = torch.cuda.CUDAGraph()
        try:
            with torch.cuda.graph(graph, stream=self.stream):
                step()
        except RuntimeError as error:
            raise FedlibError(f"the local step could not be captured as a CUDA graph ({one_line(error)}); "
                              "train this run with backend='sequential'") from error
        return graph.replay


class SyncWatch(TorchDispatchMode):
    """Notes every op in :data:`SYNC_OPS` dispatched inside it."""

    def __init__(self):
        super().__init__()
        self.syncs: list[str] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = func.__name__.split(".")[0]
        if name in SYNC_OPS:
            self.syncs.append(name)
        return func(*args, **(kwargs or {}))


def replay_obstacle(step: Step, extras: dict) -> str | None:
    """Run ``step`` once, watched; why a graph could not replay it (None when it could)."""
    before = dict(extras)
    with SyncWatch() as watch:
        step()
    if watch.syncs:
        return f"its local step reads a value to the host ({', '.join(sorted(set(watch.syncs)))})"
    replaced = sorted(str(k) for k in extras if k not in before or extras[k] is not before[k])
    if replaced:
        return f"its local step replaces ctx.extras[{replaced[0]!r}] (a graph would replay the old tensor)"
    return None


class GraphedSteps:
    """One client's step function ``steps(x, labels)``: eager warm-up steps, then replays of one
    captured step for every batch of ``full_batch`` images in the layout captured."""

    def __init__(self, train_step: Callable[[Tensor, Tensor], object], extras: dict, capture: Capture,
                 full_batch: int, warmup: int = WARMUP_STEPS):
        self.train_step = train_step
        self.extras = extras
        self.capture = capture
        self.full_batch = full_batch
        self.warmup = warmup
        self.eager_steps = 0
        self.replays = 0
        self.refusal: str | None = None
        self._static: tuple[Tensor, Tensor] | None = None
        self._replay: Callable[[], None] | None = None

    def __call__(self, x: Tensor, labels: Tensor) -> None:
        if self._replay is not None and _fits(self._static, x, labels):
            self._static[0].copy_(x)
            self._static[1].copy_(labels)
            self._replay()
            self.replays += 1
        elif self._ready_to_capture(x):
            self._static = (torch.empty_like(x).copy_(x), torch.empty_like(labels).copy_(labels))
            self._replay = self.capture.capture(lambda: self.train_step(*self._static))
            self._replay()
            self.replays += 1
        else:
            self._eager(x, labels)

    def _ready_to_capture(self, x: Tensor) -> bool:
        return (self._replay is None and self.refusal is None and self.eager_steps >= self.warmup
                and x.shape[0] == self.full_batch)

    def _eager(self, x: Tensor, labels: Tensor) -> None:
        if self._replay is None and self.refusal is None:  # a warm-up step: watched
            self.refusal = replay_obstacle(lambda: self.capture.warm(lambda: self.train_step(x, labels)), self.extras)
        else:
            self.train_step(x, labels)
        self.eager_steps += 1


def graphed_steps(algorithm, model: nn.Module, optimizer: torch.optim.Optimizer, ctx, capture: Capture,
                  full_batch: int) -> GraphedSteps:
    """:class:`GraphedSteps` of ``algorithm.train_step`` for one client (``ctx``) training ``model``."""
    return GraphedSteps(lambda x, labels: algorithm.train_step(model, optimizer, x, labels, ctx),
                        ctx.extras, capture, full_batch)


def _fits(static: tuple[Tensor, Tensor], x: Tensor, labels: Tensor) -> bool:
    """Whether ``x`` and ``labels`` can be copied into the static buffers as they are laid out."""
    return all(a.shape == b.shape and a.dtype == b.dtype and a.stride() == b.stride() and a.device == b.device
               for a, b in zip(static, (x, labels)))
