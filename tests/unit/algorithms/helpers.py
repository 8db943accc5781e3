"""What the method tests share: plain-Python softmax, KL and cross-entropy to compute expected
values by hand, and small stand-ins for a model, a server, a client's context and a run."""

import copy
import math
from types import SimpleNamespace

import torch
from torch import nn

from fedlib.algorithms.base import ClientContext, ClientUpdate
from fedlib.core.config import RunConfig
from fedlib.models import FedModel
from tests.helpers import tiny_config


# ---------------------------------------------------------------------- arithmetic by hand
def t(rows) -> torch.Tensor:
    return torch.tensor(rows, dtype=torch.float32)


def softmax(values: list[float]) -> list[float]:
    exps = [math.exp(v) for v in values]
    return [e / sum(exps) for e in exps]


def log_softmax(values: list[float]) -> list[float]:
    top = max(values)
    log_norm = top + math.log(sum(math.exp(v - top) for v in values))
    return [v - log_norm for v in values]


def kl(p: list[float], q: list[float]) -> float:
    """KL(p || q) of two probability vectors; classes with p = 0 add nothing."""
    return sum(pi * math.log(pi / qi) for pi, qi in zip(p, q) if pi > 0)


def tempered_kl(teacher_logits: list[float], student_logits: list[float], tau: float = 1.0) -> float:
    """KL(softmax(t/tau) || softmax(s/tau)) of two logit vectors."""
    log_t = log_softmax([v / tau for v in teacher_logits])
    log_s = log_softmax([v / tau for v in student_logits])
    return sum(math.exp(a) * (a - b) for a, b in zip(log_t, log_s))


def ce(logits: list[float], label: int) -> float:
    return -log_softmax(logits)[label]


# ---------------------------------------------------------------------- a client of the loss methods
LMD_COUNTS = [6.0, 3.0, 1.0, 0.0]  # n/C = 2.5: majority {0, 1}


class TinyNet(nn.Module):
    """Linear(3, 4), then BatchNorm (or nothing): the smallest model whose train/eval mode matters."""

    def __init__(self, batchnorm: bool = True):
        super().__init__()
        self.fc = nn.Linear(3, 4)
        self.norm = nn.BatchNorm1d(4) if batchnorm else nn.Identity()

    def forward(self, x, return_features=False):
        logits = self.norm(self.fc(x))
        return (x, logits) if return_features else logits


def fake_server(round_index: int = 0, batchnorm: bool = True, seed: int | None = None) -> SimpleNamespace:
    """The server a method's ``client_context`` reads, around a TinyNet; ``seed`` seeds torch first."""
    if seed is not None:
        torch.manual_seed(seed)
    return SimpleNamespace(model=TinyNet(batchnorm), round=round_index, cache={},
                           new_model=lambda num_classes=None: TinyNet(batchnorm))


def fake_context(round_index: int = 0) -> ClientContext:
    return ClientContext(client_id=0, round=round_index, class_counts=t(LMD_COUNTS), num_samples=10, data=None)


# ---------------------------------------------------------------------- server rules on nn.Linear(2, 1)
def linear(weight, bias) -> nn.Linear:
    model = nn.Linear(2, 1)
    with torch.no_grad():
        model.weight.copy_(torch.tensor([weight], dtype=torch.float32))
        model.bias.copy_(torch.tensor([bias], dtype=torch.float32))
    return model


def toy_server(weight=(1.0, 2.0), bias=0.0, **cfg) -> SimpleNamespace:
    settings = dict(momentum=0.0, clients=4, lr=0.1, lr_decay=1.0, batch_size=4)
    settings.update(cfg)
    return SimpleNamespace(model=linear(weight, bias), extras={}, cache={}, round=0, device=torch.device("cpu"),
                           cfg=SimpleNamespace(**settings), new_model=lambda: nn.Linear(2, 1))


def update(client_id, weight, bias, n, steps=1, **extras) -> ClientUpdate:
    return ClientUpdate(client_id, linear(weight, bias).state_dict(), n, steps, extras=dict(extras))


def two_clients() -> list[ClientUpdate]:
    """Client 0: w=(0,1), b=1, n=1; client 1: w=(2,2), b=-1, n=3."""
    return [update(0, (0.0, 1.0), 1.0, 1, steps=2), update(1, (2.0, 2.0), -1.0, 3, steps=1)]


def assert_state(state, weight, bias):
    assert torch.allclose(state["weight"], torch.tensor([weight]), atol=1e-6)
    assert torch.allclose(state["bias"], torch.tensor([bias]), atol=1e-6)


def engine_context(algo, server, client_id) -> ClientContext:
    """The context the engine gives ``client_id`` this round, after the method's ``client_context``."""
    lr = server.cfg.lr * server.cfg.lr_decay ** server.round  # what the engine passes
    ctx = ClientContext(client_id=client_id, round=server.round, class_counts=torch.ones(2),
                        num_samples=4, data=None, lr=lr)
    algo.client_context(server, ctx)
    return ctx


# ---------------------------------------------------------------------- a FedModel and its server
def linear_model(weight, bias) -> FedModel:
    """features = x (identity body), logits = W x + b."""
    classifier = nn.Linear(len(weight[0]), len(weight))
    with torch.no_grad():
        classifier.weight.copy_(torch.tensor(weight, dtype=torch.float32))
        classifier.bias.copy_(torch.tensor(bias, dtype=torch.float32))
    return FedModel(nn.Identity(), classifier)


def model_server(model: nn.Module, **cfg) -> SimpleNamespace:
    """A server around ``model``; ``new_model`` hands out copies of it."""
    settings = dict(momentum=0.0, weight_decay=0.0, clients=3, rounds=10, seed=0)
    settings.update(cfg)
    return SimpleNamespace(model=model, extras={}, cache={}, round=0, device=torch.device("cpu"),
                           cfg=SimpleNamespace(**settings), new_model=lambda: copy.deepcopy(model),
                           num_classes=2)


# ---------------------------------------------------------------------- runs of a method
# three clients, two rounds of 150 samples: a method's whole round in about a second
METHOD_RUN = dict(clients=3, rounds=2, batch_size=16, max_train_samples=150, max_test_samples=60, seed=0)


def method_config(method: str, **changes) -> RunConfig:
    return tiny_config(METHOD_RUN, method=method, **changes)
