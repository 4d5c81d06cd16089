r"""Lorentz (hyperboloid) model helpers and the MIPS trick for hyperbolic search.

The hyperboloid of curvature ``-c`` is ``H = {X in R^{d+1} : <X, X>_L = -1/c, X_0 > 0}``
with the Lorentzian inner product ``<X, Y>_L = -X_0 Y_0 + sum_i X_i Y_i`` (Nickel &
Kiela, "Learning Continuous Hierarchies in the Lorentz Model", ICML 2018).  The geodesic
distance ``d(X, Y) = (1/sqrt(c)) arcosh(-c <X, Y>_L)`` decreases with the Lorentzian
inner product, so after negating the time coordinate of the *stored* vectors, an
ordinary maximum-inner-product (dot-product) search returns exact hyperbolic nearest
neighbours.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from .conversion import as_points, check_curvature
from .numerics import arcosh1p, half_as_float32


@half_as_float32
def lorentz_inner(X, Y) -> torch.Tensor:
    r"""``<X, Y>_L = -X_0 Y_0 + sum_{i>=1} X_i Y_i`` over the last dimension."""
    X, Y = as_points(X, Y, names=("X", "Y"))
    prod = X * Y
    return prod[..., 1:].sum(-1) - prod[..., 0]


@half_as_float32
def lorentz_distance(X: torch.Tensor | np.ndarray, Y: torch.Tensor | np.ndarray, curvature: float = 1.0) -> torch.Tensor:
    r"""Geodesic distance on the hyperboloid: ``(1/sqrt(c)) arcosh(-c <X, Y>_L)`` (Nickel & Kiela 2018).

    On the hyperboloid ``-c <X, Y>_L - 1 = (c/2) <X - Y, X - Y>_L`` (``<X, X>_L = <Y, Y>_L = -1/c``),
    and the distance is ``arcosh1p`` of whichever form rounds less: the difference form, from the
    coordinate differences, for close points (the inner product's ``X_0 Y_0 ~ e^{2 depth}`` cancels
    to the distance's ``u``: two points 0.02 apart at depth 6 in float32 came out 0, and
    ``d(X, X)`` 0.0039 at depth 3), the inner-product form where ``(X_0 - Y_0)^2 + ||X_s - Y_s||^2``
    exceeds ``|X_0 Y_0|`` (far points, and points off the hyperboloid, such as
    :func:`~hypermem.geometry.poincare.to_lorentz` of a boundary point, where the difference
    form cancels).  ``d(X, X)`` is exactly 0."""
    c = check_curvature(curvature)
    X, Y = as_points(X, Y, names=("X", "Y"))
    D = X - Y
    d0 = D[..., 0] ** 2
    ds = D[..., 1:].pow(2).sum(-1)
    near = 0.5 * c * (ds - d0)
    far = -c * lorentz_inner(X, Y) - 1.0
    use_near = d0 + ds <= (X[..., 0] * Y[..., 0]).abs()
    return arcosh1p(torch.where(use_near, near, far)) / math.sqrt(c)


@half_as_float32
def distance_from_lorentz_inner(inner: torch.Tensor, c: float = 1.0) -> torch.Tensor:
    r"""``(1/sqrt(c)) arcosh(-c <X, Y>_L)`` from the Lorentzian inner product (Nickel & Kiela
    2018), evaluated as ``arcosh1p(-c <X, Y>_L - 1)``.  The one home of the formula for the MIPS
    index (:class:`hypermem.index.MIPSIndex`), which has only the inner products.

    ``arcosh1p`` keeps ``arcosh``'s precision near 1, but the inner product itself cancels for
    close points: its absolute error is about ``eps X_0 Y_0`` (``X_0 ~ e^{depth} / 2``), so a
    distance below ``sqrt(2 eps) X_0`` (0.02 at depth 6 in float32, at depth 15 in float64) is
    lost.  :func:`lorentz_distance`, which has the coordinates, uses their differences there."""
    return arcosh1p(-c * inner - 1.0) / math.sqrt(c)


def to_mips_vectors(X: torch.Tensor | np.ndarray) -> torch.Tensor:
    """Negate the time coordinate, so that ``to_mips_vectors(X) @ Y == <X, Y>_L``."""
    (X,) = as_points(X, names=("X",))
    return torch.cat([-X[..., :1], X[..., 1:]], dim=-1)


@half_as_float32
def mips_scores(stored_mips, query) -> torch.Tensor:
    """Dot products (larger = closer) of MIPS-prepared stored vectors ``(N, d+1)`` with
    hyperboloid query coordinates ``(d+1,)`` or ``(B, d+1)``; returns ``(N,)`` or ``(B, N)``.
    Computed in float32 for half inputs and under ``torch.autocast`` (the scores of points at
    depth 5 reach ~1e4 and cancel: bfloat16 keeps none of their digits)."""
    stored_mips, query = as_points(stored_mips, query, names=("stored_mips", "query"), core_dims=0)
    if stored_mips.dim() != 2:
        raise ValueError(f"stored_mips must have shape (N, d+1), got {tuple(stored_mips.shape)}")
    if torch.is_autocast_enabled(query.device.type):  # float32 in, float32 out: no bfloat16 product
        with torch.autocast(query.device.type, enabled=False):
            return query @ stored_mips.T
    return query @ stored_mips.T
