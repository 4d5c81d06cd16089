r"""2-D Poincaré-disk coordinates for drawing a memory.

Both layouts draw in the *unit* disk and keep every memory's exact hyperbolic depth
``r`` (its distance from the origin in the ball of curvature ``-c``): a memory is drawn
at Euclidean radius ``rho = tanh(sqrt(c) r / 2)``, which is where a point at hyperbolic
distance ``sqrt(c) r`` from the origin of the curvature ``-1`` disk sits.  Only the
*angles* are a drawing choice:

* :func:`disk_coordinates` (the semantic projection): the tangent vectors at the origin
  ``v_i = log_0(x_i)`` are reduced to two dimensions with an *uncentred* principal
  component analysis (the top two right singular vectors ``W`` of ``V``, i.e. the top
  eigenvectors of ``V^T V``; uncentred so points in a plane keep their angles), and the
  angle is that of ``W^T v_i``; :func:`projection_coordinates`, the layout of a memory
  without parents, centres the directions first (``W^T (u_i - mean)``), so that similar
  texts spread over the disk instead of piling up around their mean direction;
* :func:`structural_coordinates` (a radial tree, after Eades 1992, "Drawing free trees"):
  each subtree owns an angular wedge proportional to its number of leaves and a node sits
  in the middle of its wedge, so siblings spread evenly and subtrees never overlap;
  siblings are ordered by their semantic angle so related branches sit side by side.

These are drawings, not isometric embeddings: use the real points for distances.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch

from ..geometry import poincare as P
from .snapshot import Snapshot, as_snapshot

__all__ = ["disk_coordinates", "structural_coordinates", "projection_coordinates", "has_hierarchy"]


def _curvature(ball: Any) -> float:
    c = getattr(ball, "curvature", ball)
    c = float(c)
    if not math.isfinite(c) or c <= 0:
        raise ValueError(f"the curvature must be a positive number, got {c!r}")
    return c


def _principal_angles(vectors: torch.Tensor, centred: bool = False) -> torch.Tensor:
    """Angle of each row of ``vectors`` in the plane of its top two principal components
    (sign fixed so the largest entry of each component is positive): uncentred (rows in a
    plane through the origin keep their angles), or ``centred`` (the mean row subtracted
    first: similar rows, whose mean direction would be the first uncentred axis, spread
    around the circle instead of piling up at one angle)."""
    V = vectors.detach().to("cpu", torch.float64)
    n, d = V.shape
    if centred and n:
        V = V - V.mean(dim=0, keepdim=True)
    if n == 0:
        return torch.zeros(0, dtype=torch.float64)
    if d == 2:
        plane = V
    else:
        # Right singular vectors of V (of the small Gram matrix V^T V when n > d: the same ones).
        _, _, Vh = torch.linalg.svd(V if n <= d else V.T @ V, full_matrices=False)
        W = Vh[:2].T
        if W.shape[1] < 2:  # a single point: any second axis will do
            W = torch.cat([W, torch.zeros(d, 1, dtype=W.dtype)], dim=1)
        signs = torch.sign(W[W.abs().argmax(dim=0), torch.arange(2)])
        signs[signs == 0] = 1.0
        W = W * signs
        plane = V @ W
    return torch.atan2(plane[:, 1], plane[:, 0])


def _on_disk(angles: torch.Tensor, depths: torch.Tensor, c: float) -> torch.Tensor:
    rho = torch.tanh(math.sqrt(c) * depths.to("cpu", torch.float64) / 2.0)
    return torch.stack([rho * torch.cos(angles), rho * torch.sin(angles)], dim=1)


def disk_coordinates(points: Any, ball: Any = 1.0) -> torch.Tensor:
    """Unit-disk coordinates ``(n, 2)`` (float64, CPU) of points of the ball.

    ``ball`` is a :class:`~hypermem.geometry.PoincareBall` or a curvature.  In two
    dimensions this is the points scaled by ``sqrt(c)`` (exact); in more, the angles come
    from the uncentred PCA of the tangent vectors at the origin and the radii are exact.

    >>> pts = torch.tensor([[0.5, 0.0, 0.0], [0.0, -0.25, 0.0]], dtype=torch.float64)
    >>> xy = disk_coordinates(pts)
    >>> [round(float(v), 6) for v in xy.norm(dim=1)]
    [0.5, 0.25]
    """
    c = _curvature(ball)
    x = torch.as_tensor(points).detach().to("cpu", torch.float64)
    if x.dim() != 2:
        raise ValueError(f"points must have shape (n, dim), got {tuple(x.shape)}")
    if x.shape[1] == 2:
        return x * math.sqrt(c)
    angles = _principal_angles(P.logmap0(x, c)) if x.shape[0] else torch.zeros(0, dtype=torch.float64)
    return _on_disk(angles, P.distance_to_origin(x, c).reshape(-1), c)


def has_hierarchy(memory) -> bool:
    """Whether any memory (of a memory or a :class:`~.snapshot.Snapshot`) has a parent."""
    if isinstance(memory, Snapshot):
        return bool((memory.parent >= 0).any())
    return any(r.parent_id is not None for r in memory)


def projection_coordinates(memory) -> torch.Tensor:
    """The semantic projection of a memory's points, computed from its stored directions and
    exact depths: as :func:`disk_coordinates`, but the PCA of the directions is *centred*
    (a store without a tree holds similar texts, whose mean direction would otherwise be the
    first axis and put them all near one angle); the radii stay the exact depths.  ``memory``
    may be a :class:`~.snapshot.Snapshot` (drawn as it is, no new read)."""
    snap = as_snapshot(memory)
    dirs, depths = snap.directions, snap.depths
    if dirs.shape[1] == 2:
        angles = torch.atan2(dirs[:, 1], dirs[:, 0])
    else:
        angles = _principal_angles(dirs, centred=True)
    return _on_disk(angles, depths, snap.curvature)


def structural_coordinates(memory) -> torch.Tensor:
    """Radial-tree unit-disk coordinates ``(n, 2)`` (rows in the memory's order): angles
    from the hierarchy (wedges proportional to leaf counts), radii from the exact depths.
    ``memory`` may be a :class:`~.snapshot.Snapshot` (drawn as it is, no new read).

    >>> from hypermem import Memory
    >>> mem = Memory(); root = mem.add("animals"); _ = mem.add("dogs", parent=root)
    >>> xy = structural_coordinates(mem)
    >>> bool(xy[1].norm() > xy[0].norm())   # the child is drawn deeper
    True
    """
    snap = as_snapshot(memory)
    parent, depths, dirs = snap.parent, snap.depths, snap.directions
    n = len(parent)
    if n == 0:
        return torch.zeros(0, 2, dtype=torch.float64)
    semantic = (torch.atan2(dirs[:, 1], dirs[:, 0]) if dirs.shape[1] == 2 else
                _principal_angles(dirs, centred=True)).numpy()
    return _on_disk(torch.from_numpy(_radial_tree_angles(parent, semantic)), depths, snap.curvature)


def _radial_tree_angles(parent: np.ndarray, semantic: np.ndarray) -> np.ndarray:
    """Angles of the radial tree, vectorised level by level.  The roots are the children of
    a virtual node owning the whole circle; a node's wedge is its parent's times its share
    of the parent's leaves, siblings in the order of their semantic angle (then row), and
    the node sits in the middle of its wedge."""
    n = len(parent)
    par = np.where(parent < 0, n, parent)  # row n: the virtual root
    frontier = np.array([n])
    kids_sorted = np.argsort(par, kind="stable")
    starts = np.searchsorted(par[kids_sorted], np.arange(n + 2))
    levels = []
    while frontier.size:  # breadth first, no recursion (chains may be deep)
        lo, counts = starts[frontier], starts[frontier + 1] - starts[frontier]
        first_of = np.cumsum(counts) - counts  # where each frontier node's children start
        kids = kids_sorted[np.arange(counts.sum()) - np.repeat(first_of, counts) + np.repeat(lo, counts)]
        if kids.size:
            levels.append(kids)
        frontier = kids
    has_kids = np.zeros(n + 1, dtype=bool)
    has_kids[par] = True
    leaves = np.where(has_kids, 0.0, 1.0)
    for kids in reversed(levels):  # leaf counts bottom up
        np.add.at(leaves, par[kids], leaves[kids])
    # Each node's share of its parent's wedge and its offset among its siblings.
    order = np.lexsort((np.arange(n), semantic, par[:n]))
    run = np.cumsum(leaves[order])
    first = np.r_[True, par[order][1:] != par[order][:-1]]
    group_start = np.maximum.accumulate(np.where(first, np.arange(n), 0))
    before = run - leaves[order] - (run - leaves[order])[group_start]
    offset = np.empty(n)
    offset[order] = before
    lo_ = np.zeros(n + 1)
    width = np.zeros(n + 1)
    width[n] = 2 * math.pi
    for kids in levels:
        p = par[kids]
        scale = width[p] / leaves[p]
        lo_[kids] = lo_[p] + scale * offset[kids]
        width[kids] = scale * leaves[kids]
    return lo_[:n] + width[:n] / 2
