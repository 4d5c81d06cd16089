r"""Training-free tree embeddings: Sarkar's construction, in any dimension.

Sarkar ("Low distortion Delaunay embedding of trees in hyperbolic plane", GD 2011)
embeds any tree in the hyperbolic plane with distortion as close to 1 as wanted: put
the root at the origin and its children on a circle of hyperbolic radius ``tau``; then,
for every node ``x`` with parent ``p``, move ``x`` to the origin by an isometry, spread
its children on the circle of radius ``tau`` leaving the direction of ``p`` free, and
move everything back.  Sala, De Sa, Gu & Ré ("Representation Tradeoffs for Hyperbolic
Embeddings", ICML 2018) analysed the construction and extended it to ``R^d`` by spreading
child directions on the sphere ``S^{d-1}``.

In the Poincaré ball of curvature ``-c`` the isometry that moves ``x`` to the origin is
the Möbius translation ``y -> (-x) ⊕_c y`` and its inverse is ``y -> x ⊕_c y``.  So a child
with unit direction ``u`` (in the frame of ``x``) lands at

``x ⊕_c point_at(u, tau * l(x, child))``

where ``l`` is the optional edge length.  The parent's direction in the frame of ``x`` is
``a = normalise((-x) ⊕_c p)``; child directions come from a template (``k`` children plus
a fixed slot ``e_1`` for the parent), rotated so that ``e_1`` lands on ``a`` by the
Householder reflection ``H = I - 2 w w^T``, ``w = (e_1 - a) / ||e_1 - a||``.

The layout is vectorised per level of the tree (one batched Möbius addition per
level), in float64 by default.

Choosing ``tau`` (``tau=None``).  Two siblings whose directions make an angle
``theta`` at their parent are at distance ``d`` with ``cosh d = cosh^2 tau - sinh^2 tau
cos theta`` (hyperbolic law of cosines), i.e. ``d ≈ 2 tau + 2 log sin(theta/2)`` for
large ``tau``, against a tree distance of 2 (scaled: ``2 tau``).  The multiplicative
distortion stays below ``1 + eps`` when

``tau >= ((1 + eps) / eps) * log(1 / sin(theta_min / 2))``

with ``theta_min`` the smallest angle between the spread directions (Sala et al. 2018,
Sec. 3: in 2-D ``theta_min = 2 pi / (deg_max + 1)`` gives their
``tau = O((1 + eps)/eps * log deg_max)``; in higher dimension ``theta_min`` is measured
on the spread directions).  Larger ``tau`` lowers the distortion but moves deep nodes
toward the boundary: a node at depth ``D`` sits about ``D tau`` from the origin, which
must stay below :func:`max_radius` (about 23.7 in float64 with hypermem's margin).  With
``tau=None`` the construction takes ``tau`` for ``eps = 0.1``, capped at 97% of the
largest value that keeps the deepest node inside, and reports the choice and the
resulting distortion bound in ``layout.info``.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Hashable, Iterable, Mapping
from functools import lru_cache

import torch

from ..geometry import PoincareBall
from ..geometry import poincare as P
from .tree import bfs_order, depths, tree_from_edges

DEFAULT_EPS = 0.1
"""Distortion target used to choose ``tau`` when ``tau=None``."""

_FIT_FRACTION = 0.97


class Layout(dict):
    """``node -> point`` mapping returned by :func:`sarkar_layout`, with extras.

    Attributes: ``points`` (``(n, d)`` tensor in the order of ``nodes``), ``nodes``,
    ``tau`` (the scale used) and ``info`` (a dict: ``tau``, ``tau_chosen``, ``eps_bound``,
    ``min_angle``, ``max_degree``, ``depth``, ``max_radius``, ``dim``).
    """

    points: torch.Tensor
    nodes: list
    tau: float
    info: dict


def max_safe_depth(ball: PoincareBall | None, tau: float, dtype: torch.dtype = torch.float64) -> int:
    """Number of ``tau``-long steps from the origin that stay inside the ball's margin.

    ``floor(r_max / tau)`` with ``r_max = (2 / sqrt(c)) artanh(1 - margin(dtype))``
    (:meth:`PoincareBall.max_radius`): a path of that many edges from the root does not
    get clipped by the projection.
    """
    _check_tau(tau)
    ball = ball or PoincareBall()
    return int(math.floor(ball.max_radius(dtype) / tau + 1e-12))


def _check_tau(tau) -> None:
    if not (isinstance(tau, (int, float)) and math.isfinite(tau) and tau > 0):
        raise ValueError(f"tau must be a finite positive number, got {tau!r}")


# -- spreading directions --------------------------------------------------------------------
def spread_directions(k: int, dim: int, avoid=None, seed: int = 0, iterations: int = 200,
                      dtype: torch.dtype = torch.float64) -> torch.Tensor:
    """``k`` unit vectors in ``R^dim`` spread apart (and away from ``avoid`` if given).

    * ``dim = 2``: exact angles.  Without ``avoid`` the ``k`` directions are evenly spaced
      (``2 pi j / k``); with ``avoid`` the circle is cut into ``k + 1`` even slots and
      ``avoid`` takes one of them.
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
    template = _template(k, dim, fixed, int(seed), int(iterations))
    out = template[1:] if fixed else template
    if fixed:
        a = torch.as_tensor(avoid, dtype=torch.float64).reshape(-1)
        if a.numel() != dim or float(a.norm()) == 0.0:
            raise ValueError(f"avoid must be a non-zero vector with {dim} coordinates, got {tuple(a.shape)}")
        out = _householder(a / a.norm(), out)
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


def _template(k: int, dim: int, fixed: bool, seed: int, iterations: int, largest: int | None = None
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


def _householder(a: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
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


def choose_tau(max_degree: int, depth: int, dim: int, ball: PoincareBall | None = None,
               eps: float = DEFAULT_EPS, seed: int = 0, dtype: torch.dtype = torch.float64) -> dict:
    """``tau`` for a tree with ``max_degree`` children per node and ``depth`` levels.

    ``tau_eps = ((1 + eps) / eps) log(1 / sin(theta_min / 2))`` (see the module
    docstring), capped at ``0.97 r_max / depth``.  Returns a dict with ``tau``,
    ``tau_eps``, ``tau_fit``, ``min_angle`` and ``eps_bound`` (the distortion bound
    ``L / (tau - L)``, ``L = log(1 / sin(theta_min / 2))``, or ``inf``).
    """
    if eps <= 0:
        raise ValueError(f"eps must be positive, got {eps}")
    ball = ball or PoincareBall()
    # worst case: the root's children have no parent slot, other nodes have one
    dirs = _template(max(max_degree, 1), dim, True, seed, 200, max_degree + 1) if dim > 1 \
        else torch.tensor([[1.0], [-1.0]])
    theta = min_angle(dirs)
    L = math.log(1.0 / math.sin(theta / 2.0)) if theta < math.pi else 0.0
    tau_eps = (1.0 + eps) / eps * max(L, 1e-3)
    r_max = ball.max_radius(dtype)
    tau_fit = _FIT_FRACTION * r_max / max(depth, 1)
    tau = min(tau_eps, tau_fit)
    eps_bound = L / (tau - L) if tau > L else math.inf
    return {"tau": tau, "tau_eps": tau_eps, "tau_fit": tau_fit, "min_angle": theta, "eps_bound": eps_bound}


# -- the construction ------------------------------------------------------------------------
def sarkar_layout(edges: Iterable[tuple[Hashable, Hashable]], ball: PoincareBall | None = None, dim: int = 2,
                  tau: float | None = 1.0,
                  edge_length: Mapping[tuple[Hashable, Hashable], float] | str | None = None,
                  root: Hashable | None = None, seed: int = 0, dtype: torch.dtype = torch.float64,
                  device: torch.device | str | None = None) -> Layout:
    """Embed a rooted tree given as ``(parent, child)`` edges (Sarkar 2011; Sala et al. 2018).

    Every child is placed at hyperbolic distance ``tau * edge_length[(parent, child)]``
    from its parent (``edge_length`` defaults to 1) in the ball of ``ball``'s curvature
    (default 1), in ``dim`` dimensions.  ``tau=None`` chooses ``tau`` from the tree's
    maximum degree and depth (module docstring) and records it in ``layout.info``.
    ``root`` picks the root of a forest (only its tree is embedded); a single-root tree
    needs none.  Warns when the deepest node would pass the largest radius
    representable in ``dtype`` (the projection then compresses the deep levels).

    ``edge_length="isa"`` builds the layout for the reconstruction protocol in which
    every node ranks its *ancestors* (the closure in ``(hyponym, hypernym)`` order):
    :func:`hypermem.hierarchy.shadows.shadow_layout` (nested boundary shadows, ``dim >= 2``;
    ``tau`` is not used), under which each node's ancestors are its nearest nodes (MAP
    1.0 on the WordNet mammal and noun trees in 10-D).  With distance-preserving edge
    lengths a node's children and siblings crowd out its remote ancestors instead.

    Returns a :class:`Layout`: a ``node -> point`` dict with ``.points``, ``.nodes``,
    ``.tau`` and ``.info``.

    Example::

        >>> from hypermem.hierarchy import reconstruction
        >>> edges = [("animal", "dog"), ("animal", "cat"), ("dog", "puppy")]
        >>> lay = sarkar_layout(edges, dim=2, tau=2.0)
        >>> round(float(PoincareBall().distance(lay["dog"], lay["puppy"])), 6)
        2.0
        >>> isa = [("dog", "animal"), ("cat", "animal"), ("puppy", "dog"), ("puppy", "animal")]
        >>> reconstruction(sarkar_layout(edges, dim=5, edge_length="isa"), isa).map
        1.0
    """
    if isinstance(edge_length, str):
        if edge_length != "isa":
            raise ValueError(f"edge_length must be a mapping, None or 'isa', got {edge_length!r}")
        from .shadows import shadow_layout

        return shadow_layout(edges, ball=ball, dim=dim, root=root, seed=seed, dtype=dtype, device=device)
    if int(dim) != dim or dim < 1:
        raise ValueError(f"dim must be a positive integer, got {dim!r}")
    dim = int(dim)
    ball = ball or PoincareBall()
    c = ball.curvature
    children, top = tree_from_edges(edges, root)
    order = bfs_order(children, top)
    level = depths(children, top)
    max_deg = max((len(children.get(n, ())) for n in order), default=0)
    if dim == 1 and max_deg > 1:
        raise ValueError(f"a tree with {max_deg} children per node does not fit on a line (dim=1)")
    lengths = torch.ones(len(order), dtype=torch.float64)
    index = {n: i for i, n in enumerate(order)}
    parent_idx = torch.full((len(order),), -1, dtype=torch.int64)
    slot = torch.zeros(len(order), dtype=torch.int64)
    degree = torch.tensor([len(children.get(n, ())) for n in order], dtype=torch.int64)
    for n in order:
        for j, ch in enumerate(children.get(n, ())):
            i = index[ch]
            parent_idx[i] = index[n]
            slot[i] = j
            if edge_length is not None:
                ell = edge_length.get((n, ch), 1.0)
                if not (math.isfinite(ell) and ell > 0):
                    raise ValueError(f"edge_length[({n!r}, {ch!r})] must be finite and positive, got {ell!r}")
                lengths[i] = ell
    max_depth = max(level.values())
    longest = _longest_path(parent_idx, lengths)
    info: dict = {"dim": dim, "max_degree": max_deg, "depth": max_depth, "max_radius": ball.max_radius(dtype)}
    if tau is None:
        chosen = choose_tau(max_deg, max_depth, dim, ball, seed=seed, dtype=dtype)
        # the cap must account for the longest weighted root path, not only the depth
        cap = _FIT_FRACTION * ball.max_radius(dtype) / max(longest, 1e-300)
        tau = min(chosen["tau_eps"], cap)
        info.update(tau_chosen=True, tau_eps=chosen["tau_eps"], tau_fit=cap, min_angle=chosen["min_angle"])
        L = math.log(1.0 / math.sin(chosen["min_angle"] / 2.0)) if chosen["min_angle"] < math.pi else 0.0
        info["eps_bound"] = L / (tau - L) if tau > L else math.inf
    else:
        _check_tau(tau)
        info["tau_chosen"] = False
    tau = float(tau)
    info["tau"] = tau
    if tau * longest > ball.max_radius(dtype):
        warnings.warn(f"sarkar_layout: the deepest node would sit {tau * longest:.3g} from the origin, beyond the "
                      f"largest radius {ball.max_radius(dtype):.3g} representable in {dtype}; deep levels get "
                      f"compressed by the projection (lower tau, or use tau=None)", RuntimeWarning, stacklevel=2)

    pts = torch.zeros(len(order), dim, dtype=dtype)
    frame = torch.zeros(len(order), dim, dtype=torch.float64)  # parent's direction in each node's frame
    # templates for all degrees in use, concatenated: row offset of degree k (with parent slot)
    degs = sorted({int(k) for k in degree.tolist() if k > 0})
    tpl_fixed, off_fixed = _stack_templates(degs, dim, True, seed)
    tpl_root = _template(int(degree[0]), dim, False, seed, 200) if int(degree[0]) > 0 else None
    lv = torch.tensor([level[n] for n in order], dtype=torch.int64)
    for d in range(1, max_depth + 1):
        idx = torch.nonzero(lv == d).flatten()
        par = parent_idx[idx]
        if d == 1:
            u = tpl_root[slot[idx]]
        else:
            rows = torch.tensor([off_fixed[int(k)] for k in degree[par].tolist()], dtype=torch.int64) + slot[idx] + 1
            u = _householder(frame[par], tpl_fixed[rows])
        x = pts[par].to(torch.float64)
        r = tau * lengths[idx]
        y = P.point_at(u, r, c)  # child in the parent's frame
        child = P.project(P.mobius_add(x, y, c), c, ball.margin(dtype))
        # the parent's direction seen from the child: normalise((-child) ⊕ x)
        back = P.mobius_add(-child, x, c)
        nb = back.norm(dim=1, keepdim=True)
        frame[idx] = torch.where(nb > 0, back / nb.clamp_min(1e-300), -u)
        pts[idx] = child.to(dtype)
    pts = pts.to(device) if device is not None else pts
    out = Layout({n: pts[i] for i, n in enumerate(order)})
    out.points, out.nodes, out.tau, out.info = pts, order, tau, info
    return out


def decaying_edge_lengths(edges: Iterable[tuple[Hashable, Hashable]], ratio: float = 0.5,
                          root: Hashable | None = None) -> dict[tuple[Hashable, Hashable], float]:
    """Edge lengths ``ratio ** (depth(child) - 1)`` for :func:`sarkar_layout`.

    With equal edge lengths a node's children are as close to it as its parent, so
    ranking a node's descendants by distance mixes them with its parent and siblings.
    With lengths shrinking by ``ratio <= 1/2`` per level, the whole subtree below a node
    ``v`` lies within ``sum_{k>=1} ratio^k <= 1`` edge of the length of ``v``'s own edge:
    every descendant is closer to ``v`` than its parent, and (with spread directions)
    than the nodes of other branches, so the descendants of every node come first in the
    reconstruction ranking (MAP 1 up to floating-point resolution).  The price is
    dynamic range: the deepest edges are ``ratio^(depth-1)`` times the top ones.
    """
    if not (0 < ratio <= 1):
        raise ValueError(f"ratio must lie in (0, 1], got {ratio!r}")
    children, top = tree_from_edges(edges, root)
    dep = depths(children, top)
    return {(p, c): ratio ** (dep[c] - 1) for p, cs in children.items() for c in cs if p in dep}


def _stack_templates(degs: list[int], dim: int, fixed: bool, seed: int, iterations: int = 200
                     ) -> tuple[torch.Tensor, dict[int, int]]:
    rows, offsets, off = [], {}, 0
    largest = max(degs, default=0) + int(fixed)
    for k in degs:
        t = _template(k, dim, fixed, seed, iterations, largest)
        offsets[k] = off
        off += t.shape[0]
        rows.append(t)
    return (torch.cat(rows) if rows else torch.zeros(0, dim, dtype=torch.float64)), offsets


def _longest_path(parent_idx: torch.Tensor, lengths: torch.Tensor) -> float:
    """Largest sum of edge lengths from the root (nodes are in BFS order)."""
    total = torch.zeros_like(lengths)
    p = parent_idx.tolist()
    ell = lengths.tolist()
    acc = total.tolist()
    for i in range(1, len(p)):
        acc[i] = acc[p[i]] + ell[i]
    return max(acc, default=0.0)
