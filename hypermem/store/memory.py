"""The hierarchy-aware, time-aware memory store."""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Iterable, Iterator, Mapping
from datetime import datetime, timedelta
from typing import Any, Literal, TypeVar, overload

import torch

from ..embed import Embedder, HashingEmbedder
from ..geometry import PoincareBall
from ..geometry.cones import DEFAULT_K
from ..retrieval.scoring import RECENCY_DEFAULT, calibrated_time_coef
from ..temporal import DecayPolicy, NoDecay
from ..temporal.clock import to_seconds, to_utc, utcnow
from ..viz.html import notebook_html, render_html
from ..viz.mpl import plot
from .add_hint import OneByOne
from .atomic import write_page
from .auto_parent import resolve_auto
from .backends.opening import open_memory
from .backends.server import ServerMemory
from .calibration import Spread, ages
from .checks import (
    METRICS,
    MODES,
    UNSET,
    Batch,
    check_depth_settings,
    check_finite,
    check_ids,
    check_update,
    check_window,
    embedding_for_update,
    usable_device,
)
from .embedder_dim import check_embedder
from .encoder_points import is_hierarchy_encoder, places_points, store_defaults
from .frames import memory_from_dataframe
from .gc_pause import gc_paused
from .heap import trim_after
from .lexical import default_hybrid
from .memory_copy import copy_memory, shown_class_name
from .memory_delegates import MemoryDelegates
from .persistence import from_json as memory_from_json
from .persistence import load as load_memory
from .persistence import save as save_memory
from .persistence import to_json as memory_to_json
from .placement import Placer
from .records import MemoryRecord
from .removal import remove_memories
from .search import Searcher
from .selection import select
from .state import MemoryState
from .suggest import Suggester
from .views import MemoryViews

__all__ = ["Memory", "MODES", "METRICS"]

_M = TypeVar("_M", bound="Memory")


class Memory(MemoryDelegates):
    r"""Hierarchy-aware, time-aware memory for agents and RAG, on torch tensors.

    Each memory gets a point in the Poincaré ball.  Its direction comes from its text embedding (a child
    is pulled toward its parent's direction by ``inherit``); its depth (hyperbolic distance from the
    origin) is ``base_depth + level * depth_step``, its level in the hierarchy declared with ``parent=``.
    With a ball hierarchy encoder as the embedder, a memory's point is the encoder's (direction and
    depth; :mod:`hypermem.store.encoder_points`), and :meth:`suggest_parents`, ``add(text,
    parent="auto")`` and ``search(text, mode="ancestors")`` without a ``root`` place unfiled texts
    (:mod:`hypermem.store.suggest`, :mod:`hypermem.store.auto_parent`).

    **Scoring.** :meth:`search` ranks by ``-distance + depth_bias * depth + time_coef * log(time_weight)``.
    With ``metric="shell"`` (default) the distance is taken after moving the query and the memory to the
    reference shell at ``base_depth``: semantic (angular) mismatch in hyperbolic units, comparable across
    levels.  With ``metric="hyperbolic"`` it is the distance to the memory's actual point, which favours
    shallow, general memories.

    **Exact and fast.** The shell distance is a monotone function of the cosine between directions, so
    the score over all memories is one matrix product plus a per-memory bias;
    :func:`hypermem.index.exact_topk` evaluates it in chunks (bounded memory) and returns the exact
    top-k under every score term, filters and modes applied *before* the cut.

    **Storage.** Unit directions and depths live as tensors of ``dtype`` on ``device``; points are
    ``point_at(direction, depth)``, computed when asked.  Embeddings are kept (float64, CPU) to re-place
    subtrees and for persistence.

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
    curvature: positive curvature magnitude ``c`` (default 1; a ball encoder's own, ``1/dim``, for its store).
    decay: a temporal policy (:mod:`hypermem.temporal`); default :class:`NoDecay`.
    base_depth, depth_step: radius of roots and the extra radius per level.
    inherit: how much of the parent's direction a child inherits (0 none, 1 all).
    cone_constrained: force children inside their parent's entailment cone.  With the default ``cone_k=0.1``
        a cone is narrow (about 10 degrees at depth 1), so siblings end up close; raise ``cone_k`` for room.
    cone_k: the ``K`` of the entailment cones.
    metric: default distance of :meth:`search`, ``"shell"`` (default) or ``"hyperbolic"`` (a ball encoder's default).
    time_coef, depth_bias: score weights (:func:`hypermem.retrieval.combine`); no ``time_coef``: 1.0 with
        the hashing embedder (the seed's), else calibrated by ``recency_weight``.
    recency_weight: in ``[0, 1]``: one half-life of age costs that share of the distance spread
        (:func:`hypermem.retrieval.scoring.calibrated_time_coef`); default 0.1.
    hybrid: weight of the BM25 term of :meth:`search` (store.lexical); default 0.3, 0 with hashing.
    clock: callable returning "now" as a datetime; override in tests and simulations.  Times are stored
        in UTC; a naive datetime (from the clock or an argument) is taken as UTC.
    dtype: ``torch.float64`` (default) or ``torch.float32`` for directions and depths.
    device: where the tensors live (``"cpu"``, ``"cuda"``, ...).
    """

    def __init__(self, embedder: Embedder | None = None, curvature: float | None = None, decay: DecayPolicy | None = None,
                 base_depth: float = 1.0, depth_step: float = 0.5, inherit: float = 0.25,
                 cone_constrained: bool = False, cone_k: float = DEFAULT_K, metric: str | None = None,
                 time_coef: float | None = None, depth_bias: float = 0.0, clock: Callable[[], datetime] | None = None,
                 dtype: torch.dtype = torch.float64, device: str | torch.device = "cpu", hybrid: float | None = None,
                 recency_weight: float | None = None):
        self.embedder: Embedder = HashingEmbedder() if embedder is None else embedder
        dim = check_embedder(self.embedder)  # an embed(texts) method, an integer dim >= 2 (np.int64 too)
        curvature, metric = store_defaults(self.embedder, curvature, metric)  # a ball encoder's ball
        self.ball = PoincareBall(curvature)
        self.decay = NoDecay() if decay is None else decay
        if not callable(getattr(self.decay, "weight", None)):
            raise TypeError(f"decay must be a policy with a weight() method, got {decay!r}")
        self.base_depth, self.depth_step = check_depth_settings(base_depth, depth_step, self.ball.curvature)
        self.inherit = check_finite("inherit", inherit, lo=0.0, hi=1.0)
        self.cone_constrained = bool(cone_constrained)
        self.cone_k = check_finite("cone_k", cone_k, positive=True)
        if metric not in METRICS:
            raise ValueError(f"unknown metric {metric!r}; choose one of {METRICS}")
        self.metric = metric
        self.spread = Spread()  # the distance spread that calibrates recency_weight (store.calibration)
        self.time_coef = 1.0 if time_coef is None else time_coef  # explicit: the seed's meaning
        if time_coef is None and (recency_weight is not None or not isinstance(self.embedder, HashingEmbedder)):
            rw = RECENCY_DEFAULT if recency_weight is None else recency_weight
            self.recency_weight = check_finite("recency_weight", rw, lo=0.0, hi=1.0)
        elif recency_weight is not None:
            raise ValueError("pass time_coef (the seed's coefficient) or recency_weight (calibrated), not both")
        self.depth_bias = check_finite("depth_bias", depth_bias)
        self.hybrid = default_hybrid(self.embedder) if hybrid is None else check_finite("hybrid", hybrid, lo=0.0)
        if clock is not None and not callable(clock):
            raise TypeError("clock must be a callable returning a datetime")
        self.clock = clock or utcnow
        if dtype not in (torch.float32, torch.float64):
            raise ValueError(f"dtype must be torch.float32 or torch.float64, got {dtype}")
        self.state = MemoryState(dim, dtype, usable_device(device), narrow_embeddings=not is_hierarchy_encoder(self.embedder))
        """The rows and columns (:class:`~hypermem.store.state.MemoryState`) that the others read."""
        self.placer = Placer(self)
        """Where new and re-parented memories go (:class:`~hypermem.store.placement.Placer`)."""
        self.views = MemoryViews(self)
        """Columns, navigation and summaries (:class:`~hypermem.store.views.MemoryViews`)."""
        self.one_by_one = OneByOne()  # the run of single add() calls (store.add_hint)
        self.searcher = Searcher(self)
        """The query side (:class:`~hypermem.store.search.Searcher`) of search, search_batch, ..."""
        self.suggester = Suggester(self)  # suggest_parents, parent="auto" (store.suggest)

    # ------------------------------------------------------------------ basics
    @property
    def time_coef(self) -> float:
        """The time term's coefficient: as set, or ``calibrated_time_coef(recency_weight, spread)`` (1 for a
        policy with no age to scale: a ValidityWindow alone, :func:`~hypermem.store.calibration.ages`)."""
        if self.recency_weight is None or not ages(self.decay):
            return self._time_coef
        return calibrated_time_coef(self.recency_weight, self.spread.of(self))

    @time_coef.setter
    def time_coef(self, value: float) -> None:
        self._time_coef, self.recency_weight = check_finite("time_coef", value), None

    @property
    def dim(self) -> int:
        """Dimension of the ball (the embedder's)."""
        return int(self.embedder.dim)

    @property
    def dtype(self) -> torch.dtype:
        """Dtype of directions and depths (the state's)."""
        return self.state.dtype

    @property
    def device(self) -> torch.device:
        """Where the tensors live (the state's)."""
        return self.state.device

    @property
    def curvature(self) -> float:
        return self.ball.curvature

    def __len__(self) -> int:
        return self.state.n

    def __contains__(self, id: object) -> bool:
        return id in self.state.records

    def __iter__(self) -> Iterator[MemoryRecord]:
        with self.state.lock:
            return iter(self.state.records.values())

    def __repr__(self) -> str:
        placed = ", placed_by='hierarchy encoder'" if places_points(self.embedder) else ""
        closed = ", storage closed" if getattr(self._storage, "closed", False) else ""
        return (f"{shown_class_name(self)}(n={self.state.n}, dim={self.dim}, curvature={self.curvature:g}, metric={self.metric!r}"
                f"{placed}, decay={self.decay!r}, dtype={self.dtype}, device={self.device}, "
                f"embedder={type(self.embedder).__name__}{closed})")

    __copy__ = copy_memory  # independent, sharing the embedder and clock; refused for Memory.open (store.memory_copy)

    def get(self, id: str) -> MemoryRecord:
        """The record of ``id`` (``KeyError`` if unknown)."""
        return self.state.record(id)

    # ------------------------------------------------------------------ adding
    def add(self, text: str, parent: str | None = None, t: datetime | None = None, id: str | None = None,
            meta: Mapping[str, Any] | None = None, valid_from: datetime | None = None,
            valid_until: datetime | None = None) -> str:
        """Store a memory; returns its id.  ``parent="auto"``: the store's hierarchy encoder picks it
        (:mod:`hypermem.store.auto_parent`; the choice in ``meta["auto_parent"]``).

        ``t`` (default: the clock's now), ``valid_from`` and ``valid_until`` are datetimes; aware ones are
        converted to UTC, **naive ones are taken to be UTC already** (as the NumPy reference does), so
        pass ``datetime.now(timezone.utc)``, not ``datetime.now()``, on a machine whose clock is not in UTC.

        Each call embeds one text; :meth:`add_many` embeds many in one call, far faster (``store.add_hint``)."""
        item = {"text": text, "parent": parent, "t": t, "id": id, "meta": meta, "valid_from": valid_from,
                "valid_until": valid_until}
        start = self.one_by_one.start()  # a hint due is given before this add writes
        with gc_paused():
            new = self._add_many([item], single=True)[0]
        self.one_by_one.record(start, OneByOne.clock(), self.embedder)
        return new

    def add_many(self, items: Iterable[Mapping[str, Any]]) -> list[str]:
        """Store many memories with one embedding call; all or nothing.

        Each item is a dict of :meth:`add` keyword arguments (``text`` required), plus optionally ``embedding`` (a
        precomputed vector: the embedder is not called for it) and ``point`` (an explicit position in the ball
        instead of the computed one).  Parents must precede their children (``store.frames.parents_first`` orders
        items; an ``"auto"`` parent is chosen among the stored memories and the earlier items).  Returns the ids."""
        with gc_paused():  # bulk allocation without cyclic collections (hypermem.store.gc_pause)
            ids = self._add_many(items)
        trim_after(len(ids))  # the batch's temporaries back to the OS (hypermem.store.heap)
        return ids

    def _add_many(self, items: Iterable[Mapping[str, Any]], single: bool = False) -> list[str]:
        batch = Batch.check(list(items), self.dim, self.ball, single)
        if not batch.texts:
            return []
        emb, owned = batch.embed(self.embedder, self.dim)
        with self.state.lock:
            resolve_auto(self.suggester, batch, emb)  # parent="auto" (store.auto_parent)
            return self._insert(batch, emb, owned)

    def _insert(self, batch: Batch, emb: torch.Tensor, owned: bool = False) -> list[str]:
        """Store a checked batch (all or nothing); ``owned``: ``emb`` is fresh, an empty store may keep it as its column."""
        # Validate everything before touching any state (all or nothing).
        st = self.state
        new_ids, batch_pos = st.new_ids(batch.ids, batch.parents)
        now = to_utc(self.clock())
        levels, gen = st.batch_levels(batch.parents, batch_pos)
        # Capacity first (rows past n are not part of the store until the commit below),
        # so float64 directions are placed straight into their storage rows.
        m = len(new_ids)
        st.reserve(m)
        sl = slice(st.n, st.n + m)
        out = st.direction[sl] if self.dtype == torch.float64 else None
        dirs, depths = self.placer.place_batch(batch, emb, levels, gen, batch_pos, out=out)
        # Commit.
        if out is None:
            st.direction[sl] = dirs.to(self.device, self.dtype)
        st.depth[sl] = depths.to(self.device, self.dtype)
        times = [now if t is None else t for t in batch.times]
        records = list(map(MemoryRecord, new_ids, batch.texts, batch.parents, times, batch.metas, batch.valid_from,
                           batch.valid_until))
        st.append_rows(records, levels, emb, owned)
        return new_ids

    # ------------------------------------------------------------------ search, views: store.memory_delegates
    select = select  # the ids a filter keeps, without a search (store.selection)
    from_dataframe = classmethod(memory_from_dataframe)  # a new memory from to_dataframe's rows (store.frames)

    def touch(self, ids: Iterable[str]) -> None:
        """Count one access now of each id in ``ids`` (a repeated id counts each time), as ``search`` does."""
        ids = check_ids(ids, "touch()")
        with self.state.lock:
            self.state.rows_of(ids)  # KeyError naming an unknown id, before anything is counted
            self.state.touch(ids, to_utc(self.clock()))

    def refresh(self) -> bool:
        """Re-read what others committed (a store bound by :meth:`open`); in process: nothing, False."""
        return False

    # ------------------------------------------------------------------ changing
    def update(self, id: str, text: str | None = None, meta: Mapping[str, Any] | None = None,
               t: datetime | None = None, valid_from: Any = UNSET, valid_until: Any = UNSET,
               embedding: Any = None) -> None:
        """Change a memory in place.  New text (or a precomputed ``embedding``, as in :meth:`add_many`) re-embeds
        it and re-places its subtree; ``meta`` replaces the metadata; ``valid_from`` / ``valid_until`` may be None."""
        self.state.row_of(id)
        where, new_meta, t, vf, vu = check_update(id, text, meta, t, valid_from, valid_until)
        e = embedding_for_update(self.embedder, self.dim, text, embedding, where)
        with self.state.lock:
            rec = self.state.record(id)
            check_window(rec, vf, vu, where)
            r = self.state.row[id]
            moved: list[int] = []  # rows whose points change (none for metadata, times, validity)
            if e is not None:
                rec.text = rec.text if text is None else text
                self.state.set_embeddings(r, e)
                moved = self.placer.replace_subtree(id)
            if new_meta is not None:
                rec.meta = new_meta
            if t is not None:
                rec.t = t
                self.state.time[r] = to_seconds(t)
            if vf is not UNSET:
                rec.valid_from = vf
                self.state.valid_from[r] = to_seconds(vf, -math.inf)
            if vu is not UNSET:
                rec.valid_until = vu
                self.state.valid_until[r] = to_seconds(vu, math.inf)
            self.state.records.put(rec)  # a record is a copy: the table keeps the new fields
            self.state.changed(rows=moved)  # the search mirror and an index keep every other row

    def remove(self, id: str, cascade: bool = False) -> list[str]:
        """Remove a memory; with ``cascade`` its whole subtree.  Returns the removed ids."""
        return remove_memories(self.state, [id], cascade)

    def remove_many(self, ids: Iterable[str], cascade: bool = False) -> list[str]:
        """Remove several memories in one pass over the rows (a loop of :meth:`remove` moves the rows after
        each one); with ``cascade`` their subtrees too.  All ids are checked first (unknown: ``KeyError``;
        children neither named nor ``cascade``: ``ValueError``); nothing is removed on an error.  Returns the ids."""
        return remove_memories(self.state, list(ids), cascade)

    def link(self, child: str, parent: str | None) -> None:
        """Re-parent ``child`` under ``parent`` (``None``: make it a root) and re-place its subtree.  Refuses cycles."""
        with self.state.lock:
            rec = self.state.record(child)
            if parent is not None:
                self.state.row_of(parent)
                if parent == child:
                    raise ValueError(f"cannot link {child!r} under itself")
                if parent in set(self.descendants(child)):
                    raise ValueError(f"linking {child!r} under its descendant {parent!r} would make a cycle")
            if rec.parent_id == parent:
                return
            if rec.parent_id is not None:
                self.state.children[rec.parent_id].remove(child)
                if not self.state.children[rec.parent_id]:
                    del self.state.children[rec.parent_id]
            rec.parent_id = parent
            self.state.records.put(rec)
            if parent is not None:
                self.state.children.setdefault(parent, []).append(child)
            self.state.changed(rows=self.placer.replace_subtree(child))

    # ------------------------------------------------------------------ files
    def save(self, path: str | os.PathLike) -> None:
        """Write the memory to one SQLite file, atomically: a crash or an error in the middle leaves the
        previous file intact.  Metadata that JSON cannot hold exactly is refused (``ValueError``), and so
        is a ``.json``/``.csv``/``.html`` path (use :meth:`to_json`, :meth:`inspect`).  A new file's mode
        is ``0o666`` less the umask.  See :mod:`hypermem.store.persistence` for the format.

        >>> import os, tempfile
        >>> from hypermem import Memory
        >>> mem = Memory(); _ = mem.add("animals", id="a")
        >>> path = os.path.join(tempfile.mkdtemp(), "mem.db")
        >>> mem.save(path)
        >>> Memory.load(path).get("a").text
        'animals'
        """
        save_memory(self, path)

    @classmethod
    def load(cls: type[_M], path: str | os.PathLike, embedder: Embedder | None = None, decay: DecayPolicy | None = None,
             clock: Callable | None = None, device: str | torch.device | None = None,
             dtype: torch.dtype | None = None) -> _M:
        """Read a file written by :meth:`save` (or by ``poincare-memory`` 0.1.4), using the saved
        embeddings (nothing is re-embedded).  The hashing embedder and built-in decay policies are
        restored; pass ``embedder=`` / ``decay=`` for custom ones (a hierarchy encoder must be the one
        recorded: :mod:`hypermem.store.encoder_points`; a ``decay=`` replaces the saved policy).  Missing file: ``FileNotFoundError``; corrupt,
        truncated or other-version file: :class:`MemoryFileError`; dimension mismatch: ``ValueError``."""
        mem = load_memory(path, embedder=embedder, decay=decay, clock=clock, device=device, dtype=dtype, cls=cls)
        trim_after(mem.state.n)
        return mem

    def to_json(self, path: str | os.PathLike | None = None, indent: int | None = None) -> str:
        """Portable JSON (config, records, points, embeddings, directions, depths); the round trip through
        :meth:`from_json` is exact.  Returns the text; writes it if ``path``."""
        return memory_to_json(self, path=path, indent=indent)

    @classmethod
    def from_json(cls: type[_M], source: str | os.PathLike | Mapping, embedder: Embedder | None = None,
                  decay: DecayPolicy | None = None, clock: Callable | None = None,
                  device: str | torch.device | None = None, dtype: torch.dtype | None = None) -> _M:
        """Inverse of :meth:`to_json`: ``source`` is a path, the JSON text or the parsed dict."""
        mem = memory_from_json(source, embedder=embedder, decay=decay, clock=clock, device=device, dtype=dtype,
                               cls=cls)
        trim_after(mem.state.n)
        return mem

    # ------------------------------------------------------------------ looking
    def inspect(self, path: str | os.PathLike | None = None, open_browser: bool = False, title: str | None = None,
                layout: str = "auto", at_time: datetime | None = None, label: Callable[[Any], str] | None = None,
                future: timedelta | None = None, force: bool = False) -> str:
        """The self-contained offline inspector page (a hyperbolic browser of the Poincaré disk with focus
        + context, labels, time slider, table, tree, filter and search; see :mod:`hypermem.viz.html`).
        ``label`` maps a record to its short label (default: the meta keys ``label``, ``name``,
        ``lemma``, ``title``, else the text's first words); ``future`` lets the time slider run past now.
        Returns the HTML; writes it (atomically) when ``path`` is given (an existing file that is no
        inspector page needs ``force=True``; this store's own file is refused); ``open_browser`` opens it.
        The page is returned even with a ``path``, as poincare-memory's ``inspect`` does; in a REPL write
        ``_ = mem.inspect(path)`` to keep it from echoing the whole page.

        >>> from hypermem import Memory
        >>> mem = Memory(); _ = mem.add("animals")
        >>> mem.inspect().startswith("<!DOCTYPE html>")
        True
        """
        page = render_html(self, title=title, at_time=at_time, layout=layout, label=label, future=future)
        write_page(page, path, open_browser, own=getattr(self.storage, "path", None), force=force)
        return page

    def _repr_html_(self) -> str:
        """Jupyter shows the inspector inline (in a sandboxed iframe)."""
        return notebook_html(self)

    def plot(self, ax=None, labels: bool = False, at_time: datetime | None = None, layout: str = "auto", **more):
        """Matplotlib drawing in the Poincaré disk (the ``viz`` extra; ``max_labels=``...): :func:`hypermem.viz.plot`."""
        return plot(self, ax=ax, labels=labels, at_time=at_time, layout=layout, **more)

    # ------------------------------------------------------------------ durable storage
    _storage: Any = None

    @overload
    @classmethod
    def open(cls: type[_M], target: str | os.PathLike, read_only: bool = False, mirror: Literal[True] = True,
             **memory_kwargs: Any) -> _M: ...
    @overload
    @classmethod
    def open(cls, target: str, read_only: bool = False, *, mirror: Literal[False],
             **memory_kwargs: Any) -> ServerMemory: ...
    @overload
    @classmethod
    def open(cls: type[_M], target: str | os.PathLike, read_only: bool = False, mirror: bool = True,
             **memory_kwargs: Any) -> _M | ServerMemory: ...
    @classmethod
    def open(cls: type[_M], target: str | os.PathLike, read_only: bool = False, mirror: bool = True,
             **memory_kwargs: Any) -> _M | ServerMemory:
        """A memory bound to durable storage at ``target``: a file path (SQLite, WAL, write-through) or a
        ``postgresql://`` URL (PostgreSQL + pgvector).

        A new target is created with the ``Memory`` keyword arguments; an existing one is read back (its
        stored settings win; passing a different value is a ``ValueError``; custom embedders and decay
        policies must be passed again, a hierarchy encoder the recorded one).  ``read_only=True`` opens
        an existing target for reading only.  Storage options: ``vector_dtype="float32"`` stores
        embeddings as float32 (half the disk; reopened directions then differ from the writer's by
        float32 rounding), SQLite ``synchronous="FULL"`` (default; ``"NORMAL"`` survives a process kill
        but not a power cut).

        ``mirror=False`` (PostgreSQL only; a SQLite path is a ``ValueError``) returns a
        :class:`~hypermem.store.backends.server.ServerMemory` instead: no copy of the rows in the
        process (its RAM does not grow with the store), every call reads the server (other processes'
        writes are visible at once), searches run on the server; cone mode, the hyperbolic metric,
        callable filters and a ball encoder's store need the mirror.  See :mod:`hypermem.store.backends`."""
        return open_memory(cls, target, read_only=read_only, mirror=mirror, **memory_kwargs)

    @property
    def storage(self):
        """The storage this memory writes through to (``None`` for an in-process store)."""
        return self._storage

    def close(self) -> None:
        """Close the storage connection (a no-op for an in-process store).  Every call that
        returned is already committed; nothing is flushed here."""
        st = self._storage
        if st is not None:
            st.close()

    def __enter__(self: _M) -> _M:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
