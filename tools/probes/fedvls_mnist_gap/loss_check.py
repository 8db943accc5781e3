"""fedlib's official FedVLS loss against a from-the-facts restatement of the authors' client loss."""
import math

import torch
import torch.nn.functional as F

from fedlib.algorithms.fedvls import local_loss


def authors_style(z, zt, y, counts, lam):
    C = z.shape[1]
    prior = counts / counts.sum()
    cal = F.cross_entropy(z + torch.log(prior + 1e-9), y)
    spread = (z - torch.log(prior + 1e-9) + math.log(1.0 / C)).T * (y != torch.arange(C).view(-1, 1)).float()
    second = torch.logsumexp(spread, -1) - math.log(z.shape[0])
    sup = -torch.sum(-second * prior) * 0.005
    vac = torch.where(prior == 0)[0]
    kl = F.kl_div(F.log_softmax(z[:, vac], dim=1), F.softmax(zt[:, vac], dim=1), reduction="batchmean")
    return cal + sup + lam * kl


torch.manual_seed(0)
worst = 0.0
for case in range(200):
    C, B = 10, int(torch.randint(1, 65, ()))
    counts = torch.zeros(C)
    held = torch.randperm(C)[: int(torch.randint(1, C + 1, ()))]
    counts[held] = torch.randint(1, 6000, (len(held),)).float()
    y = held[torch.randint(0, len(held), (B,))]
    z = (torch.randn(B, C) * 5).requires_grad_()
    zt = torch.randn(B, C) * 5
    lam = float(torch.rand(()))
    a = authors_style(z, zt, y, counts, lam)
    ga, = torch.autograd.grad(a, z)
    b = local_loss(z, zt, y, counts, lam=lam, variant="official")
    gb, = torch.autograd.grad(b, z)
    worst = max(worst, abs(a - b).item(), (ga - gb).abs().max().item())
print("200 cases, max |loss diff| or |grad diff|:", worst)
