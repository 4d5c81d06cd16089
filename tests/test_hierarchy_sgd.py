"""The SGD steps of hierarchy training: the fused step against geoopt's RiemannianSGD, the
compiled (numba) epoch against the torch steps, poincare-memory's ``lr``, Hogwild workers,
and the speed tiers."""

import pytest
import torch
from tree_helpers import balanced_isa

from hypermem.hierarchy import Relations, reconstruction
from hypermem.hierarchy.ranking_loss import softmax_ranking_loss
from hypermem.hierarchy.sampling import NegativeSampler
from hypermem.hierarchy.training import fit_poincare_embeddings


@pytest.mark.parametrize("geometry", ["poincare", "euclidean"])
@pytest.mark.parametrize("c", [1.0, 2.0])
def test_fused_sgd_step_equals_geoopt_riemannian_sgd(geometry, c):
    from hypermem.geometry import PoincareBall
    from hypermem.hierarchy.fused_sgd import softmax_sgd_step
    from hypermem.hierarchy.model import HierarchyEmbedding
    from hypermem.hierarchy.training import make_optimizer

    model = HierarchyEmbedding(30, 4, geometry=geometry, ball=PoincareBall(curvature=c), init_range=0.3, seed=1)
    start = model.weight.detach().clone()
    g = torch.Generator().manual_seed(0)
    u = torch.randint(0, 30, (16,), generator=g)
    cand = torch.randint(0, 30, (16, 6), generator=g)
    cand[:, 0] = (u + 1) % 30  # positives; repeated rows among the candidates on purpose
    masked_out = (torch.rand(16, 6, generator=g) < 0.2) | (cand == u[:, None])
    masked_out[:, 0] = False
    opt = make_optimizer([model.weight], "rsgd", 0.7)
    d_pos, d_neg = model(u, cand[:, 0], cand[:, 1:])
    loss = softmax_ranking_loss(d_pos, d_neg, ~masked_out[:, 1:], reduction="sum")
    loss.backward()
    opt.step()
    w = start.clone()
    fused_loss = softmax_sgd_step(w, u, cand, masked_out, 0.7, geometry, c)
    assert float(fused_loss) == pytest.approx(float(loss.detach()), rel=1e-12)
    assert torch.allclose(w, model.weight.detach(), atol=1e-13)


def test_fused_step_keeps_points_inside_the_ball():
    from hypermem.hierarchy.fused_sgd import softmax_sgd_step

    w = torch.full((5, 2), 0.7, dtype=torch.float64) * torch.tensor([[1.0, 1.0]] * 4 + [[-1.0, -1.0]])
    u = torch.tensor([0, 1])
    cand = torch.tensor([[4, 2], [4, 3]])
    softmax_sgd_step(w, u, cand, torch.zeros(2, 2, dtype=torch.bool), 50.0)  # a huge step
    assert bool((w.norm(dim=1) < 1.0).all())


def compiled_epoch_matches_torch_steps(geometry, c, dtype, spread, tol, loss_rel):
    """Run softmax_sgd_epoch and the torch steps of softmax_sgd_step from the same start
    on 200 pairs with batches of 1, 16 and 200; check they agree; return the inputs."""
    pytest.importorskip("numba")
    from hypermem.hierarchy.compiled_sgd import compiled_epoch_available, softmax_sgd_epoch
    from hypermem.hierarchy.fused_sgd import sample_epoch, softmax_sgd_step

    rel = Relations(balanced_isa(3, 4))
    g = torch.Generator().manual_seed(0)
    pairs = rel.pairs[torch.randperm(len(rel), generator=g)][:200]
    cand, masked_out = sample_epoch(NegativeSampler(rel, generator=g), pairs, 12, unigram=False)
    start = ((torch.rand(rel.n, 4, generator=g, dtype=torch.float64) - 0.5) * spread).to(dtype)
    assert compiled_epoch_available(start, geometry)
    for bs in (1, 16, 200):
        A, B = start.clone(), start.clone()
        loss_a = sum(float(softmax_sgd_step(A, pairs[s:s + bs, 0], cand[s:s + bs], masked_out[s:s + bs], 0.5,
                                            geometry, c)) for s in range(0, len(pairs), bs))
        loss_b = softmax_sgd_epoch(B, pairs[:, 0], cand, masked_out, 0.5, bs, curvature=c, geometry=geometry)
        assert float((A - B).abs().max()) < tol and loss_b == pytest.approx(loss_a, rel=loss_rel)
        assert not torch.equal(B, start)
        if geometry == "poincare":
            assert bool((B.norm(dim=1) * c ** 0.5 < 1).all())
    return start, pairs, cand, masked_out


@pytest.mark.parametrize("c", [1.0, 2.0])
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_compiled_epoch_equals_the_torch_steps(c, dtype):
    """The numba epoch takes the same Riemannian SGD steps as softmax_sgd_step, batch
    after batch (to rounding), and keeps every point inside the ball."""
    from hypermem.hierarchy.compiled_sgd import compiled_epoch_available, softmax_sgd_epoch

    tol = 1e-9 if dtype == torch.float64 else 1e-3
    # points near the boundary amplify rounding differences in the summed loss
    start, pairs, cand, masked_out = compiled_epoch_matches_torch_steps("poincare", c, dtype, 0.8, tol, 1e3 * tol)
    # a point pushed to the boundary comes back inside, as the torch projection does
    A = start.clone()
    A[0] = A[0] / A[0].norm() * 0.999999 / c ** 0.5
    softmax_sgd_epoch(A, pairs[:, 0], cand, masked_out, 50.0, 8, curvature=c)
    assert bool(torch.isfinite(A).all()) and bool((A.norm(dim=1) * c ** 0.5 < 1).all())
    assert not compiled_epoch_available(start, "lorentz")
    with pytest.raises(ValueError, match="batch_size"):
        softmax_sgd_epoch(start.clone(), pairs[:, 0], cand, masked_out, 0.5, 0)
    with pytest.raises(ValueError, match="geometry"):
        softmax_sgd_epoch(start.clone(), pairs[:, 0], cand, masked_out, 0.5, 8, geometry="lorentz")


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_compiled_euclidean_epoch_equals_the_torch_steps(dtype):
    """The Euclidean baseline's compiled epoch: the plain SGD steps of softmax_sgd_step
    (summed loss, ``x -= lr grad``), batch after batch, with a candidate on top of its
    anchor kept finite."""
    from hypermem.hierarchy.compiled_sgd import softmax_sgd_epoch

    tol = 1e-9 if dtype == torch.float64 else 1e-4
    start, pairs, cand, masked_out = compiled_epoch_matches_torch_steps("euclidean", 1.0, dtype, 3.0, tol, 10 * tol)
    same = start.clone()
    same[pairs[0, 1]] = same[pairs[0, 0]]  # the first positive sits on its anchor
    softmax_sgd_epoch(same, pairs[:, 0], cand, masked_out, 0.5, 16, geometry="euclidean")
    assert bool(torch.isfinite(same).all())


def test_lr_acts_on_the_summed_loss_like_poincare_memory():
    """One batch, the same negatives: hypermem's step with ``lr`` is poincare-memory's
    step with ``lr`` (gradients of the batch summed, Riemannian factor
    ``(1 - ||x||^2)^2 / 4`` at the current points), so its ``lr`` values carry over."""
    rsgd = pytest.importorskip("poincare_memory.hierarchy.rsgd")
    import numpy as np

    from hypermem.hierarchy.fused_sgd import softmax_sgd_step

    rng = np.random.default_rng(0)
    theta = rng.uniform(-0.4, 0.4, size=(40, 5))
    u = rng.integers(0, 40, 16)
    v = (u + 1) % 40
    neg = (u[:, None] + rng.integers(2, 40, (16, 7))) % 40  # never the anchor; rows repeat
    lr = 0.1
    # the reference's step, from its own distance/gradient and loss helpers
    tu, tv, tn = theta[u], theta[v], theta[neg]
    d_pos, g_u_pos = rsgd._poincare_distance_and_grad(tu, tv)
    _, g_v_pos = rsgd._poincare_distance_and_grad(tv, tu)
    d_neg, g_u_neg = rsgd._poincare_distance_and_grad(tu[:, None, :], tn)
    _, g_n = rsgd._poincare_distance_and_grad(tn, tu[:, None, :])
    loss, dpos, dneg = rsgd._softmax_neg_log_prob(d_pos, d_neg)
    grad = np.zeros_like(theta)
    np.add.at(grad, u, dpos[:, None] * g_u_pos + np.sum(dneg[..., None] * g_u_neg, axis=1))
    np.add.at(grad, v, dpos[:, None] * g_v_pos)
    np.add.at(grad, neg.ravel(), (dneg[..., None] * g_n).reshape(-1, 5))
    want = theta - lr * ((1 - (theta ** 2).sum(1, keepdims=True)) ** 2 / 4) * grad
    w = torch.from_numpy(theta.copy())
    cand = torch.from_numpy(np.concatenate([v[:, None], neg], axis=1))
    got = softmax_sgd_step(w, torch.from_numpy(u), cand, torch.zeros(cand.shape, dtype=torch.bool), lr)
    assert float(got) == pytest.approx(float(loss.sum()), rel=1e-6)
    assert np.allclose(w.numpy(), want, rtol=0, atol=1e-8)
    assert not np.allclose(want, theta, rtol=0, atol=1e-4)  # the step moved the points
    mean_step = theta - lr / 16 * ((1 - (theta ** 2).sum(1, keepdims=True)) ** 2 / 4) * grad
    assert not np.allclose(w.numpy(), mean_step, rtol=0, atol=1e-4)  # not a mean over the batch


def test_hogwild_workers_split_the_epoch():
    """workers=2 runs the two halves of the epoch in two threads on one table: on pairs
    whose halves touch disjoint rows (two separate trees) no update can collide, so the
    result equals the one-thread epoch; on one tree training still works, points stay in
    the ball, and bad ``workers`` values are errors."""
    pytest.importorskip("numba")
    from hypermem.hierarchy.compiled_sgd import softmax_sgd_epoch
    from hypermem.hierarchy.fused_sgd import sample_epoch

    left = balanced_isa(3, 3)  # nodes 0..39
    right = [(d + 40, a + 40) for d, a in left]
    rel = Relations(left + right, nodes=list(range(80)))
    g = torch.Generator().manual_seed(0)
    half = torch.randperm(len(left), generator=g)
    # each tree samples negatives inside itself, so the halves never share a row
    parts = []
    for sub, shift in ((left, 0), (right, 40)):
        r = Relations(sub, nodes=list(range(shift, shift + 40)))
        pairs = r.pairs[half]
        cand, masked = sample_epoch(NegativeSampler(r, generator=g), pairs, 6, unigram=False)
        parts.append((pairs[:, 0] + shift, cand + shift, masked))
    anchors, cand, masked = (torch.cat(x) for x in zip(*parts))
    assert len(left) % 6 == 0  # 17 batches of 6 pairs a tree: the halves split between the trees
    start = (torch.rand(rel.n, 3, generator=g, dtype=torch.float64) - 0.5) * 0.5
    one, two = start.clone(), start.clone()
    loss_one = softmax_sgd_epoch(one, anchors, cand, masked, 0.3, 6)
    loss_two = softmax_sgd_epoch(two, anchors, cand, masked, 0.3, 6, workers=2)
    assert torch.equal(one, two) and loss_two == pytest.approx(loss_one, rel=1e-12)
    assert not torch.equal(one, start)
    with pytest.raises(ValueError, match="workers"):
        softmax_sgd_epoch(start.clone(), anchors, cand, masked, 0.3, 8, workers=0)
    # a row that another thread left outside the ball for a moment gives finite steps
    # and ends back inside
    # (a row read halfway through another thread's write mixes two rows of the ball: norm < sqrt 2)
    for outside in (1.0000001, 1.41, 40.0):
        out = start.clone()
        out[anchors[0]] = out[anchors[0]] / out[anchors[0]].norm() * outside
        out[cand[0, 1]] = out[cand[0, 1]] / out[cand[0, 1]].norm() * outside
        softmax_sgd_epoch(out, anchors, cand, masked, 0.3, 6)
        assert bool(torch.isfinite(out).all()) and bool((out.norm(dim=1) < 1).all()), outside

    closure = balanced_isa(4, 3)
    pts, rep = fit_poincare_embeddings(closure, dim=5, epochs=100, burn_in=5, lr=1.0, batch_size=8, workers=2,
                                       final_lr_factor=0.01)
    assert rep.settings["workers"] == 2 and rep.losses[-1] < rep.losses[0]
    assert all(float(x.norm()) < 1.0 for x in pts.values())
    # Hogwild is not reproducible: over 200 runs MAP ranged 0.80-0.94 (median 0.91; one
    # thread 0.94), random points 0.06-0.10
    assert reconstruction(pts, closure, "poincare").map > 0.75
    with pytest.raises(ValueError, match="workers"):
        fit_poincare_embeddings(closure, epochs=1, workers=0)


def test_one_place_chooses_the_speed_tier():
    from hypermem.hierarchy.compiled_sgd import compiled_epoch_available
    from hypermem.hierarchy.objectives import objective_for
    from hypermem.hierarchy.steps import choose_tier

    w = torch.zeros(4, 2, dtype=torch.float64)
    fast = "compiled" if compiled_epoch_available(w) else "closed_form"
    assert choose_tier(objective_for("poincare"), "rsgd", w) == fast
    assert choose_tier(objective_for("euclidean"), "rsgd", w) == fast
    assert choose_tier(objective_for("poincare"), "radam", w) == "autograd"
    assert choose_tier(objective_for("poincare"), "rsgd", w, processes=2) == "autograd"
    assert choose_tier(objective_for("poincare"), "rsgd", w, custom=True) == "autograd"
    assert choose_tier(objective_for("cones"), "rsgd", w) == "autograd"


@pytest.mark.parametrize("geometry", ["poincare", "euclidean"])
def test_every_tier_takes_the_same_step_through_one_interface(geometry):
    """take_step in the closed-form tiers (ClosedFormSGD, a RiemannianSGD whose step(batch=...)
    is the update) moves the table as geoopt's RiemannianSGD does through autograd."""
    from hypermem.hierarchy.compiled_sgd import compiled_epoch_available
    from hypermem.hierarchy.model import HierarchyEmbedding
    from hypermem.hierarchy.objectives import objective_for
    from hypermem.hierarchy.steps import ClosedFormSGD, make_step_optimizer, take_step

    g = torch.Generator().manual_seed(3)
    pairs = torch.randint(0, 30, (16, 2), generator=g)
    neg = torch.randint(0, 30, (16, 5), generator=g)
    valid = torch.rand(16, 5, generator=g) > 0.2
    objective = objective_for(geometry)
    tiers = ["autograd", "closed_form"] + (["compiled"] if compiled_epoch_available(torch.zeros(1, 1)) else [])
    weights, losses = [], []
    for tier in tiers:
        model = HierarchyEmbedding(30, 3, geometry, seed=1, init_range=0.3)
        opt = make_step_optimizer(tier, model, "rsgd", 0.5)
        assert isinstance(opt, ClosedFormSGD) == (tier != "autograd")
        losses.append(float(take_step(opt, tier, objective, model, pairs, neg, valid)))
        weights.append(model.points())
    for w, loss in zip(weights[1:], losses[1:]):
        assert float((w - weights[0]).abs().max()) < 1e-12 and loss == pytest.approx(losses[0], rel=1e-12)
