"""float16 / bfloat16 inputs to the geometry and to hypermem.nn: computed in float32, returned in
the input's dtype, finite values close to float64 and finite gradients (docs/numerics.md)."""

import pytest
import torch

import hypermem.nn as hn
from hypermem.geometry import PoincareBall
from hypermem.geometry import cones as C
from hypermem.geometry import lorentz as L
from hypermem.geometry import poincare as P
from hypermem.geometry.numerics import half_as_float32

HALF = [torch.float16, torch.bfloat16]
TOL = {torch.float16: 2e-2, torch.bfloat16: 6e-2}  # relative to |value| + 1, after rounding the inputs
NORMS = {torch.float16: [0.0, 1e-4, 0.5, 0.9, 0.99], torch.bfloat16: [0.0, 1e-4, 0.5, 0.9, 0.98],
         torch.float32: [0.0, 1e-4, 0.5, 0.9, 0.98]}


def _points(dtype, seed=0, flip=False):
    g = torch.Generator().manual_seed(seed)
    u = torch.nn.functional.normalize(torch.randn(5, 6, generator=g, dtype=torch.float64), dim=-1)
    n = torch.tensor(NORMS[dtype][::-1] if flip else NORMS[dtype], dtype=torch.float64)
    return (u * n[:, None]).to(dtype)


FUNS = {
    "distance": lambda x, y: P.distance(x, y),
    "pairwise": lambda x, y: P.pairwise_distance(x, y),
    "ball.dist": lambda x, y: PoincareBall().dist(x, y),
    "dist0": lambda x, y: P.distance_to_origin(x),
    "conformal": lambda x, y: P.conformal_factor(x),
    "logmap": lambda x, y: P.logmap(x, y),
    "expmap": lambda x, y: P.expmap(x * 0.5, y),
    "logmap0": lambda x, y: P.logmap0(x),
    "mobius_add": lambda x, y: P.mobius_add(x, y),
    "shell": lambda x, y: P.shell_distance(x, y, 3.0),
    "lorentz": lambda x, y: L.lorentz_distance(P.to_lorentz(x), P.to_lorentz(y)),
    "cone_angle": lambda x, y: C.cone_angle(x, y),
    "cone_energy": lambda x, y: C.cone_energy(x, y),
}


@pytest.mark.parametrize("dtype", HALF)
@pytest.mark.parametrize("name", list(FUNS))
def test_half_values_and_gradients(name, dtype):
    f = FUNS[name]
    x = _points(dtype).requires_grad_()
    y = _points(dtype, seed=1, flip=True).requires_grad_()
    out = f(x, y)
    assert out.dtype == dtype
    ref = f(x.detach().double(), y.detach().double())
    assert torch.isfinite(out).all()
    err = ((out.double() - ref).abs() / (ref.abs() + 1.0)).max().item()
    assert err < TOL[dtype], err
    gx, gy = torch.autograd.grad(out.float().sum(), (x, y), allow_unused=True)
    for g in (gx, gy):
        assert g is None or torch.isfinite(g).all()


def test_float16_distance_near_boundary_is_finite():
    # 1 + 2|x-y|^2 / ((1-|x|^2)(1-|y|^2)) is ~2e7 here: above float16's 65504
    x = torch.tensor([[0.999, 0.0]], dtype=torch.float16, requires_grad=True)
    y = torch.tensor([[-0.999, 0.0]], dtype=torch.float16)
    d = P.distance(x, y)
    ref = P.distance(x.detach().double(), y.double())
    assert d.dtype == torch.float16 and torch.isfinite(d).all()
    assert abs(d.item() - ref.item()) < 2e-2 * ref.item()
    (g,) = torch.autograd.grad(d.sum(), x)
    assert torch.isfinite(g).all()


def test_half_pairwise_distance_runs():  # torch.cdist has no float16 / bfloat16 kernel on the CPU
    for dt in HALF:
        assert P.pairwise_distance(_points(dt), _points(dt, 1)).dtype == dt


def test_mips_scores_float32_under_autocast():
    X = P.to_lorentz(_points(torch.bfloat16).float())
    with torch.autocast("cpu", dtype=torch.bfloat16):
        s = L.mips_scores(L.to_mips_vectors(X), X)
    assert s.dtype == torch.float32
    torch.testing.assert_close(s, L.to_mips_vectors(X) @ X.T)


def test_float32_and_float64_pass_through_unchanged():
    calls = []

    @half_as_float32
    def f(x):
        calls.append(x)
        return x * 2

    x = torch.ones(3)
    assert f(x).dtype == torch.float32 and calls[-1] is x  # no copy
    h = torch.ones(3, dtype=torch.float16)
    assert f(h).dtype == torch.float16 and calls[-1].dtype == torch.float32
    assert P.distance(torch.zeros(2, dtype=torch.float16), torch.zeros(2)).dtype == torch.float32  # promotes


@pytest.mark.parametrize("dtype", HALF)
def test_losses_in_half(dtype):
    q = _points(dtype).requires_grad_()
    k = _points(dtype, 1, flip=True).requires_grad_()
    losses = [hn.hyperbolic_info_nce(q, k, torch.arange(5)),
              hn.poincare_ranking_loss(q, k, k.flip(0)[:, None, :]),
              hn.entailment_cone_loss(q, k)]
    for loss in losses:
        assert torch.isfinite(loss).all()
        gq, gk = torch.autograd.grad(loss.float().sum(), (q, k))
        assert torch.isfinite(gq).all() and torch.isfinite(gk).all()


@pytest.mark.parametrize("autocast", [False, True])
def test_memory_reads_half_queries(autocast):
    keys = P.project(_points(torch.float32))
    m = hn.HyperbolicMemory(keys=keys.clone(), values=torch.randn(5, 4))
    q = _points(torch.float16 if not autocast else torch.bfloat16, 1).requires_grad_()
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
        out = m(q)
    ref = m(q.detach().float())
    # under autocast the softmax-weighted sum of the values runs in bfloat16; without it the read is
    # computed in the memory's float32 and returned in the query's float16 (walk 74: the next half layer takes it)
    tol = 3e-2 if autocast else 2e-3
    assert out.read.dtype == (torch.bfloat16 if autocast else torch.float16)
    torch.testing.assert_close(out.read.float(), ref.read, atol=tol, rtol=tol)
    out.read.float().sum().backward()
    assert torch.isfinite(q.grad).all() and torch.isfinite(m.keys.grad).all()


@pytest.mark.parametrize("dtype", HALF)
def test_ball_encoder_in_half(dtype):
    e = hn.BallEncoder(16, 6).to(dtype)
    x = (torch.randn(5, 16) * 10).to(dtype).requires_grad_()
    y = e(x)
    assert torch.isfinite(y).all() and P.is_inside(y.float()).all()
    y.float().sum().backward()
    assert torch.isfinite(x.grad).all()


@pytest.mark.parametrize("half", [torch.float16, torch.bfloat16])
def test_a_0d_curvature_leaves_a_half_input_half(half):
    """As torch promotes: a 0-d tensor (a learnable ball's curvature) does not change the dtype."""
    x = (P.expmap0(torch.randn(4, 6, dtype=torch.float64)) * 0.9).to(half)
    y = (P.expmap0(torch.randn(4, 6, dtype=torch.float64)) * 0.9).to(half)
    assert P.distance(x, y, torch.tensor(1.0, dtype=torch.float64)).dtype == half
    assert P.expmap0(x, torch.tensor(1.0)).dtype == half and P.conformal_factor(x, torch.tensor(1.0)).dtype == half
    ball = hn.make_ball(1.0, learnable=True)
    assert ball.dist(x, y).dtype == half and ball.expmap0(x).dtype == half
