"""The low-dimensional memory of experiments/rag/lowdim.py: scores against brute-force formulas,
the tree closure, the ridge start, and short real training runs on the shipped mammals."""

from __future__ import annotations

import math

import geoopt
import pytest
import torch

from experiments.rag.comparison import train_step
from experiments.rag.data import build_rag_data
from experiments.rag.lowdim import (
    DeepBall,
    LowDimModule,
    LowDimRAG,
    closure_edges,
    fit_keys,
    pair_energy,
    ridge_query_map,
    run_lowdim,
    tangent_of,
)
from hypermem.embed import HashingEmbedder


@pytest.fixture(scope="module")
def tiny():
    return build_rag_data("mammal.n.01", n_test=40, n_val=40, embedder=HashingEmbedder(dim=32), cache=False)


def ball_points(n, d, seed, radius=0.95):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, d, generator=g, dtype=torch.float64)
    return x / x.norm(dim=1, keepdim=True) * radius * torch.rand(n, 1, generator=g, dtype=torch.float64)


def test_ball_energy_is_the_poincare_distance_and_cosh_minus_one():
    q, k = ball_points(5, 3, 0), ball_points(7, 3, 1, radius=0.999)
    ball = geoopt.PoincareBall()
    brute = torch.stack([torch.stack([ball.dist(q[i], k[j]) for j in range(7)]) for i in range(5)])
    assert torch.allclose(pair_energy(q, k, "poincare", "dist"), brute, rtol=1e-9, atol=1e-9)
    assert torch.allclose(pair_energy(q, k, "poincare", "sq"), torch.cosh(brute) - 1, rtol=1e-8)


def test_euclidean_energy_is_the_norm_and_its_square():
    g = torch.Generator().manual_seed(2)
    q, k = torch.randn(4, 5, generator=g, dtype=torch.float64), torch.randn(6, 5, generator=g, dtype=torch.float64)
    brute = (q[:, None, :] - k[None, :, :]).norm(dim=2)
    assert torch.allclose(pair_energy(q, k, "euclidean", "dist"), brute, atol=1e-9)
    assert torch.allclose(pair_energy(q, k, "euclidean", "sq"), brute ** 2, atol=1e-9)


@pytest.mark.parametrize("geometry", ["poincare", "euclidean"])
def test_scores_match_the_formula_with_depth_offset(geometry):
    keys = ball_points(6, 3, 3)
    model = LowDimRAG(keys, torch.tensor([-1, 0, 0, 1, 1, 2]), 4, geometry, "dist", "plain")
    with torch.no_grad():
        model.depth_bias.fill_(0.4)
        model.log_temperature.fill_(math.log(0.3))
    x = torch.randn(3, 4, generator=torch.Generator().manual_seed(4))
    v = model.query(x.double())
    if geometry == "poincare":
        q = torch.tanh(v.norm(dim=1, keepdim=True)) * v / v.norm(dim=1, keepdim=True)
        ball = geoopt.PoincareBall()
        d = torch.stack([torch.stack([ball.dist(q[i], keys[j]) for j in range(6)]) for i in range(3)])
        d0 = torch.stack([ball.dist0(keys[j]) for j in range(6)])
    else:
        d = (v[:, None, :] - keys[None]).norm(dim=2)
        d0 = keys.norm(dim=1)
    assert torch.allclose(model.answer_scores(x), -(d - 0.4 * d0) / 0.3, atol=1e-8)


def test_closure_edges_of_a_small_tree():
    # 0 <- 1 <- 3, 0 <- 2
    assert sorted(closure_edges([-1, 0, 0, 1])) == [(1, 0), (2, 0), (3, 0), (3, 1)]


def test_ridge_recovers_an_exact_linear_map_and_tangent_inverts_expmap():
    g = torch.Generator().manual_seed(5)
    X = torch.randn(50, 6, generator=g, dtype=torch.float64)
    W, b = torch.randn(3, 6, generator=g, dtype=torch.float64), torch.randn(3, generator=g, dtype=torch.float64)
    W2, b2 = ridge_query_map(X, X @ W.T + b, lam=1e-10)
    assert torch.allclose(W2, W, atol=1e-6) and torch.allclose(b2, b, atol=1e-6)
    k = ball_points(10, 3, 6)
    v = tangent_of(k)
    assert torch.allclose(torch.tanh(v.norm(dim=1, keepdim=True)) * v / v.norm(dim=1, keepdim=True), k, atol=1e-12)


def test_deep_ball_keeps_points_that_geoopt_would_cut():
    x = torch.tensor([[1 - 1e-10, 0.0]], dtype=torch.float64)
    assert float(DeepBall().projx(x).norm()) == pytest.approx(1 - 1e-10, abs=1e-14)
    assert float(geoopt.PoincareBall().projx(x).norm()) < 1 - 1e-6


@pytest.mark.parametrize("geometry", ["poincare", "euclidean"])
@pytest.mark.parametrize("readout", ["plain", "vote"])
def test_training_moves_keys_lowers_loss_and_stays_valid(tiny, geometry, readout):
    keys = ball_points(tiny.n_slots, 3, 7, radius=0.999)
    target = tangent_of(keys) if geometry == "poincare" else keys
    model = LowDimRAG(keys, tiny.slot_parent, tiny.dim, geometry, "dist", readout, learn_keys=True,
                      init=ridge_query_map(tiny.slot_emb, target))
    opts = LowDimModule(model, lr=0.03, key_lr=0.03).configure_optimizers()
    assert len(opts) == 2
    slots = tiny.train_slots[:32]
    x, y = tiny.slot_emb[slots], tiny.slot_parent[slots]
    _, s = model.train_scores(x, y, slots)
    assert torch.isinf(s[torch.arange(len(slots)), slots]).all()  # the own slot is never a candidate
    before = model.keys.detach().clone()
    losses = []
    for _ in range(4):
        losses.append(float(train_step(model, opts, x, y, slots).detach()))
        for p in model.parameters():
            assert p.grad is None or torch.isfinite(p.grad).all()
    assert losses[-1] < losses[0]
    assert not torch.equal(model.keys.detach(), before)
    if geometry == "poincare":
        assert float(model.keys.detach().norm(dim=1).max()) < 1


def test_fit_keys_fits_the_closure_in_each_geometry(tiny):
    for g in ("poincare", "euclidean"):
        keys, quality = fit_keys(tiny, g, 2, epochs=1)
        assert keys.shape == (tiny.n_slots, 2) and 0 < quality["map"] <= 1 and quality["mean_rank"] >= 1
        if g == "poincare":
            assert float(keys.norm(dim=1).max()) < 1


def test_run_lowdim_chooses_on_validation_with_one_readout_for_both(tiny, tmp_path):
    keys = {"poincare": ball_points(tiny.n_slots, 2, 8, radius=0.99), "euclidean": ball_points(tiny.n_slots, 2, 9, 3.0)}
    res = run_lowdim(tiny, 2, metrics=("dist",), readouts=("plain", "vote"), key_lrs=(0.03,), lrs=(0.03,), epochs=0.3,
                     batch_size=64, val_every=4, keys=keys, out=str(tmp_path / "lowdim"), log=None)
    for variant in ("frozen", "trained"):
        ch = res["chosen"][variant]
        assert ch["poincare"]["readout"] == ch["euclidean"]["readout"] == ch["readout"]
        assert ch["poincare"]["variant"] == variant
        for g in ("poincare", "euclidean"):  # the chosen run is the grid's best on validation
            same = [r for r in res["geometries"][g]["runs"] if r["variant"] == variant and r["readout"] == ch["readout"]]
            assert ch[g]["val"]["mrr"] == max(r["val"]["mrr"] for r in same)
            assert 0 <= ch[g]["test"]["mrr"] <= 1
