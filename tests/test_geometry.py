"""Property tests of the Poincaré-ball geometry (hypothesis: dims 2-16, curvatures 0.25-4)."""

import math

import geoopt
import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from hypermem.geometry import (
    PoincareBall,
    ball_margin,
    lorentz_distance,
    lorentz_inner,
    mips_scores,
    to_mips_vectors,
)

dims = st.integers(2, 16)
curvatures = st.floats(0.25, 4.0)
seeds = st.integers(0, 2**31 - 1)
SETTINGS = settings(max_examples=40, deadline=None)


def pts(ball, n, dim, seed, rmax=4.0, dtype=torch.float64):
    return ball.random_points(n, dim, max_hyperbolic_radius=rmax, seed=seed, dtype=dtype)


@SETTINGS
@given(dims, curvatures, seeds)
def test_distance_formulas_agree(dim, c, seed):
    ball = PoincareBall(c)
    x, y = pts(ball, 8, dim, seed), pts(ball, 8, dim, seed + 1)
    d1 = ball.distance(x, y)
    d2 = ball.distance_arcosh(x, y)
    d3 = ball.dist(x, y)  # geoopt's own formula
    d4 = lorentz_distance(ball.to_lorentz(x), ball.to_lorentz(y), c)
    torch.testing.assert_close(d1, d2, rtol=1e-9, atol=1e-9)
    torch.testing.assert_close(d1, d3, rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(d1, d4, rtol=1e-7, atol=1e-7)
    pw = ball.pairwise_distance(x, y)
    torch.testing.assert_close(pw.diagonal(), d2, rtol=1e-7, atol=1e-7)


@SETTINGS
@given(dims, curvatures, seeds)
def test_metric_axioms(dim, c, seed):
    ball = PoincareBall(c)
    x, y, z = (pts(ball, 16, dim, seed + i) for i in range(3))
    dxy, dyx = ball.distance_arcosh(x, y), ball.distance_arcosh(y, x)
    assert torch.all(dxy >= 0)
    torch.testing.assert_close(dxy, dyx)
    assert torch.all(ball.distance_arcosh(x, x) < 1e-7)
    assert torch.all(dxy <= ball.distance_arcosh(x, z) + ball.distance_arcosh(z, y) + 1e-9)


@SETTINGS
@given(dims, curvatures, seeds)
def test_mobius_identities(dim, c, seed):
    ball = PoincareBall(c)
    x, y = pts(ball, 8, dim, seed, rmax=3.0), pts(ball, 8, dim, seed + 1, rmax=3.0)
    zero = torch.zeros_like(x)
    torch.testing.assert_close(ball.mobius_add(zero, x), x)
    torch.testing.assert_close(ball.mobius_add(x, zero), x)
    torch.testing.assert_close(ball.mobius_add(-x, x), zero, atol=1e-12, rtol=0)
    # left cancellation: (-x) ⊕ (x ⊕ y) = y
    torch.testing.assert_close(ball.mobius_add(-x, ball.mobius_add(x, y)), y, atol=1e-9, rtol=1e-7)
    # scalar multiplication scales the distance from the origin
    r = 0.7
    torch.testing.assert_close(ball.distance_to_origin(ball.mobius_scalar_mul(r, x)),
                               r * ball.distance_to_origin(x), atol=1e-9, rtol=1e-7)
    torch.testing.assert_close(ball.mobius_scalar_mul(1.0, x), x, atol=1e-12, rtol=1e-9)
    # gyrovector distance is invariant under left Möbius translation (isometry)
    a = pts(ball, 8, dim, seed + 2, rmax=1.0)
    torch.testing.assert_close(ball.distance(ball.mobius_add(a, x), ball.mobius_add(a, y)),
                               ball.distance(x, y), atol=1e-7, rtol=1e-7)


@SETTINGS
@given(dims, curvatures, seeds)
def test_exp_log_inverse(dim, c, seed):
    ball = PoincareBall(c)
    x, y = pts(ball, 8, dim, seed, rmax=3.0), pts(ball, 8, dim, seed + 1, rmax=3.0)
    torch.testing.assert_close(ball.expmap0(ball.logmap0(y)), y, atol=1e-9, rtol=1e-9)
    torch.testing.assert_close(ball.expmap(x, ball.logmap(x, y)), y, atol=1e-8, rtol=1e-8)
    v = torch.randn(8, dim, dtype=torch.float64, generator=torch.Generator().manual_seed(seed))
    v = v / v.norm(dim=-1, keepdim=True) * 2.0 / ball.conformal_factor(x)  # a step of length 2 ((n, 1) factor)
    torch.testing.assert_close(ball.logmap(x, ball.expmap(x, v)), v, atol=1e-7, rtol=1e-7)
    # the exponential map moves by the Riemannian norm: d(x, exp_x(v)) = lambda_x ||v||
    torch.testing.assert_close(ball.distance(x, ball.expmap(x, v)),
                               ball.lambda_x(x) * v.norm(dim=-1), atol=1e-6, rtol=1e-6)
    # geodesic endpoints and midpoint
    torch.testing.assert_close(ball.geodesic(0.0, x, y), x, atol=1e-9, rtol=1e-9)
    torch.testing.assert_close(ball.geodesic(1.0, x, y), y, atol=1e-8, rtol=1e-8)
    m = ball.geodesic(0.5, x, y)
    torch.testing.assert_close(ball.distance(x, m), ball.distance(x, y) / 2, atol=1e-7, rtol=1e-7)


@SETTINGS
@given(dims, curvatures, seeds, st.floats(0.0, 1.0))
def test_point_at_radius(dim, c, seed, frac):
    ball = PoincareBall(c)
    r = frac * (ball.max_radius() - 0.1)  # anywhere up to the float64 margin
    u = torch.randn(5, dim, dtype=torch.float64, generator=torch.Generator().manual_seed(seed))
    p = ball.point_at(u, r)
    torch.testing.assert_close(ball.distance_to_origin(p), torch.full((5,), r, dtype=torch.float64),
                               atol=1e-6, rtol=1e-6)
    q = ball.set_depth(p * 0.3, r / 2)
    torch.testing.assert_close(ball.distance_to_origin(q), torch.full((5,), r / 2, dtype=torch.float64),
                               atol=1e-6, rtol=1e-6)


@SETTINGS
@given(dims, curvatures, seeds)
def test_lorentz_roundtrip_and_hyperboloid(dim, c, seed):
    ball = PoincareBall(c)
    x = pts(ball, 8, dim, seed, rmax=6.0)
    X = ball.to_lorentz(x)
    assert X.shape == (8, dim + 1)
    # relative to the size of the coordinates (X_0 grows like e^r)
    scale = X[:, 0] ** 2
    err = (lorentz_inner(X, X) + 1.0 / c) / scale
    assert float(err.abs().max()) < 1e-12
    assert torch.all(X[:, 0] > 0)
    torch.testing.assert_close(ball.from_lorentz(X), x, atol=1e-10, rtol=1e-9)
    torch.testing.assert_close(ball.distance_to_origin(ball.from_lorentz(X)), ball.distance_to_origin(x),
                               atol=1e-7, rtol=1e-7)


@SETTINGS
@given(dims, curvatures, seeds)
def test_mips_order_equals_hyperbolic_nn_order(dim, c, seed):
    ball = PoincareBall(c)
    stored = pts(ball, 64, dim, seed)
    queries = pts(ball, 4, dim, seed + 7)
    mips = to_mips_vectors(ball.to_lorentz(stored))
    scores = mips_scores(mips, ball.to_lorentz(queries))
    dist = ball.pairwise_distance(queries, stored)
    assert scores.shape == (4, 64)
    assert torch.equal(torch.argsort(scores, dim=1, descending=True), torch.argsort(dist, dim=1))


@SETTINGS
@given(dims, curvatures, seeds, st.floats(0.1, 6.0))
def test_shell_distance(dim, c, seed, depth):
    ball = PoincareBall(c)
    x, y = pts(ball, 8, dim, seed), pts(ball, 8, dim, seed + 1)
    direct = ball.distance(ball.set_depth(x, depth), ball.set_depth(y, depth))
    torch.testing.assert_close(ball.shell_distance(x, y, depth), direct, atol=1e-6, rtol=1e-6)
    cos = torch.nn.functional.cosine_similarity(x, y, dim=-1)
    torch.testing.assert_close(ball.shell_distance_from_cosine(cos, depth), direct, atol=1e-6, rtol=1e-6)


def test_list_inputs_become_float64_and_dtypes_are_kept():
    ball = PoincareBall()
    out = ball.distance([[0.1, 0.2]], np.array([[0.3, -0.1]]))
    assert out.dtype == torch.float64 and isinstance(out, torch.Tensor)
    p32 = np.array([[0.1, 0.2]], dtype=np.float32)
    assert ball.distance(p32, p32 * 0.5).dtype == torch.float32  # NumPy float32 stays float32
    assert ball.distance(p32, [[0.3, 0.1]]).dtype == torch.float32  # lists follow the array
    assert ball.distance(p32, p32.astype(np.float64)).dtype == torch.float64  # promoted
    assert ball.distance(np.array([[0, 0]]), [[0.1, 0.0]]).dtype == torch.float64  # integers: float64
    x32 = torch.tensor([[0.1, 0.2]], dtype=torch.float32)
    assert ball.distance(x32, x32 * 0.5).dtype == torch.float32
    assert ball.distance(x32, [[0.3, 0.1]]).dtype == torch.float32  # array-likes follow the tensor
    for fn in (ball.expmap0, ball.logmap0, ball.to_lorentz, ball.project, ball.conformal_factor):
        assert fn(x32).dtype == torch.float32
        assert fn(x32.double()).dtype == torch.float64


def test_broadcasting_over_batch_dimensions():
    ball = PoincareBall(1.3)
    x = ball.random_points(6, 4, seed=0).reshape(2, 3, 4)
    y = ball.random_points(3, 4, seed=1)
    d = ball.distance(x, y)
    assert d.shape == (2, 3)
    torch.testing.assert_close(d[1], ball.distance(x[1], y))
    assert ball.pairwise_distance(x, y).shape == (2, 3, 3)
    assert ball.expmap(x, y * 0.1).shape == (2, 3, 4)


@pytest.mark.parametrize("bad", [0.0, -1.0, float("nan"), float("inf"), "1", None, True])
def test_bad_curvature(bad):
    with pytest.raises(ValueError, match="curvature"):
        PoincareBall(bad)
    with pytest.raises(ValueError, match="curvature"):
        lorentz_distance([[1.0, 0.0]], [[1.0, 0.0]], curvature=bad)


def test_bad_shapes():
    ball = PoincareBall()
    with pytest.raises(ValueError, match="dimension mismatch"):
        ball.distance(torch.zeros(3, 4), torch.zeros(3, 5))
    with pytest.raises(ValueError, match="at least one dimension"):
        ball.distance_to_origin(torch.tensor(0.5))
    with pytest.raises(ValueError, match="broadcast"):
        ball.distance(torch.zeros(3, 4), torch.zeros(2, 4))
    with pytest.raises(ValueError, match=r"\(n, d\)"):
        ball.pairwise_distance(torch.zeros(4), torch.zeros(3, 4))
    with pytest.raises(TypeError, match="must be a tensor"):
        ball.distance_to_origin("abc")
    with pytest.raises(ValueError, match="not inside"):
        ball.check_inside(torch.tensor([[0.1, 0.0], [1.0, 0.5]]))
    with pytest.raises(ValueError, match="not inside"):
        ball.check_inside(torch.tensor([[float("nan"), 0.0]]))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("c", [0.5, 1.0, 3.0])
def test_finite_values_and_gradients_at_origin_and_boundary(dtype, c):
    ball = PoincareBall(c)
    m = ball_margin(dtype)
    dim = 5
    u = torch.randn(4, dim, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    u = u / u.norm(dim=-1, keepdim=True)
    edge = (u * (1 - m) / math.sqrt(c)).to(dtype)  # exactly at the margin
    near = (u * (1 - 2 * m) / math.sqrt(c)).to(dtype)
    origin = torch.zeros(4, dim, dtype=dtype)
    cases = [(edge, near), (edge, origin), (origin, origin), (edge, edge), (near, origin)]
    fns = [
        lambda a, b: ball.distance(a, b),
        lambda a, b: ball.distance_arcosh(a, b),
        lambda a, b: ball.distance_to_origin(a) + ball.distance_to_origin(b),
        lambda a, b: ball.shell_distance(a, b, 2.0),
        lambda a, b: ball.logmap0(a).sum(-1) + ball.expmap0(b).sum(-1),
        lambda a, b: ball.logmap(a, b).sum(-1),
        lambda a, b: ball.expmap(a, 0.1 * b).sum(-1),
        lambda a, b: ball.mobius_add(a, b).sum(-1) + ball.mobius_scalar_mul(0.5, a).sum(-1),
        lambda a, b: ball.to_lorentz(a).sum(-1) + ball.lambda_x(b),
        lambda a, b: ball.pairwise_distance(a, b).sum(-1),
    ]
    for a, b in cases:
        for fn in fns:
            a_ = a.clone().requires_grad_(True)
            b_ = b.clone().requires_grad_(True)
            out = fn(a_, b_)
            assert torch.isfinite(out).all(), out
            out.sum().backward()
            assert torch.isfinite(a_.grad).all() and torch.isfinite(b_.grad).all()


def test_float64_keeps_full_range_near_boundary():
    # geoopt clamps artanh at 1 - 1e-7 (distances cap near 16.6); hypermem's float64 does not.
    ball = PoincareBall()
    p = ball.point_at([1.0, 0.0, 0.0], 20.0)
    assert abs(float(ball.distance_to_origin(p)) - 20.0) < 1e-4
    q = ball.point_at([0.0, 1.0, 0.0], 20.0)
    # two deep points at right angles: d = 2 asinh(sinh(20) sin(pi/4))
    expected = 2 * math.asinh(math.sinh(20.0) * math.sin(math.pi / 4))
    assert abs(float(ball.distance_arcosh(p, q)) - expected) < 1e-4
    assert abs(float(ball.shell_distance(p, q, 20.0)) - expected) < 1e-9


def test_egrad2rgrad_and_retraction():
    ball = PoincareBall(2.0)
    x = ball.random_points(3, 4, seed=3)
    g = torch.randn(3, 4, dtype=torch.float64)
    expected = ((1 - 2.0 * (x * x).sum(-1, keepdim=True)) ** 2 / 4) * g
    torch.testing.assert_close(ball.egrad2rgrad(x, g), expected)
    far = ball.retraction(x, 100 * g)
    assert torch.all(ball.is_inside(far))
    torch.testing.assert_close(ball.retraction(x, 1e-3 * g), x + 1e-3 * g)


def test_random_points_seeded_and_bounded():
    ball = PoincareBall(0.5)
    a = ball.random_points(100, 3, max_hyperbolic_radius=2.5, seed=7)
    b = ball.random_points(100, 3, max_hyperbolic_radius=2.5, seed=7)
    assert torch.equal(a, b)
    r = ball.distance_to_origin(a)
    assert float(r.max()) <= 2.5 + 1e-9 and float(r.min()) >= 0
    assert a.dtype == torch.float64


def test_gradcheck_float64():
    ball = PoincareBall(1.7)
    x = ball.random_points(3, 4, seed=1, max_hyperbolic_radius=3.0).requires_grad_(True)
    y = ball.random_points(3, 4, seed=2, max_hyperbolic_radius=3.0).requires_grad_(True)
    v = (0.2 * torch.randn(3, 4, dtype=torch.float64)).requires_grad_(True)
    assert torch.autograd.gradcheck(lambda a, b: ball.distance(a, b), (x, y))
    assert torch.autograd.gradcheck(lambda a, b: ball.distance_arcosh(a, b), (x, y))
    assert torch.autograd.gradcheck(lambda a, b: ball.shell_distance(a, b, 1.5), (x, y))
    assert torch.autograd.gradcheck(lambda a: ball.expmap0(a), (v,))
    assert torch.autograd.gradcheck(lambda a: ball.logmap0(a), (x,))
    assert torch.autograd.gradcheck(lambda a, b: ball.pairwise_distance(a, b), (x, y))


def test_geoopt_integration_manifold_parameter_and_optimizers():
    ball = PoincareBall(1.0)
    target = ball.point_at([1.0, 2.0, -1.0], 3.0)
    for opt_cls in (geoopt.optim.RiemannianSGD, geoopt.optim.RiemannianAdam):
        p = geoopt.ManifoldParameter(torch.zeros(3, dtype=torch.float64) + 0.01, manifold=ball)
        opt = opt_cls([p], lr=0.05)
        for _ in range(400):
            opt.zero_grad()
            loss = ball.distance(p, target) ** 2
            loss.backward()
            opt.step()
        assert float(ball.distance(p.detach(), target)) < 0.1
        assert bool(ball.is_inside(p.detach()))


def test_learnable_curvature_has_gradient():
    ball = PoincareBall(1.0, learnable=True)
    x = torch.tensor([[0.3, 0.1]], dtype=torch.float64)
    y = torch.tensor([[-0.2, 0.4]], dtype=torch.float64)
    ball.distance(x, y).sum().backward()
    assert ball.isp_c.grad is not None and torch.isfinite(ball.isp_c.grad).all()


def test_same_results_on_device(device):
    ball = PoincareBall(1.5).to(device)
    x = ball.random_points(10, 6, seed=0)
    y = ball.random_points(10, 6, seed=1)
    ref = ball.distance(x, y)
    out = ball.distance(x.to(device), y.to(device))
    assert out.device.type == device.type
    torch.testing.assert_close(out.cpu(), ref)
    torch.testing.assert_close(ball.shell_distance(x.to(device), y.to(device), 1.0).cpu(),
                               ball.shell_distance(x, y, 1.0))


def test_every_geoopt_method_uses_hypermems_numerics():
    from hypermem.geometry.vocabulary import RATIONAL_INHERITED

    ours = {name for cls in PoincareBall.__mro__[:2] for name in vars(cls)}
    public = {n for cls in geoopt.PoincareBall.__mro__ if cls.__module__.startswith("geoopt")
              for n, v in vars(cls).items() if callable(v) and not n.startswith("_")}
    left = sorted(public - ours - RATIONAL_INHERITED)
    assert not left, f"geoopt methods with geoopt's clamps or margins: {left}"
    assert "_check_point_on_manifold" in ours


def test_geoopt_names_agree_with_hypermem_names_on_deep_points():
    ball = PoincareBall()
    x = ball.point_at(torch.tensor([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]], dtype=torch.float64),
                      torch.tensor([20.0, 18.0], dtype=torch.float64))
    o = torch.zeros(3, dtype=torch.float64)
    torch.testing.assert_close(ball.dist(x, o), torch.tensor([20.0, 18.0], dtype=torch.float64), rtol=1e-6, atol=0)
    assert torch.equal(ball.dist(x, o), ball.distance(x, o))
    assert torch.equal(ball.dist0(x, keepdim=True), ball.distance_to_origin(x).unsqueeze(-1))
    assert torch.equal(ball.lambda_x(x, keepdim=True), ball.conformal_factor(x))
    torch.testing.assert_close(ball.dist(x[0], x[1]), ball.distance_arcosh(x[0], x[1]), rtol=1e-6, atol=0)
    torch.testing.assert_close(ball.mobius_matvec(torch.eye(3, dtype=torch.float64), x), x, rtol=1e-12, atol=0)
    torch.testing.assert_close(ball.dist0(ball.mobius_scalar_mul(0.5, x)), torch.tensor([10.0, 9.0],
                               dtype=torch.float64), rtol=1e-6, atol=0)
    torch.testing.assert_close(ball.weighted_midpoint(x[:1].expand(3, 3)), x[0], rtol=1e-6, atol=0)
    ok, reason = ball.check_point_on_manifold(x, explain=True)
    assert ok, reason
    assert not ball.check_point_on_manifold(torch.tensor([1.5, 0.0], dtype=torch.float64))
    # geoopt's parameter and optimizer keep the deep point (hypermem's float64 margin 1e-10)
    p = geoopt.ManifoldParameter(x.clone(), manifold=ball)
    opt = geoopt.optim.RiemannianSGD([p], lr=1e-3)
    ball.dist(p, o).sum().backward()
    opt.step()
    assert float(ball.dist0(p.detach()).min()) > 17.0


def test_geoopt_names_match_geoopts_formulas_inside_its_range():
    ball, ref = PoincareBall(1.7), geoopt.PoincareBall(c=torch.tensor(1.7, dtype=torch.float64))
    g = torch.Generator().manual_seed(3)
    x, y, v = (torch.randn(6, 4, generator=g, dtype=torch.float64) * 0.2 for _ in range(3))
    m = torch.randn(5, 4, generator=g, dtype=torch.float64)
    t = torch.tensor(0.3, dtype=torch.float64)
    w = torch.rand(6, generator=g, dtype=torch.float64)
    cases = [("dist", (x, y)), ("dist0", (x,)), ("mobius_sub", (x, y)), ("mobius_coadd", (x, y)),
             ("mobius_cosub", (x, y)), ("mobius_pointwise_mul", (v, x)), ("mobius_matvec", (m, x)),
             ("geodesic", (t, x, y)), ("geodesic_unit", (t, x, v)), ("transp", (x, y, v)),
             ("dist2plane", (x, y, v)), ("norm", (x, v)), ("lambda_x", (x,)), ("logmap0", (x,)),
             ("expmap", (x, v)), ("logmap", (x, y))]
    for name, args in cases:
        torch.testing.assert_close(getattr(ball, name)(*args), getattr(ref, name)(*args), rtol=1e-9, atol=1e-12,
                                   msg=name)
    torch.testing.assert_close(ball.inner(x, v, keepdim=True), ref.inner(x, v, keepdim=True))
    torch.testing.assert_close(ball.weighted_midpoint(x, w), ref.weighted_midpoint(x, w))
    torch.testing.assert_close(ball.weighted_midpoint(x, w, lincomb=True), ref.weighted_midpoint(x, w, lincomb=True))
    torch.testing.assert_close(ball.mobius_fn_apply(torch.tanh, x), ref.mobius_fn_apply(torch.tanh, x))


def test_geodesic_takes_geoopts_and_the_references_argument_order():
    ball = PoincareBall()
    x = torch.tensor([[0.1, 0.2], [0.3, -0.4]], dtype=torch.float64)
    y = torch.tensor([[-0.5, 0.1], [0.2, 0.2]], dtype=torch.float64)
    want = ball.geodesic(0.25, x, y)  # geoopt: (t, x, y)
    assert torch.equal(ball.geodesic(x, y, 0.25), want)  # the reference: (x, y, t)
    assert torch.equal(ball.geodesic(x, y, t=0.25), want)
    t = torch.tensor([[0.25], [0.25]], dtype=torch.float64)
    assert torch.equal(ball.geodesic(x, y, t), want)  # t of shape (n, 1) at the end
    assert torch.equal(ball.geodesic(t, x, y), want)
    torch.testing.assert_close(ball.distance(x, want), 0.25 * ball.distance(x, y))
    with pytest.raises(TypeError, match="three arguments"):
        ball.geodesic(x, y)


def test_pairwise_distance_keeps_full_precision_for_nearby_points():
    ball = PoincareBall()
    g = torch.Generator().manual_seed(0)
    for dtype, tol in ((torch.float64, 1e-12), (torch.float32, 1e-5)):
        x = (torch.randn(30, 5, generator=g, dtype=torch.float64) * 0.2).to(dtype)
        assert torch.equal(ball.pairwise_distance(x, x).diagonal(), torch.zeros(30, dtype=dtype))
        y = x + (1e-7 if dtype == torch.float64 else 1e-3)
        exact = ball.distance_arcosh(x.double(), y.double())  # differences, not the matmul shortcut
        got = ball.pairwise_distance(x, y).diagonal().double()
        assert float(((got - exact).abs() / exact).max()) < tol
