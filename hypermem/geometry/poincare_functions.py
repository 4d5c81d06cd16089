r"""Pure tensor functions of the Poincaré ball of curvature ``-c`` (``c > 0``).

The ball is ``B_c^n = {x in R^n : c ||x||^2 < 1}`` with the metric
``g_x = lambda_x^2 g_E``, ``lambda_x = 2 / (1 - c ||x||^2)``.  Formulas follow the
gyrovector formalism of Ungar (2008) as used by Ganea, Bécigneul & Hofmann,
"Hyperbolic Neural Networks" (NeurIPS 2018), and Nickel & Kiela, "Poincaré Embeddings
for Learning Hierarchical Representations" (NeurIPS 2017).

Every function takes tensors (or arrays, lists), keeps the dtype and device of torch
input, broadcasts over leading batch dimensions, and reduces over the last one.  ``c``
may be a float or a 0-dim tensor (for a learnable curvature).  The pole-prone special
functions come from :mod:`hypermem.geometry.numerics`, so values and gradients are finite
everywhere inside the ball, at the origin and within the margin of the boundary.
"""

from __future__ import annotations

import math
from typing import Any

import torch

from .conversion import as_points, as_tensor, as_tensors
from .numerics import arcosh1p, artanh, ball_margin, safe_norm, sq_norm, tanh, tiny

Curvature = float | torch.Tensor

__all__ = [
    "Curvature", "conformal_factor", "mobius_add", "mobius_scalar_mul", "distance",
    "distance_arcosh", "boundary_gap", "arcosh_distance", "distance_to_origin", "pairwise_distance",
    "expmap0", "logmap0", "expmap", "logmap", "geodesic", "point_at", "set_depth", "project",
    "is_inside", "to_lorentz", "from_lorentz", "egrad2rgrad", "retraction", "shell_distance",
    "shell_distance_from_cosine", "shell_scale", "shell_distance_from_half_chord", "random_points",
]


def _sqrt_c(c: Curvature):
    return c**0.5 if isinstance(c, torch.Tensor) else math.sqrt(c)


def _radius_tensor(r: Any, like: torch.Tensor) -> torch.Tensor:
    r = as_tensor(r, dtype=like.dtype, device=like.device, name="hyperbolic_radius")
    return r.unsqueeze(-1)


def conformal_factor(x, c: Curvature = 1.0, keepdim: bool = False) -> torch.Tensor:
    r"""Conformal factor ``lambda_x = 2 / (1 - c ||x||^2)``, shape ``x.shape[:-1]``
    (``x.shape[:-1] + (1,)`` with ``keepdim``, ready to multiply vectors)."""
    (x,) = as_points(x, names=("x",))
    return 2.0 / boundary_gap(sq_norm(x, keepdim=keepdim), c)


def mobius_add(x, y, c: Curvature = 1.0) -> torch.Tensor:
    r"""Möbius addition (Ungar 2008; Ganea et al. 2018, eq. 2).

    ``x ⊕_c y = ((1 + 2c<x,y> + c||y||^2) x + (1 - c||x||^2) y)
    / (1 + 2c<x,y> + c^2 ||x||^2 ||y||^2)``
    """
    x, y = as_points(x, y)
    xy = (x * y).sum(-1, keepdim=True)
    x2 = sq_norm(x, keepdim=True)
    y2 = sq_norm(y, keepdim=True)
    num = (1.0 + 2.0 * c * xy + c * y2) * x + (1.0 - c * x2) * y
    den = 1.0 + 2.0 * c * xy + (c * c) * x2 * y2
    return num / den.clamp_min(tiny(x.dtype))


def mobius_scalar_mul(r, x, c: Curvature = 1.0) -> torch.Tensor:
    r"""Möbius scalar multiplication (Ganea et al. 2018, eq. 3).

    ``r ⊗_c x = tanh(r artanh(sqrt(c)||x||)) x / (sqrt(c) ||x||)``; it multiplies the
    hyperbolic distance from the origin by ``r``.
    """
    (x,) = as_points(x, names=("x",))
    r = _radius_tensor(r, x)
    sc = _sqrt_c(c)
    n = safe_norm(x, keepdim=True)
    return tanh(r * artanh(sc * n)) * x / (sc * n)


def distance(x, y, c: Curvature = 1.0) -> torch.Tensor:
    r"""Geodesic distance (Ganea et al. 2018, eq. 5, the gyrovector form).

    ``d_c(x, y) = (2 / sqrt(c)) artanh(sqrt(c) ||(-x) ⊕_c y||)``

    The value is computed by the equal arcosh form of :func:`distance_arcosh` (Ungar's
    identity ``1 - c||(-x) ⊕_c y||^2 = (1 - c||x||^2)(1 - c||y||^2) / (1 - 2c<x,y> +
    c^2 ||x||^2 ||y||^2)`` turns one into the other).  The gyrovector form cancels twice
    in floating point: ``||(-x) ⊕_c y||`` rounds to the radius for deep points far apart
    (``artanh`` then saturates: 35.2 instead of 37.3 for orthogonal points at depths 20
    and 18 in float64), and the Möbius denominator loses every digit for two nearby deep
    points; the coordinate differences ``||x - y||^2`` of the arcosh form keep full
    precision in both cases.
    """
    return distance_arcosh(x, y, c)


def distance_arcosh(x, y, c: Curvature = 1.0) -> torch.Tensor:
    r"""Geodesic distance by the arcosh formula (Nickel & Kiela 2017, eq. 1, curvature c).

    ``d_c(x, y) = (1 / sqrt(c)) arcosh(1 + 2c ||x - y||^2 / ((1 - c||x||^2)(1 - c||y||^2)))``

    Evaluated as ``arcosh1p`` of the fraction, which keeps small distances precise.
    """
    x, y = as_points(x, y)
    return arcosh_distance(sq_norm(x - y), boundary_gap(sq_norm(x), c), boundary_gap(sq_norm(y), c), c)


def boundary_gap(sq, c: Curvature = 1.0) -> torch.Tensor:
    r"""``1 - c ||x||^2`` from the squared norm ``sq``, floored at the dtype's ``tiny``
    (``2 / lambda_x``: the factor of both distance formulas that vanishes at the boundary)."""
    return (1.0 - c * sq).clamp_min(tiny(sq.dtype))


def arcosh_distance(sq_diff: torch.Tensor, gap_x: torch.Tensor, gap_y: torch.Tensor,
                    c: Curvature = 1.0) -> torch.Tensor:
    r"""The arcosh distance from its parts (Nickel & Kiela 2017, eq. 1, curvature c):

    ``d_c = (1 / sqrt(c)) arcosh(1 + 2c sq_diff / (gap_x gap_y))``

    with ``sq_diff = ||x - y||^2`` and ``gap = 1 - c||.||^2`` (:func:`boundary_gap`, or any
    equal form: the index takes it from the hyperbolic radius).  The one home of the
    formula: :func:`distance_arcosh`, :func:`pairwise_distance`, the index's
    :class:`~hypermem.index.HyperbolicDistance` and the differentiable memory's distances
    (:mod:`hypermem.nn.distance`) evaluate it here; the closed-form training kernels
    (:mod:`hypermem.hierarchy.fused`, ``fused_sgd``, ``compiled_sgd``) keep their own copy
    and ``tests/test_formula_contract.py`` checks them against it.
    """
    return arcosh1p(2.0 * c * sq_diff / (gap_x * gap_y)) / _sqrt_c(c)


def distance_to_origin(x, c: Curvature = 1.0) -> torch.Tensor:
    r"""Depth coordinate ``d_c(0, x) = (2 / sqrt(c)) artanh(sqrt(c) ||x||)``."""
    (x,) = as_points(x, names=("x",))
    sc = _sqrt_c(c)
    return 2.0 / sc * artanh(sc * safe_norm(x))


def pairwise_distance(x, y, c: Curvature = 1.0) -> torch.Tensor:
    r"""All-pairs distances: ``x`` of shape ``(..., n, d)``, ``y`` of shape ``(..., m, d)``
    give ``(..., n, m)``.

    The arcosh formula, with ``||x_i - y_j||`` taken from the coordinate differences
    (:func:`torch.cdist` without its matrix-product shortcut, memory ``O(n m)``): the
    shortcut ``||x||^2 + ||y||^2 - 2 <x, y>`` cancels for nearby points (an error of
    ``eps * ||x||^2``, 2e-9 in float64 and 1e-3 in float32 once the arcosh's square
    root is taken), while the differences keep full relative precision, so ``d(x, x)``
    is exactly 0 and nearby distances agree with :func:`distance` to the last digits.
    """
    x, y = as_points(x, y, core_dims=2)
    if x.dim() < 2 or y.dim() < 2:
        raise ValueError(f"pairwise_distance needs (n, d) and (m, d) inputs, got shapes "
                         f"{tuple(x.shape)} and {tuple(y.shape)}")
    d2 = torch.cdist(x, y, compute_mode="donot_use_mm_for_euclid_dist").square()
    gap_x = boundary_gap(sq_norm(x), c).unsqueeze(-1)
    return arcosh_distance(d2, gap_x, boundary_gap(sq_norm(y), c).unsqueeze(-2), c)


def expmap0(v, c: Curvature = 1.0) -> torch.Tensor:
    r"""Exponential map at the origin: ``exp_0(v) = tanh(sqrt(c)||v||) v / (sqrt(c)||v||)``
    (Ganea et al. 2018, Lemma 2 at ``x = 0``)."""
    (v,) = as_points(v, names=("v",))
    sc = _sqrt_c(c)
    n = safe_norm(v, keepdim=True)
    return tanh(sc * n) * v / (sc * n)


def logmap0(y, c: Curvature = 1.0) -> torch.Tensor:
    r"""Logarithmic map at the origin: ``log_0(y) = artanh(sqrt(c)||y||) y / (sqrt(c)||y||)``."""
    (y,) = as_points(y, names=("y",))
    sc = _sqrt_c(c)
    n = safe_norm(y, keepdim=True)
    return artanh(sc * n) * y / (sc * n)


def expmap(x, v, c: Curvature = 1.0) -> torch.Tensor:
    r"""Exponential map at ``x`` (Ganea et al. 2018, Lemma 2).

    ``exp_x(v) = x ⊕_c (tanh(sqrt(c) lambda_x ||v|| / 2) v / (sqrt(c) ||v||))``
    """
    x, v = as_points(x, v, names=("x", "v"))
    sc = _sqrt_c(c)
    n = safe_norm(v, keepdim=True)
    lam = conformal_factor(x, c, keepdim=True)
    return mobius_add(x, tanh(sc * lam * n / 2.0) * v / (sc * n), c)


def logmap(x, y, c: Curvature = 1.0) -> torch.Tensor:
    r"""Logarithmic map at ``x`` (Ganea et al. 2018, Lemma 2).

    ``log_x(y) = (2 / (sqrt(c) lambda_x)) artanh(sqrt(c)||w||) w / ||w||``, ``w = (-x) ⊕_c y``
    """
    x, y = as_points(x, y)
    sc = _sqrt_c(c)
    w = mobius_add(-x, y, c)
    n = safe_norm(w, keepdim=True)
    lam = conformal_factor(x, c, keepdim=True)
    return 2.0 / (sc * lam) * artanh(sc * n) * w / n


def geodesic(t, x, y, c: Curvature = 1.0) -> torch.Tensor:
    r"""Point at fraction ``t`` of the geodesic from ``x`` (t=0) to ``y`` (t=1).

    ``gamma(t) = x ⊕_c (t ⊗_c ((-x) ⊕_c y))`` (Ganea et al. 2018, eq. 6)
    """
    x, y = as_points(x, y)
    return mobius_add(x, mobius_scalar_mul(t, mobius_add(-x, y, c), c), c)


def point_at(direction, hyperbolic_radius, c: Curvature = 1.0) -> torch.Tensor:
    r"""Point at hyperbolic distance ``r`` from the origin along ``direction``.

    ``p = tanh(sqrt(c) r / 2) u / sqrt(c)`` with ``u = direction / ||direction||``, so that
    ``d_c(0, p) = r``.  A zero direction gives the origin.
    """
    (u,) = as_points(direction, names=("direction",))
    r = _radius_tensor(hyperbolic_radius, u)
    sc = _sqrt_c(c)
    u = u / safe_norm(u, keepdim=True)
    return project(tanh(sc * r / 2.0) * u / sc, c)


def set_depth(x, hyperbolic_radius, c: Curvature = 1.0) -> torch.Tensor:
    """Move ``x`` radially so that its distance from the origin is ``hyperbolic_radius``."""
    return point_at(x, hyperbolic_radius, c)


def project(x, c: Curvature = 1.0, margin: float | None = None) -> torch.Tensor:
    r"""Pull points back inside the ball: ``||x|| <= (1 - margin) / sqrt(c)``.

    ``margin`` defaults to :func:`hypermem.geometry.numerics.ball_margin` of the dtype.
    Points already inside are returned unchanged.
    """
    (x,) = as_points(x, names=("x",))
    m = ball_margin(x.dtype) if margin is None else margin
    maxnorm = (1.0 - m) / _sqrt_c(c)
    n = safe_norm(x, keepdim=True)
    return torch.where(n > maxnorm, x / n * maxnorm, x)


def is_inside(x, c: Curvature = 1.0) -> torch.Tensor:
    """Boolean tensor ``c ||x||^2 < 1`` (strictly inside the open ball), shape ``x.shape[:-1]``."""
    (x,) = as_points(x, names=("x",))
    return (c * sq_norm(x) < 1.0) & torch.isfinite(x).all(-1)


def to_lorentz(x, c: Curvature = 1.0) -> torch.Tensor:
    r"""Map ball points to the hyperboloid ``{X : <X,X>_L = -1/c, X_0 > 0}``.

    ``X_0 = (1 + c||x||^2) / (sqrt(c) (1 - c||x||^2))``, ``X_i = 2 x_i / (1 - c||x||^2)``.
    The output has one more coordinate, the time coordinate first.
    """
    (x,) = as_points(x, names=("x",))
    x2 = c * sq_norm(x, keepdim=True)
    den = (1.0 - x2).clamp_min(tiny(x.dtype))
    x0 = (1.0 + x2) / (_sqrt_c(c) * den)
    return torch.cat([x0, 2.0 * x / den], dim=-1)


def from_lorentz(X, c: Curvature = 1.0) -> torch.Tensor:
    r"""Inverse of :func:`to_lorentz`: ``x_i = X_i / (1 + sqrt(c) X_0)``."""
    (X,) = as_points(X, names=("X",))
    if X.shape[-1] < 2:
        raise ValueError(f"hyperboloid points need at least 2 coordinates, got shape {tuple(X.shape)}")
    return X[..., 1:] / (1.0 + _sqrt_c(c) * X[..., :1])


def egrad2rgrad(x, grad, c: Curvature = 1.0) -> torch.Tensor:
    r"""Riemannian gradient from a Euclidean one: ``((1 - c||x||^2)^2 / 4) grad``
    (Nickel & Kiela 2017, eq. 4)."""
    x, grad = as_points(x, grad, names=("x", "grad"))
    return ((1.0 - c * sq_norm(x, keepdim=True)) ** 2 / 4.0) * grad


def retraction(x, v, c: Curvature = 1.0) -> torch.Tensor:
    """First-order retraction ``proj(x + v)`` of Riemannian SGD (Nickel & Kiela 2017, eq. 5)."""
    x, v = as_points(x, v, names=("x", "v"))
    return project(x + v, c)


def shell_distance(x, y, depth, c: Curvature = 1.0) -> torch.Tensor:
    r"""Distance after moving ``x`` and ``y`` radially to the same hyperbolic radius ``depth``.

    By the hyperbolic law of cosines, two points at radius ``rho`` with angle ``theta``
    between them are at ``cosh(sqrt(c) d) = 1 + sinh^2(sqrt(c) rho)(1 - cos theta)``, i.e.

    ``d = (2 / sqrt(c)) arsinh(sinh(sqrt(c) rho) sin(theta / 2))``

    a monotone function of the angle alone (see :func:`shell_distance_from_cosine`).
    ``sin(theta/2) = ||u - v|| / 2`` for the unit directions ``u``, ``v``, which stays
    precise for tiny angles.  A zero vector has no direction and is treated as
    orthogonal to everything.
    """
    x, y = as_points(x, y)
    u = x / safe_norm(x, keepdim=True)
    v = y / safe_norm(y, keepdim=True)
    half_chord = safe_norm(u - v) / 2.0
    zero = (sq_norm(x) == 0) | (sq_norm(y) == 0)
    half_chord = torch.where(zero, torch.full_like(half_chord, math.sqrt(0.5)), half_chord)
    depth_t = as_tensor(depth, dtype=x.dtype, device=x.device, name="depth")
    return shell_distance_from_half_chord(half_chord, shell_scale(depth_t, c), c)


def shell_distance_from_cosine(cos, depth, c: Curvature = 1.0) -> torch.Tensor:
    r"""Shell distance from the cosine of the angle between two directions.

    ``d = (2 / sqrt(c)) arsinh(sinh(sqrt(c) rho) sqrt((1 - cos theta) / 2))``; decreasing
    in ``cos theta``, which is what lets a store rank by one matrix product of unit
    directions (see :func:`shell_distance`).
    """
    (cos,) = as_tensors(cos, names=("cos",))
    depth_t = as_tensor(depth, dtype=cos.dtype, device=cos.device, name="depth")
    s = ((1.0 - cos.clamp(-1.0, 1.0)) * 0.5).clamp_min(tiny(cos.dtype)).sqrt()
    return shell_distance_from_half_chord(s, shell_scale(depth_t, c), c)


def shell_scale(depth, c: Curvature = 1.0):
    r"""``sinh(sqrt(c) rho)`` of the shell at hyperbolic radius ``rho = depth``: a Python
    float for a float depth and curvature, else a tensor."""
    sc = _sqrt_c(c)
    x = sc * depth
    return torch.sinh(x) if isinstance(x, torch.Tensor) else math.sinh(x)


def shell_distance_from_half_chord(half_chord, scale, c: Curvature = 1.0) -> torch.Tensor:
    r"""The shell distance from its parts: ``d = (2 / sqrt(c)) arsinh(scale * h)`` with
    ``scale = sinh(sqrt(c) rho)`` (:func:`shell_scale`) and ``h = sin(theta / 2) =
    ||u - v|| / 2 = sqrt((1 - cos theta) / 2)`` for unit directions (the hyperbolic law of
    cosines, see :func:`shell_distance`).

    The one home of the formula: :func:`shell_distance`, :func:`shell_distance_from_cosine`
    and the differentiable memory's distances (:mod:`hypermem.nn.distance`) evaluate it
    here; the search kernel's :class:`~hypermem.index.ShellDistance` keeps an in-place copy
    (its hot loop) that ``tests/test_formula_contract.py`` checks against it.
    """
    sc = _sqrt_c(c)
    return 2.0 / sc * torch.asinh(scale * half_chord)


def random_points(n: int, dim: int, max_hyperbolic_radius: float = 2.0, seed: int | None = None,
                  c: Curvature = 1.0, dtype: torch.dtype = torch.float64,
                  device: torch.device | str | None = None) -> torch.Tensor:
    """``n`` points with uniform random directions and hyperbolic radius uniform in
    ``[0, max_hyperbolic_radius]``."""
    if int(n) < 0 or int(dim) < 1:
        raise ValueError(f"need n >= 0 and dim >= 1, got n={n}, dim={dim}")
    if not (max_hyperbolic_radius >= 0 and math.isfinite(max_hyperbolic_radius)):
        raise ValueError(f"max_hyperbolic_radius must be finite and >= 0, got {max_hyperbolic_radius}")
    g = torch.Generator(device="cpu")
    if seed is not None:
        g.manual_seed(int(seed))
    else:
        g.seed()
    u = torch.randn(int(n), int(dim), generator=g, dtype=torch.float64)
    r = torch.rand(int(n), generator=g, dtype=torch.float64) * max_hyperbolic_radius
    return point_at(u, r, float(c) if not isinstance(c, torch.Tensor) else float(c)).to(dtype=dtype,
                                                                                         device=device)
