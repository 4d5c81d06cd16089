"""hypermem.geometry against 60-digit mpmath references at the points where float arithmetic failed:
deep log/exp maps and geodesics, close and boundary points on the hyperboloid, huge and tiny vectors."""

import math

import mpmath as mp
import pytest
import torch

from hypermem.geometry import PoincareBall, ball_margin, lorentz_distance
from hypermem.geometry import poincare as P

mp.mp.dps = 60
DTYPES = (torch.float32, torch.float64)


# -- mpmath references (unit ball unless c is given) ------------------------------------------
def V(t):
    return [mp.mpf(float(v)) for v in t.detach().reshape(-1)]


def dot(a, b):
    return mp.fsum(p * q for p, q in zip(a, b))


def nrm(a):
    return mp.sqrt(dot(a, a))


def mob_add(x, y, c=1):
    xy, x2, y2 = dot(x, y), dot(x, x), dot(y, y)
    den = 1 + 2 * c * xy + c * c * x2 * y2
    return [((1 + 2 * c * xy + c * y2) * p + (1 - c * x2) * q) / den for p, q in zip(x, y)]


def ref_dist(x, y, c=1):
    d2 = dot([p - q for p, q in zip(x, y)], [p - q for p, q in zip(x, y)])
    return mp.acosh(1 + 2 * c * d2 / ((1 - c * dot(x, x)) * (1 - c * dot(y, y)))) / mp.sqrt(c)


def ref_logmap(x, y, c=1):
    w = mob_add([-p for p in x], y, c)
    n, s, lam = nrm(w), mp.sqrt(c), 2 / (1 - c * dot(x, x))
    return [2 / (s * lam) * mp.atanh(s * n) / n * p for p in w]


def ref_expmap(x, v, c=1):
    n, s, lam = nrm(v), mp.sqrt(c), 2 / (1 - c * dot(x, x))
    return mob_add(x, [mp.tanh(s * lam * n / 2) / (s * n) * p for p in v], c)


def rel(out, ref):
    got = V(out) if isinstance(out, torch.Tensor) else out
    return float(nrm([p - q for p, q in zip(got, ref)]) / nrm(ref))


def pt(n, angle, dtype=torch.float64):
    return torch.tensor([n * math.cos(angle), n * math.sin(angle), 0.0], dtype=dtype)


# |x|, |y| and the angle between them: both points inside the dtype's margin
DEEP = {torch.float64: [(1 - 1e-7, 1 - 1e-10, 1e-4), (1 - 1e-9, 1 - 1e-9, 1e-5), (1 - 1e-10, 1 - 1e-10, 1e-3),
                        (1 - 1e-10, 1 - 1e-10, 1.0), (0.5, 0.3, 2.0)],
        torch.float32: [(0.999, 0.999, 1e-2), (0.999, 0.99, 1.0), (0.99, 0.999, 3.0), (0.5, 0.3, 2.0)]}
TOL = {torch.float64: 1e-5, torch.float32: 2e-3}


def deep_cases():
    return [(dt, *case) for dt in DTYPES for case in DEEP[dt]]


# -- 1. log / exp / geodesic deep inside the margin --------------------------------------------
@pytest.mark.parametrize("dtype,nx,ny,angle", deep_cases())
def test_logmap_matches_mpmath_deep(dtype, nx, ny, angle):
    x, y = pt(nx, 0.3, dtype), pt(ny, 0.3 + angle, dtype)
    X, Y = V(x), V(y)
    v = P.logmap(x, y)
    assert v.dtype == dtype
    assert rel(v, ref_logmap(X, Y)) < TOL[dtype]
    # its Riemannian norm is the distance
    riem = float(P.conformal_factor(x.double()) * v.double().norm())
    assert riem == pytest.approx(float(ref_dist(X, Y)), rel=TOL[dtype])
    yg = y.clone().requires_grad_(True)
    xg = x.clone().requires_grad_(True)
    (P.logmap(xg, yg) * torch.tensor([1.0, -0.7, 0.3], dtype=dtype)).sum().backward()
    assert torch.isfinite(xg.grad).all() and torch.isfinite(yg.grad).all()


# exp_x's end point is as precise as 1 - c||x||^2 (relative error eps / (1 - c||x||^2)): the two
# float64 pairs at 1 - 1e-10 of the radius are out of its reach (see the expmap docstring)
EXP_CASES = [c for c in deep_cases() if min(c[1], c[2]) < 1 - 1e-10 - 1e-13]


@pytest.mark.parametrize("dtype,nx,ny,angle", EXP_CASES)
def test_expmap_of_exact_log_lands_on_y(dtype, nx, ny, angle):
    x, y = pt(nx, 0.3, dtype), pt(ny, 0.3 + angle, dtype)
    X, Y = V(x), V(y)
    v = torch.tensor([float(t) for t in ref_logmap(X, Y)], dtype=dtype)
    e = P.expmap(x, v)
    assert e.dtype == dtype
    assert rel(e, ref_expmap(X, V(v))) < TOL[dtype]
    assert float(ref_dist(V(e), Y)) < (1e-3 if dtype == torch.float64 else 1e-2)


@pytest.mark.parametrize("dtype,nx,ny,angle", deep_cases())
def test_geodesic_midpoint_halves_the_distance(dtype, nx, ny, angle):
    x, y = pt(nx, 0.3, dtype), pt(ny, 0.3 + angle, dtype)
    X, Y = V(x), V(y)
    d = float(ref_dist(X, Y))
    half = ref_expmap(X, [p / 2 for p in ref_logmap(X, Y)])
    for m in (P.geodesic(0.5, x, y), PoincareBall().geodesic(0.5, x, y)):
        assert rel(m, half) < TOL[dtype]
        M = V(m)
        assert float(ref_dist(X, M)) == pytest.approx(d / 2, rel=TOL[dtype])
        assert float(ref_dist(M, Y)) == pytest.approx(d / 2, rel=TOL[dtype])
    assert torch.equal(P.geodesic(0.0, x, y), x) or rel(P.geodesic(0.0, x, y), X) < 1e-6
    assert rel(P.geodesic(1.0, x, y), Y) < TOL[dtype] * 1e-2 + 1e-6
    xg = x.clone().requires_grad_(True)
    P.geodesic(0.3, xg, y).sum().backward()
    assert torch.isfinite(xg.grad).all()


def test_geodesic_unit_deep():
    x, y = pt(1 - 1e-9, 0.3), pt(1 - 1e-9, 0.3 + 1e-5)
    d = float(ref_dist(V(x), V(y)))
    u = P.logmap(x, y)
    end = PoincareBall().geodesic_unit(d, x, u, project=False)
    assert rel(end, V(y)) < 1e-9


# -- 2. Lorentz distance of close points ----------------------------------------------------
@pytest.mark.parametrize("dtype,depth", [(torch.float32, 3.0), (torch.float32, 6.0), (torch.float64, 10.0),
                                         (torch.float64, 15.0), (torch.float64, 20.0)])
def test_lorentz_distance_close_points(dtype, depth):
    u = torch.tensor([0.6, 0.8, 0.0], dtype=torch.float64)
    x = P.point_at(u, depth).to(dtype)
    y = P.point_at(torch.tensor([0.6, 0.8, 2e-2 / math.sinh(depth)], dtype=torch.float64), depth).to(dtype)
    X, Y = P.to_lorentz(x), P.to_lorentz(y)
    assert float(lorentz_distance(X, X)) == 0.0
    ref = float(ref_dist(V(x), V(y)))
    assert float(lorentz_distance(X, Y)) == pytest.approx(ref, rel=1e-3 if dtype == torch.float32 else 1e-6)
    Xg = X.clone().requires_grad_(True)
    lorentz_distance(Xg, Y).backward()
    assert torch.isfinite(Xg.grad).all()


@pytest.mark.parametrize("dtype", DTYPES)
def test_lorentz_distance_far_points_keep_precision(dtype):
    # radially aligned points at depths 2 and 7 (float32) / 5 and 20 (float64), and points at one depth
    a, b = (2.0, 7.0) if dtype == torch.float32 else (5.0, 20.0)
    for dy in (torch.tensor([0.6, 0.8, 0.0]), torch.tensor([-0.8, 0.6, 0.0])):
        x = P.point_at(torch.tensor([0.6, 0.8, 0.0], dtype=torch.float64), a).to(dtype)
        y = P.point_at(dy.double(), b).to(dtype)
        ref = float(ref_dist(V(x), V(y)))
        got = float(lorentz_distance(P.to_lorentz(x), P.to_lorentz(y)))
        assert got == pytest.approx(ref, rel=1e-4 if dtype == torch.float32 else 1e-9)


# -- 3. the hyperboloid on and beyond the boundary ------------------------------------------
@pytest.mark.parametrize("dtype", DTYPES)
def test_to_lorentz_on_boundary_is_finite(dtype):
    b = torch.tensor([1.0, 0.0, 0.0], dtype=dtype, requires_grad=True)
    o = torch.zeros(3, dtype=dtype)
    X = P.to_lorentz(b)
    assert torch.isfinite(X).all() and float(X[0]) < 1e16
    d = lorentz_distance(X, P.to_lorentz(o))
    d.backward()
    assert math.isfinite(float(d)) and torch.isfinite(b.grad).all() and float(b.grad.abs().sum()) >= 0
    assert float(d) == pytest.approx(float(P.distance(b.detach(), o)), rel=1e-3)
    opp = lorentz_distance(X.detach(), P.to_lorentz(-b.detach()))
    assert float(opp) == pytest.approx(float(P.distance(b.detach(), -b.detach())), rel=1e-3)
    out = torch.tensor([1.5, 0.0, 0.0], dtype=dtype, requires_grad=True)
    Xo = P.to_lorentz(out)
    do = lorentz_distance(Xo, P.to_lorentz(o))
    do.backward()
    assert torch.isfinite(Xo).all() and math.isfinite(float(do)) and torch.isfinite(out.grad).all()


# -- 4. huge vectors ----------------------------------------------------------------------
HUGE = {torch.float32: [3e19, 4e19, 0.0], torch.float64: [3e200, 4e200, 0.0]}


@pytest.mark.parametrize("dtype", DTYPES)
def test_huge_vectors_keep_their_direction(dtype):
    x = torch.tensor(HUGE[dtype], dtype=dtype)
    edge = 1 - ball_margin(dtype)
    want = torch.tensor([0.6 * edge, 0.8 * edge, 0.0], dtype=torch.float64)
    ball = PoincareBall()
    for out in (P.project(x), P.retraction(torch.zeros_like(x), x), ball.projx(x), ball.expmap0(x),
                P.project(P.expmap0(x)), P.point_at(x, 40.0)):
        assert out.dtype == dtype
        assert torch.allclose(out.double(), want, rtol=0, atol=1e-6)
    assert torch.allclose(P.point_at(x, 1.0).double(), math.tanh(0.5) * want / edge, atol=1e-6)
    for row in ([math.inf, 0.0, 0.0], [-math.inf, 5.0, 0.0]):
        got = P.project(torch.tensor(row, dtype=dtype))
        assert torch.isfinite(got).all()
        assert torch.allclose(got.double(), torch.tensor([math.copysign(edge, row[0]), 0, 0], dtype=torch.float64),
                              atol=1e-6)
    v = x.clone().requires_grad_(True)
    P.expmap0(v).sum().backward()
    assert torch.isfinite(v.grad).all()


@pytest.mark.parametrize("dtype", DTYPES)
def test_project_and_expmap0_unchanged_inside(dtype):
    x = P.random_points(50, 5, 5.0, seed=3, dtype=dtype)
    assert torch.equal(P.project(x), x)
    v = torch.zeros(2, 3, dtype=dtype, requires_grad=True)
    P.expmap0(v).sum().backward()
    assert torch.equal(v.grad, torch.ones_like(v))  # exp_0 is the identity to first order at 0


# -- 5. tiny vectors ----------------------------------------------------------------------
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n", [1e-16, 1e-17, 1e-20])
def test_tiny_vectors_have_their_norm(dtype, n):
    x = torch.tensor([n, 0.0, 0.0], dtype=dtype, requires_grad=True)
    d0 = P.distance_to_origin(x)
    d0.backward()
    assert float(d0) == pytest.approx(2 * n, rel=1e-4)
    assert float(x.grad[0]) == pytest.approx(2.0, rel=1e-4)
    y = torch.tensor([0.5, 0.0, 0.0], dtype=dtype)
    assert float(P.shell_distance(x.detach(), y, 3.0)) < 1e-6
    assert float(P.mobius_scalar_mul(2.0, x.detach())[0]) == pytest.approx(2 * n, rel=1e-4)
    z = torch.zeros(3, dtype=dtype, requires_grad=True)
    P.distance_to_origin(z).backward()
    assert torch.isfinite(z.grad).all()
