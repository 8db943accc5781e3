"""FedProto (Tan et al., "FedProto: Federated Prototype Learning across Heterogeneous Clients",
AAAI 2022), as the FedCSD paper uses it: a prototype regulariser on top of FedAvg.

Each client sends, besides its weights, the mean penultimate feature of each class it holds
(its local prototypes C_k^c). The server averages them per class over the clients that hold the
class (uniformly, as the authors' code does) into global prototypes C^c. During local training a
sample of class y is pulled towards C^y:

    L = CE(z, y) + lambda * MSE(h, C^y)

where MSE averages over the batch and the feature dimension, and samples whose class has no
global prototype (every class in round 0; later, classes none of last round's clients held)
contribute zero. lambda = 1 (FedProto's setting and the value the FedCSD paper found best).

Decisions: local prototypes are computed after local training with the trained model in eval
mode over the client's (non-augmented) data; global prototypes are rebuilt from each round's
uploads alone; the global model is still the FedAvg average of the weights, evaluated as usual.
The global prototypes live in ``server.extras`` so a resumed run keeps them.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from fedlib.algorithms.base import NON_NEGATIVE, Algorithm, ClientContext, ClientUpdate, Outputs
from fedlib.core.registry import register
from fedlib.core.state import ClientData, ServerState
from fedlib.errors import FedlibError

PROTOTYPES = "fedproto_prototypes"  # (C, D) global prototypes
AVAILABLE = "fedproto_available"  # (C,) 1.0 where class c has a global prototype


def local_loss(logits: Tensor, features: Tensor, labels: Tensor, prototypes: Tensor,
               available: Tensor, lam: float = 1.0) -> Tensor:
    """CE + lam * MSE(features, prototypes[labels]); classes without a prototype add nothing."""
    target = prototypes.detach()[labels]
    weight = available.detach().to(features.dtype)[labels]
    squared_error = ((features - target) ** 2).mean(dim=1)
    return F.cross_entropy(logits, labels) + lam * (weight * squared_error).mean()


@torch.no_grad()
def class_feature_sums(model: nn.Module, data: ClientData, num_classes: int,
                       feature_dim: int) -> tuple[Tensor, Tensor]:
    """Per-class sums of the penultimate features (C, D) and per-class counts (C,)."""
    sums = torch.zeros(num_classes, feature_dim, device=data.indices.device)
    counts = torch.zeros(num_classes, device=data.indices.device)
    for x, y in data.eval_batches():
        features, _ = model(x, return_features=True)
        sums.index_add_(0, y, features.float())
        counts.index_add_(0, y, torch.ones_like(y, dtype=counts.dtype))
    return sums, counts


def aggregate_prototypes(sums: list[Tensor], counts: list[Tensor]) -> tuple[Tensor, Tensor]:
    """Global prototypes: per class, the uniform mean of the local class means of its holders."""
    local_means = [s / c.clamp_min(1)[:, None] for s, c in zip(sums, counts)]
    holds = torch.stack([(c > 0).float() for c in counts])  # (K, C)
    total = (torch.stack(local_means) * holds[:, :, None]).sum(0)
    holders = holds.sum(0)
    return total / holders.clamp_min(1)[:, None], (holders > 0).float()


@register
class FedProto(Algorithm):
    """CE plus an MSE pull of each feature towards its class's global prototype."""

    name = "fedproto"
    paper = "Tan et al., AAAI 2022"
    defaults = {"lam": 1.0}
    ranges = {"lam": NON_NEGATIVE}

    @classmethod
    def short_run(cls, method_args: dict, rounds: int) -> tuple[dict, int, str]:
        """Two rounds at least: global prototypes exist from round 1."""
        return {}, max(2, rounds), "fedproto: 2 rounds, global prototypes exist from round 1"

    def setup(self, server: ServerState) -> None:
        super().setup(server)
        feature_dim = getattr(server.model, "feature_dim", None)
        if feature_dim is None:
            raise FedlibError("fedproto needs a model with a feature_dim attribute (a fedlib.models model)")
        server.extras[PROTOTYPES] = torch.zeros(server.num_classes, feature_dim, device=server.device)
        server.extras[AVAILABLE] = torch.zeros(server.num_classes, device=server.device)

    def client_context(self, server: ServerState, ctx: ClientContext) -> None:
        super().client_context(server, ctx)
        ctx.tensors[PROTOTYPES] = server.extras[PROTOTYPES]
        ctx.tensors[AVAILABLE] = server.extras[AVAILABLE]

    def loss(self, out: Outputs, labels: Tensor, ctx: ClientContext,
             teacher_out: dict[str, Outputs]) -> Tensor:
        return local_loss(out.logits, out.features, labels, ctx.tensors[PROTOTYPES],
                          ctx.tensors[AVAILABLE], self.hp["lam"])

    def client_upload(self, model: nn.Module, ctx: ClientContext, update: ClientUpdate) -> None:
        super().client_upload(model, ctx, update)
        was_training = model.training
        model.eval()
        sums, counts = class_feature_sums(model, ctx.data, ctx.class_counts.numel(),
                                          ctx.tensors[PROTOTYPES].shape[1])
        model.train(was_training)
        update.extras["fedproto_sums"], update.extras["fedproto_counts"] = sums, counts

    def end_round(self, server: ServerState, updates: list[ClientUpdate]) -> None:
        super().end_round(server, updates)
        prototypes, available = aggregate_prototypes([u.extras["fedproto_sums"] for u in updates],
                                                     [u.extras["fedproto_counts"] for u in updates])
        server.extras[PROTOTYPES], server.extras[AVAILABLE] = prototypes, available
