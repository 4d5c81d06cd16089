r"""Hyperbolic entailment cones (Ganea, Bécigneul & Hofmann, "Hyperbolic Entailment Cones
for Learning Hierarchical Embeddings", ICML 2018).

Every point ``x`` of the ball outside a small central region owns a geodesically convex
cone opening toward the boundary; "``y`` is in the cone of ``x``" is the geometric form of
"``x`` entails (is more general than) ``y``".  Formulas for the unit ball (points of a
ball of curvature ``-c`` are scaled by ``sqrt(c)`` first):

* half-aperture (eq. 26): ``psi(x) = arcsin(K (1 - ||x||^2) / ||x||)``;
* angle at ``x`` between the cone axis and ``y`` (eq. 28):
  ``Xi(x, y) = arccos((<x,y>(1 + ||x||^2) - ||x||^2 (1 + ||y||^2))
  / (||x|| ||x - y|| sqrt(1 + ||x||^2 ||y||^2 - 2 <x,y>)))``;
* energy (eq. 30): ``E(x, y) = max(0, Xi(x, y) - psi(x))``, zero inside the cone.

``psi`` is defined for ``||x|| >= eps_K`` with ``K(1-eps^2)/eps = 1``, i.e.
``eps_K = (sqrt(1 + 4K^2) - 1) / (2K)`` (0.0990 for ``K = 0.1``).  Inside that central
region the cone is undefined; as in the NumPy reference it is taken to contain
everything: ``psi = pi``, so ``in_cone(x, y)`` holds for every ``y`` and the energy is 0.
Ganea et al. keep trained points out of the region (``hypermem.hierarchy.cones``
projects them onto its boundary), so training and the store's cone placement (parents at
depth >= ``base_depth``, outside the region) never see the jump from ``pi/2`` to ``pi``.

This module is the one home of these formulas: the store's cone search and placement,
cone training (:mod:`hypermem.hierarchy.cones`), the cone loss of :mod:`hypermem.nn` and the
seed import path :mod:`hypermem.retrieval.cones` (a re-export) all use it.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np
import torch

from .conversion import as_points, check_curvature
from .numerics import half_as_float32, safe_norm, sq_norm

if TYPE_CHECKING:
    from .ball import PoincareBall

DEFAULT_K = 0.1
"""Aperture constant ``K`` of Ganea et al. (2018); they use 0.1."""

_ACOS_EPS = {torch.float32: 1e-6, torch.float64: 1e-12}


def _scale(ball) -> float | torch.Tensor:
    """``sqrt(c)`` of ``ball``: None (c = 1), a curvature, or a ball (a learnable
    :class:`~hypermem.geometry.PoincareBall` gives its tensor, which keeps the graph)."""
    if ball is None:
        return 1.0
    if isinstance(ball, (int, float)):
        return math.sqrt(check_curvature(ball))
    c = ball.curvature_arg() if callable(getattr(ball, "curvature_arg", None)) else ball.c
    return c**0.5 if isinstance(c, torch.Tensor) else math.sqrt(c)


def _check_k(K: float) -> None:
    if not (isinstance(K, (int, float)) and math.isfinite(K) and K > 0):
        raise ValueError(f"cone constant K must be a finite positive number, got {K!r}")


@half_as_float32
def half_aperture(x, ball=None, K: float = DEFAULT_K) -> torch.Tensor:
    """Half-aperture ``psi(x) = arcsin(K (1 - ||x||^2) / ||x||)`` (radians), shape ``x.shape[:-1]``;
    ``pi`` inside the central region where the argument exceeds 1 (the cone is undefined
    there and contains everything; see the module docstring).

    ``ball`` is a :class:`~hypermem.geometry.PoincareBall` or a curvature (default 1).
    """
    _check_k(K)
    (x,) = as_points(x, names=("x",))
    x = x * _scale(ball)
    n = safe_norm(x)
    eps = _ACOS_EPS.get(x.dtype, 1e-6)
    arg = K * (1.0 - n * n) / n
    psi = torch.asin(arg.clamp(-1.0 + eps, 1.0 - eps))
    return torch.where(arg > 1.0, torch.full_like(psi, math.pi), psi)


@half_as_float32
def cone_angle(x, y, ball=None) -> torch.Tensor:
    r"""Angle ``Xi(x, y)`` at ``x`` between the cone axis (away from the origin) and ``y``
    (Ganea et al. 2018, eq. 28), in ``[0, pi]``, shape ``broadcast(x, y).shape[:-1]``.

    Eq. 28 is the angle between ``x`` and the direction ``w = (-x) ⊕ y`` of ``log_x(y)``
    (the metric is conformal, so the Euclidean angle at ``x`` is the hyperbolic one).  With
    ``d = y - x`` the Möbius numerator is ``w = (1 - ||x||^2) d - ||d||^2 x``, so, with
    ``u = x / ||x||`` and ``d_perp = d - <d, u> u``,

    ``Xi(x, y) = atan2((1 - ||x||^2) ||d_perp||, (1 - ||x||^2) <d, u> - ||d||^2 ||x||)``

    equal to eq. 28's ``arccos`` (whose numerator and denominator are ``||x|| <x, w>`` and
    ``||x||^2 ||w||``).  Taken from ``d`` and ``atan2``, it keeps full precision where the
    ``arccos`` form cancels: at angles near 0 and ``pi`` (a float32 ``x`` at the margin, norm
    ``0.999``, has ``Xi`` within ``1e-3`` of ``pi`` for most ``y``; the ``arccos`` clamp cut
    its gradient to 0 there), and for ``y`` near ``x``.

    ``y = x`` (``d = 0``) has no direction: ``Xi(x, x) = 0`` (a point lies in its own cone:
    energy 0), with gradient 0.  Near ``y = x`` the angle is the true one and its gradient
    grows like ``1 / ||y - x||`` (the direction of ``y`` seen from ``x`` turns that fast).
    ``x = 0`` has no axis: ``Xi = pi/2`` (inside the central region, where ``psi = pi``).
    """
    x, y = as_points(x, y)
    s = _scale(ball)
    if not (isinstance(s, float) and s == 1.0):  # no pass over y for the unit ball
        x = x * s
        y = y * s
    d = y - x
    x2 = sq_norm(x, keepdim=True)
    pos = x2 > 0
    nx = torch.where(pos, x2, 1.0).sqrt()  # no 1/sqrt(tiny) gradient at x = 0
    u = x / nx
    du = (d * u).sum(-1, keepdim=True)
    gap = 1.0 - x2
    perp = torch.linalg.vector_norm(d - du * u, dim=-1)  # ||d_perp||, gradient 0 at 0
    du = du.squeeze(-1)
    d2 = du * du + perp * perp  # ||d||^2 without another pass over d
    sin_part = gap.squeeze(-1) * perp
    cos_part = gap.squeeze(-1) * du - d2 * (nx * pos).squeeze(-1)
    same = d2 == 0  # y = x: atan2(0, 0) has a NaN gradient; the value 0 needs no branch
    return torch.atan2(sin_part, torch.where(same, 1.0, cos_part))


@half_as_float32
def cone_energy(x, y, ball=None, K: float = DEFAULT_K) -> torch.Tensor:
    """``max(0, Xi(x, y) - psi(x))``: zero when ``y`` lies in the entailment cone of ``x``."""
    return (cone_angle(x, y, ball) - half_aperture(x, ball, K)).clamp_min(0.0)


def in_cone(x: torch.Tensor | np.ndarray, y: torch.Tensor | np.ndarray, ball: PoincareBall | float | None = None,
            K: float = DEFAULT_K, tol: float = 1e-9) -> torch.Tensor:
    """Boolean mask: ``y`` is inside the entailment cone of ``x`` (energy <= ``tol``)."""
    return cone_energy(x, y, ball, K) <= tol


@half_as_float32
def euclidean_cone_energy(x, y, scale: float = 1.0, K: float = DEFAULT_K) -> torch.Tensor:
    r"""Energy of Ganea et al.'s *Euclidean* entailment cones (2018, sec. 3.1), the twin of
    :func:`cone_energy` in R^d: ``max(0, Xi(x, y) - psi(x))`` with

    ``psi(x) = arcsin(min(1, K / ||x||))``,  ``Xi(x, y) = arccos(<y - x, x> / (||x|| ||y - x||))``

    after both points are multiplied by ``scale`` (e.g. ``1/sqrt(d)`` to measure them in the
    units of a ball of radius ``sqrt(d)``, so that ``K`` means the same in both spaces)."""
    _check_k(K)
    x, y = as_points(x, y)
    x = x * scale
    y = y * scale
    eps = _ACOS_EPS.get(x.dtype, 1e-6)
    n = safe_norm(x)
    psi = torch.asin((K / n).clamp(max=1.0 - eps))
    diff = y - x
    cos = (diff * x).sum(-1) / (n * safe_norm(diff))
    return (torch.acos(cos.clamp(-1.0 + eps, 1.0 - eps)) - psi).clamp_min(0.0)
