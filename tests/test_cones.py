import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from hypermem.geometry import PoincareBall
from hypermem.retrieval.cones import DEFAULT_K, cone_angle, cone_energy, half_aperture, in_cone


def test_default_k():
    assert DEFAULT_K == 0.1


@settings(max_examples=40, deadline=None)
@given(st.integers(2, 16), st.floats(0.25, 4.0), st.integers(0, 10_000), st.floats(0.6, 4.0))
def test_ray_membership_and_reverse(dim, c, seed, r):
    ball = PoincareBall(c)
    u = torch.randn(dim, dtype=torch.float64, generator=torch.Generator().manual_seed(seed))
    x = ball.point_at(u, r)
    further = ball.point_at(u, r + 1.0)
    closer = ball.point_at(u, r / 3)
    assert bool(in_cone(x, further, ball))
    assert float(cone_energy(x, further, ball)) == 0.0
    assert not bool(in_cone(x, closer, ball))
    assert abs(float(cone_angle(x, closer, ball)) - math.pi) < 1e-4


def test_half_aperture_shrinks_toward_boundary_and_matches_formula():
    ball = PoincareBall(1.0)
    radii = torch.tensor([0.5, 1.0, 2.0, 4.0], dtype=torch.float64)
    pts = ball.point_at(torch.tensor([[1.0, 0.0]] * 4, dtype=torch.float64), radii)
    psi = half_aperture(pts, ball)
    assert torch.all(psi[1:] < psi[:-1])
    n = pts.norm(dim=-1)
    expected = torch.asin((DEFAULT_K * (1 - n * n) / n).clamp(max=1 - 1e-12))
    torch.testing.assert_close(psi, expected)


def test_curvature_scaling():
    # a ball of curvature c is the unit ball scaled by 1/sqrt(c)
    c = 2.5
    x = torch.tensor([0.3, 0.2], dtype=torch.float64)
    y = torch.tensor([0.4, 0.35], dtype=torch.float64)
    s = math.sqrt(c)
    torch.testing.assert_close(cone_energy(x / s, y / s, PoincareBall(c)), cone_energy(x, y))
    torch.testing.assert_close(cone_energy(x / s, y / s, c), cone_energy(x, y))


def test_cone_gradcheck_and_bad_k():
    ball = PoincareBall(1.0)
    x = torch.tensor([[0.5, 0.1, 0.0]], dtype=torch.float64, requires_grad=True)
    y = torch.tensor([[0.1, 0.6, 0.2]], dtype=torch.float64, requires_grad=True)
    assert float(cone_energy(x, y, ball).detach()) > 0
    assert torch.autograd.gradcheck(lambda a, b: cone_energy(a, b, ball), (x, y))
    with pytest.raises(ValueError, match="K"):
        cone_energy(x, y, ball, K=-1.0)


def test_finite_gradients_float32_near_boundary():
    ball = PoincareBall(1.0)
    x = torch.tensor([[0.9989, 0.0]], dtype=torch.float32, requires_grad=True)
    y = torch.tensor([[0.0, 0.9989]], dtype=torch.float32, requires_grad=True)
    e = cone_energy(x, y, ball) + cone_energy(y * 0, x, ball)
    e.sum().backward()
    assert torch.isfinite(x.grad).all() and torch.isfinite(y.grad).all()


def test_undefined_inner_cone_contains_everything():
    ball = PoincareBall(1.0)
    eps_k = (math.sqrt(1 + 4 * DEFAULT_K**2) - 1) / (2 * DEFAULT_K)  # K (1 - e^2) / e = 1
    inner = torch.tensor([[eps_k * 0.5, 0.0], [0.0, 1e-6]], dtype=torch.float64)
    outer = torch.tensor([[eps_k * 1.01, 0.0]], dtype=torch.float64)
    assert torch.equal(half_aperture(inner, ball), torch.full((2,), math.pi, dtype=torch.float64))
    assert float(half_aperture(outer, ball)) < math.pi / 2
    anywhere = ball.random_points(50, 2, seed=0)
    for x in inner:
        assert bool(in_cone(x, anywhere, ball).all())
        assert float(cone_energy(x, anywhere, ball).max()) == 0.0
    # a curvature-2 ball scales the region by 1 / sqrt(2)
    assert float(half_aperture(inner[:1] / math.sqrt(2), 2.0)) == math.pi
