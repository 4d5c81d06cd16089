r"""Shell distances of the Poincaré ball: the distance between two directions after both are moved
to one hyperbolic radius (the hyperbolic law of cosines), the metric of hypermem's stores.

Re-exported by :mod:`hypermem.geometry.poincare_functions` (and so by
:mod:`hypermem.geometry.poincare`) under the same names.
"""

from __future__ import annotations

import math
from numbers import Real

import torch

from .conversion import Curvature, as_points, as_tensor, as_tensors, checked_curvature, sqrt_curvature
from .numerics import asinh_exp, exp_range, half_as_float32, rescaled, safe_norm, sq_norm, tiny

__all__ = ["shell_distance", "shell_distance_from_cosine", "shell_scale", "shell_distance_from_half_chord",
           "shell_distance_at_depth"]

_c = checked_curvature
_sqrt_c = sqrt_curvature


@half_as_float32
def shell_distance(x, y, depth, c: Curvature = 1.0) -> torch.Tensor:
    r"""Distance after moving ``x`` and ``y`` radially to the same hyperbolic radius ``depth``.

    By the hyperbolic law of cosines, two points at radius ``rho`` with angle ``theta``
    between them are at ``cosh(sqrt(c) d) = 1 + sinh^2(sqrt(c) rho)(1 - cos theta)``, i.e.

    ``d = (2 / sqrt(c)) arsinh(sinh(sqrt(c) rho) sin(theta / 2))``

    a monotone function of the angle alone (see :func:`shell_distance_from_cosine`).
    ``sin(theta/2) = ||u - v|| / 2`` for the unit directions ``u``, ``v``, which stays
    precise for tiny angles (and exactly 0 for one direction and for tiny vectors, unfloored: at depth 800 a
    floor of ``1e-150`` would be a distance of 900).  A zero vector has no direction and is treated as
    orthogonal to everything.  Evaluated by :func:`shell_distance_at_depth` (finite for
    every depth, curvature and angle).
    """
    c = _c(c)
    x, y = as_points(x, y)
    u, v = _direction(x), _direction(y)
    half_chord = torch.linalg.vector_norm(u - v, dim=-1) / 2.0  # 0 for one direction (gradient 0)
    zero = (sq_norm(x) == 0) | (sq_norm(y) == 0)
    half_chord = torch.where(zero, torch.full_like(half_chord, math.sqrt(0.5)), half_chord)
    return shell_distance_at_depth(half_chord, _depth(depth, x), c)


@half_as_float32
def shell_distance_from_cosine(cos, depth, c: Curvature = 1.0) -> torch.Tensor:
    r"""Shell distance from the cosine of the angle between two directions.

    ``d = (2 / sqrt(c)) arsinh(sinh(sqrt(c) rho) sqrt((1 - cos theta) / 2))``; decreasing
    in ``cos theta``, which is what lets a store rank by one matrix product of unit
    directions (see :func:`shell_distance`; evaluated by :func:`shell_distance_at_depth`).
    """
    c = _c(c)
    (cos,) = as_tensors(cos, names=("cos",))
    s = ((1.0 - cos.clamp(-1.0, 1.0)) * 0.5).clamp_min(tiny(cos.dtype)).sqrt()
    return shell_distance_at_depth(s, _depth(depth, cos), c)


def _direction(x: torch.Tensor) -> torch.Tensor:
    """``x / ||x||`` (0 for ``x = 0``), divided by ``max_i |x_i|`` first
    (:func:`~hypermem.geometry.numerics.rescaled`) so that the squares of a tiny ``x`` (below
    ~1e-19 in float32) are not subnormal: exactly aligned vectors keep half chord 0."""
    xs, _, _ = rescaled(x)
    return xs / safe_norm(xs, keepdim=True)


def _depth(depth, like: torch.Tensor):
    """A Python number stays a float (so :func:`shell_distance_at_depth` picks its branch on the
    host); anything else becomes a tensor like ``like``."""
    if isinstance(depth, Real) and not isinstance(depth, bool):
        return float(depth)
    return as_tensor(depth, dtype=like.dtype, device=like.device, name="depth")


def shell_scale(depth, c: Curvature = 1.0):
    r"""``sinh(sqrt(c) rho)`` of the shell at hyperbolic radius ``rho = depth``: a Python
    float for a float depth and curvature, else a tensor.

    ``sinh`` overflows float64 beyond ``sqrt(c) rho = log(max) = 709.78``: a float argument
    there is refused (``ValueError``; :func:`shell_distance_at_depth` computes the distance
    in log space), a tensor one gives ``inf``.
    """
    c = _c(c)
    sc = _sqrt_c(c)
    x = sc * depth
    if isinstance(x, torch.Tensor):
        return torch.sinh(x)
    if abs(x) > exp_range(torch.float64):
        raise ValueError(f"the shell scale sinh(sqrt(c) * depth) = sinh({x:g}) overflows a float64 (sqrt(c) * "
                         f"depth must be at most {exp_range(torch.float64):.2f}); shell_distance_at_depth "
                         "computes shell distances at any depth")
    return math.sinh(x)


@half_as_float32
def shell_distance_at_depth(half_chord, depth, c: Curvature = 1.0) -> torch.Tensor:
    r"""The shell distance ``d = (2 / sqrt(c)) arsinh(sinh(a) h)``, ``a = sqrt(c) rho``, from the
    half chord ``h = sin(theta / 2)`` and the radius ``rho = depth``: finite wherever ``d`` is.

    Where ``sinh(a)`` fits the dtype (``a <= log(max)``: 88.7 in float32, 709.8 in float64)
    this is :func:`shell_distance_from_half_chord` of :func:`shell_scale`.  Beyond, where
    ``sinh(a)`` overflows but ``d`` does not (``d ~ (2 / sqrt(c))(a + log h)``: depth 800 is
    a distance near 1600), it is taken in log space,

    ``d = (2 / sqrt(c)) arsinh(e^t)``, ``t = log sinh(a) + log h``, ``log sinh(a) = a - log 2
    + log1p(-e^{-2a})``

    with :func:`~hypermem.geometry.numerics.asinh_exp` (``h = 0`` gives 0).  A Python depth
    and curvature choose the branch on the host, for free (the memory's reads with a fixed
    curvature); a tensor ``a`` (a learnable curvature, a depth per pair) evaluates both and
    picks elementwise, with no host sync.
    """
    c = _c(c)
    (h,) = as_tensors(half_chord, names=("half_chord",))
    sc = _sqrt_c(c)
    a = sc * depth
    top = exp_range(h.dtype)
    if not isinstance(a, torch.Tensor):
        if a <= top:
            return shell_distance_from_half_chord(h, math.sinh(a), c)
        return 2.0 / sc * _asinh_sinh_far(h, a)
    near = torch.asinh(torch.sinh(a.clamp_max(top)) * h)
    return 2.0 / sc * torch.where(a <= top, near, _asinh_sinh_far(h, a.clamp_min(top)))


def _asinh_sinh_far(h: torch.Tensor, a):
    """``arsinh(sinh(a) h)`` for ``a >= log(max)``: ``asinh_exp(log sinh(a) + log h)``, with
    ``log h = -inf`` (so 0, zero gradient) where ``h <= 0``."""
    log_sinh = a - math.log(2.0) + (torch.log1p(-torch.exp(-2.0 * a)) if isinstance(a, torch.Tensor)
                                    else math.log1p(-math.exp(-2.0 * a)))
    pos = h > 0
    log_h = torch.where(pos, torch.log(torch.where(pos, h, 1.0)), -math.inf)
    return asinh_exp(log_h + log_sinh)


@half_as_float32
def shell_distance_from_half_chord(half_chord, scale, c: Curvature = 1.0) -> torch.Tensor:
    r"""The shell distance from its parts: ``d = (2 / sqrt(c)) arsinh(scale * h)`` with
    ``scale = sinh(sqrt(c) rho)`` (:func:`shell_scale`) and ``h = sin(theta / 2) =
    ||u - v|| / 2 = sqrt((1 - cos theta) / 2)`` for unit directions (the hyperbolic law of
    cosines, see :func:`shell_distance`).

    The one home of the formula: :func:`shell_distance`, :func:`shell_distance_from_cosine`
    and the differentiable memory's distances (:mod:`hypermem.nn.distance`) evaluate it
    here, through :func:`shell_distance_at_depth` (which takes over in log space where
    ``scale`` would overflow); the search kernel's :class:`~hypermem.index.ShellDistance` keeps an in-place copy
    (its hot loop) that ``tests/test_formula_contract.py`` checks against it.
    """
    c = _c(c)
    sc = _sqrt_c(c)
    return 2.0 / sc * torch.asinh(scale * half_chord)
