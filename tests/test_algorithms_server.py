"""Optimiser and server-rule baselines: FedAvgM, FedNova, SCAFFOLD, FedExP, FedSAM, FedCurv, MOON.

Server rules are checked on a tiny nn.Linear(2, 1) "global model" against numbers computed by
hand (the arithmetic is written next to each expectation).
"""

import math
from types import SimpleNamespace

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from fedlib import engine
from fedlib.algorithms import build_algorithm, method_class
from fedlib.algorithms.base import ClientContext, ClientUpdate, Outputs
from fedlib.algorithms.fedcurv import diagonal_fisher, fisher_penalty
from fedlib.algorithms.fedexp import extrapolation_step
from fedlib.algorithms.fednova import momentum_path_length
from fedlib.algorithms.fedsam import FedSAM, ascent_perturbation, frozen_batchnorm_stats
from fedlib.algorithms.moon import contrastive_loss
from fedlib.algorithms.scaffold import option_two_update
from fedlib.config import RunConfig
from fedlib.errors import FedlibError


# ---------------------------------------------------------------------- toy server and clients
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


# ---------------------------------------------------------------------- FedAvgM
def test_fedavgm_two_rounds_by_hand():
    algo, server = build_algorithm("fedavgm", {"server_momentum": 0.9}), toy_server()
    algo.setup(server)
    # weighted mean: w = ((0,1)*1 + (2,2)*3)/4 = (1.5, 1.75), b = (1 - 3)/4 = -0.5
    # Delta = w_g - mean = (1-1.5, 2-1.75) = (-0.5, 0.25), b: 0.5; m = Delta; w = w_g - m = mean
    first = algo.aggregate(server, two_clients())
    assert_state(first, [1.5, 1.75], -0.5)
    server.model.load_state_dict(first)
    # same clients again: Delta = 0, m = 0.9 * (-0.5, 0.25, 0.5) = (-0.45, 0.225, 0.45)
    # w = (1.5 + 0.45, 1.75 - 0.225) = (1.95, 1.525), b = -0.5 - 0.45 = -0.95
    second = algo.aggregate(server, two_clients())
    assert_state(second, [1.95, 1.525], -0.95)
    assert torch.allclose(server.extras["fedavgm_momentum"]["bias"], torch.tensor([0.45]))


def test_fedavgm_zero_momentum_is_fedavg_and_buffers_are_averaged():
    bn = nn.BatchNorm1d(2)
    states = []
    for shift, n in ((1.0, 1), (5.0, 3)):
        state = {k: v.clone() for k, v in bn.state_dict().items()}
        state["running_mean"] += shift
        state["weight"] += shift
        states.append(state)
    server = SimpleNamespace(model=bn, extras={}, cache={}, round=0)
    algo = build_algorithm("fedavgm", {"server_momentum": 0.0})
    algo.setup(server)
    new = algo.aggregate(server, [ClientUpdate(0, states[0], 1, 1), ClientUpdate(1, states[1], 3, 1)])
    # (1*1 + 5*3)/4 = 4 for both the parameter (beta = 0) and the running-mean buffer
    assert torch.allclose(new["weight"], torch.full((2,), 5.0))  # 1 + 4
    assert torch.allclose(new["running_mean"], torch.full((2,), 4.0))
    assert set(server.extras["fedavgm_momentum"]) == {"weight", "bias"}  # buffers get no momentum


# ---------------------------------------------------------------------- FedNova
def test_fednova_path_length_by_hand():
    assert momentum_path_length(7, 0.0) == 7
    # (2 - 0.5 (1 - 0.25) / 0.5) / 0.5 = (2 - 0.75) / 0.5 = 2.5
    assert momentum_path_length(2, 0.5) == pytest.approx(2.5)
    with pytest.raises(FedlibError):
        momentum_path_length(2, 1.0)


def test_fednova_aggregate_by_hand():
    algo, server = build_algorithm("fednova"), toy_server(momentum=0.5)
    # a_0 = 2.5 (2 steps), a_1 = (1 - 0.5*0.5/0.5)/0.5 = 1; p = (0.25, 0.75); tau_eff = 0.625 + 0.75 = 1.375
    # d_0 = ((1,2) - (0,1))/2.5 = (0.4, 0.4), b: (0 - 1)/2.5 = -0.4; d_1 = (1,2) - (2,2) = (-1, 0), b: 1
    # sum p d = (0.1 - 0.75, 0.1) = (-0.65, 0.1), b: -0.1 + 0.75 = 0.65
    # w = (1,2) - 1.375 (-0.65, 0.1) = (1.89375, 1.8625), b = -1.375 * 0.65 = -0.89375
    new = algo.aggregate(server, two_clients())
    assert_state(new, [1.89375, 1.8625], -0.89375)
    assert algo.round_metrics(server, two_clients())["fednova_tau_eff"] == pytest.approx(1.375)


def test_fednova_equals_fedavg_for_equal_steps_without_momentum():
    server = toy_server(momentum=0.0)
    updates = [update(0, (0.0, 1.0), 1.0, 1, steps=3), update(1, (2.0, 2.0), -1.0, 3, steps=3)]
    assert_state(build_algorithm("fednova").aggregate(server, updates), [1.5, 1.75], -0.5)


# ---------------------------------------------------------------------- FedExP
def test_fedexp_step_by_hand():
    algo, server = build_algorithm("fedexp", {"eps": 0.01}), toy_server(weight=(0.0, 0.0))
    updates = [update(0, (2.0, 0.0), 1.0, 1), update(1, (0.0, -1.0), -1.0, 3)]
    # D_0 = (2, 0, 1), D_1 = (0, -1, -1); p = (0.25, 0.75)
    # sum p ||D_i||^2 = 0.25*5 + 0.75*2 = 2.75
    # D = (0.5, -0.75, 0.25 - 0.75) = (0.5, -0.75, -0.5); ||D||^2 = 0.25 + 0.5625 + 0.25 = 1.0625
    # eta = 2.75 / (2 (1.0625 + 2 * 0.01)) = 2.75 / 2.165
    eta = 2.75 / 2.165
    new = algo.aggregate(server, updates)
    assert_state(new, [0.5 * eta, -0.75 * eta], -0.5 * eta)
    assert algo.round_metrics(server, updates)["fedexp_eta_g"] == pytest.approx(eta)
    assert "fedexp_previous_params" not in server.extras  # round 0: no earlier iterate


def test_fedexp_step_is_at_least_one_and_eps_decays():
    same = [{"w": torch.tensor([1.0, 1.0])}, {"w": torch.tensor([1.0, 1.0])}]
    # identical updates: 2 / (2 (2 + 2 eps)) < 1 -> 1 (plain FedAvg)
    assert extrapolation_step(same, [1, 1], 0.01) == 1.0
    opposite = [{"w": torch.tensor([1.0])}, {"w": torch.tensor([-1.0])}]
    # D = 0: 1 / (2 (0 + 2 * 0.01)) = 25
    assert extrapolation_step(opposite, [1, 1], 0.01) == pytest.approx(25.0)
    algo = build_algorithm("fedexp", {"eps": 0.01})
    server = toy_server(weight=(0.0, 0.0), bias=0.0, lr_decay=0.5)
    server.round = 1
    algo.aggregate(server, [update(0, (1.0, 0.0), 0.0, 1), update(1, (-1.0, 0.0), 0.0, 1)])
    # eps_1 = 0.01 * 0.5^2 = 0.0025: eta = 1 / (2 * 2 * 0.0025) = 100
    assert server.extras["fedexp_eta_g"] == pytest.approx(100.0)


def test_fedexp_evaluates_the_average_of_the_last_two_iterates():
    algo, server = build_algorithm("fedexp"), toy_server(weight=(1.0, 2.0), bias=0.0)
    assert algo.eval_model(server) is server.model
    server.round = 1
    new = algo.aggregate(server, [update(0, (3.0, 2.0), 2.0, 1), update(1, (3.0, 2.0), 2.0, 1)])
    # identical clients: eta = 1, new = (3, 2), b = 2; previous = (1, 2), b = 0
    server.model.load_state_dict(new)
    evaluated = algo.eval_model(server)
    assert torch.allclose(evaluated.weight, torch.tensor([[2.0, 2.0]]))
    assert torch.allclose(evaluated.bias, torch.tensor([1.0]))
    assert torch.allclose(server.model.weight, torch.tensor([[3.0, 2.0]]))  # global untouched


# ---------------------------------------------------------------------- SCAFFOLD
def test_scaffold_option_two_by_hand():
    # c_i+ = c_i - c + (x - y)/(K lr) = 1 - 3 + (2 - 0.5)/(3 * 0.1) = -2 + 5 = 3
    new = option_two_update([torch.tensor([1.0])], [torch.tensor([3.0])], [torch.tensor([2.0])],
                            [torch.tensor([0.5])], steps=3, lr=0.1)
    assert torch.allclose(new[0], torch.tensor([3.0]))


def scaffold_context(algo, server, client_id) -> ClientContext:
    lr = server.cfg.lr * server.cfg.lr_decay ** server.round  # what the engine passes
    ctx = ClientContext(client_id=client_id, round=server.round, class_counts=torch.ones(2),
                        num_samples=4, data=None, lr=lr)
    algo.client_context(server, ctx)
    return ctx


def test_scaffold_corrected_sgd_step_and_control_update_by_hand():
    algo, server = build_algorithm("scaffold"), toy_server(weight=(1.0, 2.0), bias=0.0, lr=0.1, clients=4)
    algo.setup(server)
    server.extras["scaffold_c"] = {"weight": torch.tensor([[1.0, 1.0]]), "bias": torch.tensor([2.0])}
    server.extras["scaffold_c_clients"][0] = {"weight": torch.tensor([[0.5, -1.0]]), "bias": torch.tensor([0.0])}
    model = linear((1.0, 2.0), 0.0)
    ctx = scaffold_context(algo, server, 0)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    model.weight.grad, model.bias.grad = torch.tensor([[1.0, 0.0]]), torch.tensor([1.0])
    algo.before_step(model, ctx)
    # g - c_i + c = (1 - 0.5 + 1, 0 + 1 + 1) = (1.5, 2), b: 1 - 0 + 2 = 3
    assert torch.allclose(model.weight.grad, torch.tensor([[1.5, 2.0]]))
    optimizer.step()  # w = (1 - 0.15, 2 - 0.2) = (0.85, 1.8), b = -0.3
    up = ClientUpdate(0, model.state_dict(), 4, 1)
    algo.client_upload(model, ctx, up)
    # c_0+ = c_0 - c + (x - y)/(1 * 0.1) = (0.5 - 1 + 1.5, -1 - 1 + 2) = (1, 0), b: 0 - 2 + 3 = 1
    assert torch.allclose(up.extras["scaffold_c_i"]["weight"], torch.tensor([[1.0, 0.0]]), atol=1e-5)
    assert torch.allclose(up.extras["scaffold_c_i"]["bias"], torch.tensor([1.0]), atol=1e-5)
    algo.end_round(server, [up])
    # c = c + (c_0+ - c_0)/N = (1 + 0.5/4, 1 + 1/4) = (1.125, 1.25), b: 2 + 1/4 = 2.25
    assert torch.allclose(server.extras["scaffold_c"]["weight"], torch.tensor([[1.125, 1.25]]), atol=1e-5)
    assert torch.allclose(server.extras["scaffold_c"]["bias"], torch.tensor([2.25]), atol=1e-5)


def test_scaffold_new_client_starts_from_zero_and_model_rule_is_fedavg():
    algo, server = build_algorithm("scaffold"), toy_server(clients=4)
    algo.setup(server)
    ups = two_clients()
    for up, value in zip(ups, (4.0, 8.0)):
        up.extras["scaffold_c_i"] = {"weight": torch.full((1, 2), value), "bias": torch.tensor([value])}
    assert_state(algo.aggregate(server, ups), [1.5, 1.75], -0.5)
    algo.end_round(server, ups)
    # c = 0 + (4 - 0)/4 + (8 - 0)/4 = 3
    assert torch.allclose(server.extras["scaffold_c"]["bias"], torch.tensor([3.0]))
    assert sorted(server.extras["scaffold_c_clients"]) == [0, 1]


# ---------------------------------------------------------------------- FedSAM
def test_sam_perturbation_by_hand():
    # g = (3, 4): ||g|| = 5, e = 0.1 * g / 5 = (0.06, 0.08)
    e = ascent_perturbation([torch.tensor([3.0]), torch.tensor([4.0])], 0.1)
    assert torch.allclose(torch.cat(e), torch.tensor([0.06, 0.08]))
    assert torch.all(ascent_perturbation([torch.zeros(3)], 0.1)[0] == 0)


class TinyNet(nn.Module):
    """features = x, logits = Linear(x); with an optional BatchNorm in front."""

    def __init__(self, bn: bool = False):
        super().__init__()
        self.bn = nn.BatchNorm1d(2) if bn else nn.Identity()
        self.fc = nn.Linear(2, 3)

    def forward(self, x, return_features=False):
        features = self.bn(x)
        logits = self.fc(features)
        return (features, logits) if return_features else logits


def test_sam_step_uses_gradient_at_perturbed_point():
    torch.manual_seed(0)
    model, x, y = TinyNet(), torch.randn(5, 2), torch.tensor([0, 1, 2, 0, 1])
    start = [p.detach().clone() for p in model.parameters()]
    # reference, step by step: g at w, e = rho g/||g||, g2 at w + e, w <- w - lr g2
    w = [p.clone().requires_grad_(True) for p in start]
    g = torch.autograd.grad(F.cross_entropy(F.linear(x, w[0], w[1]), y), w)
    norm = math.sqrt(sum(float((t ** 2).sum()) for t in g))
    shifted = [(p + 0.5 * t / norm).detach().requires_grad_(True) for p, t in zip(start, g)]
    g2 = torch.autograd.grad(F.cross_entropy(F.linear(x, shifted[0], shifted[1]), y), shifted)
    expected = [p - 0.1 * t for p, t in zip(start, g2)]
    algo = build_algorithm("fedsam", {"rho": 0.5})
    ctx = ClientContext(0, 0, torch.ones(3), 5, None)
    loss = algo.train_step(model, torch.optim.SGD(model.parameters(), lr=0.1), x, y, ctx)
    for p, e in zip(model.parameters(), expected):
        assert torch.allclose(p, e, atol=1e-6)
    assert loss == pytest.approx(float(F.cross_entropy(F.linear(x, start[0], start[1]), y)))


def test_sam_second_pass_leaves_batchnorm_statistics_alone():
    torch.manual_seed(0)
    model, x, y = TinyNet(bn=True), torch.randn(8, 2) + 3.0, torch.zeros(8, dtype=torch.long)
    algo = build_algorithm("fedsam")
    algo.train_step(model, torch.optim.SGD(model.parameters(), lr=0.1), x, y, ClientContext(0, 0, torch.ones(3), 8, None))
    # one update with momentum 0.1 from 0: running_mean = 0.1 * batch mean
    assert torch.allclose(model.bn.running_mean, 0.1 * x.mean(0), atol=1e-6)
    assert int(model.bn.num_batches_tracked) == 1
    assert model.bn.momentum == 0.1
    with frozen_batchnorm_stats(model):
        model(x)
    assert int(model.bn.num_batches_tracked) == 1


def test_fedsam_composes_with_a_loss_method():
    klass = method_class("fedvls+fedsam")
    assert klass.train_step is FedSAM.train_step
    assert klass.loss is method_class("fedvls").loss


# ---------------------------------------------------------------------- FedCurv
def test_fisher_penalty_by_hand_and_equal_to_the_double_sum():
    # one other client: u = (1, 2), w_j = (1, -1), w = (0, 1): 1*(0-1)^2 + 2*(1+1)^2 = 9; lambda 0.5 -> 4.5
    u, wj, w = torch.tensor([1.0, 2.0]), torch.tensor([1.0, -1.0]), torch.tensor([0.0, 1.0])
    assert float(fisher_penalty(w, u, u * wj, (u * wj * wj).sum(), 0.5)) == pytest.approx(4.5)
    torch.manual_seed(0)
    us, ws, w = torch.rand(3, 5), torch.randn(3, 5), torch.randn(5, requires_grad=True)
    direct = sum((us[j] * (w - ws[j]) ** 2).sum() for j in range(3))
    value = fisher_penalty(w, us.sum(0), (us * ws).sum(0), (us * ws * ws).sum(), 1.0)
    assert float(value.detach()) == pytest.approx(float(direct.detach()), rel=1e-5)
    (grad,) = torch.autograd.grad(value, w)
    # d/dw = 2 (P w - Q)
    assert torch.allclose(grad, 2 * (us.sum(0) * w - (us * ws).sum(0)).detach(), atol=1e-5)


def test_fedcurv_excludes_the_clients_own_fisher():
    algo, server = build_algorithm("fedcurv"), toy_server()
    algo.setup(server)
    ctx = scaffold_context(algo, server, 0)
    assert "fedcurv_P" not in ctx.tensors and algo.penalty(server.model, ctx) is None  # round 0
    uploads = {0: torch.tensor([1.0, 1.0, 1.0]), 1: torch.tensor([2.0, 0.0, 3.0])}
    ups = [ClientUpdate(k, {}, 1, 1, extras={"fedcurv": {"u": u, "v": 2 * u, "r": u.sum()}}) for k, u in uploads.items()]
    algo.end_round(server, ups)
    server.round = 1
    ctx = scaffold_context(algo, server, 0)
    assert torch.equal(ctx.tensors["fedcurv_P"], uploads[1])
    assert torch.equal(ctx.tensors["fedcurv_Q"], 2 * uploads[1])
    ctx_new = scaffold_context(algo, server, 3)  # a client with no Fisher of its own sees both
    assert torch.equal(ctx_new.tensors["fedcurv_P"], uploads[0] + uploads[1])


def test_diagonal_fisher_is_mean_squared_batch_gradient():
    torch.manual_seed(0)
    model = nn.Linear(2, 3)
    batches = [(torch.randn(4, 2), torch.tensor([0, 1, 2, 0])) for _ in range(3)]
    fisher = diagonal_fisher(model, iter(batches), min_samples=8)  # stops after 2 batches (8 samples)
    squares = []
    for x, y in batches[:2]:
        grads = torch.autograd.grad(F.cross_entropy(model(x), y), list(model.parameters()))
        squares.append(torch.cat([g.reshape(-1) for g in grads]) ** 2)
    assert torch.allclose(fisher, (squares[0] + squares[1]) / 2)


# ---------------------------------------------------------------------- MOON
def test_contrastive_loss_by_hand():
    z = torch.tensor([[1.0, 0.0], [1.0, 1.0]], requires_grad=True)
    z_glob = torch.tensor([[2.0, 0.0], [1.0, 0.0]], requires_grad=True)
    z_prev = torch.tensor([[0.0, 3.0], [-1.0, 0.0]], requires_grad=True)
    # sample 0: cos = 1 and 0 -> logits (2, 0): -log(e^2 / (e^2 + 1)) = log(1 + e^-2)
    # sample 1: cos = 1/sqrt2 and -1/sqrt2 -> logits (sqrt2, -sqrt2): log(1 + e^(-2 sqrt2))
    expected = (math.log(1 + math.exp(-2)) + math.log(1 + math.exp(-2 * math.sqrt(2)))) / 2
    value = contrastive_loss(z, z_glob, z_prev, 0.5)
    assert float(value.detach()) == pytest.approx(expected, rel=1e-6)
    value.backward()
    assert z.grad is not None and z_glob.grad is None and z_prev.grad is None


def test_contrastive_loss_invariants_and_extremes():
    torch.manual_seed(0)
    z, other = torch.randn(4, 6), torch.randn(4, 6)
    # positive == negative: every sample gives -log(1/2) = log 2
    assert float(contrastive_loss(z, other, other, 0.5)) == pytest.approx(math.log(2))
    big = contrastive_loss(1e4 * z, 1e4 * z, -1e4 * z, 0.5)
    assert torch.isfinite(big) and float(big) == pytest.approx(math.log(1 + math.exp(-4)), rel=1e-5)
    zero = contrastive_loss(torch.zeros(2, 3), z[:2, :3], other[:2, :3], 0.5)
    assert torch.isfinite(zero)


def test_moon_loss_is_ce_plus_mu_contrastive():
    torch.manual_seed(0)
    algo = build_algorithm("moon", {"mu": 0.5, "tau": 0.5})
    feats, logits, labels = torch.randn(3, 4), torch.randn(3, 5), torch.tensor([0, 4, 2])
    teachers = {"moon_global": Outputs(torch.randn(3, 4), torch.randn(3, 5)),
                "moon_previous": Outputs(torch.randn(3, 4), torch.randn(3, 5))}
    value = algo.loss(Outputs(feats, logits), labels, ClientContext(0, 0, torch.ones(5), 3, None), teachers)
    expected = F.cross_entropy(logits, labels) + 0.5 * contrastive_loss(
        feats, teachers["moon_global"].features, teachers["moon_previous"].features, 0.5)
    assert float(value) == pytest.approx(float(expected))


# ---------------------------------------------------------------------- end to end
def tiny(method: str, **changes) -> RunConfig:
    base = dict(dataset="synthetic", model="mlp", clients=3, rounds=2, local_epochs=1, batch_size=16,
                max_train_samples=150, max_test_samples=60, lr=0.05, momentum=0.5, seed=0,
                device="cpu", method=method)
    base.update(changes)
    return RunConfig(**base)


@pytest.mark.parametrize("method, args", [
    ("fedsam", {}), ("fedexp", {}), ("fedavgm", {}), ("fednova", {}), ("scaffold", {}),
    ("scaffold", {"control_divisor": "momentum"}), ("fedcurv", {}), ("moon", {}),
    ("moon", {"projection_head": True}), ("fedvls+fedsam", {}), ("fedvls+fedexp", {}),
    ("fedlmd+fedavgm", {}), ("scaffold+fedexp", {}),
])
def test_two_rounds_without_nan(method, args):
    result = engine.run(tiny(method, method_args=args), use_store=False, progress=False)
    assert len(result.rounds) == 2
    for row in result.rounds:
        assert math.isfinite(row["loss"]) and 0.0 <= row["accuracy"] <= 1.0
    numbers = [v for row in result.rounds for k, v in row.items() if k.startswith(("fedexp", "fednova"))]
    assert all(math.isfinite(v) for v in numbers)


@pytest.mark.parametrize("method, args", [("scaffold", {}), ("fedcurv", {}), ("fedexp", {}),
                                          ("fedavgm", {}), ("moon", {"projection_head": True})])
def test_resume_matches_an_uninterrupted_run(tmp_path, method, args):
    cfg = tiny(method, method_args=args, rounds=3)
    whole = engine.run(cfg, use_store=False, progress=False)
    engine.run(cfg, results_dir=tmp_path, progress=False, stop_after=2)
    resumed = engine.run(cfg, results_dir=tmp_path, progress=False)
    assert resumed.final_accuracy == whole.final_accuracy
    assert resumed.summary["final_loss"] == pytest.approx(whole.summary["final_loss"], rel=1e-6)
