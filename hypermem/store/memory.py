"""The hierarchy-aware, time-aware memory store."""

from __future__ import annotations

import json
import math
import threading
import uuid
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from datetime import datetime, timezone
from typing import Any

import numpy as np
import torch

from ..embed import HashingEmbedder, check_texts, embed_checked
from ..geometry import PoincareBall
from ..geometry import poincare as P
from ..index import HyperbolicDistance, MIPSIndex, ShellDistance, exact_topk
from ..retrieval.cones import DEFAULT_K, cone_energy
from ..temporal import MIN_WEIGHT, DecayPolicy, NoDecay, policy_spec
from ..temporal.clock import from_seconds, to_seconds, to_utc, utcnow
from ..viz.mixin import InspectMixin
from .gc_pause import gc_paused
from .persistence import PersistenceMixin
from .placement import child_directions, unit
from .records import MemoryRecord, SearchResult

MODES = ("nearest", "subtree", "children", "ancestors", "siblings", "cone")
METRICS = ("shell", "hyperbolic")
ADD_KEYS = frozenset({"text", "parent", "t", "id", "meta", "valid_from", "valid_until", "embedding", "point"})
CONE_TOL = 1e-9


class _Unset:
    def __repr__(self) -> str:
        return "<unset>"


_UNSET: Any = _Unset()

Filter = Mapping[str, Any] | Callable[[MemoryRecord], bool] | None


def _finite(name: str, value: Any, *, positive: bool = False, lo: float | None = None,
            hi: float | None = None) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"{name} must be a finite number, got {value!r}")
    v = float(value)
    if not math.isfinite(v):
        raise ValueError(f"{name} must be a finite number, got {value!r}")
    if positive and v <= 0:
        raise ValueError(f"{name} must be positive, got {value!r}")
    if lo is not None and v < lo or hi is not None and v > hi:
        raise ValueError(f"{name} must be in [{lo}, {hi}], got {value!r}")
    return v


def _check_meta(meta: Any, where: str) -> dict:
    """Metadata must survive a JSON round trip unchanged (so every store can be saved):
    string keys, JSON values, no NaN, no tuples or sets."""
    if meta is None or (type(meta) is dict and not meta):
        return {}
    if not isinstance(meta, Mapping):
        raise TypeError(f"{where}: meta must be a dict, got {type(meta).__name__}")
    meta = dict(meta)
    try:
        back = json.loads(json.dumps(meta, allow_nan=False))
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{where}: meta must be JSON-serialisable ({exc})") from exc
    if back != meta:
        raise ValueError(f"{where}: meta must be plain JSON (string keys; lists, not tuples): it does not "
                         f"survive a JSON round trip unchanged")
    return meta


def _check_time(value: Any, name: str, where: str | int) -> datetime | None:
    """``value`` as an aware UTC datetime (``None`` stays ``None``); ``where`` names the
    call or, as an int, the ``add_many`` item (formatted only for an error)."""
    if value is None:
        return None
    if type(value) is datetime and value.tzinfo is timezone.utc:
        return value
    if not isinstance(value, datetime):
        where = f"item #{where}" if isinstance(where, int) else where
        raise TypeError(f"{where}: {name} must be a datetime or None, got {type(value).__name__}")
    return to_utc(value)


_PLACE_BLOCK = 4096
"""Children placed per vectorised block in ``add_many`` (see ``Memory._place_batch``)."""


class _Batch:
    """The columns of an ``add_many`` call, checked (all or nothing: nothing is stored if
    any item is bad)."""

    __slots__ = ("texts", "ids", "parents", "times", "valid_from", "valid_until", "metas", "embeddings", "points")

    @classmethod
    def check(cls, items: list, dim: int, ball: PoincareBall) -> _Batch:
        b = cls()
        n = len(items)
        texts, ids, parents = [None] * n, [None] * n, [None] * n
        times, vfrom, vuntil, metas = [None] * n, [None] * n, [None] * n, [None] * n
        b.embeddings, b.points = {}, {}
        # One pass; the common cases (str, None, no metadata) cost no call.
        for i, it in enumerate(items):
            if not isinstance(it, Mapping):
                raise TypeError(f"item #{i} must be a dict of add() arguments, got {type(it).__name__}")
            if not it.keys() <= ADD_KEYS:
                raise ValueError(f"item #{i} has unknown keys {sorted(it.keys() - ADD_KEYS)}; "
                                 f"allowed: {sorted(ADD_KEYS)}")
            get = it.get
            text = get("text")
            if type(text) is not str or not text.strip():
                if "text" not in it:
                    raise ValueError(f"item #{i} has no 'text'")
                check_texts([text], what=f"item #{i} text")  # raises the precise error
            texts[i] = text
            id_ = get("id")
            if id_ is not None:
                if not isinstance(id_, str) or not id_.strip():
                    raise ValueError(f"item #{i}: id must be a non-empty string, got {id_!r}")
                ids[i] = id_
            par = get("parent")
            if par is not None:
                if not isinstance(par, str):
                    raise TypeError(f"item #{i}: parent must be a memory id (str), got {type(par).__name__}")
                parents[i] = par
            t = get("t")
            if t is not None:
                times[i] = _check_time(t, "t", i)
            vf, vu = get("valid_from"), get("valid_until")
            if vf is not None or vu is not None:  # validity windows are rare: no calls without one
                vf = vfrom[i] = _check_time(vf, "valid_from", i)
                vu = vuntil[i] = _check_time(vu, "valid_until", i)
                if vf is not None and vu is not None and vu < vf:
                    raise ValueError(f"item #{i}: valid_until ({vu}) is before valid_from ({vf})")
            meta = get("meta")
            metas[i] = {} if meta is None else _check_meta(meta, f"item #{i}")
            if get("embedding") is not None:
                e = torch.as_tensor(it["embedding"], dtype=torch.float64).detach().cpu()
                if e.shape != (dim,):
                    raise ValueError(f"item #{i}: embedding must have shape ({dim},), got {tuple(e.shape)}")
                if not bool(torch.isfinite(e).all()):
                    raise ValueError(f"item #{i}: embedding has non-finite values")
                b.embeddings[i] = e
            if get("point") is not None:
                p = torch.as_tensor(it["point"], dtype=torch.float64).detach().cpu()
                if p.shape != (dim,):
                    raise ValueError(f"item #{i}: point must have shape ({dim},), got {tuple(p.shape)}")
                ball.check_inside(p, name=f"item #{i} point")
                b.points[i] = p
        b.texts, b.ids, b.parents, b.times = texts, ids, parents, times
        b.valid_from, b.valid_until, b.metas = vfrom, vuntil, metas
        return b


class Memory(PersistenceMixin, InspectMixin):
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
    clock: callable returning "now" as a datetime; override in tests and simulations.
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
        self.device = torch.device(device)
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

    @property
    def ids(self) -> list[str]:
        """Ids in insertion order."""
        return list(self._ids)

    @property
    def points(self) -> torch.Tensor:
        """All points ``(n, dim)`` in insertion order (computed from directions and depths)."""
        with self._lock:
            n = self._n
            return P.point_at(self._dir[:n], self._depth[:n], self.curvature)

    @property
    def directions(self) -> torch.Tensor:
        """Unit directions ``(n, dim)`` (a view of the store's tensor; do not modify)."""
        return self._dir[: self._n]

    @property
    def depths(self) -> torch.Tensor:
        """Hyperbolic radii ``(n,)`` (a view; do not modify)."""
        return self._depth[: self._n]

    @property
    def embeddings(self) -> torch.Tensor:
        """Raw embeddings ``(n, dim)``, float64 on the CPU (a view; do not modify)."""
        return self._emb[: self._n]

    def _rec(self, id: str) -> MemoryRecord:
        try:
            return self._records[id]
        except (KeyError, TypeError):
            raise KeyError(f"unknown memory id {id!r}") from None

    def get(self, id: str) -> MemoryRecord:
        """The record of ``id`` (``KeyError`` if unknown)."""
        return self._rec(id)

    def parent(self, id: str) -> str | None:
        return self._rec(id).parent_id

    def children(self, id: str) -> list[str]:
        self._rec(id)
        return list(self._children.get(id, ()))

    def ancestors(self, id: str) -> list[str]:
        """Ancestors from the parent up to the root."""
        out: list[str] = []
        cur = self._rec(id).parent_id
        while cur is not None:
            out.append(cur)
            cur = self._records[cur].parent_id
        return out

    def descendants(self, id: str) -> list[str]:
        """All descendants, breadth first."""
        self._rec(id)
        out: list[str] = []
        frontier = list(self._children.get(id, ()))
        while frontier:
            out.extend(frontier)
            frontier = [c for p in frontier for c in self._children.get(p, ())]
        return out

    def siblings(self, id: str) -> list[str]:
        p = self._rec(id).parent_id
        pool = self._children.get(p, ()) if p is not None else self.roots()
        return [i for i in pool if i != id]

    def roots(self) -> list[str]:
        return [i for i in self._ids if self._records[i].parent_id is None]

    def level(self, id: str) -> int:
        self._rec(id)
        return self._levels[self._row[id]]

    def depth(self, id: str) -> float:
        """Hyperbolic distance of ``id``'s point from the origin."""
        self._rec(id)
        return float(self._depth[self._row[id]])

    def point(self, id: str) -> torch.Tensor:
        """The point ``(dim,)`` of ``id``."""
        self._rec(id)
        r = self._row[id]
        return P.point_at(self._dir[r], self._depth[r], self.curvature)

    def embedding(self, id: str) -> torch.Tensor:
        self._rec(id)
        return self._emb[self._row[id]].clone()

    # ------------------------------------------------------------------ adding
    def add(self, text: str, parent: str | None = None, t: datetime | None = None, id: str | None = None,
            meta: Mapping[str, Any] | None = None, valid_from: datetime | None = None,
            valid_until: datetime | None = None) -> str:
        """Store a memory; returns its id."""
        item = {"text": text, "parent": parent, "t": t, "id": id, "meta": meta, "valid_from": valid_from,
                "valid_until": valid_until}
        return self.add_many([item])[0]

    def add_many(self, items: Iterable[Mapping[str, Any]]) -> list[str]:
        """Store many memories with one embedding call; all or nothing.

        Each item is a dict of :meth:`add` keyword arguments (``text`` required), plus
        optionally ``embedding`` (a precomputed vector: the embedder is not called for it)
        and ``point`` (an explicit position in the ball instead of the computed one).
        Parents must precede their children.  Returns the ids in order.
        """
        with gc_paused():  # bulk allocation without cyclic collections (hypermem.store.gc_pause)
            return self._add_many(items)

    def _add_many(self, items: Iterable[Mapping[str, Any]]) -> list[str]:
        batch = _Batch.check(list(items), self.dim, self.ball)
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

    # ------------------------------------------------------------------ time
    def _now(self, at_time: datetime | None) -> datetime:
        return to_utc(at_time) if at_time is not None else to_utc(self.clock())

    def _weights_all(self, at_time: datetime | None) -> torch.Tensor:
        n = self._n
        w = self.decay.weight(to_seconds(self._now(at_time)), self._time[:n], self._access[:n],
                              self._vfrom[:n], self._vuntil[:n])
        w = torch.as_tensor(w, dtype=torch.float64, device=self.device)
        if w.shape != (n,):
            raise ValueError(f"the decay policy returned shape {tuple(w.shape)}, expected ({n},)")
        return w

    def time_weights(self, ids: Sequence[str] | None = None, at_time: datetime | None = None) -> torch.Tensor:
        """Temporal weights in ``[MIN_WEIGHT, 1]`` of ``ids`` (all memories if None) at ``at_time``."""
        with self._lock:
            w = self._weights_all(at_time)
            if ids is None:
                return w
            rows = [self._row[self._rec(i).id] for i in ids]
            return w[torch.tensor(rows, dtype=torch.long, device=self.device)]

    # ------------------------------------------------------------------ queries
    def embed_query(self, query: str, depth: float | None = None) -> torch.Tensor:
        """Point for a free-text query: direction from the embedder, depth given or ``base_depth``."""
        check_texts([query], what="query")
        e = embed_checked(self.embedder, [query])[0]
        d = self.base_depth if depth is None else _finite("depth", depth, lo=0.0)
        return P.point_at(e.to(self.device, self.dtype), d, self.curvature)

    def _query_dirs(self, queries: Sequence[Any], query_depth: float | None):
        """Unit directions ``(B, dim)`` and hyperbolic radii ``(B,)`` of the queries."""
        texts = [q for q in queries if isinstance(q, str)]
        if texts:
            check_texts(texts, what="query")
            emb = iter(embed_checked(self.embedder, texts))
        dirs, radii = [], []
        default = self.base_depth if query_depth is None else _finite("query_depth", query_depth, lo=0.0)
        for q in queries:
            if isinstance(q, str):
                dirs.append(next(emb))
                radii.append(default)
                continue
            if q is None:
                raise ValueError("a query in a batch cannot be None")
            if not isinstance(q, (torch.Tensor, np.ndarray, list, tuple)):
                raise TypeError(f"a query must be text or a point (tensor, array, list), got {type(q).__name__}")
            p = torch.as_tensor(q).detach().to("cpu", torch.float64)
            if p.shape != (self.dim,):
                raise ValueError(f"a query must be text or a point of shape ({self.dim},), got shape "
                                 f"{tuple(p.shape)}")
            self.ball.check_inside(p, name="query point")
            dirs.append(p)
            radii.append(default if query_depth is not None else float(P.distance_to_origin(p, self.curvature)))
        D = unit(torch.stack(dirs)).to(self.device, self.dtype)
        return D, torch.tensor(radii, dtype=self.dtype, device=self.device)

    def _candidates(self, mode: str, root: str | None) -> tuple[torch.Tensor | None, torch.Tensor | None]:
        """Candidate rows (None: all) and, in cone mode, the energies of the candidates."""
        if mode not in MODES:
            raise ValueError(f"unknown mode {mode!r}; choose one of {MODES}")
        if mode == "nearest":
            return None, None
        if root is None:
            raise ValueError(f"mode={mode!r} needs root=<memory id>")
        self._rec(root)
        if mode == "subtree":
            ids = [root, *self.descendants(root)]
        elif mode == "children":
            ids = self.children(root)
        elif mode == "ancestors":
            ids = self.ancestors(root)
        elif mode == "siblings":
            ids = self.siblings(root)
        else:
            n = self._n
            pts = P.point_at(self._dir[:n].to(torch.float64), self._depth[:n].to(torch.float64), self.curvature)
            r = self._row[root]
            energy = cone_energy(pts[r], pts, self.curvature, self.cone_k)
            inside = energy <= CONE_TOL
            inside[r] = False
            rows = inside.nonzero().squeeze(1)
            return rows, energy[rows]
        rows = torch.tensor(sorted(self._row[i] for i in ids), dtype=torch.long, device=self.device)
        return rows, None

    def _filter_rows(self, rows: torch.Tensor | None, filters: Filter) -> torch.Tensor | None:
        if filters is None:
            return rows
        if callable(filters):
            keep_fn = filters
        elif isinstance(filters, Mapping):
            items = list(filters.items())

            def keep_fn(rec):
                return all(k in rec.meta and rec.meta[k] == v for k, v in items)
        else:
            raise TypeError(f"filters must be a dict or a callable, got {type(filters).__name__}")
        cand = range(self._n) if rows is None else rows.tolist()
        kept = [r for r in cand if keep_fn(self._records[self._ids[r]])]
        return torch.tensor(kept, dtype=torch.long, device=self.device)

    def search(self, query: Any = None, k: int = 5, mode: str = "nearest", root: str | None = None,
               at_time: datetime | None = None, filters: Filter = None, metric: str | None = None,
               query_depth: float | None = None, touch: bool = True, use_index: bool | None = None,
               oversample: int = 8) -> list[SearchResult]:
        """Rank memories by ``-distance + depth_bias*depth + time_coef*log(time_weight)``.

        ``mode`` restricts the candidates: ``nearest`` (all), ``subtree`` / ``children`` /
        ``ancestors`` / ``siblings`` of ``root``, or ``cone`` (points inside the entailment
        cone of ``root``).  ``query`` is text, a point in the ball, or None for structural
        modes (then candidates are ranked by time weight and depth only).  ``filters`` (a
        metadata dict that must match, or a callable on the record) apply before the
        top-k cut.  ``metric`` overrides the default; ``query_depth`` places the query for
        ``metric="hyperbolic"`` (default ``base_depth``; a point query keeps its own depth).
        ``touch`` counts an access for every returned memory, after scoring.
        ``use_index`` (True, or None once :meth:`build_index` was called) uses the index
        for ``nearest`` search: with an exact backend the answer is the same; with faiss the
        ``k * oversample`` index candidates are re-scored exactly.
        """
        return self._search([query], k, mode, root, at_time, filters, metric, query_depth, touch, use_index,
                            oversample, allow_none=True)[0]

    def search_batch(self, queries: Sequence[Any], k: int = 5, **kwargs: Any) -> list[list[SearchResult]]:
        """:meth:`search` for many queries at once (one embedding call, one batched scoring):
        one list per query, equal to calling :meth:`search` for each.

        With ``touch=True`` and a policy that depends on access counts (Ebbinghaus), each
        search changes the next one's weights, so the queries are then run one by one."""
        if isinstance(queries, str):
            raise TypeError("search_batch takes a list of queries, got a single string")
        queries = list(queries)
        allowed = {"mode", "root", "at_time", "filters", "metric", "query_depth", "touch", "use_index",
                   "oversample"}
        unknown = set(kwargs) - allowed
        if unknown:
            raise TypeError(f"search_batch got unexpected keyword arguments {sorted(unknown)}")
        if not queries:
            return []
        touch = kwargs.get("touch", True)
        if touch and _uses_access_counts(self.decay):
            return [self.search(q, k=k, **kwargs) for q in queries]
        return self._search(queries, k, kwargs.get("mode", "nearest"), kwargs.get("root"), kwargs.get("at_time"),
                            kwargs.get("filters"), kwargs.get("metric"), kwargs.get("query_depth"), touch,
                            kwargs.get("use_index"), kwargs.get("oversample", 8), allow_none=False)

    def _search(self, queries, k, mode, root, at_time, filters, metric, query_depth, touch, use_index,
                oversample, allow_none):
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise ValueError(f"k must be an integer >= 1, got {k!r}")
        if mode not in MODES:
            raise ValueError(f"unknown mode {mode!r}; choose one of {MODES}")
        metric = self.metric if metric is None else metric
        if metric not in METRICS:
            raise ValueError(f"unknown metric {metric!r}; choose one of {METRICS}")
        if isinstance(oversample, bool) or not isinstance(oversample, int) or oversample < 1:
            raise ValueError(f"oversample must be an integer >= 1, got {oversample!r}")
        no_query = allow_none and queries[0] is None
        if no_query and mode == "nearest":
            raise ValueError("mode='nearest' needs a query; omit the query only with a structural mode")
        if not no_query:
            Q, q_radius = self._query_dirs(queries, query_depth)  # embedder runs outside the lock
        with self._lock:
            n = self._n
            if n == 0:
                if root is not None and mode != "nearest":
                    self._rec(root)
                return [[] for _ in queries]
            rows, energies = self._candidates(mode, root)
            rows = self._filter_rows(rows, filters)
            if rows is not None and rows.numel() == 0:
                return [[] for _ in queries]
            weights = self._weights_all(at_time)
            bias = torch.zeros(n, dtype=self.dtype, device=self.device)
            if self.time_coef != 0.0:
                bias += (self.time_coef * weights.clamp_min(MIN_WEIGHT).log()).to(self.dtype)
            if self.depth_bias != 0.0:
                bias += self.depth_bias * self._depth[:n]
            if no_query:
                scores, idx, dist = self._rank_by_bias(bias, rows, k)
            else:
                scores, idx, dist = self._rank(Q, q_radius, bias, rows, k, metric, use_index, oversample)
            results = self._results(scores, idx, dist, weights, rows, energies)
            if touch:
                self._touch([r.record.id for res in results for r in res])
            return results

    def _rank_by_bias(self, bias, rows, k):
        cand = torch.arange(self._n, device=self.device) if rows is None else rows
        b = bias[cand]
        order = torch.argsort(-b, stable=True)[:k]  # ties: insertion order
        idx = cand[order].unsqueeze(0)
        s = b[order].unsqueeze(0)
        return s, idx, torch.zeros_like(s)

    def _distance_model(self, metric, q_radius, rows):
        if metric == "shell":
            g = ShellDistance(self.curvature, self.base_depth)
            return g, g.inverse
        key_r = self._depth[: self._n] if rows is None else self._depth[rows]
        return HyperbolicDistance(self.curvature, q_radius, key_r), None

    def _rank(self, Q, q_radius, bias, rows, k, metric, use_index, oversample):
        use = (self._index is not None) if use_index is None else bool(use_index)
        if use and rows is None and metric == "shell":
            index = self._ensure_index()
            if not index.exact:
                return self._rank_approx(index, Q, bias, k, oversample)
        keys = self._dir[: self._n] if rows is None else self._dir[rows]
        b = bias if rows is None else bias[rows]
        g, inv = self._distance_model(metric, q_radius, rows)
        # directions are unit vectors: every product is a cosine, at most 1
        scores, local, dist = exact_topk(Q, keys, k, g, b, inv, max_product=1.0)
        idx = local if rows is None else torch.where(local >= 0, rows[local.clamp_min(0)], local)
        return scores, idx, dist

    def _rank_approx(self, index, Q, bias, k, oversample):
        """faiss: the index's ``k * oversample`` shell-nearest candidates, re-scored exactly."""
        shell_q = P.point_at(Q.to(torch.float64), self.base_depth, self.curvature)
        _, cand = index.search(shell_q, k=min(self._n, k * oversample))
        cand = cand.to(self.device)
        g = ShellDistance(self.curvature, self.base_depth)
        out_s, out_i, out_d = [], [], []
        for qi in range(Q.shape[0]):
            c = cand[qi][cand[qi] >= 0]
            s, local, d = exact_topk(Q[qi: qi + 1], self._dir[c], k, g, bias[c], None)
            out_s.append(s)
            out_i.append(torch.where(local >= 0, c[local.clamp_min(0)], local))
            out_d.append(d)
        return torch.cat(out_s), torch.cat(out_i), torch.cat(out_d)

    def _results(self, scores, idx, dist, weights, rows, energies):
        s_l, i_l, d_l = scores.tolist(), idx.tolist(), dist.tolist()
        hit = sorted({i for row in i_l for i in row if i >= 0})
        if not hit:
            return [[] for _ in i_l]
        hit_t = torch.tensor(hit, dtype=torch.long, device=self.device)
        w_of = dict(zip(hit, weights[hit_t].tolist()))
        dep_of = dict(zip(hit, self._depth[hit_t].tolist()))
        energy_of = None
        if energies is not None:
            energy_of = dict(zip(rows.tolist(), energies.tolist()))
        out = []
        for s_row, i_row, d_row in zip(s_l, i_l, d_l):
            res = []
            for s, i, d in zip(s_row, i_row, d_row):
                if i < 0 or s == -math.inf:
                    continue
                res.append(SearchResult(record=self._records[self._ids[i]], score=float(s), distance=float(d),
                                        time_weight=float(w_of[i]), depth=float(dep_of[i]),
                                        cone_energy=None if energy_of is None else float(energy_of[i])))
            out.append(res)
        return out

    def _touch(self, ids: list[str]) -> None:
        if not ids:
            return
        now = to_utc(self.clock())
        rows = []
        for i in ids:
            rec = self._records[i]
            rec.access_count += 1
            rec.last_accessed = now
            rows.append(self._row[i])
        uniq = Counter(rows)
        idx = torch.tensor(list(uniq), dtype=torch.long, device=self.device)
        self._access[idx] += torch.tensor(list(uniq.values()), dtype=torch.float64, device=self.device)

    # ------------------------------------------------------------------ index
    def build_index(self, backend: str = "auto") -> MIPSIndex:
        """Build (or rebuild) the shell-metric nearest-neighbour index over all memories.

        ``"auto"``/``"torch"``/``"numpy"`` are exact (search answers do not change);
        ``"faiss"`` (the ``ann`` extra) is approximate HNSW.  The index is rebuilt
        automatically after changes."""
        with self._lock:
            self._index = MIPSIndex(self.ball, backend=backend)
            self._index_version = -1
            return self._ensure_index()

    def _ensure_index(self) -> MIPSIndex:
        if self._index_version != self._version:
            shell = P.point_at(self._dir[: self._n].to(torch.float64), self.base_depth, self.curvature)
            self._index.build(shell)
            self._index_version = self._version
        return self._index

    # ------------------------------------------------------------------ views
    def stats(self, at_time: datetime | None = None) -> dict[str, Any]:
        """Summary numbers: counts, levels, depths, timestamps, mean temporal weight."""
        with self._lock:
            n = self._n
            hist: dict[int, int] = {}
            for lv in self._levels:
                hist[lv] = hist.get(lv, 0) + 1
            w = self._weights_all(at_time) if n else None
            d = self._depth[:n]
            t = self._time[:n]
            return {
                "count": n,
                "roots": sum(1 for i in self._ids if self._records[i].parent_id is None),
                "max_level": max(self._levels, default=0),
                "levels": dict(sorted(hist.items())),
                "dim": self.dim,
                "curvature": self.curvature,
                "metric": self.metric,
                "decay": policy_spec(self.decay),
                "depth_min": float(d.min()) if n else None,
                "depth_max": float(d.max()) if n else None,
                "oldest": from_seconds(float(t.min())).isoformat() if n else None,
                "newest": from_seconds(float(t.max())).isoformat() if n else None,
                "mean_time_weight": float(w.mean()) if n else None,
                "accesses": int(self._access[:n].sum()) if n else 0,
                "dtype": str(self.dtype).replace("torch.", ""),
                "device": str(self.device),
            }

    def table(self, at_time: datetime | None = None) -> list[dict[str, Any]]:
        """Plain rows: id, text, parent, level, depth, time, weight, accesses, meta."""
        with self._lock:
            w = self._weights_all(at_time).tolist() if self._n else []
            dep = self._depth[: self._n].tolist()
            rows = []
            for r, i in enumerate(self._ids):
                rec = self._records[i]
                rows.append({"id": i, "text": rec.text, "parent": rec.parent_id, "level": self._levels[r],
                             "depth": dep[r], "time": rec.t.isoformat(), "weight": w[r],
                             "accesses": rec.access_count, "meta": dict(rec.meta)})
            return rows

    def to_dataframe(self, at_time: datetime | None = None):
        """:meth:`table` as a ``pandas.DataFrame`` (the ``pandas`` extra)."""
        try:
            import pandas as pd
        except ImportError as exc:
            raise ImportError('to_dataframe needs pandas: pip install "hypermem-torch[pandas]"') from exc
        return pd.DataFrame(self.table(at_time),
                            columns=["id", "text", "parent", "level", "depth", "time", "weight", "accesses", "meta"])

    def tree(self, root: str | None = None, max_text: int = 60) -> str:
        """The hierarchy as indented text (all roots, or the subtree of ``root``)."""
        with self._lock:
            tops = [root] if root is not None else self.roots()
            if root is not None:
                self._rec(root)
            lines: list[str] = []

            def label(i: str) -> str:
                text = self._records[i].text.replace("\n", " ")
                if len(text) > max_text:
                    text = text[: max(0, max_text - 1)] + "…"
                return f"{text}  [{i}]"

            for top in tops:
                lines.append(label(top))
                stack = [(c, "", j == len(self._children.get(top, ())) - 1)
                         for j, c in enumerate(self._children.get(top, ()))][::-1]
                while stack:
                    node, prefix, last = stack.pop()
                    lines.append(prefix + ("└── " if last else "├── ") + label(node))
                    kids = self._children.get(node, ())
                    child_prefix = prefix + ("    " if last else "│   ")
                    stack.extend((c, child_prefix, j == len(kids) - 1) for j, c in reversed(list(enumerate(kids))))
            return "\n".join(lines)


def _uses_access_counts(policy: Any) -> bool:
    """Whether a policy's weights depend on access counts (custom policies: assume so,
    unless they say ``uses_access_counts = False``)."""
    from ..temporal import Ebbinghaus, HalfLife, Product, ValidityWindow

    if isinstance(policy, (NoDecay, HalfLife, ValidityWindow)):
        return False
    if isinstance(policy, Ebbinghaus):
        return True
    if isinstance(policy, Product):
        return any(_uses_access_counts(p) for p in policy.policies)
    return bool(getattr(policy, "uses_access_counts", True))
