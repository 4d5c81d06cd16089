r"""Pure tensor functions of the Poincaré ball of curvature ``-c`` (``c > 0``).

The ball is ``B_c^n = {x in R^n : c ||x||^2 < 1}`` with the metric
``g_x = lambda_x^2 g_E``, ``lambda_x = 2 / (1 - c ||x||^2)``.  Formulas follow the
gyrovector formalism of Ungar (2008) as used by Ganea, Bécigneul & Hofmann,
"Hyperbolic Neural Networks" (NeurIPS 2018), and Nickel & Kiela, "Poincaré Embeddings
for Learning Hierarchical Representations" (NeurIPS 2017).

Every function takes tensors (or arrays, lists), keeps the dtype and device of torch
input, broadcasts over leading batch dimensions, and reduces over the last one.  ``c``
may be a float or a 0-dim tensor (for a learnable curvature); every function checks it with
:func:`~hypermem.geometry.conversion.checked_curvature` (a number: finite and at least
``MIN_CURVATURE``, else ``ValueError``; a tensor: read only where that costs no device sync,
see there).  Pole-prone special functions come from :mod:`hypermem.geometry.numerics`, so values
and gradients are finite everywhere inside the ball, at the origin and near the boundary.
"""

from __future__ import annotations

import math
from numbers import Real
from typing import Any

import torch

from .conversion import Curvature, as_points, as_tensor, check_curvature, checked_curvature, sqrt_curvature
from .numerics import (
    arcosh1p,
    artanh,
    ball_margin,
    gap_floor,
    half_as_float32,
    rescaled,
    safe_norm,
    sech2,
    sq_norm,
    tanh,
    tiny,
    x_over_tanh,
)
from .shell import (
    shell_distance,
    shell_distance_at_depth,
    shell_distance_from_cosine,
    shell_distance_from_half_chord,
    shell_scale,
)
from .squared_distances import squared_distances

__all__ = [
    "Curvature", "conformal_factor", "mobius_add", "mobius_scalar_mul", "distance",
    "distance_arcosh", "boundary_gap", "arcosh_distance", "distance_to_origin", "pairwise_distance",
    "expmap0", "logmap0", "expmap", "logmap", "geodesic", "mobius_add_from_gaps", "point_at", "set_depth", "project",
    "is_inside", "to_lorentz", "from_lorentz", "egrad2rgrad", "retraction", "shell_distance",
    "shell_distance_from_cosine", "shell_scale", "shell_distance_from_half_chord", "shell_distance_at_depth",
    "random_points",
]


_c = checked_curvature
_sqrt_c = sqrt_curvature


def _radius_tensor(r: Any, like: torch.Tensor) -> torch.Tensor:
    return as_tensor(r, dtype=like.dtype, device=like.device, name="hyperbolic_radius").unsqueeze(-1)


@half_as_float32
def conformal_factor(x, c: Curvature = 1.0, keepdim: bool = False) -> torch.Tensor:
    r"""Conformal factor ``lambda_x = 2 / (1 - c ||x||^2)``, shape ``x.shape[:-1]``
    (``x.shape[:-1] + (1,)`` with ``keepdim``, ready to multiply vectors)."""
    c = _c(c)
    (x,) = as_points(x, names=("x",))
    return 2.0 / boundary_gap(sq_norm(x, keepdim=keepdim), c)


@half_as_float32
def mobius_add(x, y, c: Curvature = 1.0) -> torch.Tensor:
    r"""Möbius addition (Ungar 2008; Ganea et al. 2018, eq. 2).

    ``x ⊕_c y = ((1 + 2c<x,y> + c||y||^2) x + (1 - c||x||^2) y)
    / (1 + 2c<x,y> + c^2 ||x||^2 ||y||^2)``

    Evaluated by :func:`mobius_add_from_gaps` (the one home of eq. 2) with the gaps
    ``1 - c||x||^2`` and ``1 - c||y||^2`` unfloored, so points outside the ball add as before.
    """
    c = _c(c)
    x, y = as_points(x, y)
    return mobius_add_from_gaps(x, y, 1.0 - c * sq_norm(x, keepdim=True), 1.0 - c * sq_norm(y, keepdim=True), c)


@half_as_float32
def mobius_scalar_mul(r, x, c: Curvature = 1.0) -> torch.Tensor:
    r"""Möbius scalar multiplication (Ganea et al. 2018, eq. 3).

    ``r ⊗_c x = tanh(r artanh(sqrt(c)||x||)) x / (sqrt(c) ||x||)``; it multiplies the
    hyperbolic distance from the origin by ``r``.
    """
    c = _c(c)
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


@half_as_float32
def distance_arcosh(x, y, c: Curvature = 1.0) -> torch.Tensor:
    r"""Geodesic distance by the arcosh formula (Nickel & Kiela 2017, eq. 1, curvature c).

    ``d_c(x, y) = (1 / sqrt(c)) arcosh(1 + 2c ||x - y||^2 / ((1 - c||x||^2)(1 - c||y||^2)))``

    Evaluated by :func:`arcosh_distance` (``arcosh1p`` of the fraction, which keeps small
    distances precise).
    """
    c = _c(c)
    x, y = as_points(x, y)
    return arcosh_distance(sq_norm(x - y), boundary_gap(sq_norm(x), c), boundary_gap(sq_norm(y), c), c)


def boundary_gap(sq, c: Curvature = 1.0) -> torch.Tensor:
    r"""``1 - c ||x||^2`` from the squared norm ``sq`` (``2 / lambda_x``: the factor of both
    distance formulas that vanishes at the boundary), floored at
    :func:`~hypermem.geometry.numerics.gap_floor` (``2e-7`` in float32, ``2e-15`` in float64),
    the gap at the radius where :func:`distance_to_origin`'s ``artanh`` clamps.

    So a point on or outside the boundary gets finite distances with finite gradients, and
    on the boundary ``distance(0, x) == distance_to_origin(x)`` (16.64 in float32, 35.23 in
    float64; see ``docs/numerics.md``).  No point within the dtype's margin is floored."""
    c = _c(c)
    return (1.0 - c * sq).clamp_min(gap_floor(sq.dtype))


@half_as_float32
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

    Evaluated as :func:`~hypermem.geometry.numerics.arcosh1p` of the fraction, which keeps
    small distances precise and floors no positive argument (a floor at ``tiny(dtype)`` made
    ``c = 1e-300`` give 1.41 for a distance of 0.22).  The fraction is a product with ``c``:
    see :data:`~hypermem.geometry.conversion.MIN_CURVATURE` for where it stays a normal
    float.  The ``sqrt(c)`` form ``(2 / sqrt(c)) arsinh(sqrt(c) ||x - y|| / sqrt(gap_x
    gap_y))`` would underflow later, but costs 10 to 40% more in the search's hot loop
    (``torch.asinh`` is not vectorised on the CPU).
    """
    c = _c(c)
    return arcosh1p(2.0 * c * sq_diff / (gap_x * gap_y)) / _sqrt_c(c)


@half_as_float32
def distance_to_origin(x, c: Curvature = 1.0) -> torch.Tensor:
    r"""Depth coordinate ``d_c(0, x) = (2 / sqrt(c)) artanh(sqrt(c) ||x||)``."""
    c = _c(c)
    (x,) = as_points(x, names=("x",))
    sc = _sqrt_c(c)
    return 2.0 / sc * artanh(sc * safe_norm(x))


@half_as_float32
def pairwise_distance(x, y, c: Curvature = 1.0) -> torch.Tensor:
    r"""All-pairs distances: ``x`` of shape ``(..., n, d)``, ``y`` of shape ``(..., m, d)``
    give ``(..., n, m)``.

    The arcosh formula, ``||x_i - y_j||^2`` from the coordinate differences (memory ``O(n m)``;
    derivatives of every order: :mod:`~hypermem.geometry.squared_distances`): the shortcut
    ``||x||^2 + ||y||^2 - 2 <x, y>`` cancels for nearby points (an error of ``eps * ||x||^2``,
    2e-9 in float64 and 1e-3 in float32 once the arcosh's square root is taken), while the
    differences keep full relative precision, so ``d(x, x)`` is exactly 0 and nearby
    distances agree with :func:`distance` to the last digits."""
    c = _c(c)
    x, y = as_points(x, y, core_dims=2)
    if x.dim() < 2 or y.dim() < 2:
        raise ValueError(f"pairwise_distance needs (n, d) and (m, d) inputs, got shapes "
                         f"{tuple(x.shape)} and {tuple(y.shape)}")
    d2 = squared_distances(x, y)
    gap_x = boundary_gap(sq_norm(x), c).unsqueeze(-1)
    return arcosh_distance(d2, gap_x, boundary_gap(sq_norm(y), c).unsqueeze(-2), c)


@half_as_float32
def expmap0(v, c: Curvature = 1.0) -> torch.Tensor:
    r"""Exponential map at the origin: ``exp_0(v) = tanh(sqrt(c)||v||) v / (sqrt(c)||v||)``
    (Ganea et al. 2018, Lemma 2 at ``x = 0``), taken from ``v / max_i |v_i|``
    (:func:`~hypermem.geometry.numerics.rescaled`): a vector whose squared norm overflows
    keeps its direction (the boundary point along it, not the origin), ``+-inf`` coordinates
    give the direction of the infinite ones; the identity to first order at ``v = 0``."""
    c = _c(c)
    (v,) = as_points(v, names=("v",))
    sc = _sqrt_c(c)
    vs, s, nonzero = rescaled(v)  # v = s vs: a huge v keeps its direction (sum v_i^2 overflowed to inf)
    ns = torch.linalg.vector_norm(vs, dim=-1, keepdim=True)
    ns = torch.where(nonzero, ns, 1.0)
    # tanh(sqrt(c)||v||) v / (sqrt(c)||v||) = vs tanh(sqrt(c) s ns) / (sqrt(c) ns); 1 * v at v = 0
    return vs * torch.where(nonzero, tanh(sc * (s * ns)) / (sc * ns), 1.0)


@half_as_float32
def logmap0(y, c: Curvature = 1.0) -> torch.Tensor:
    r"""Logarithmic map at the origin: ``log_0(y) = artanh(sqrt(c)||y||) y / (sqrt(c)||y||)``."""
    c = _c(c)
    (y,) = as_points(y, names=("y",))
    sc = _sqrt_c(c)
    n = safe_norm(y, keepdim=True)
    return artanh(sc * n) * y / (sc * n)


@half_as_float32
def expmap(x, v, c: Curvature = 1.0) -> torch.Tensor:
    r"""Exponential map at ``x`` (Ganea et al. 2018, Lemma 2).

    ``exp_x(v) = x ⊕_c z``, ``z = tanh(a) v / (sqrt(c) ||v||)``, ``a = sqrt(c) lambda_x ||v|| / 2``

    The Möbius sum is evaluated by :func:`mobius_add_from_gaps` with ``1 - c||z||^2 =
    sech^2(a)`` taken from ``a``, not from ``z``: ``z`` lies at ``1 - 2e^{-2a}`` of the radius,
    which float64 rounds to the radius once ``a > 19`` (an ``x`` at ``1 - 1e-9`` of the radius
    and ``lambda_x ||v||`` = 18.4 already landed 0.57 away from the exact ``exp_x(v)``).
    """
    c = _c(c)
    x, v = as_points(x, v, names=("x", "v"))
    sc = _sqrt_c(c)
    n = safe_norm(v, keepdim=True)
    gap_x = boundary_gap(sq_norm(x, keepdim=True), c)  # 2 / lambda_x
    a = sc * n / gap_x
    return mobius_add_from_gaps(x, torch.tanh(a) * v / (sc * n), gap_x, sech2(a), c)


@half_as_float32
def mobius_add_from_gaps(x, z, gap_x, gap_z, c: Curvature = 1.0) -> torch.Tensor:
    r"""Möbius addition ``x ⊕_c z`` (Ganea et al. 2018, eq. 2) from the points and their gaps
    ``gap = 1 - c||.||^2`` (:func:`boundary_gap`, or any more precise form), without cancellation:

    ``x ⊕_c z = (gap_x s + c||s||^2 x) / (gap_x gap_z + c||s||^2)``, ``s = x + z``

    (eq. 2's factors rewritten: ``1 + 2c<x,z> + c||z||^2 = gap_x + c||s||^2`` and ``1 + 2c<x,z> +
    c^2||x||^2||z||^2 = gap_x gap_z + c||s||^2``, sums of non-negative terms).  Points near the
    boundary keep the digits that ``1 + 2c<x,z> + ...`` loses, as long as the gaps are exact.
    The denominator is floored at ``tiny`` (it vanishes only on or outside the boundary)."""
    c = _c(c)
    s = x + z
    s2 = c * sq_norm(s, keepdim=True)
    return (gap_x * s + s2 * x) / (gap_x * gap_z + s2).clamp_min(tiny(s.dtype))


@half_as_float32
def logmap(x, y, c: Curvature = 1.0) -> torch.Tensor:
    r"""Logarithmic map at ``x`` (Ganea et al. 2018, Lemma 2).

    ``log_x(y) = (2 / (sqrt(c) lambda_x)) artanh(sqrt(c)||u||) u / ||u||``, ``u = (-x) ⊕_c y``

    Evaluated without forming ``u``, whose norm is ``1 - O(e^{-d})`` of the radius for deep
    points (float64 rounds it to the radius, and ``lambda_x ||log_x(y)||`` was stuck at 35.23).
    With ``d = y - x`` and ``gap = 1 - c||.||^2``, eq. 2's numerator of ``u`` is

    ``w = (1 - 2c<x,y> + c||y||^2)(-x) + gap_x y = gap_x d - c||d||^2 x``

    (``1 - 2c<x,y> + c||y||^2 = gap_x + c||d||^2``), and its denominator is ``D = 1 - 2c<x,y> +
    c^2||x||^2||y||^2 = gap_x gap_y + c||d||^2 > 0``: ``u = w / D``, parallel to ``w``.  The
    artanh is the distance, ``artanh(sqrt(c)||u||) = sqrt(c) d_c(x, y) / 2 = a``
    (:func:`distance`, which is precise here), and ``sqrt(c)||u|| = tanh(a)``, so

    ``log_x(y) = gap_x (a / tanh(a)) w / D``

    whose norm is ``d_c(x, y) / lambda_x`` and which is smooth at ``y = x`` (``a / tanh(a)`` is
    :func:`~hypermem.geometry.numerics.x_over_tanh`, 1 there).
    """
    c = _c(c)
    x, y = as_points(x, y)
    d = y - x
    d2 = sq_norm(d, keepdim=True)
    gap_x = boundary_gap(sq_norm(x, keepdim=True), c)
    gap_y = boundary_gap(sq_norm(y, keepdim=True), c)
    a = _sqrt_c(c) / 2.0 * arcosh_distance(d2, gap_x, gap_y, c)
    w = gap_x * d - (c * d2) * x
    return gap_x * x_over_tanh(a) * w / (gap_x * gap_y + c * d2)


@half_as_float32
def geodesic(t, x, y, c: Curvature = 1.0) -> torch.Tensor:
    r"""Point at fraction ``t`` of the geodesic from ``x`` (t=0) to ``y`` (t=1).

    ``gamma(t) = x ⊕_c (t ⊗_c ((-x) ⊕_c y)) = exp_x(t log_x(y))`` (Ganea et al. 2018, eq. 6 and
    Lemma 2), evaluated as the latter by :func:`expmap` and :func:`logmap`: the former forms
    ``(-x) ⊕_c y``, which float64 rounds onto the boundary for points deep in the ball (the
    midpoint of two points at ``1 - 1e-9`` of the radius was 17.2 and 1.2 from the ends).
    """
    c = _c(c)
    x, y = as_points(x, y)
    return expmap(x, _radius_tensor(t, x) * logmap(x, y, c), c)


def point_at(direction, hyperbolic_radius, c: Curvature = 1.0) -> torch.Tensor:
    r"""Point at hyperbolic distance ``r`` from the origin along ``direction``.

    ``p = tanh(sqrt(c) r / 2) u / sqrt(c)`` with ``u = direction / ||direction||``, so that
    ``d_c(0, p) = r``.  A zero direction gives the origin with zero gradient (``u / ||u||`` detached
    where ``||u||^2 = 0``, not ``1/sqrt(tiny)``; other rows' values and gradients unchanged).
    """
    c = _c(c)
    (u,) = as_points(direction, names=("direction",))
    return project(_on_ray(u, hyperbolic_radius, c), c)


@half_as_float32
def _on_ray(u, hyperbolic_radius, c):
    """:func:`point_at` before its projection (which runs in the input's dtype): in float32 for half input."""
    r, sc = _radius_tensor(hyperbolic_radius, u), _sqrt_c(c)
    us, _, nonzero = rescaled(u)  # u / max|u_i|: no overflow of ||u||^2 for a huge direction
    unit = us / torch.where(nonzero, torch.linalg.vector_norm(us, dim=-1, keepdim=True), 1.0)
    u = torch.where(nonzero, unit, unit.detach()) if unit.requires_grad else unit
    return tanh(sc * r / 2.0) * u / sc


def set_depth(x, hyperbolic_radius, c: Curvature = 1.0) -> torch.Tensor:
    """Move ``x`` radially so that its distance from the origin is ``hyperbolic_radius``."""
    return point_at(x, hyperbolic_radius, c)


def project(x, c: Curvature = 1.0, margin: float | None = None) -> torch.Tensor:
    r"""Pull points back inside the ball: ``||x|| <= (1 - margin) / sqrt(c)``.

    ``margin`` defaults to :func:`hypermem.geometry.numerics.ball_margin` of the dtype; a
    given one is a number in ``[0, 1)`` (else ``ValueError``: 1 or more would put every point
    at or through the origin).  Points already inside are returned unchanged.  The norm is taken
    from ``x / max_i |x_i|`` (:func:`~hypermem.geometry.numerics.rescaled`, no host sync): a huge
    finite point (float32 ``[3e19, 4e19]``, whose ``sum x_i^2`` overflows) lands on the margin
    along its own direction, not at the origin; ``+-inf`` coordinates are read as the direction
    of the infinite ones (``[inf, 5]`` gives ``[1 - margin, 0]``); NaN coordinates stay NaN.
    """
    c = _c(c)
    (x,) = as_points(x, names=("x",))
    if margin is not None and (isinstance(margin, bool) or not isinstance(margin, Real)
                               or not 0.0 <= float(margin) < 1.0):
        raise ValueError(f"margin must be a number in [0, 1), got {margin!r}")
    m = ball_margin(x.dtype) if margin is None else float(margin)
    maxnorm = (1.0 - m) / _sqrt_c(c)
    xs, s, _ = rescaled(x)  # x = s xs, ||xs|| in [1, sqrt(d)]: ||x|| = s ||xs|| without overflow
    ns = torch.linalg.vector_norm(xs, dim=-1, keepdim=True)
    over = ns > maxnorm / s
    return torch.where(over, xs * (maxnorm / torch.where(over, ns, 1.0)), x)  # no 1/0 (NaN gradient) at 0


def is_inside(x, c: Curvature = 1.0) -> torch.Tensor:
    """Boolean tensor ``c ||x||^2 < 1`` (strictly inside the open ball), shape ``x.shape[:-1]``."""
    c = _c(c)
    (x,) = as_points(x, names=("x",))
    return (c * sq_norm(x) < 1.0) & torch.isfinite(x).all(-1)


@half_as_float32
def to_lorentz(x, c: Curvature = 1.0) -> torch.Tensor:
    r"""Map ball points to the hyperboloid ``{X : <X,X>_L = -1/c, X_0 > 0}``.

    ``X_0 = (1 + c||x||^2) / (sqrt(c) (1 - c||x||^2))``, ``X_i = 2 x_i / (1 - c||x||^2)``.
    The output has one more coordinate, the time coordinate first (Nickel & Kiela 2018, eq. 11).
    The denominator is :func:`boundary_gap`, floored like the distances' (``gap_floor``): a point
    on or beyond the boundary maps to finite coordinates (``X_0 = 8.4e6`` / ``1.0e15`` on it, float32 /
    float64, not ``2e30`` / ``2e300``) and :func:`~hypermem.geometry.lorentz_distance` from it is
    finite with a finite gradient, as ``docs/numerics.md`` promises.
    """
    c = _c(c)
    (x,) = as_points(x, names=("x",))
    sq = sq_norm(x, keepdim=True)
    x2 = c * sq
    den = boundary_gap(sq, c)
    x0 = (1.0 + x2) / (_sqrt_c(c) * den)
    return torch.cat([x0, 2.0 * x / den], dim=-1)


@half_as_float32
def from_lorentz(X, c: Curvature = 1.0) -> torch.Tensor:
    r"""Inverse of :func:`to_lorentz`: ``x_i = X_i / (1 + sqrt(c) X_0)``."""
    c = _c(c)
    (X,) = as_points(X, names=("X",))
    if X.shape[-1] < 2:
        raise ValueError(f"hyperboloid points need at least 2 coordinates, got shape {tuple(X.shape)}")
    return X[..., 1:] / (1.0 + _sqrt_c(c) * X[..., :1])


@half_as_float32
def egrad2rgrad(x, grad, c: Curvature = 1.0) -> torch.Tensor:
    r"""Riemannian gradient from a Euclidean one: ``((1 - c||x||^2)^2 / 4) grad``
    (Nickel & Kiela 2017, eq. 4)."""
    c = _c(c)
    x, grad = as_points(x, grad, names=("x", "grad"))
    return ((1.0 - c * sq_norm(x, keepdim=True)) ** 2 / 4.0) * grad


def retraction(x, v, c: Curvature = 1.0) -> torch.Tensor:
    """First-order retraction ``proj(x + v)`` of Riemannian SGD (Nickel & Kiela 2017, eq. 5)."""
    c = _c(c)
    x, v = as_points(x, v, names=("x", "v"))
    return project(x + v, c)


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
    g.manual_seed(int(seed)) if seed is not None else g.seed()
    u = torch.randn(int(n), int(dim), generator=g, dtype=torch.float64)
    r = torch.rand(int(n), generator=g, dtype=torch.float64) * max_hyperbolic_radius
    return point_at(u, r, check_curvature(c)).to(dtype=dtype, device=device)
