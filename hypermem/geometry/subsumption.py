r"""Subsumption scores: how likely "``child`` is a ``parent``" is, from two points.

A hierarchy encoder (:class:`hypermem.embed.HierarchyEncoder`) puts a text at a point;
these functions turn a pair of points into one number, higher meaning "more likely that
the child is subsumed by the parent".  Both broadcast over leading dimensions: ``(n, 1, d)``
against ``(1, m, d)`` gives ``(n, m)``.

**In the Poincaré ball** (Hierarchy Transformers: He, Yuan, Chen & Horrocks, "Language
Models as Hierarchy Encoders", NeurIPS 2024, eq. 5 of arXiv 2401.11374)::

    s(c, p) = -( d_c(c, p) + lambda (h(p) - h(c)) ),   h(x) = d_c(0, x)

``d_c`` is the ball's geodesic distance (:func:`~hypermem.geometry.poincare.distance_arcosh`)
and ``h`` the hyperbolic norm (:func:`~hypermem.geometry.poincare.distance_to_origin`): a
parent should be near its child and nearer the origin (more general), so a parent deeper
than its child is penalised by ``lambda`` per unit of depth.

**In R^d** (the Euclidean twin of the same model, trained with the same losses)::

    s(c, p) = -( ||c - p|| + lambda (||p|| - ||c||) )

the same score with the Euclidean distance and the Euclidean distance from the origin.

``lambda`` (the *centripetal weight*) is chosen on validation data, as HiT does.

**Broadcast products.**  ``||c - p||^2`` is taken from the coordinate differences (full
relative precision, ``d(x, x) = 0`` exactly) while the broadcast holds at most
:data:`EXACT_DIFF_ELEMENTS` numbers; beyond that (e.g. a thousand queries against every
entity of a hierarchy) it is ``||c||^2 + ||p||^2 - 2 <c, p>``, clamped at 0, with the
all-pairs inner products as one matrix product (:func:`broadcast_inner`: the memory of the
``(n, m)`` result) (absolute error ``~eps ||x||^2``: 5e-6 for float32 points of
norm 7, far below the score differences that rank parents).
"""

from __future__ import annotations

import torch

from .conversion import as_points
from .numerics import safe_norm, sq_norm
from .poincare_functions import Curvature, arcosh_distance, boundary_gap, distance_to_origin

EXACT_DIFF_ELEMENTS = 1 << 24
"""Largest broadcast ``c - p`` (in numbers) computed from coordinate differences."""


def broadcast_inner(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """``<x, y>`` over the last dimension, broadcasting the leading ones; the all-pairs case
    ``(..., n, 1, d)`` against ``(..., 1, m, d)`` (either way round) is one matrix product,
    never the ``(n, m, d)`` broadcast."""
    if x.dim() >= 3 and y.dim() >= 3:
        if x.shape[-2] == 1 and y.shape[-3] == 1:
            return torch.matmul(x.squeeze(-2), y.squeeze(-3).transpose(-1, -2))
        if y.shape[-2] == 1 and x.shape[-3] == 1:
            return torch.matmul(y.squeeze(-2), x.squeeze(-3).transpose(-1, -2)).transpose(-1, -2)
    return (x * y).sum(-1)


def squared_distance(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """``||x - y||^2`` over the last dimension, broadcasting the leading ones (see the module
    docstring for when the matrix-product form is used)."""
    shape = torch.broadcast_shapes(x.shape[:-1], y.shape[:-1])
    n = x.shape[-1]
    for s in shape:
        n *= s
    if n <= EXACT_DIFF_ELEMENTS:
        return sq_norm(x - y)
    return (sq_norm(x) + sq_norm(y) - 2.0 * broadcast_inner(x, y)).clamp_min(0.0)


def ball_distance(x, y, c: Curvature = 1.0) -> torch.Tensor:
    """Geodesic distance of the ball of curvature ``-c``, broadcasting like
    :func:`squared_distance` (the arcosh form of :mod:`hypermem.geometry.poincare`)."""
    x, y = as_points(x, y)
    return arcosh_distance(squared_distance(x, y), boundary_gap(sq_norm(x), c), boundary_gap(sq_norm(y), c), c)


def geometry_distance(x, y, curvature: Curvature | None) -> torch.Tensor:
    """``d(x, y)`` broadcasting: the ball's geodesic distance for a ``curvature``, the
    Euclidean distance for ``None``."""
    if curvature is None:
        x, y = as_points(x, y)
        d2 = squared_distance(x, y)
        return d2.clamp_min(torch.finfo(d2.dtype).tiny).sqrt() * (d2 > 0)
    return ball_distance(x, y, curvature)


def geometry_norm(x, curvature: Curvature | None) -> torch.Tensor:
    """``h(x)``: the hyperbolic distance from the origin for a ``curvature``, the Euclidean
    norm for ``None``."""
    return safe_norm(as_points(x)[0]) if curvature is None else distance_to_origin(x, curvature)


def score_from_terms(dist, child_norm, parent_norm, centripetal_weight) -> torch.Tensor:
    r"""``-(dist + lambda (parent_norm - child_norm))``: the score of either geometry from its
    parts, so that an evaluation can compute the distances and norms once and try many
    ``lambda``."""
    return -(dist + centripetal_weight * (parent_norm - child_norm))


def hit_subsumption_score(child, parent, c: Curvature, centripetal_weight: float) -> torch.Tensor:
    r"""HiT's score ``-(d_c(c, p) + lambda (d_c(0, p) - d_c(0, c)))`` (module docstring)."""
    return score_from_terms(geometry_distance(child, parent, c), geometry_norm(child, c), geometry_norm(parent, c),
                            centripetal_weight)


def euclidean_subsumption_score(child, parent, centripetal_weight: float) -> torch.Tensor:
    r"""The twin's score ``-(||c - p|| + lambda (||p|| - ||c||))`` (module docstring)."""
    return score_from_terms(geometry_distance(child, parent, None), geometry_norm(child, None),
                            geometry_norm(parent, None), centripetal_weight)
