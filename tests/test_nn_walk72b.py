"""Walk 72 (advanced PyTorch): second-order and forward-mode derivatives of the all-pairs
distance, torch.compile(dynamic=True), per-sample gradients of the losses, top-k reads under vmap."""

from __future__ import annotations

import pytest
import torch
from torch.autograd import gradcheck, gradgradcheck
from torch.func import grad, jacfwd, jacrev, jvp, vmap

from hypermem.geometry import poincare as P
from hypermem.nn import (
    BallEncoder,
    HyperbolicMemory,
    hyperbolic_info_nce,
    memory_info_nce,
    poincare_ranking_loss,
)

pytestmark = pytest.mark.filterwarnings("ignore:There is a performance drop:UserWarning")

DT = torch.float64


def _points(n: int, d: int = 3, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return 0.25 * torch.randn(n, d, generator=g, dtype=DT)


def test_pairwise_distance_has_a_double_backward_and_keeps_cdists_first_order_gradient():
    x, y = _points(4).requires_grad_(), _points(5, seed=1).requires_grad_()
    assert gradgradcheck(lambda a, b: P.pairwise_distance(a, b), (x, y))
    # batch dimensions broadcast, and the gradient reduces over them
    xb = _points(6).reshape(2, 3, 3).requires_grad_()
    assert gradgradcheck(lambda a, b: P.pairwise_distance(a, b), (xb, y))
    # the double backward equals the one of the broadcast two-point distance
    g1, = torch.autograd.grad(P.pairwise_distance(x, y).sum(), x, create_graph=True)
    h1, = torch.autograd.grad(g1.square().sum(), x)
    g2, = torch.autograd.grad(P.distance(x[:, None], y[None]).sum(), x, create_graph=True)
    h2, = torch.autograd.grad(g2.square().sum(), x)
    torch.testing.assert_close(h1, h2)
    # the first-order gradient is cdist's own, to the bit
    w = torch.randn(4, 5, dtype=DT)
    ours = torch.autograd.grad(P.pairwise_distance(x, y), (x, y), w)
    d2 = torch.cdist(x, y, compute_mode="donot_use_mm_for_euclid_dist").square()
    gap_x = P.boundary_gap((x * x).sum(-1), 1.0).unsqueeze(-1)
    ref = torch.autograd.grad(P.arcosh_distance(d2, gap_x, P.boundary_gap((y * y).sum(-1), 1.0).unsqueeze(-2)),
                              (x, y), w)
    assert all(torch.equal(a, b) for a, b in zip(ours, ref))


def test_pairwise_distance_forward_mode_matches_reverse_mode():
    x, y = _points(4), _points(5, seed=1)
    fwd = jacfwd(P.pairwise_distance, argnums=(0, 1))(x, y)
    rev = jacrev(lambda a, b: P.distance(a[:, None], b[None]), argnums=(0, 1))(x, y)
    for a, b in zip(fwd, rev):
        torch.testing.assert_close(a, b)
    _, t = jvp(lambda a: P.pairwise_distance(a, y), (x,), (torch.ones_like(x),))
    torch.testing.assert_close(t, rev[0].sum((-1, -2)))


def test_hyperbolic_info_nce_gradgradcheck():
    q, keys = _points(4).requires_grad_(), _points(6, seed=2)
    assert gradcheck(lambda a: hyperbolic_info_nce(a, keys, torch.arange(4)), (q,))
    assert gradgradcheck(lambda a: hyperbolic_info_nce(a, keys, torch.arange(4)), (q,))


@pytest.mark.slow
def test_ball_encoder_compiles_with_dynamic_shapes(one_thread):
    torch.manual_seed(0)
    enc = BallEncoder(6, 4)
    x = torch.randn(5, 6)
    out = torch.compile(enc, fullgraph=True, dynamic=True)(x)  # was: math.isfinite of a SymFloat curvature
    torch.testing.assert_close(out, enc(x))


def _per_sample(f, *args):
    """The per-sample gradients of ``f`` by a Python loop (the reference for vmap(grad(f)))."""
    return torch.stack([grad(f)(*(a[i] for a in args)) for i in range(args[0].shape[0])])


def test_memory_info_nce_per_sample_gradients_under_vmap():
    keys, q = _points(10), _points(6, seed=3)
    t = torch.tensor([0, 3, 9, 2, 2, 7])
    mem = HyperbolicMemory(keys, torch.randn(10, 2, dtype=DT), check_finite=False, depth_bias=0.2)
    for k in (None, 3):
        def f(a, b, k=k):
            return memory_info_nce(mem, a[None], b[None], k=k)
        torch.testing.assert_close(vmap(grad(f))(q, t), _per_sample(f, q, t))


def test_losses_under_vmap_take_check_finite_and_name_it():
    keys, q = _points(10), _points(6, seed=3)
    t = torch.tensor([0, 3, 9, 2, 2, 7])

    def f(a, b):
        return hyperbolic_info_nce(a[None], keys, b[None], check_finite=False)

    torch.testing.assert_close(vmap(grad(f))(q, t), _per_sample(f, q, t))
    with pytest.raises(RuntimeError, match=r"call hyperbolic_info_nce\(\.\.\., check_finite=False\)") as e:
        vmap(grad(lambda a, b: hyperbolic_info_nce(a[None], keys, b[None])))(q, t)
    assert "layer" not in str(e.value).split("(vmap:")[0]
    neg = keys[:4].reshape(2, 2, 3)
    with pytest.raises(RuntimeError, match=r"call poincare_ranking_loss\(\.\.\., check_finite=False\)"):
        vmap(lambda a: poincare_ranking_loss(a[None], keys[:1], neg[:1]))(q[:2])
    out = vmap(lambda a: poincare_ranking_loss(a[None], keys[:1], neg[:1], check_finite=False))(q[:2])
    assert out.shape == (2,)
    # outside vmap the checks still run by default
    with pytest.raises(ValueError, match="queries row #0 is not inside"):
        hyperbolic_info_nce(torch.full((1, 3), 0.9, dtype=DT), keys, torch.tensor([0]))


def test_top_k_read_under_vmap_equals_the_eager_read():
    keys, q = _points(12), _points(5, seed=4)
    mem = HyperbolicMemory(keys, torch.randn(12, 2, dtype=DT), check_finite=False, depth_bias=0.3)
    ex = torch.tensor([[0, 1], [2, -1], [3, 4], [5, 6], [-1, -1]])
    out = vmap(lambda a, e: mem(a[None], k=4, exclude=e[None]).indices[0])(q, ex)
    assert torch.equal(out, mem(q, k=4, exclude=ex).indices)
    read = vmap(lambda a: mem(a[None], k=3).read[0])(q)
    torch.testing.assert_close(read, mem(q, k=3).read)
