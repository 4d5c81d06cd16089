r"""Training-free tree layout in which every node's ancestors are its nearest nodes.

Sarkar's construction (:mod:`~hypermem.hierarchy.sarkar`) preserves tree *distances*:
a node's parent and its children are equally close, and its root is ``depth`` edges
away, so in the reconstruction protocol of Nickel & Kiela (2017) -- each node ranks
all others by distance and its ancestors (the transitive closure in the ``(hyponym,
hypernym)`` orientation) should come first -- the children and siblings of a node
crowd out its remote ancestors (MAP 0.04 in 2-D and 0.36 in 10-D on the WordNet
mammal tree).  Putting all ancestors first with edge lengths alone would need every
edge longer than the whole path above it, i.e. radii growing like ``2^depth``.

This module uses the boundary ("shadows") instead.  In the upper half-space model
``H^d = {(x, h): x in R^(d-1), h > 0}`` the distance satisfies

``cosh d((x, h), (x', h')) = 1 + (||x - x'||^2 + (h - h')^2) / (2 h h')``,

so for a query ``u`` the nodes rank by ``(||x_u - x_w||^2 + (h_u - h_w)^2) / h_w``
(the factor of ``u`` is common).  Give every node ``w`` a ball ``B(c_w, rho_w)`` of the
boundary ``R^(d-1)`` (its shadow) and the point ``(c_w, gamma rho_w^2)`` above its
centre.  Then, up to the small vertical term, ``w`` ranks by the *scale-free* key

``K(u, w) = ||c_u - c_w|| / rho_w``.

Children's shadows are nested in their parent's: the ``k`` children of ``b`` get
centres ``c_b + rho_b y_i`` and radii ``s_b rho_b``, where ``y_1..y_k`` are spread
points with ``||y_i|| <= 1`` (unit spread directions for ``d >= 3``), at least ``eta``
from the origin and ``sigma`` apart.  With ``S = max s`` an ancestor ``a`` of ``u`` has ``K(u, a) <= 1 / (1 - S)``
(``u`` lies within a geometric series of offsets from ``c_a``), a child of ``u`` has
``K >= eta / s``, and a node of another branch at least
``(sigma - 2 s / (1 - S)) / s``.  So every ancestor ranks before every other node
when

``s_b < (1 - S) min(eta, sigma / 3)``.

For ``d >= 3`` the layout takes ``s_b = min(S, shrink * min(eta, sigma / 3))`` per
node (the bound is a worst case: ``shrink = 1`` is exact in practice), so a node's
shadow shrinks by a factor set by its parent's degree, and its hyperbolic distance from
the root grows by about ``2 log(1 / s)`` per level: the tree's *depth* costs radius
linearly (not exponentially), and the branching is paid in the boundary's volume, which
grows exponentially with the dimension.  For ``d = 2`` the boundary is a line with
little room, so the children's intervals are sized by their subtrees
(:func:`_segment_plan`, within the proven bound when ``shrink <= 1``).  Finally the half-space is dilated by ``1 / gamma``
(root at ``(0, 1)``) and mapped to the Poincaré ball by the Cayley transform

``(x, h) -> (2 x, ||x||^2 + h^2 - 1) / (||x||^2 + (1 + h)^2)``

(an isometry sending the root to the origin; ``1 - ||p||^2 = 4 h / (||x||^2 + (1 + h)^2)``),
and scaled by ``1 / sqrt(c)`` for a ball of curvature ``-c``.

The construction is vectorised per level and runs in float64 (the deepest WordNet
mammals sit about 17 from the origin in 10-D; a float32 layout keeps only a few
levels).  On the WordNet mammal tree it reconstructs with MAP 1.0 in dimensions 2, 5
and 10 (radius 29, 18 and 16), and on the tree of all 82,115 nouns with MAP 1.0 in 10-D.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Hashable, Iterable

import torch

from ..geometry import PoincareBall
from .directions import min_angle, stack_templates
from .layout import Layout
from .tree import bfs_order, depths, tree_from_edges

_ITERATIONS = 60
"""Relaxation steps of the spread directions (the shrink factors use the minimum angle
actually reached, so fewer steps cost a little radius, never correctness)."""

DEFAULT_SHRINK = 1.0
"""Fraction of the worst-case bound ``min(eta, sigma / 3)`` used as shrink factor."""

DEFAULT_MAX_SHRINK = 0.45
"""Largest shrink factor ``S`` of a shadow from one level to the next."""

DEFAULT_GAMMA = 1.0
"""Height of a node above its shadow's centre, in units of the squared shadow radius."""


def _segment_plan(order: list, children: dict, index: dict, max_shrink: float, shrink: float
                  ) -> tuple[torch.Tensor, torch.Tensor]:
    r"""Per-child offsets ``y`` ``(n, 1)`` and shrink factors ``s`` ``(n,)`` on a line.

    On the boundary of the hyperbolic plane (a line) the children's shadows are
    intervals, and their sizes follow their subtrees: a child whose subtree needs a
    total shrink ``W(i) = e^{L(i)}`` below it (``L(leaf) = 0``) gets ``s_i`` proportional
    to ``W(i)``, so every root-to-leaf path ends at about the same depth
    (``L(b) = max_i (L(i) + log(1 / s_i))``) instead of the branchiest path paying for
    every level.  The children go to the two sides of the parent (lighter side first),
    heavier ones farther out; child ``i`` takes an interval of half-width
    ``a_i = 2 s_i / (1 - S)`` (``S = max_shrink``), intervals on a side touch and start at
    0, and ``s_i = shrink * lambda * W(i)`` (at most ``S``) with the largest ``lambda``
    that keeps the outermost centre at 1.  Then siblings are ``a_i + a_j`` apart and
    ``|y_i| >= a_i``, which satisfy the ordering conditions of the module docstring for
    shadows of different sizes.
    """
    n = len(order)
    y = torch.zeros(n, 1, dtype=torch.float64)
    s = torch.ones(n, dtype=torch.float64)
    log_w = [0.0] * n
    free = 1.0 - max_shrink
    for b in reversed(order):
        kids = children.get(b, ())
        if not kids:
            continue
        ki = [index[c] for c in kids]
        # log-weights relative to the heaviest child (no overflow on deep trees)
        top = max(log_w[i] for i in ki)
        w = {i: math.exp(log_w[i] - top) for i in ki}
        sides: tuple[list, list] = ([], [])
        mass = [0.0, 0.0]
        for i in sorted(ki, key=lambda i: -w[i]):
            side = 0 if mass[0] <= mass[1] else 1
            sides[side].append(i)
            mass[side] += w[i]
        need = max((2.0 * sum(w[i] for i in side) - w[side[0]]) for side in sides if side)
        lam = free / (2.0 * need)  # Σ_{i<outer} 2 a_i + a_outer = 1 with a = 2 s / (1 - S)
        worst = -math.inf
        for sign, side in ((1.0, sides[0]), (-1.0, sides[1])):
            centre, edge, placed = [], 0.0, []
            for i in reversed(side):  # from the centre outwards: light first
                si = min(max_shrink, shrink * lam * w[i])
                a = 2.0 * si / free
                centre.append(edge + a)
                edge += 2.0 * a
                placed.append((i, si))
            stretch = 1.0 / centre[-1] if centre else 1.0
            for (i, si), ci in zip(placed, centre):
                y[i, 0] = sign * ci * stretch
                s[i] = si
                worst = max(worst, log_w[i] - math.log(si))
        log_w[index[b]] = worst
    return y, s


def _sphere_plan(order: list, children: dict, index: dict, dim: int, max_shrink: float, shrink: float,
                 seed: int) -> tuple[torch.Tensor, torch.Tensor, float]:
    """Per-child offsets ``(n, dim - 1)`` (spread unit directions, one template per
    degree) and shrink factors ``min(S, shrink * sigma / 3)`` of the parent's degree."""
    n, m = len(order), dim - 1
    degree = [len(children.get(b, ())) for b in order]
    degs = sorted({k for k in degree if k > 0})
    stacked, offset_of = stack_templates(degs, m, False, seed, _ITERATIONS)
    factor = {}
    for k in degs:
        sigma = 2.0 * math.sin(min_angle(stacked[offset_of[k]:offset_of[k] + k]) / 2.0) if k > 1 else 2.0
        factor[k] = min(max_shrink, shrink * min(1.0, sigma / 3.0))
    rows = torch.zeros(n, dtype=torch.int64)
    s = torch.ones(n, dtype=torch.float64)
    for b in order:
        kids = children.get(b, ())
        for j, c in enumerate(kids):
            rows[index[c]] = offset_of[len(kids)] + j
            s[index[c]] = factor[len(kids)]
    y = stacked[rows] if stacked.shape[0] else torch.zeros(n, m, dtype=torch.float64)
    y[0] = 0.0
    return y, s, min(factor.values(), default=1.0)


def shadow_layout(edges: Iterable[tuple[Hashable, Hashable]], ball: PoincareBall | None = None, dim: int = 10,
                  shrink: float = DEFAULT_SHRINK, max_shrink: float = DEFAULT_MAX_SHRINK,
                  gamma: float = DEFAULT_GAMMA, root: Hashable | None = None, seed: int = 0,
                  dtype: torch.dtype = torch.float64, device: torch.device | str | None = None) -> Layout:
    """Embed a rooted tree so that every node's ancestors are its nearest nodes.

    ``edges`` are ``(parent, child)`` pairs; see the module docstring for the
    construction (nested boundary shadows, Cayley transform to the ball).  ``dim >= 2``;
    ``shrink`` scales the per-level shrink factor (smaller: larger margins, deeper
    points), ``max_shrink`` caps it, ``gamma`` sets each node's height above its shadow.
    ``root`` picks one tree of a forest.  Warns when the deepest node passes the largest
    radius that ``ball`` keeps inside its margin in ``dtype`` (the points are *not*
    projected: rankings stay exact, but :meth:`PoincareBall.project` would clip them).

    Returns a :class:`~hypermem.hierarchy.layout.Layout` (``node -> point`` with
    ``.points``, ``.nodes``, ``.tau`` (``nan``: no edge scale), ``.shadow_centres``
    ``(n, dim - 1)`` and ``.shadow_radii`` ``(n,)`` (float64, in the order of ``.nodes``:
    exact at any depth, for :func:`shadow_isa_score`) and ``.info``: ``dim``,
    ``max_degree``, ``depth``, ``shrink``, ``max_shrink``, ``gamma``, ``min_shrink``
    (the smallest per-node factor used), ``radius`` (largest distance from the root) and
    ``max_radius`` (the ball's limit)).

    Example::

        >>> from hypermem.hierarchy import Relations, reconstruction
        >>> from hypermem.hierarchy.shadows import shadow_layout
        >>> edges = [("animal", "dog"), ("animal", "cat"), ("dog", "puppy"), ("cat", "kitten")]
        >>> lay = shadow_layout(edges, dim=3)
        >>> isa = [("dog", "animal"), ("cat", "animal"), ("puppy", "dog"), ("puppy", "animal"),
        ...        ("kitten", "cat"), ("kitten", "animal")]
        >>> reconstruction(lay, isa).map
        1.0
    """
    if int(dim) != dim or dim < 2:
        raise ValueError(f"dim must be an integer >= 2 (the boundary needs a dimension), got {dim!r}")
    for name, value, hi in (("shrink", shrink, math.inf), ("max_shrink", max_shrink, 1.0), ("gamma", gamma, math.inf)):
        if not (isinstance(value, (int, float)) and math.isfinite(value) and 0 < value < hi):
            raise ValueError(f"{name} must be a positive number{' below 1' if hi == 1.0 else ''}, got {value!r}")
    dim, m = int(dim), int(dim) - 1
    ball = ball or PoincareBall()
    children, top = tree_from_edges(edges, root)
    order = bfs_order(children, top)
    level = depths(children, top)
    index = {n: i for i, n in enumerate(order)}
    n = len(order)
    parent_idx = torch.full((n,), -1, dtype=torch.int64)
    for p in order:
        for ch in children.get(p, ()):
            parent_idx[index[ch]] = index[p]
    if m == 1:
        offsets, factors = _segment_plan(order, children, index, max_shrink, shrink)
        min_factor = float(factors.min())
    else:
        offsets, factors, min_factor = _sphere_plan(order, children, index, dim, max_shrink, shrink, seed)
    lv = torch.tensor([level[x] for x in order], dtype=torch.int64)
    centre = torch.zeros(n, m, dtype=torch.float64)
    rho = torch.ones(n, dtype=torch.float64)
    for d in range(1, int(lv.max()) + 1):
        idx = torch.nonzero(lv == d).flatten()
        par = parent_idx[idx]
        centre[idx] = centre[par] + rho[par, None] * offsets[idx]
        rho[idx] = rho[par] * factors[idx]
    points = cayley_to_ball(centre / gamma, rho.square()) / math.sqrt(ball.curvature)
    radius = float(2.0 / math.sqrt(ball.curvature) * torch.atanh(
        (points.norm(dim=1) * math.sqrt(ball.curvature)).clamp(max=1.0 - 1e-16)).max())
    limit = ball.max_radius(dtype)
    if radius > limit:
        warnings.warn(f"shadow_layout: the deepest node sits {radius:.3g} from the root, beyond the radius "
                      f"{limit:.3g} that {dtype} keeps inside the ball's margin; the points are exact but "
                      f"projecting them would merge deep levels (use a larger dim, larger shrink and max_shrink, "
                      f"or a smaller tree)",
                      RuntimeWarning, stacklevel=2)
    pts = points.to(dtype)
    pts = pts.to(device) if device is not None else pts
    out = Layout({x: pts[i] for i, x in enumerate(order)})
    out.points, out.nodes, out.tau = pts, order, math.nan
    out.shadow_centres, out.shadow_radii = centre, rho
    out.info = {"dim": dim, "max_degree": max(len(children.get(x, ())) for x in order), "depth": int(lv.max()),
                "shrink": shrink, "max_shrink": max_shrink, "gamma": gamma, "min_shrink": min_factor,
                "radius": radius, "max_radius": limit}
    return out


NOT_BELOW = 1e9
"""Added to :func:`shadow_isa_score` when the hyponym's shadow is not smaller than the
hypernym's (it cannot lie below it): larger than any key of a real pair."""


def shadow_isa_score(centres: torch.Tensor, radii: torch.Tensor, pairs: torch.Tensor) -> torch.Tensor:
    r"""Is-a score of ``(m, 2)`` ``(hyponym, hypernym)`` index pairs from the shadows of a
    :func:`shadow_layout` (``layout.shadow_centres``, ``layout.shadow_radii``, in the order
    of ``layout.nodes``); lower means more likely.

    ``score(u, w) = ||c_u - c_w|| / rho_w`` when ``rho_u < rho_w`` (else
    ``+ NOT_BELOW``): the key ``K(u, w)`` of the module docstring, at most
    ``1 / (1 - S)`` for every descendant of ``w`` and at least ``(sigma - 2 s / (1 - S)) / s``
    for nodes of other branches, so one threshold separates the pairs of the tree.  The
    partial order is read from the points alone (``c_w`` and ``rho_w`` are the point's
    half-space coordinates, ``(c_w / gamma, rho_w^2)``), as for the shadow cones of Yu,
    Liu, Tseng & De Sa ("Shadow Cones: A Generalized Framework for Partial Order
    Embeddings", ICLR 2024), where a node entails the nodes inside the shadow it casts on
    the boundary.  Use it for link prediction with
    :func:`~hypermem.hierarchy.evaluation.link_prediction` (threshold chosen on validation
    pairs).
    """
    u, w = pairs[:, 0], pairs[:, 1]
    key = torch.linalg.vector_norm(centres[u] - centres[w], dim=-1) / radii[w]
    return torch.where(radii[u] < radii[w], key, key + NOT_BELOW)


def cayley_to_ball(x: torch.Tensor, h: torch.Tensor) -> torch.Tensor:
    """Map upper half-space points ``(x, h)`` (``x: (n, d-1)``, ``h: (n,)``) to the unit ball.

    ``p = (2 x, ||x||^2 + h^2 - 1) / (||x||^2 + (1 + h)^2)``: an isometry of ``H^d`` onto
    the Poincaré ball of curvature ``-1`` sending ``(0, 1)`` to the origin and the boundary
    ``h = 0`` to the unit sphere (inverse stereographic projection).  Norms that round
    to 1 are pulled back to ``1 - eps``.
    """
    x2 = (x * x).sum(-1)
    den = x2 + (1.0 + h) ** 2
    p = torch.cat([2.0 * x, (x2 + h * h - 1.0)[:, None]], dim=1) / den[:, None]
    norm = p.norm(dim=1, keepdim=True)
    top = 1.0 - torch.finfo(p.dtype).eps
    return torch.where(norm >= top, p * (top / norm.clamp_min(1e-300)), p)
