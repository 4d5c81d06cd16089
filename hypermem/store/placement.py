r"""Where a memory goes in the ball: direction from its embedding, depth from its level.

A memory at hierarchy level ``l`` (roots are level 0) sits at hyperbolic radius
``base_depth + l * depth_step``.  A root's direction is its unit embedding ``e``; a
child's direction is pulled toward its parent's direction ``u_p``:

``u = normalize((1 - a) e + a u_p)``, ``a = inherit``.

With ``cone_constrained`` the child must also lie in its parent's entailment cone
(Ganea et al. 2018): when ``u`` leaves it, the pull ``a`` is raised by bisection to the
smallest value that puts the child inside (``a = 1`` puts it on the parent's ray, which is
always inside, since the child is deeper).
"""

from __future__ import annotations

import math
import weakref

import numpy as np
import torch

from ..geometry import poincare as P
from ..geometry.cones import cone_angle, half_aperture
from ..geometry.numerics import max_radius
from .caller_warning import warn_caller
from .checks import max_depth
from .encoder_points import encoder_placement, places_points

CONE_MARGIN = 1e-7
"""Children are placed at least this many radians inside their parent's cone, so that
membership survives rounding (stored in float32 too)."""
_BISECT_STEPS = 40


def unit(x: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
    """Rows scaled to unit norm (zero rows stay zero: a store refuses a zero embedding,
    :func:`hypermem.store.checks.check_has_direction`); written to ``out`` when given.

    A row whose norm overflows (entries beyond about 1e154 in float64) or underflows is first
    divided by its largest entry, so every finite non-zero row gets its unit direction; the
    other rows are divided by their norm as they are (bit for bit as before)."""
    n = torch.linalg.vector_norm(x, dim=-1, keepdim=True)
    small = 1e-140 if x.dtype == torch.float64 else 1e-18  # below: the squares lose precision
    if n.numel() == 1 and 2 * small < n.item() < math.inf:  # one ordinary row (an add()): one read, same division
        return torch.div(x, n, out=out)
    odd = ~((n > small) & (n < math.inf))
    if bool(odd.any()):  # rare: scale those rows by their max-abs entry first
        s = torch.linalg.vector_norm(x, ord=math.inf, dim=-1, keepdim=True).clamp_min_(torch.finfo(x.dtype).tiny)
        x = torch.where(odd, x / s, x)
        n = torch.where(odd, torch.linalg.vector_norm(x, dim=-1, keepdim=True), n)
    return torch.div(x, n.clamp_min_(1e-300 if x.dtype == torch.float64 else 1e-30), out=out)


def level_depths(memory, levels, device=None) -> torch.Tensor:
    """Depths (float64) of memories at hierarchy ``levels``: ``base_depth + level * depth_step``,
    clamped to :func:`~hypermem.store.checks.max_depth` (a deeper level shares the deepest
    radius its point can hold; the first time a store's level is clamped, :func:`warn_saturated`)."""
    top = max_depth(memory.curvature)
    if type(levels) is list and len(levels) == 1:  # one add(): the same float64 arithmetic in Python
        d = float(memory.base_depth) + float(memory.depth_step) * float(levels[0])
        if d > top:  # one comparison: the level's depth is clamped
            warn_saturated(memory, top)
        return torch.full((1,), min(d, top), dtype=torch.float64, device=device)
    if len(levels) and memory.base_depth + memory.depth_step * max(levels) > top:  # the batch's deepest level
        warn_saturated(memory, top)
    lv = torch.as_tensor(levels, dtype=torch.float64, device=device)
    return (memory.base_depth + memory.depth_step * lv).clamp_max_(top)


_SATURATED: weakref.WeakSet = weakref.WeakSet()
"""The stores :func:`warn_saturated` has warned (once a store)."""


def saturation_level(base_depth: float, depth_step: float, top: float) -> int:
    """The first level whose depth ``base_depth + level * depth_step`` passes ``top``
    (:func:`~hypermem.store.checks.max_depth`): ``floor((top - base_depth) / depth_step) + 1``, as
    the float64 comparison of :func:`level_depths` decides it; that level and every deeper one share
    the radius ``top`` (the defaults ``1 + 0.5 l`` and ``c = 1``: level 46, ``top = 23.72``)."""
    lv = max(0, math.floor((top - base_depth) / depth_step))
    while base_depth + depth_step * lv <= top:  # the float64 comparison of level_depths decides
        lv += 1
    return lv


def warn_saturated(memory, top: float) -> None:
    """Warn once a store (a ``UserWarning`` at the caller's line) that its levels from
    :func:`saturation_level` on share the deepest radius ``top``, so depth no longer tells them apart."""
    if memory in _SATURATED:
        return
    _SATURATED.add(memory)
    b, s = float(memory.base_depth), float(memory.depth_step)
    sat = saturation_level(b, s, top)
    hint = ""
    if getattr(memory, "dtype", torch.float64) != torch.float64:  # float32 points stop sooner (numerics.max_radius)
        hint = (f"; the points of this float32 store (mem.points) already stop at radius "
                f"{max_radius(torch.float32, memory.curvature):.3g}: dtype=torch.float64 keeps them to {top:.4g}")
    warn_caller(f"levels {sat} and deeper all sit at radius {top:.4g}, the deepest a float64 point in the ball "
                f"of curvature {memory.curvature:g} holds (max_depth): base_depth {b:g} + level * depth_step {s:g} "
                f"passes it from level {sat} on, so depth no longer tells those levels apart; for a deeper tree "
                f"pass a smaller depth_step or base_depth (level L stays apart while base_depth + L * depth_step "
                f"<= {top:.4g}) or a smaller curvature{hint} (warned once a store)")


def point_placement(points: torch.Tensor, fallback: torch.Tensor, c: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Directions and depths (float64) of explicit ``point=`` rows: the unit point and
    ``d_c(0, x)`` clamped to :func:`~hypermem.store.checks.max_depth` (a point beyond the float64
    margin is stored at the margin); the origin, which has no direction, keeps its row of
    ``fallback`` (its unit embedding)."""
    u = unit(points)
    u = torch.where(torch.linalg.vector_norm(u, dim=-1, keepdim=True) > 0, u, fallback)
    return u, P.distance_to_origin(points, c).reshape(-1).clamp_max_(max_depth(c))


def mix(e: torch.Tensor, up: torch.Tensor, a: torch.Tensor | float) -> torch.Tensor:
    """``normalize((1 - a) e + a up)``; falls back to ``up`` where the mix vanishes."""
    if isinstance(a, float):
        v = torch.add(e * (1.0 - a), up, alpha=a)  # one temporary, updated in place
    else:
        a = torch.as_tensor(a, dtype=e.dtype, device=e.device)
        if a.dim() == 1:
            a = a.unsqueeze(1)
        v = (1.0 - a) * e + a * up
    n = torch.linalg.vector_norm(v, dim=-1, keepdim=True)
    if n.numel() == 1 and n.item() > 2e-12:  # one row that did not vanish (an add()): one read
        return v.div_(n)
    vanished = n <= 1e-12
    v.div_(n.clamp_min_(1e-300))
    if bool(vanished.any()):
        v = torch.where(vanished, up, v)
    return v


def child_directions(e: torch.Tensor, parent_dir: torch.Tensor, parent_depth: torch.Tensor,
                     child_depth: torch.Tensor, inherit: float, cone_constrained: bool, cone_k: float,
                     c: float) -> torch.Tensor:
    """Directions ``(n, d)`` of children with unit embeddings ``e`` under parents with unit
    directions ``parent_dir`` at radii ``parent_depth``; the children sit at ``child_depth``."""
    u = mix(e, parent_dir, inherit)
    if not cone_constrained:
        return u
    x = P.point_at(parent_dir, parent_depth, c)
    psi = half_aperture(x, c, cone_k)

    def inside(xs, us, ds, ps):
        return cone_angle(xs, P.point_at(us, ds, c), c) <= ps - CONE_MARGIN

    bad = ~inside(x, u, child_depth, psi)
    if not bool(bad.any()):
        return u
    eb, pb, xb, db, psb = e[bad], parent_dir[bad], x[bad], child_depth[bad], psi[bad]
    lo = torch.full((eb.shape[0],), float(inherit), dtype=e.dtype, device=e.device)
    hi = torch.ones_like(lo)
    for _ in range(_BISECT_STEPS):
        mid = 0.5 * (lo + hi)
        ok = inside(xb, mix(eb, pb, mid), db, psb)
        hi = torch.where(ok, mid, hi)
        lo = torch.where(ok, lo, mid)
    u = u.clone()
    u[bad] = mix(eb, pb, hi)
    return u


def generation_groups(gen: np.ndarray, keep: np.ndarray) -> list[np.ndarray]:
    """The positions where ``keep`` holds, one array a generation present, in generation order
    (each in batch order): ``np.nonzero((gen == g) & keep)[0]`` for each such ``g``, from one
    stable sort instead of one scan of the batch a generation (a parent chain of ``n`` has ``n``
    generations: those scans were ``n**2``)."""
    pos = np.nonzero(keep)[0]
    g = np.asarray(gen)[pos]
    order = np.argsort(g, kind="stable")
    pos, g = pos[order], g[order]
    starts = np.flatnonzero(g[1:] != g[:-1]) + 1
    return np.split(pos, starts) if pos.size else []


PLACE_BLOCK = 4096
"""Children placed per vectorised block in ``add_many`` (see :meth:`Placer.place_batch`)."""


class Placer:
    """Places a store's memories (the module's rules) and writes them into its
    :class:`~hypermem.store.state.MemoryState`: new batches generation by generation, and
    whole subtrees again after a re-parenting or a new text.  It reads the store's public
    settings (``base_depth``, ``depth_step``, ``inherit``, ``cone_constrained``,
    ``cone_k``, ``curvature``, ``device``, ``dtype``) at each call."""

    def __init__(self, memory):
        self.memory = memory

    def place_batch(self, batch, emb, levels, gen, batch_pos, out=None):
        """Directions (float64, store device; written to ``out`` when given) and depths for
        a batch of new memories.

        Generation by generation (a memory whose parent is in the same batch comes one
        generation after it), each generation placed in one vectorised call."""
        dev = self.memory.device
        c = self.memory.curvature
        if places_points(self.memory.embedder):  # a ball encoder's point, as it is (store.encoder_points)
            dirs, depths = encoder_placement(emb.to(dev), c)
            for i, p in batch.points.items():  # an explicit point= wins, as for any store
                u, r = point_placement(p.to(dev)[None], dirs[i][None], c)
                dirs[i], depths[i] = u[0], r[0]
            if out is not None:
                out.copy_(dirs)
            return (dirs if out is None else out), depths
        if len(batch.texts) == 1 and not batch.points:  # one add(): no generations to order
            return self._place_one(batch.parents[0], emb, levels, out)
        # Roots keep their unit embedding; children's rows are overwritten generation by
        # generation (each child's own row is read just before it is replaced).
        dirs = unit(emb.to(dev), out=out)
        e = dirs
        depths = level_depths(self.memory, levels, dev)
        gen_a = np.asarray(gen)
        m = len(batch.texts)
        explicit = np.zeros(m, dtype=bool)
        explicit[list(batch.points)] = True
        par_batch = np.array([-1 if p is None else batch_pos.get(p, -1) for p in batch.parents])
        par_store = np.array([-1 if p is None or p in batch_pos else self.memory.state.row[p] for p in batch.parents])
        if explicit.any():
            ex = sorted(batch.points)
            pts = torch.stack([batch.points[i] for i in ex]).to(dev)
            dirs[ex], depths[ex] = point_placement(pts, dirs[ex], c)
        has_parent = (par_batch >= 0) | (par_store >= 0)
        for gen_kids in generation_groups(gen_a, has_parent & ~explicit):
            # Blocks of PLACE_BLOCK rows keep every temporary small enough for the
            # allocator to reuse freed memory (a fresh large buffer costs a page fault per
            # 4 KiB, which here dominated the arithmetic).
            for b0 in range(0, gen_kids.size, PLACE_BLOCK):
                self._place_children(gen_kids[b0:b0 + PLACE_BLOCK], dirs, e, depths, par_batch, par_store)
        return dirs, depths

    def _place_one(self, parent, emb, levels, out):
        """:meth:`place_batch` of one memory without ``point=`` (its parent, if any, is stored):
        the same arithmetic on the same one-row tensors, without the generation bookkeeping."""
        mem = self.memory
        dev = mem.device
        dirs = unit(emb.to(dev), out=out)
        depths = level_depths(mem, levels, dev)
        if parent is not None:
            r = mem.state.row[parent]
            pdir = mem.state.direction[r: r + 1].to(torch.float64)
            pdep = mem.state.depth[r: r + 1].to(torch.float64)
            dirs.copy_(child_directions(dirs, pdir, pdep, depths, mem.inherit, mem.cone_constrained, mem.cone_k,
                                        mem.curvature))
        return dirs, depths

    def _place_children(self, kids: np.ndarray, dirs, e, depths, par_batch, par_store) -> None:
        """Directions of the children ``kids`` (batch positions), written into ``dirs``."""
        dev = self.memory.device
        pdir = torch.empty(kids.size, self.memory.dim, dtype=torch.float64, device=dev)
        pdep = torch.empty(kids.size, dtype=torch.float64, device=dev)
        in_batch = par_batch[kids] >= 0
        if in_batch.any():
            src = torch.from_numpy(par_batch[kids][in_batch]).to(dev)
            pdir[torch.from_numpy(in_batch).to(dev)] = dirs[src]
            pdep[torch.from_numpy(in_batch).to(dev)] = depths[src]
        if (~in_batch).any():
            src = torch.from_numpy(par_store[kids][~in_batch]).to(dev)
            mask = torch.from_numpy(~in_batch).to(dev)
            pdir[mask] = self.memory.state.direction[src].to(torch.float64)
            pdep[mask] = self.memory.state.depth[src].to(torch.float64)
        k_t = torch.from_numpy(kids).to(dev)
        dirs[k_t] = child_directions(e[k_t], pdir, pdep, depths[k_t], self.memory.inherit, self.memory.cone_constrained,
                                     self.memory.cone_k, self.memory.curvature)

    def replace_subtree(self, root: str) -> list[int]:
        """Recompute levels, depths and directions of ``root`` and its descendants; returns
        their rows."""
        c = self.memory.curvature
        frontier, moved = [root], []
        while frontier:
            rows = [self.memory.state.row[i] for i in frontier]
            moved += rows
            e = unit(self.memory.state.embeddings_of(rows).to(self.memory.device))
            par = [self.memory.state.records.parent(i) for i in frontier]
            lv = [0 if p is None else self.memory.state.levels[self.memory.state.row[p]] + 1 for p in par]
            for r, v in zip(rows, lv):
                self.memory.state.levels[r] = v
            if places_points(self.memory.embedder):  # the encoder's points, whatever the hierarchy
                dirs, depth = encoder_placement(self.memory.state.embeddings_of(rows).to(self.memory.device), c)
            else:
                dirs, depth = self._placed(e, par, lv)
            idx = torch.tensor(rows, device=self.memory.device)
            self.memory.state.direction[idx] = dirs.to(self.memory.dtype)
            self.memory.state.depth[idx] = depth.to(self.memory.dtype)
            frontier = [k for i in frontier for k in self.memory.state.children.get(i, ())]
        return moved

    def _placed(self, e, par, lv):
        """Directions and depths of memories with unit embeddings ``e``, parents ``par`` and levels ``lv``."""
        dev = self.memory.device
        depth = level_depths(self.memory, lv, dev)
        dirs = e.clone()
        kid_pos = [j for j, p in enumerate(par) if p is not None]
        if kid_pos:
            prow = [self.memory.state.row[par[j]] for j in kid_pos]
            dirs[kid_pos] = child_directions(e[kid_pos], self.memory.state.direction[prow].to(torch.float64),
                                             self.memory.state.depth[prow].to(torch.float64), depth[kid_pos],
                                             self.memory.inherit, self.memory.cone_constrained, self.memory.cone_k,
                                             self.memory.curvature)
        return dirs, depth
