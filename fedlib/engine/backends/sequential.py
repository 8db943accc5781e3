"""The sequential backend: the round's clients trained one after another on the reference path of
:mod:`fedlib.algorithms.client_training`."""

from __future__ import annotations

from typing import Sequence

from fedlib.algorithms.base import Algorithm, ClientUpdate, Observer
from fedlib.algorithms.client_training import train_client
from fedlib.core.state import ServerState


def train_round(server: ServerState, algorithm: Algorithm, clients: list[int], lr: float,
                hooks: Sequence[Observer] = ()) -> list[ClientUpdate]:
    """Local training of the round's clients, one after another (updates in ``clients`` order)."""
    return [train_client(server, algorithm, k, lr, hooks) for k in clients]
