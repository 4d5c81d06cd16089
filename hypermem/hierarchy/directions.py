r"""Spread unit directions on the sphere, the templates of the tree layouts.

Sarkar's construction (:mod:`~hypermem.hierarchy.sarkar`) and the shadow layout
(:mod:`~hypermem.hierarchy.shadows`) both place a node's ``k`` children along ``k``
directions spread apart on ``S^{d-1}``: exact angles on the circle (``2 pi j / k``), the
vertices ``+-e_i`` of the cross-polytope when they suffice, otherwise a Thomson-style
relaxation of the Riesz energy ``sum_{i<j} ||x_i - x_j||^{-s}`` (``s = d``), which favours
a large minimum angle (Sala, De Sa, Gu & Ré, "Representation Tradeoffs for Hyperbolic
Embeddings", ICML 2018, Sec. 3, spread child directions this way).  A *template* for a
node with a parent keeps ``e_1`` as the parent's slot; :func:`turn` carries it onto the
parent's actual direction ``a``: in 2-D by the rotation sending ``e_1`` to ``a`` (the slots keep
their counter-clockwise order), above by the reflection ``H = I - 2 w w^T``,
``w = (e_1 - a) / ||e_1 - a||``.
"""

from __future__ import annotations

import math
from functools import lru_cache

import torch


def spread_directions(k: int, dim: int, avoid=None, seed: int = 0, iterations: int = 200,
                      dtype: torch.dtype = torch.float64) -> torch.Tensor:
    """``k`` unit vectors in ``R^dim`` spread apart (and away from ``avoid`` if given).

    * ``dim = 2``: exact angles.  Without ``avoid`` the ``k`` directions are evenly spaced
      (``2 pi j / k``); with ``avoid`` the circle is cut into ``k + 1`` even slots,
      ``avoid`` takes the first and the directions follow it counter-clockwise.
    * ``dim >= 3``: a seeded Thomson-style relaxation on the sphere: points repel with
      the Riesz energy ``sum_{i<j} ||x_i - x_j||^{-s}`` (``s = dim``, which favours a large
      minimum angle), by projected normalised gradient steps; ``avoid`` is a fixed extra
      point that repels the others.

    Returns a ``(k, dim)`` tensor (float64 by default).
    """
    if int(k) != k or k < 0 or int(dim) != dim or dim < 1:
        raise ValueError(f"need integers k >= 0 and dim >= 1, got k={k}, dim={dim}")
    k, dim = int(k), int(dim)
    if k == 0:
        return torch.zeros(0, dim, dtype=dtype)
    if dim == 1:
        if k > 2 - (avoid is not None):
            raise ValueError(f"a line holds at most {2 - (avoid is not None)} spread directions, asked for {k}")
    fixed = avoid is not None
    spread = template(k, dim, fixed, int(seed), int(iterations))
    out = spread[1:] if fixed else spread
    if fixed:
        a = torch.as_tensor(avoid, dtype=torch.float64).reshape(-1)
        if a.numel() != dim or float(a.norm()) == 0.0:
            raise ValueError(f"avoid must be a non-zero vector with {dim} coordinates, got {tuple(a.shape)}")
        out = turn(a / a.norm(), out)
    return out.to(dtype)


_EXACT_UP_TO = 24
_BUCKET_GROWTH = 1.25


def _bucket(n: int) -> int:
    """Template size used for ``n`` points: ``n`` itself up to 24, else the next size on
    a geometric grid (ratio 1.25), so a tree with hundreds of distinct degrees needs
    only a few dozen relaxations; the first ``n`` points of a larger spread set are
    still spread (their minimum angle is at least that of the whole set)."""
    if n <= _EXACT_UP_TO:
        return n
    b = _EXACT_UP_TO
    while b < n:
        b = int(math.ceil(b * _BUCKET_GROWTH))
    return b


def template(k: int, dim: int, fixed: bool, seed: int, iterations: int, largest: int | None = None
              ) -> torch.Tensor:
    """``k`` spread directions (plus ``e_1`` first when ``fixed``), float64.

    Sizes above 24 are prefixes of one relaxed set of size ``_bucket(largest)`` (the
    largest size the tree needs), so a tree needs one large relaxation only."""
    n = k + int(fixed)
    if dim <= 2 or n <= _EXACT_UP_TO:
        return _relaxed(n, dim, fixed, seed, iterations)
    big = _bucket(max(n, largest or n))
    return _relaxed(big, dim, fixed, seed, iterations if big <= 128 else max(40, iterations // 4))[:n]


@lru_cache(maxsize=1024)
def _relaxed(n: int, dim: int, fixed: bool, seed: int, iterations: int) -> torch.Tensor:
    """``n`` spread unit vectors (``e_1`` first and fixed when ``fixed``), cached.

    The relaxation runs hundreds of tiny tensor operations: on one thread (restored
    afterwards), since a thread pool only adds synchronisation to them."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return _relax(n, dim, fixed, seed, iterations)
    finally:
        torch.set_num_threads(threads)


def _relax(n: int, dim: int, fixed: bool, seed: int, iterations: int) -> torch.Tensor:
    if dim == 1:
        return torch.tensor([[1.0], [-1.0]], dtype=torch.float64)[:n]
    if dim == 2:
        ang = 2.0 * math.pi * torch.arange(n, dtype=torch.float64) / n
        return torch.stack([ang.cos(), ang.sin()], dim=1)
    if n <= 2 * dim and n > dim + 1:
        # cross-polytope vertices +-e_i: all angles >= 90 degrees
        eye = torch.eye(dim, dtype=torch.float64)
        return torch.cat([eye, -eye])[torch.tensor([i // 2 + (i % 2) * dim for i in range(n)])]
    g = torch.Generator().manual_seed(seed * 1_000_003 + n * 131 + dim)
    x = torch.randn(n, dim, generator=g, dtype=torch.float64)
    if fixed:
        x[0] = 0.0
        x[0, 0] = 1.0
    x = x / x.norm(dim=1, keepdim=True)
    if n == 1:
        return x
    s = float(dim)
    step = 0.5 / math.sqrt(n)
    eye = torch.eye(n, dtype=torch.bool)
    for it in range(max(iterations, 1)):
        # unit vectors: ||x_i - x_j||^2 = 2 - 2 <x_i, x_j>; the force on x_i is
        # sum_j w_ij (x_i - x_j) = x_i sum_j w_ij - (W x)_i  (no (n, n, d) tensor)
        dist2 = (2.0 - 2.0 * (x @ x.T)).clamp_min(1e-12).masked_fill(eye, 1.0)
        w = dist2.pow(-(s + 2) / 2).masked_fill(eye, 0.0)
        grad = x * w.sum(1, keepdim=True) - w @ x  # repulsive force (descent direction)
        grad = grad - (grad * x).sum(1, keepdim=True) * x  # tangent to the sphere
        gn = grad.norm(dim=1, keepdim=True).clamp_min(1e-300)
        lr = step * (1.0 - it / max(iterations, 1)) + 1e-3
        x = x + lr * grad / gn
        if fixed:
            x[0] = 0.0
            x[0, 0] = 1.0
        x = x / x.norm(dim=1, keepdim=True)
    return x


def rotate_2d(a: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
    """Rotate rows of ``t`` (2-D) by the rotation sending ``e_1`` to the unit vector ``a``.

    ``R(a) t = (a_1 t_1 - a_2 t_2, a_2 t_1 + a_1 t_2)``: angles add, ``angle(R t) =
    angle(a) + angle(t)``, so a template slot at ``2 pi j / (k + 1)`` lands that far
    counter-clockwise from ``a``.  ``a`` has shape ``(2,)`` or ``(m, 2)``.
    """
    a1, a2 = a[..., 0:1], a[..., 1:2]
    t1, t2 = t[..., 0:1], t[..., 1:2]
    return torch.cat([a1 * t1 - a2 * t2, a2 * t1 + a1 * t2], dim=-1)


def turn(a: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
    """Carry template rows ``t`` (laid out around ``e_1``) to the unit direction ``a``: in 2-D
    by the rotation :func:`rotate_2d`, which keeps the slots' counter-clockwise order (Sarkar
    2011; poincare-memory's 2-D layouts), in higher dimensions by :func:`householder`."""
    return rotate_2d(a, t) if t.shape[-1] == 2 else householder(a, t)


def householder(a: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
    """Reflect rows of ``t`` by the Householder map sending ``e_1`` to the unit vector ``a``.

    ``a`` has shape ``(d,)`` or ``(m, d)`` (one per row of ``t``)."""
    e1 = torch.zeros_like(a)
    e1[..., 0] = 1.0
    w = e1 - a
    wn = w.norm(dim=-1, keepdim=True)
    ok = wn > 1e-12
    w = torch.where(ok, w / wn.clamp_min(1e-300), torch.zeros_like(w))
    return t - 2.0 * (t * w).sum(-1, keepdim=True) * w


def min_angle(directions: torch.Tensor) -> float:
    """Smallest angle (radians) between distinct rows of ``directions`` (pi for < 2 rows)."""
    if directions.shape[0] < 2:
        return math.pi
    u = directions / directions.norm(dim=1, keepdim=True)
    cos = (u @ u.T).clamp(-1.0, 1.0)
    cos.fill_diagonal_(-1.0)
    return float(torch.acos(cos.max()))



def stack_templates(degs: list[int], dim: int, fixed: bool, seed: int, iterations: int = 200
                    ) -> tuple[torch.Tensor, dict[int, int]]:
    """The :func:`template` of every degree in ``degs`` (sorted, distinct), stacked:
    returns the ``(rows, dim)`` float64 tensor and ``degree -> first row``.  Sizes above
    24 share one relaxation sized for the largest degree (plus the parent slot when
    ``fixed``), as in :func:`template`."""
    rows, offsets, off = [], {}, 0
    largest = max(degs, default=0) + int(fixed)
    for k in degs:
        t = template(k, dim, fixed, seed, iterations, largest)
        offsets[k] = off
        off += t.shape[0]
        rows.append(t)
    return (torch.cat(rows) if rows else torch.zeros(0, dim, dtype=torch.float64)), offsets
