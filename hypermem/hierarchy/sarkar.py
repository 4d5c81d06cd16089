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
a fixed slot ``e_1`` for the parent), turned so that ``e_1`` lands on ``a``.  In 2-D the
turn is the rotation ``R(a) = [[a_1, -a_2], [a_2, a_1]]``, which keeps the orientation:
child ``j`` of ``k`` lies at angle ``angle(a) + 2 pi j / (k + 1)``, ``j = 1..k``, counted
counter-clockwise from the parent's direction, as Sarkar's construction spaces them (and
as poincare-memory 0.1.4 does, so the 2-D points are the same).  In ``d >= 3`` it is the
Householder reflection ``H = I - 2 w w^T``, ``w = (e_1 - a) / ||e_1 - a||`` (a reflection
also sends ``e_1`` to ``a``; on the sphere's spread templates the orientation carries no
meaning).

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

import torch

from ..geometry import PoincareBall
from ..geometry import poincare as P
from .directions import min_angle, spread_directions, stack_templates, template, turn
from .layout import Layout
from .shadows import shadow_layout
from .tree import bfs_order, depths, tree_from_edges

__all__ = ["Layout", "choose_tau", "decaying_edge_lengths", "max_safe_depth", "min_angle", "sarkar_layout",
           "spread_directions"]

DEFAULT_EPS = 0.1
"""Distortion target used to choose ``tau`` when ``tau=None``."""

_FIT_FRACTION = 0.97



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
    dirs = template(max(max_degree, 1), dim, True, seed, 200, max_degree + 1) if dim > 1 \
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

    ``edge_length="isa"`` is kept for compatibility and does **not** run Sarkar's
    construction: it returns ``shadow_layout(edges, ball=ball, dim=dim, root=root,
    seed=seed, dtype=dtype, device=device)`` (:func:`hypermem.hierarchy.shadows.shadow_layout`,
    nested boundary shadows, ``dim >= 2``; ``tau`` is ignored), the layout for the
    reconstruction protocol in which every node ranks its *ancestors* (the closure in
    ``(hyponym, hypernym)`` order): each node's ancestors are its nearest nodes.  Call
    :func:`~hypermem.hierarchy.shadows.shadow_layout` directly in new code (it also takes
    ``shrink``, ``max_shrink`` and ``gamma``).  With distance-preserving edge lengths a
    node's children and siblings crowd out its remote ancestors instead.

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
        try:
            return shadow_layout(edges, ball=ball, dim=dim, root=root, seed=seed, dtype=dtype, device=device)
        except ValueError as exc:
            raise ValueError(tree_hint(str(exc))) from None
    if int(dim) != dim or dim < 1:
        raise ValueError(f"dim must be a positive integer, got {dim!r}")
    dim = int(dim)
    ball = ball or PoincareBall()
    c = ball.curvature
    try:
        children, top = tree_from_edges(edges, root)
    except ValueError as exc:
        raise ValueError(tree_hint(str(exc))) from None
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
    tpl_fixed, off_fixed = stack_templates(degs, dim, True, seed)
    tpl_root = template(int(degree[0]), dim, False, seed, 200) if int(degree[0]) > 0 else None
    lv = torch.tensor([level[n] for n in order], dtype=torch.int64)
    for d in range(1, max_depth + 1):
        idx = torch.nonzero(lv == d).flatten()
        par = parent_idx[idx]
        if d == 1:
            u = tpl_root[slot[idx]]
        else:
            rows = torch.tensor([off_fixed[int(k)] for k in degree[par].tolist()], dtype=torch.int64) + slot[idx] + 1
            u = turn(frame[par], tpl_fixed[rows])
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


def tree_hint(message: str) -> str:
    """``message`` (a refusal of :func:`~hypermem.hierarchy.tree.tree_from_edges`) with the way
    out: a node with two parents (a DAG) needs a spanning tree,
    :func:`hypermem.hierarchy.spanning.ancestor_tree`; a forest a virtual root,
    :func:`hypermem.hierarchy.spanning.add_virtual_root`."""
    if "has two parents" in message:
        return (f"{message}; for a DAG take a spanning tree first: hypermem.hierarchy.spanning.ancestor_tree(closure, "
                f"root='<root>') gives the (parent, child) edges of one tree, each node under the parent whose path "
                f"keeps the most ancestors (closure: the (descendant, ancestor) pairs of the transitive closure)")
    if "form a forest" in message:
        return (f"{message} (hypermem.hierarchy.spanning.add_virtual_root(edges, '<root>', nodes) does, and "
                f"keeps the nodes in no edge)")
    return message


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


def _longest_path(parent_idx: torch.Tensor, lengths: torch.Tensor) -> float:
    """Largest sum of edge lengths from the root (nodes are in BFS order)."""
    total = torch.zeros_like(lengths)
    p = parent_idx.tolist()
    ell = lengths.tolist()
    acc = total.tolist()
    for i in range(1, len(p)):
        acc[i] = acc[p[i]] + ell[i]
    return max(acc, default=0.0)
