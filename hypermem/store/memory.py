"""The hierarchy-aware, time-aware memory store."""

from __future__ import annotations

import math
import threading
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping
from datetime import datetime
from typing import Any

import numpy as np
import torch

from ..embed import HashingEmbedder, check_texts, embed_checked
from ..geometry import PoincareBall
from ..geometry import poincare as P
from ..index import MIPSIndex
from ..retrieval.cones import DEFAULT_K
from ..temporal import DecayPolicy, NoDecay
from ..temporal.clock import to_seconds, to_utc, utcnow
from ..viz.mixin import InspectMixin
from .backends import DurableMixin
from .checks import _UNSET, METRICS, MODES, _Batch, _check_meta, _check_time, _finite, _usable_device
from .gc_pause import gc_paused
from .persistence import PersistenceMixin
from .placement import child_directions, unit
from .records import MemoryRecord
from .search import SearchMixin
from .views import ViewsMixin

__all__ = ["Memory", "MODES", "METRICS"]

_PLACE_BLOCK = 4096
"""Children placed per vectorised block in ``add_many`` (see ``Memory._place_batch``)."""


class Memory(SearchMixin, ViewsMixin, PersistenceMixin, InspectMixin, DurableMixin):
    r"""Hierarchy-aware, time-aware memory for agents and RAG, on torch tensors.

    Each memory gets a point in the Poincaré ball.  Its direction comes from its text
    embedding (a child is pulled toward its parent's direction by ``inherit``); its depth
    (hyperbolic distance from the origin) is ``base_depth + level * depth_step``, its
    level in the hierarchy declared with ``parent=``.

    **Scoring.** :meth:`search` ranks by
    ``-distance + depth_bias * depth + time_coef * log(time_weight)``.  With
    ``metric="shell"`` (default) the distance is taken after moving the query and the
    memory to the reference shell at ``base_depth``: semantic (angular) mismatch in
    hyperbolic units, comparable across levels.  With ``metric="hyperbolic"`` it is the
    distance to the memory's actual point, which favours shallow, general memories.

    **Exact and fast.** The shell distance is a monotone function of the cosine between
    directions, so the score over all memories is one matrix product plus a per-memory
    bias; :func:`hypermem.index.exact_topk` evaluates it in chunks (bounded memory) and
    returns the exact top-k under every score term, filters and modes applied *before*
    the cut.

    **Storage.** Unit directions and depths live as tensors of ``dtype`` on ``device``;
    points are ``point_at(direction, depth)``, computed when asked.  Embeddings are kept
    (float64, CPU) to re-place subtrees and for persistence.

    **Thread safety.** One re-entrant lock guards the store; the embedder runs outside it.

    Example::

        >>> from hypermem import Memory
        >>> mem = Memory()
        >>> animal = mem.add("animals")
        >>> dog = mem.add("dogs are loyal animals", parent=animal)
        >>> [r.record.text for r in mem.search("loyal dog", k=1)]
        ['dogs are loyal animals']

    Parameters
    ----------
    embedder: anything with ``dim`` and ``embed(texts)``; default :class:`HashingEmbedder`.
    curvature: positive curvature magnitude ``c``.
    decay: a temporal policy (:mod:`hypermem.temporal`); default :class:`NoDecay`.
    base_depth, depth_step: radius of roots and the extra radius per level.
    inherit: how much of the parent's direction a child inherits (0 none, 1 all).
    cone_constrained: force children inside their parent's entailment cone.  With the default
        ``cone_k=0.1`` a cone is narrow (about 10 degrees at depth 1), so siblings end up
        close together; raise ``cone_k`` for more room.
    cone_k: the ``K`` of the entailment cones.
    metric: default distance of :meth:`search`, ``"shell"`` or ``"hyperbolic"``.
    time_coef, depth_bias: score weights (see :func:`hypermem.retrieval.combine`).
    clock: callable returning "now" as a datetime; override in tests and simulations.  Times
        are stored in UTC; a naive datetime (from the clock or an argument) is taken as UTC.
    dtype: ``torch.float64`` (default) or ``torch.float32`` for directions and depths.
    device: where the tensors live (``"cpu"``, ``"cuda"``, ...).
    """

    def __init__(self, embedder=None, curvature: float = 1.0, decay: DecayPolicy | None = None,
                 base_depth: float = 1.0, depth_step: float = 0.5, inherit: float = 0.25,
                 cone_constrained: bool = False, cone_k: float = DEFAULT_K, metric: str = "shell",
                 time_coef: float = 1.0, depth_bias: float = 0.0, clock: Callable[[], datetime] | None = None,
                 dtype: torch.dtype = torch.float64, device: str | torch.device = "cpu"):
        self.embedder = HashingEmbedder() if embedder is None else embedder
        if not callable(getattr(self.embedder, "embed", None)) or not hasattr(self.embedder, "dim"):
            raise TypeError("embedder must have a dim attribute and an embed(texts) method")
        dim = self.embedder.dim
        if isinstance(dim, bool) or not isinstance(dim, int) or dim < 2:
            raise ValueError(f"the embedder must produce vectors of dimension >= 2, got dim={dim!r}")
        self.ball = PoincareBall(curvature)
        self.decay = NoDecay() if decay is None else decay
        if not callable(getattr(self.decay, "weight", None)):
            raise TypeError(f"decay must be a policy with a weight() method, got {decay!r}")
        self.base_depth = _finite("base_depth", base_depth, positive=True)
        self.depth_step = _finite("depth_step", depth_step, positive=True)
        self.inherit = _finite("inherit", inherit, lo=0.0, hi=1.0)
        self.cone_constrained = bool(cone_constrained)
        self.cone_k = _finite("cone_k", cone_k, positive=True)
        if metric not in METRICS:
            raise ValueError(f"unknown metric {metric!r}; choose one of {METRICS}")
        self.metric = metric
        self.time_coef = _finite("time_coef", time_coef)
        self.depth_bias = _finite("depth_bias", depth_bias)
        if clock is not None and not callable(clock):
            raise TypeError("clock must be a callable returning a datetime")
        self.clock = clock or utcnow
        if dtype not in (torch.float32, torch.float64):
            raise ValueError(f"dtype must be torch.float32 or torch.float64, got {dtype}")
        self.dtype = dtype
        self.device = _usable_device(device)
        self._lock = threading.RLock()
        self._ids: list[str] = []
        self._row: dict[str, int] = {}
        self._records: dict[str, MemoryRecord] = {}
        self._children: dict[str, list[str]] = {}
        self._levels: list[int] = []
        self._n = 0
        self._version = 0
        self._index: MIPSIndex | None = None
        self._index_version = -1
        self._alloc(0)

    # ------------------------------------------------------------------ storage
    def _alloc(self, cap: int) -> None:
        d, dev, dt = self.dim, self.device, self.dtype
        self._dir = torch.zeros(cap, d, dtype=dt, device=dev)
        self._depth = torch.zeros(cap, dtype=dt, device=dev)
        self._time = torch.zeros(cap, dtype=torch.float64, device=dev)
        self._access = torch.zeros(cap, dtype=torch.float64, device=dev)
        self._vfrom = torch.zeros(cap, dtype=torch.float64, device=dev)
        self._vuntil = torch.zeros(cap, dtype=torch.float64, device=dev)
        self._emb = torch.zeros(cap, d, dtype=torch.float64)

    _TENSORS = ("_dir", "_depth", "_time", "_access", "_vfrom", "_vuntil", "_emb")

    def _reserve(self, extra: int) -> None:
        need = self._n + extra
        cap = self._dir.shape[0]
        if need <= cap:
            return
        new_cap = max(need, 2 * cap, 64)
        for name in self._TENSORS:
            old = getattr(self, name)
            new = old.new_empty((new_cap,) + tuple(old.shape[1:]))
            new[: self._n] = old[: self._n]
            setattr(self, name, new)

    def _keep_rows(self, keep: torch.Tensor) -> None:
        """Compact storage to the rows where ``keep`` (CPU bool, length n) is true."""
        idx = keep.nonzero().squeeze(1)
        m = int(idx.numel())
        for name in self._TENSORS:
            t = getattr(self, name)
            ii = idx.to(t.device)
            t[:m] = t[: self._n].index_select(0, ii)
        self._ids = [self._ids[i] for i in idx.tolist()]
        self._levels = [self._levels[i] for i in idx.tolist()]
        self._row = {i: r for r, i in enumerate(self._ids)}
        self._n = m

    # ------------------------------------------------------------------ basics
    @property
    def dim(self) -> int:
        """Dimension of the ball (the embedder's)."""
        return int(self.embedder.dim)

    @property
    def curvature(self) -> float:
        return self.ball.curvature

    def __len__(self) -> int:
        return self._n

    def __contains__(self, id: object) -> bool:
        return id in self._records

    def __iter__(self) -> Iterator[MemoryRecord]:
        with self._lock:
            return iter([self._records[i] for i in self._ids])

    def __repr__(self) -> str:
        return (f"Memory(n={self._n}, dim={self.dim}, curvature={self.curvature:g}, metric={self.metric!r}, "
                f"decay={self.decay!r}, dtype={self.dtype}, device={self.device})")

    def _rec(self, id: str) -> MemoryRecord:
        try:
            return self._records[id]
        except (KeyError, TypeError):
            raise KeyError(f"unknown memory id {id!r}") from None

    def get(self, id: str) -> MemoryRecord:
        """The record of ``id`` (``KeyError`` if unknown)."""
        return self._rec(id)

    # ------------------------------------------------------------------ adding
    def add(self, text: str, parent: str | None = None, t: datetime | None = None, id: str | None = None,
            meta: Mapping[str, Any] | None = None, valid_from: datetime | None = None,
            valid_until: datetime | None = None) -> str:
        """Store a memory; returns its id.

        ``t`` (default: the clock's now), ``valid_from`` and ``valid_until`` are datetimes;
        aware ones are converted to UTC, **naive ones are taken to be UTC already** (as
        the NumPy reference does), so pass ``datetime.now(timezone.utc)``, not
        ``datetime.now()``, on a machine whose clock is not in UTC."""
        item = {"text": text, "parent": parent, "t": t, "id": id, "meta": meta, "valid_from": valid_from,
                "valid_until": valid_until}
        with gc_paused():
            return self._add_many([item], single=True)[0]

    def add_many(self, items: Iterable[Mapping[str, Any]]) -> list[str]:
        """Store many memories with one embedding call; all or nothing.

        Each item is a dict of :meth:`add` keyword arguments (``text`` required), plus
        optionally ``embedding`` (a precomputed vector: the embedder is not called for it)
        and ``point`` (an explicit position in the ball instead of the computed one).
        Parents must precede their children.  Returns the ids in order.
        """
        with gc_paused():  # bulk allocation without cyclic collections (hypermem.store.gc_pause)
            return self._add_many(items)

    def _add_many(self, items: Iterable[Mapping[str, Any]], single: bool = False) -> list[str]:
        batch = _Batch.check(list(items), self.dim, self.ball, single)
        if not batch.texts:
            return []
        todo = [i for i in range(len(batch.texts)) if i not in batch.embeddings]
        if len(todo) == len(batch.texts):
            emb, owned = embed_checked(self.embedder, batch.texts, return_owned=True)
        else:
            emb, owned = torch.empty(len(batch.texts), self.dim, dtype=torch.float64), True
            if todo:
                emb[todo] = embed_checked(self.embedder, [batch.texts[i] for i in todo])
            for i, e in batch.embeddings.items():
                emb[i] = e
        with self._lock:
            return self._insert(batch, emb, owned)

    def _insert(self, batch: _Batch, emb: torch.Tensor, owned: bool = False) -> list[str]:
        """Store a checked batch (all or nothing).  ``owned``: nobody else holds ``emb``, so
        an empty store may keep it as its raw-embedding column instead of copying it."""
        # Validate everything before touching any state (all or nothing).
        m = len(batch.texts)
        records, parents = self._records, batch.parents
        new_ids: list[str] = []
        batch_pos: dict[str, int] = {}
        for i, id_ in enumerate(batch.ids):
            if id_ is None:
                id_ = uuid.uuid4().hex[:16]
                while id_ in records or id_ in batch_pos:
                    id_ = uuid.uuid4().hex[:16]
            elif id_ in records or id_ in batch_pos:
                raise ValueError(f"duplicate id {id_!r}")
            par = parents[i]
            if par is not None and par not in records and par not in batch_pos:
                raise KeyError(f"unknown parent id {par!r} (item #{i}; parents must precede their children)")
            batch_pos[id_] = i
            new_ids.append(id_)
        now = to_utc(self.clock())
        # Levels and generations (a memory whose parent is in this batch comes one
        # generation after it).
        levels = [0] * m
        gen = [0] * m
        row, lv_store = self._row, self._levels
        for i, par in enumerate(parents):
            if par is None:
                continue
            j = batch_pos.get(par)
            if j is not None:
                levels[i], gen[i] = levels[j] + 1, gen[j] + 1
            else:
                levels[i] = lv_store[row[par]] + 1
        # Capacity first (rows past _n are not part of the store until the commit below),
        # so float64 directions are placed straight into their storage rows.
        self._reserve(m)
        n0 = self._n
        sl = slice(n0, n0 + m)
        dev = self.device
        out = self._dir[sl] if self.dtype == torch.float64 else None
        dirs, depths = self._place_batch(batch, emb, levels, gen, batch_pos, out=out)
        # Commit.
        if out is None:
            self._dir[sl] = dirs.to(dev, self.dtype)
        self._depth[sl] = depths.to(dev, self.dtype)
        if owned and n0 == 0 and self._emb.shape == emb.shape and emb.is_contiguous():
            self._emb = emb  # the first batch's fresh embeddings become the column (no copy)
        else:
            self._emb[sl] = emb
        times = [now if t is None else t for t in batch.times]
        self._time[sl] = torch.tensor([t.timestamp() for t in times], dtype=torch.float64, device=dev)
        self._access[sl] = 0.0
        self._vfrom[sl] = torch.tensor([-math.inf if v is None else v.timestamp() for v in batch.valid_from],
                                       dtype=torch.float64, device=dev)
        self._vuntil[sl] = torch.tensor([math.inf if v is None else v.timestamp() for v in batch.valid_until],
                                        dtype=torch.float64, device=dev)
        records.update(zip(new_ids, map(MemoryRecord, new_ids, batch.texts, parents, times, batch.metas,
                                        batch.valid_from, batch.valid_until)))
        row.update(zip(new_ids, range(n0, n0 + m)))
        children = self._children
        for id_, par in zip(new_ids, parents):
            if par is not None:
                children.setdefault(par, []).append(id_)
        self._ids.extend(new_ids)
        self._levels.extend(levels)
        self._n = n0 + m
        self._version += 1
        return new_ids

    def _place_batch(self, batch: _Batch, emb, levels, gen, batch_pos, out=None):
        """Directions (float64, store device; written to ``out`` when given) and depths for
        a batch of new memories.

        Generation by generation (a memory whose parent is in the same batch comes one
        generation after it), each generation placed in one vectorised call."""
        dev = self.device
        c = self.curvature
        # Roots keep their unit embedding; children's rows are overwritten generation by
        # generation (each child's own row is read just before it is replaced).
        dirs = unit(emb.to(dev), out=out)
        e = dirs
        depths = self.base_depth + self.depth_step * torch.tensor(levels, dtype=torch.float64, device=dev)
        gen_a = np.asarray(gen)
        m = len(batch.texts)
        explicit = np.zeros(m, dtype=bool)
        explicit[list(batch.points)] = True
        par_batch = np.array([-1 if p is None else batch_pos.get(p, -1) for p in batch.parents])
        par_store = np.array([-1 if p is None or p in batch_pos else self._row[p] for p in batch.parents])
        if explicit.any():
            ex = sorted(batch.points)
            pts = torch.stack([batch.points[i] for i in ex]).to(dev)
            dirs[ex] = unit(pts)
            depths[ex] = P.distance_to_origin(pts, c)
        has_parent = (par_batch >= 0) | (par_store >= 0)
        for g in range(int(gen_a.max()) + 1):
            gen_kids = np.nonzero((gen_a == g) & has_parent & ~explicit)[0]
            # Blocks of _PLACE_BLOCK rows keep every temporary small enough for the
            # allocator to reuse freed memory (a fresh large buffer costs a page fault per
            # 4 KiB, which here dominated the arithmetic).
            for b0 in range(0, gen_kids.size, _PLACE_BLOCK):
                self._place_children(gen_kids[b0:b0 + _PLACE_BLOCK], dirs, e, depths, par_batch, par_store)
        return dirs, depths

    def _place_children(self, kids: np.ndarray, dirs, e, depths, par_batch, par_store) -> None:
        """Directions of the children ``kids`` (batch positions), written into ``dirs``."""
        dev = self.device
        pdir = torch.empty(kids.size, self.dim, dtype=torch.float64, device=dev)
        pdep = torch.empty(kids.size, dtype=torch.float64, device=dev)
        in_batch = par_batch[kids] >= 0
        if in_batch.any():
            src = torch.from_numpy(par_batch[kids][in_batch]).to(dev)
            pdir[torch.from_numpy(in_batch).to(dev)] = dirs[src]
            pdep[torch.from_numpy(in_batch).to(dev)] = depths[src]
        if (~in_batch).any():
            src = torch.from_numpy(par_store[kids][~in_batch]).to(dev)
            mask = torch.from_numpy(~in_batch).to(dev)
            pdir[mask] = self._dir[src].to(torch.float64)
            pdep[mask] = self._depth[src].to(torch.float64)
        k_t = torch.from_numpy(kids).to(dev)
        dirs[k_t] = child_directions(e[k_t], pdir, pdep, depths[k_t], self.inherit, self.cone_constrained,
                                     self.cone_k, self.curvature)

    def _replace_subtree(self, root: str) -> None:
        """Recompute levels, depths and directions of ``root`` and its descendants."""
        c = self.curvature
        frontier = [root]
        while frontier:
            rows = [self._row[i] for i in frontier]
            e = unit(self._emb[rows].to(self.device))
            par = [self._records[i].parent_id for i in frontier]
            lv = [0 if p is None else self._levels[self._row[p]] + 1 for p in par]
            for r, v in zip(rows, lv):
                self._levels[r] = v
            depth = torch.tensor([self.base_depth + v * self.depth_step for v in lv], dtype=torch.float64,
                                 device=self.device)
            dirs = e.clone()
            kid_pos = [j for j, p in enumerate(par) if p is not None]
            if kid_pos:
                prow = [self._row[par[j]] for j in kid_pos]
                dirs[kid_pos] = child_directions(e[kid_pos], self._dir[prow].to(torch.float64),
                                                 self._depth[prow].to(torch.float64), depth[kid_pos],
                                                 self.inherit, self.cone_constrained, self.cone_k, c)
            idx = torch.tensor(rows, device=self.device)
            self._dir[idx] = dirs.to(self.dtype)
            self._depth[idx] = depth.to(self.dtype)
            frontier = [k for i in frontier for k in self._children.get(i, ())]

    # ------------------------------------------------------------------ changing
    def update(self, id: str, text: str | None = None, meta: Mapping[str, Any] | None = None,
               t: datetime | None = None, valid_from: Any = _UNSET, valid_until: Any = _UNSET) -> None:
        """Change a memory in place.  New text re-embeds it and re-places its subtree;
        ``meta`` replaces the metadata dict; ``valid_from`` / ``valid_until`` may be set to None.
        All or nothing."""
        self._rec(id)
        where = f"update({id!r})"
        if text is not None:
            check_texts([text], what="text")
        new_meta = None if meta is None else _check_meta(meta, where)
        t = _check_time(t, "t", where)
        vf = valid_from if valid_from is _UNSET else _check_time(valid_from, "valid_from", where)
        vu = valid_until if valid_until is _UNSET else _check_time(valid_until, "valid_until", where)
        e = embed_checked(self.embedder, [text])[0] if text is not None else None
        with self._lock:
            rec = self._rec(id)
            lo = rec.valid_from if vf is _UNSET else vf
            hi = rec.valid_until if vu is _UNSET else vu
            if lo is not None and hi is not None and hi < lo:
                raise ValueError(f"{where}: valid_until ({hi}) is before valid_from ({lo})")
            r = self._row[id]
            if e is not None:
                rec.text = text
                self._emb[r] = e
                self._replace_subtree(id)
            if new_meta is not None:
                rec.meta = new_meta
            if t is not None:
                rec.t = t
                self._time[r] = to_seconds(t)
            if vf is not _UNSET:
                rec.valid_from = vf
                self._vfrom[r] = to_seconds(vf, -math.inf)
            if vu is not _UNSET:
                rec.valid_until = vu
                self._vuntil[r] = to_seconds(vu, math.inf)
            self._version += 1

    def remove(self, id: str, cascade: bool = False) -> list[str]:
        """Remove a memory; with ``cascade`` its whole subtree.  Returns the removed ids."""
        with self._lock:
            rec = self._rec(id)
            kids = self._children.get(id, [])
            if kids and not cascade:
                raise ValueError(f"{id!r} has {len(kids)} children; pass cascade=True to remove the subtree")
            gone = [id, *self.descendants(id)]
            gone_set = set(gone)
            keep = torch.ones(self._n, dtype=torch.bool)
            keep[[self._row[i] for i in gone]] = False
            if rec.parent_id is not None:
                self._children[rec.parent_id].remove(id)
                if not self._children[rec.parent_id]:
                    del self._children[rec.parent_id]
            for i in gone:
                del self._records[i]
                self._children.pop(i, None)
            self._keep_rows(keep)
            assert not (gone_set & set(self._row))
            self._version += 1
            return gone

    def link(self, child: str, parent: str | None) -> None:
        """Re-parent ``child`` under ``parent`` (``None``: make it a root) and re-place its
        subtree.  Refuses cycles."""
        with self._lock:
            rec = self._rec(child)
            if parent is not None:
                self._rec(parent)
                if parent == child:
                    raise ValueError(f"cannot link {child!r} under itself")
                if parent in set(self.descendants(child)):
                    raise ValueError(f"linking {child!r} under its descendant {parent!r} would make a cycle")
            if rec.parent_id == parent:
                return
            if rec.parent_id is not None:
                self._children[rec.parent_id].remove(child)
                if not self._children[rec.parent_id]:
                    del self._children[rec.parent_id]
            rec.parent_id = parent
            if parent is not None:
                self._children.setdefault(parent, []).append(child)
            self._replace_subtree(child)
            self._version += 1

