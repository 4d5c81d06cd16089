"""The cone angle at y = x and near the float32 margin, and distances on and beyond the boundary."""

from __future__ import annotations

import math

import pytest
import torch

from hypermem.geometry import PoincareBall
from hypermem.geometry import poincare_functions as P
from hypermem.geometry.cones import cone_angle, cone_energy
from hypermem.geometry.numerics import gap_floor
from hypermem.nn import entailment_cone_loss

DTYPES = (torch.float32, torch.float64)


def _eq28(x, y):
    """Ganea et al. (2018) eq. 28 as written (the arccos form), in float64, for reference."""
    xy = (x * y).sum(-1)
    x2 = (x * x).sum(-1)
    y2 = (y * y).sum(-1)
    num = xy * (1 + x2) - x2 * (1 + y2)
    den = x2.sqrt() * (x - y).norm(dim=-1) * (1 + x2 * y2 - 2 * xy).sqrt()
    return torch.acos((num / den).clamp(-1, 1))


@pytest.mark.parametrize("dtype", DTYPES)
def test_cone_angle_at_y_equal_x_is_zero_with_zero_gradient(dtype):
    x = torch.tensor([[0.3, 0.1, -0.2], [0.5, 0.0, 0.0], [0.0, -0.999, 0.0]], dtype=dtype, requires_grad=True)
    a = cone_angle(x, x)
    a.sum().backward()
    assert torch.equal(a.detach(), torch.zeros(3, dtype=dtype))
    assert torch.equal(x.grad, torch.zeros_like(x))
    y = x.detach().clone().requires_grad_(True)
    x.grad = None
    cone_angle(x, y).sum().backward()
    assert torch.equal(x.grad, torch.zeros_like(x)) and torch.equal(y.grad, torch.zeros_like(y))


@pytest.mark.parametrize("dtype", DTYPES)
def test_entailment_cone_loss_of_a_point_and_its_copy_is_zero_with_finite_gradients(dtype):
    g = torch.tensor([[0.3, 0.1, -0.2], [0.5, 0.0, 0.0]], dtype=dtype, requires_grad=True)
    s = g.detach().clone().requires_grad_(True)
    loss = entailment_cone_loss(g, s)
    loss.backward()
    assert float(loss.detach()) == 0.0
    assert torch.equal(g.grad, torch.zeros_like(g)) and torch.equal(s.grad, torch.zeros_like(s))


@pytest.mark.parametrize("dtype", DTYPES)
def test_cone_angle_near_y_equal_x_has_the_true_gradient(dtype):
    """Near y = x the gradient is the angle's own (it grows like 1 / ||y - x||), equal in both dtypes."""
    x = torch.tensor([0.3, 0.1, -0.2], dtype=torch.float64)
    step = torch.tensor([0.6, -0.8, 0.0], dtype=torch.float64)
    for h in (1e-2, 1e-4):
        y64 = (x + h * step).requires_grad_(True)
        cone_angle(x, y64).backward()
        y = (x + h * step).to(dtype).requires_grad_(True)
        a = cone_angle(x.to(dtype), y)
        a.backward()
        assert torch.isfinite(y.grad).all()
        assert float(y.grad.norm()) < 2.0 / h
        assert torch.allclose(y.grad.double(), y64.grad, rtol=2e-2, atol=0)
        assert float(a.detach()) == pytest.approx(float(_eq28(x, y64.detach())), abs=1e-3 if dtype == torch.float32 else 1e-9)


def test_cone_angle_matches_eq28_away_from_y_equal_x():
    ball = PoincareBall()
    x = ball.random_points(2000, 5, 4.0, seed=3)
    y = ball.random_points(2000, 5, 4.0, seed=4)
    ref = _eq28(x, y)
    inner = (ref > 1e-3) & (ref < math.pi - 1e-3)  # arccos itself is imprecise near 0 and pi
    assert torch.allclose(cone_angle(x, y)[inner], ref[inner], rtol=0, atol=1e-6)
    assert torch.allclose(cone_angle(x.float(), y.float()).double(), cone_angle(x, y), rtol=0, atol=2e-4)


@pytest.mark.parametrize("norm", [0.998, 0.999])
def test_float32_cone_angle_gradient_matches_float64_at_the_margin(norm):
    """0.999 is the float32 margin (1 - 1e-3, docs/numerics.md): the arccos clamp zeroed the gradient there."""
    ys = PoincareBall().random_points(50, 3, 3.0, seed=5)
    for y in ys:
        grads = {}
        for dtype in DTYPES:
            x = torch.tensor([norm, 0.0, 0.0], dtype=dtype, requires_grad=True)
            cone_angle(x, y.to(dtype)).backward()
            grads[dtype] = x.grad.double()
        g64 = grads[torch.float64]
        assert torch.allclose(grads[torch.float32], g64, rtol=0, atol=2e-2 * float(g64.norm()) + 1e-6)
    energy_grads = []
    for dtype in DTYPES:
        x = torch.tensor([norm, 0.0, 0.0], dtype=dtype, requires_grad=True)
        cone_energy(x, torch.tensor([0.3, 0.1, -0.2], dtype=dtype)).backward()
        energy_grads.append(float(x.grad[0]))
    assert energy_grads[0] == pytest.approx(energy_grads[1], rel=2e-2) and energy_grads[1] > 0.5


@pytest.mark.parametrize("dtype", DTYPES)
def test_distance_on_and_beyond_the_boundary_is_finite_and_meets_dist0(dtype):
    ball = PoincareBall()
    x = torch.tensor([[1.0, 0.0, 0.0], [1.5, 0.0, 0.0], [0.0, -1.0, 0.0]], dtype=dtype, requires_grad=True)
    y = torch.tensor([0.3, 0.1, -0.2], dtype=dtype)
    d = ball.distance(x, y)
    d.sum().backward()
    assert torch.isfinite(d).all() and torch.isfinite(x.grad).all() and bool((x.grad != 0).any())
    assert torch.equal(ball.dist(x, y), d)
    assert torch.allclose(ball.pairwise_distance(x, y[None]).squeeze(-1), d, rtol=1e-6)
    on = x.detach()[[0, 2]]
    cap = ball.dist0(on)
    assert torch.allclose(ball.distance(on, torch.zeros(3, dtype=dtype)), cap, rtol=1e-6)
    assert float(cap[0]) == pytest.approx(16.6355 if dtype == torch.float32 else 35.2327, abs=1e-3)
    assert float(ball.distance(x.detach()[0], -x.detach()[0])) == pytest.approx(2 * float(cap[0]), rel=1e-6)


@pytest.mark.parametrize("dtype", DTYPES)
def test_the_gap_floor_changes_no_point_within_the_margin(dtype):
    m = PoincareBall().margin(dtype)
    assert gap_floor(dtype) < 1e-3 * (1 - (1 - m) ** 2)
    x = P.project(P.random_points(500, 4, 40.0, seed=6, dtype=dtype))
    y = P.project(P.random_points(500, 4, 40.0, seed=7, dtype=dtype))
    gx = 1 - (x * x).sum(-1)
    gy = 1 - (y * y).sum(-1)
    assert bool((gx > gap_floor(dtype)).all()) and bool((gy > gap_floor(dtype)).all())
    ref = P.arcosh_distance(((x - y) ** 2).sum(-1), gx, gy)
    assert torch.equal(P.distance(x, y), ref)
