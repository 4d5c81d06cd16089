"""Guards of the pure geometry functions: the curvature ``c`` and ``project``'s margin are
checked (defect 7 of the fuzzing report), tiny curvatures give the Euclidean limit instead of a
floored value (8), and the shell distance stays finite wherever its true value is (9).

References are closed forms evaluated independently of the code under test: the Euclidean limit
``2 ||x - y||`` of the distance as ``c -> 0`` (relative correction ``O(c ||x||^2)``), Python's
``acosh(1 + u) = log1p(u + sqrt(u (u + 2)))`` in Python floats, and ``2 (sqrt(c) rho + log h) / sqrt(c)`` for
the shell distance deep in the ball (``arsinh(z) = log(2 z) + O(z^-2)``).
"""

import math

import pytest
import torch

from hypermem.geometry import PoincareBall, max_radius
from hypermem.geometry import poincare as P
from hypermem.geometry.conversion import MIN_CURVATURE
from hypermem.geometry.numerics import arcosh1p, asinh_exp
from hypermem.nn import HyperbolicMemory

X = [0.1, 0.2]
Y = [0.3, -0.1]

# every function of poincare_functions that takes c, called with c as the last argument
CALLS = {
    "conformal_factor": lambda c: P.conformal_factor(X, c),
    "mobius_add": lambda c: P.mobius_add(X, Y, c),
    "mobius_scalar_mul": lambda c: P.mobius_scalar_mul(2.0, X, c),
    "distance": lambda c: P.distance(X, Y, c),
    "distance_arcosh": lambda c: P.distance_arcosh(X, Y, c),
    "boundary_gap": lambda c: P.boundary_gap(torch.tensor([0.1]), c),
    "arcosh_distance": lambda c: P.arcosh_distance(torch.tensor([0.1]), torch.tensor([0.9]), torch.tensor([0.9]), c),
    "distance_to_origin": lambda c: P.distance_to_origin(X, c),
    "pairwise_distance": lambda c: P.pairwise_distance([X], [Y], c),
    "expmap0": lambda c: P.expmap0(X, c),
    "logmap0": lambda c: P.logmap0(X, c),
    "expmap": lambda c: P.expmap(X, Y, c),
    "logmap": lambda c: P.logmap(X, Y, c),
    "geodesic": lambda c: P.geodesic(0.5, X, Y, c),
    "point_at": lambda c: P.point_at(X, 1.0, c),
    "set_depth": lambda c: P.set_depth(X, 1.0, c),
    "project": lambda c: P.project(X, c),
    "is_inside": lambda c: P.is_inside(X, c),
    "to_lorentz": lambda c: P.to_lorentz(X, c),
    "from_lorentz": lambda c: P.from_lorentz([1.2, 0.1, 0.2], c),
    "egrad2rgrad": lambda c: P.egrad2rgrad(X, Y, c),
    "retraction": lambda c: P.retraction(X, Y, c),
    "shell_distance": lambda c: P.shell_distance(X, Y, 1.0, c),
    "shell_distance_from_cosine": lambda c: P.shell_distance_from_cosine(0.5, 1.0, c),
    "shell_scale": lambda c: P.shell_scale(1.0, c),
    "shell_distance_from_half_chord": lambda c: P.shell_distance_from_half_chord(torch.tensor(0.3), 1.2, c),
    "shell_distance_at_depth": lambda c: P.shell_distance_at_depth(torch.tensor(0.3), 1.0, c),
    "random_points": lambda c: P.random_points(3, 2, c=c, seed=0),
    "max_radius": lambda c: max_radius(torch.float64, c),
}

BAD = [-1.0, 0.0, math.nan, math.inf, -math.inf, "1", None, True, 1e-300, 5e-324,
       torch.tensor(-1.0, dtype=torch.float64), torch.tensor(math.nan), torch.tensor(0.0)]


# ---------------------------------------------------------------------------- defect 7: c checked
@pytest.mark.parametrize("name", sorted(CALLS))
@pytest.mark.parametrize("c", BAD, ids=repr)
def test_every_function_refuses_a_bad_curvature(name, c):
    with pytest.raises(ValueError, match="curvature"):
        CALLS[name](c)


@pytest.mark.parametrize("name", sorted(CALLS))
def test_every_function_takes_a_good_curvature(name):
    for c in (1, 0.37, 2.5, torch.tensor(0.37, dtype=torch.float64)):
        out = CALLS[name](c)
        assert bool(torch.isfinite(torch.as_tensor(out)).all())


def test_a_bool_or_complex_tensor_curvature_is_a_type_error():
    for c in (torch.tensor(True), torch.tensor(1 + 0j)):
        with pytest.raises(TypeError, match="real tensor"):
            P.distance(X, Y, c)


def test_a_tensor_curvature_keeps_its_gradient():
    c = torch.tensor(0.5, dtype=torch.float64, requires_grad=True)
    P.distance(X, Y, c).backward()
    assert c.grad is not None and math.isfinite(float(c.grad))


@pytest.mark.parametrize("margin", [2.0, 1.0, -0.1, math.nan, math.inf, "0.1", True])
def test_project_refuses_a_margin_outside_0_1(margin):
    with pytest.raises(ValueError, match="margin"):
        P.project(torch.tensor([3.0, 4.0], dtype=torch.float64), margin=margin)
    with pytest.raises(ValueError, match="margin"):
        PoincareBall().project(torch.tensor([3.0, 4.0]), margin=margin)


def test_project_with_a_good_margin_stays_on_the_same_side():
    x = torch.tensor([3.0, 4.0], dtype=torch.float64)
    for m in (0.0, 0.5, 0.999):
        p = P.project(x, margin=m)
        assert float(p.norm()) == pytest.approx(1.0 - m) and bool((p * x > 0).all())


# ---------------------------------------------------------------------------- defect 8: tiny curvatures
def test_curvatures_below_the_floor_are_refused_with_a_euclidean_hint():
    for c in (1e-300, 1e-320, MIN_CURVATURE / 2):
        with pytest.raises(ValueError, match="Euclidean"):
            PoincareBall(c)
    assert PoincareBall(MIN_CURVATURE).curvature == MIN_CURVATURE


@pytest.mark.parametrize("dtype,rtol", [(torch.float64, 1e-12), (torch.float32, 2e-6)])
@pytest.mark.parametrize("c", [MIN_CURVATURE, 1e-29, 1e-20, 1e-12])
def test_tiny_curvature_gives_the_euclidean_limit(dtype, rtol, c):
    x = torch.tensor([[0.1, 0.2], [0.3, -0.1], [1e-3, 2e-3]], dtype=dtype, requires_grad=True)
    y = torch.tensor([[0.05, 0.1], [0.3, -0.1 + 1e-4], [-4e-3, 0.0]], dtype=dtype)
    ref = 2.0 * (x.detach().double() - y.double()).norm(dim=-1)  # the c -> 0 limit
    for d in (P.distance(x, y, c), P.pairwise_distance(x, y, c).diagonal(), PoincareBall(c).dist(x, y)):
        torch.testing.assert_close(d.double(), ref, rtol=rtol, atol=0.0)
    P.distance(x, y, c).sum().backward()
    diff = x.detach().double() - y.double()
    torch.testing.assert_close(x.grad.double(), 2.0 * diff / diff.norm(dim=-1, keepdim=True), rtol=10 * rtol,
                               atol=rtol)


def test_the_reported_tiny_curvature_cases():
    x = torch.tensor([0.1, 0.2], dtype=torch.float64)
    assert float(P.distance(x.float(), x.float() * 0.5, 1e-29)) == pytest.approx(0.2236068, rel=1e-6)
    with pytest.raises(ValueError, match="Euclidean"):
        P.distance(x, x * 0.5, 1e-300)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_distance_matches_the_python_arcosh_at_ordinary_curvatures(dtype):
    g = torch.Generator().manual_seed(3)
    for c in (1e-6, 0.37, 1.0, 10.0):
        x = P.random_points(40, 4, 3.0, seed=1, c=c).to(dtype)
        y = P.random_points(40, 4, 3.0, seed=2, c=c).to(dtype) + 1e-3 * torch.randn(40, 4, generator=g).to(dtype)
        y = P.project(y, c)
        ref = []
        for a, b in zip(x.double().tolist(), y.double().tolist()):
            sq = sum((p - q) ** 2 for p, q in zip(a, b))
            ga, gb = 1 - c * sum(p * p for p in a), 1 - c * sum(q * q for q in b)
            u = 2 * c * sq / (ga * gb)
            ref.append(math.log1p(u + math.sqrt(u * (u + 2))) / math.sqrt(c))  # acosh(1 + u), precise near 1
        rtol = 1e-10 if dtype == torch.float64 else 1e-4
        torch.testing.assert_close(P.distance(x, y, c).double(), torch.tensor(ref, dtype=torch.float64),
                                   rtol=rtol, atol=0.0)


def test_distance_to_itself_is_exactly_zero_with_a_zero_gradient():
    for dtype in (torch.float64, torch.float32):
        x = torch.tensor([[0.1, 0.2], [0.0, 0.0]], dtype=dtype, requires_grad=True)
        d = P.distance(x, x.detach(), 0.5)
        assert d.tolist() == [0.0, 0.0]
        d.sum().backward()
        assert x.grad.tolist() == [[0.0, 0.0], [0.0, 0.0]]


def test_arcosh1p_does_not_floor_a_small_argument():
    for dtype, u in ((torch.float64, 2.5e-302), (torch.float32, 2.5e-31), (torch.float32, 1e-36)):
        v = torch.tensor([u, 0.0, -1.0], dtype=dtype, requires_grad=True)
        out = arcosh1p(v)
        assert float(out[0].detach()) == pytest.approx(math.sqrt(2 * u), rel=1e-5, abs=0.0)  # arcosh(1 + u) ~ sqrt(2u)
        assert out[1:].tolist() == [0.0, 0.0]
        out.sum().backward()
        assert bool(torch.isfinite(v.grad).all()) and v.grad[1:].tolist() == [0.0, 0.0]


def test_a_learnable_tiny_curvature_is_kept_exactly():
    for c in (1e-20, 1e-12, 3e-16, 1000.0):
        ball = PoincareBall(c, learnable=True)
        assert float(ball.c.detach()) == pytest.approx(c, rel=1e-12, abs=0.0)  # geoopt's log(exp(c) - 1) gave 0 / 1.00009e-12
        again = PoincareBall(1.0, learnable=True)
        again.load_state_dict(ball.state_dict())
        assert again.curvature == pytest.approx(c, rel=1e-12, abs=0.0)
        fixed = PoincareBall(1.0)
        fixed.load_state_dict(PoincareBall(c).state_dict())
        assert fixed.curvature == c


# ---------------------------------------------------------------------------- defect 9: shell overflow
def _half_chord(x, y):
    return float((x / x.norm() - y / y.norm()).norm() / 2)


def test_shell_distance_deep_in_the_ball_is_finite_and_right():
    x = torch.tensor([0.1, 0.2], dtype=torch.float64)
    y = torch.tensor([0.2, -0.1], dtype=torch.float64)
    h = _half_chord(x, y)
    for depth in (100.0, 709.0, 710.5, 800.0, 1e5):
        ref = 2 * (depth + math.log(h))
        assert float(P.shell_distance(x, y, depth)) == pytest.approx(ref, rel=1e-13), depth
        cos = float((x / x.norm()) @ (y / y.norm()))
        assert float(P.shell_distance_from_cosine(cos, depth)) == pytest.approx(ref, rel=1e-12), depth
    assert float(P.shell_distance(x, 2 * x, 800.0)) == 0.0  # one direction: 0 at any depth


def test_shell_distance_at_a_huge_curvature_has_finite_gradients():
    x = (1e-4 * torch.tensor([0.1, 0.2], dtype=torch.float64)).requires_grad_(True)
    y = 1e-4 * torch.tensor([0.2, -0.1], dtype=torch.float64)
    c, depth = 1e6, 1.5
    d = P.shell_distance(x, y, depth, c)
    d.backward()
    xr = x.detach().clone().requires_grad_(True)
    u, v = xr / xr.norm(), y / y.norm()
    ref = 2 / math.sqrt(c) * (math.sqrt(c) * depth + torch.log((u - v).norm() / 2))  # arsinh(z) = log 2z
    ref.backward()
    assert float(d.detach()) == pytest.approx(float(ref.detach()), rel=1e-13)
    torch.testing.assert_close(x.grad, xr.grad, rtol=1e-10, atol=0.0)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_shell_distance_with_a_tensor_curvature_agrees_on_both_sides_of_the_overflow(dtype):
    x = torch.tensor([[0.1, 0.2], [0.3, 0.05]], dtype=dtype)
    y = torch.tensor([[0.2, -0.1], [0.3, 0.06]], dtype=dtype)
    for depth in (1.0, 50.0, 88.0, 90.0, 700.0, 720.0):
        c = torch.tensor(1.0, dtype=dtype, requires_grad=True)
        d = P.shell_distance(x, y, depth, c)
        torch.testing.assert_close(d, P.shell_distance(x, y, depth, 1.0), rtol=1e-5 if dtype == torch.float32
                                   else 1e-13, atol=0.0)
        d.sum().backward()
        assert math.isfinite(float(c.grad)), depth


def test_shell_scale_refuses_a_float_that_overflows():
    assert P.shell_scale(700.0) == math.sinh(700.0)
    with pytest.raises(ValueError, match="overflows"):
        P.shell_scale(1000.0)


def test_asinh_exp_matches_its_closed_forms():
    t = torch.tensor([-math.inf, -800.0, -30.0, -1.0, 0.0, 1.0, 30.0, 700.0, 800.0, 1e6], dtype=torch.float64,
                     requires_grad=True)
    out = asinh_exp(t)
    ref = [0.0] + [math.asinh(math.exp(v)) for v in (-800.0, -30.0, -1.0, 0.0, 1.0, 30.0, 700.0)] + [
        800.0 + math.log(2.0), 1e6 + math.log(2.0)]
    torch.testing.assert_close(out, torch.tensor(ref, dtype=torch.float64), rtol=1e-15, atol=0.0)
    out.sum().backward()
    assert bool(torch.isfinite(t.grad).all())


def test_a_shell_memory_read_deep_in_the_ball_is_finite():
    keys = torch.tensor([[0.1, 0.2, 0.0], [-0.3, 0.1, 0.2], [0.0, -0.2, 0.4]], dtype=torch.float64)
    mem = HyperbolicMemory(keys, metric="shell", base_depth=800.0)
    q = torch.tensor([[0.2, 0.1, 0.05]], dtype=torch.float64, requires_grad=True)
    out = mem(q)
    torch.testing.assert_close(out.distances[0], P.shell_distance(q.detach(), keys, 800.0), rtol=1e-13, atol=0.0)
    assert bool(torch.isfinite(out.distances).all()) and float(out.weights.sum().detach()) == pytest.approx(1.0)
    out.read.sum().backward()
    assert bool(torch.isfinite(q.grad).all())
