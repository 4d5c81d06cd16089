r"""A PostgreSQL memory without an in-process mirror: ``Memory.open(url, mirror=False)``.

:class:`ServerMemory` keeps no per-memory state in the process: every call reads the rows
it needs from the server and writes what it changes in one transaction, so its RAM does
not grow with the store, and what other processes commit is visible at the next call.
It offers the ``Memory`` methods that need no row kept in the process (the others name
themselves: :mod:`.server_views`), with the in-process answers (scores to rounding):

* ``search`` / ``search_batch`` run on the server (:mod:`.pg_search`): exact with the
  certified early stop by default, ``ann=True`` the HNSW order re-scored in float64;
  ``touch=True`` (the default, as in process) adds the accesses with increments, without
  waiting for another client's write lock (:mod:`.server_touch`);
* ``add`` / ``add_many`` / ``update`` / ``link`` / ``remove`` read only the rows that
  placement needs (the parents, a subtree) and write them (:mod:`.server_writes`);
* navigation (``children``, ``ancestors``, ``descendants``...) is recursive SQL on the
  ``parent_id`` index; ``__iter__`` streams the records in insertion order, a page at a
  time (keyset on the ``seq`` index: no transaction stays open between pages).

What the server search does not do yet raises a ``ValueError`` naming the alternative
(the mirrored ``Memory.open(url)``): ``mode="cone"``, ``metric="hyperbolic"``, callable
filters, ``use_index``.  A connection lost before a call (a server restarted since the last
one) is opened again and the call runs; one lost during a call raises :class:`StorageError`; the next call
reconnects.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterable, Iterator, Mapping
from datetime import datetime
from typing import Any

import torch

from ...geometry import poincare as P
from ...temporal import policy_spec, uses_access_counts
from ...temporal.clock import from_seconds, to_seconds, to_utc
from ..add_hint import OneByOne
from ..checks import METRICS, MODES, UNSET, Batch, check_update, check_window, embedding_for_update
from ..heap import trim_after
from ..records import MemoryRecord, SearchResult
from ..search import Searcher
from . import server_touch as T
from . import server_writes as W
from .durable import DurableStore, StorageError, first_statement
from .pg_lexical import lexical_terms
from .pg_search import ann_settings, candidate_bounds, rank_by_bias, scan, where_clause
from .rows import record_of, vector_from
from .server_views import ServerViews
from .touches import LockBusy, PendingTouches

__all__ = ["ServerMemory"]

_M = "hypermem_memories"
_RECORD = ("id", "seq", "sib", "text", "parent_id", "t", "valid_from", "valid_until", "access_count",
           "last_accessed", "meta")
_MIRROR = "Memory.open(url) (with the in-process mirror)"
_SETTINGS = ("embedder", "ball", "decay", "base_depth", "depth_step", "inherit", "cone_constrained", "cone_k",
             "metric", "time_coef", "depth_bias", "clock", "dtype", "device")
_SEARCH_DEFAULTS = {"mode": "nearest", "root": None, "at_time": None, "filters": None, "metric": None,
                    "query_depth": None, "touch": True, "use_index": None, "oversample": 4, "valid_only": False,
                    "ann": False, "ef_search": 100, "stats": None, "hybrid": None}
PAGE = 1000
"""Records per page of ``__iter__``."""


class ServerMemory(ServerViews):
    """A memory whose rows live only in PostgreSQL (see the module docstring).  Made by
    ``Memory.open(url, mirror=False)`` from the validated settings of a ``Memory``."""

    def __init__(self, storage, settings, read_only: bool = False):
        for name in _SETTINGS:
            setattr(self, name, getattr(settings, name))
        self.hybrid = settings.hybrid  # the server's lexical term is its full-text rank (.pg_lexical)
        self._storage = storage
        self.read_only = read_only
        self.lock = storage.lock = threading.RLock()   # one lock: close() waits for a call in flight
        self._query = Searcher(self)  # its query side only: query directions and "now"
        self.one_by_one = OneByOne(commits=True)  # the run of single add() calls, each committed (store.add_hint)
        self._pending = PendingTouches()  # touches not written yet: the lock was busy (.touches)

    __getstate__ = DurableStore.__getstate__  # refused: the rows live in the database

    # ------------------------------------------------------------------ basics
    @property
    def dim(self) -> int:
        return int(self.embedder.dim)

    @property
    def curvature(self) -> float:
        return self.ball.curvature

    @property
    def storage(self):
        """The :class:`~hypermem.store.backends.postgres.PostgresStorage` this memory reads and writes."""
        return self._storage

    def __repr__(self) -> str:
        return (f"ServerMemory(dim={self.dim}, curvature={self.curvature:g}, metric={self.metric!r}, "
                f"decay={self.decay!r}, storage={self._storage!r})")

    def close(self) -> None:
        """Write the touches still pending (:mod:`.server_touch`), then close the connection; a
        call of another thread in flight ends first (the calls and close hold one lock)."""
        with self.lock:
            self._flush_touches()
            self._storage.close()

    def _flush_touches(self) -> None:
        T.flush(self)

    def __enter__(self):
        if self._storage.closed:
            raise StorageError("this memory's storage is closed")
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def refresh(self) -> bool:
        """Nothing to re-read: every call reads the server.  Returns False."""
        return False

    @contextlib.contextmanager
    def _read(self):
        """One read transaction (one snapshot), ended when the block ends."""
        with self.lock:
            st = self._storage
            try:
                con = first_statement(st, lambda: st.con.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
                                      .connection)
                yield con
            except st.db_errors as exc:
                st.rollback()
                raise st.error(exc) from exc
            finally:
                st.rollback()

    @contextlib.contextmanager
    def _write(self, what: str, wait: bool = True):
        """One write transaction under the storage's write lock, which first writes the pending
        touches; the version counter (which mirrored clients compare) goes up unless the block
        sets ``tx["changed"] = False``.  ``wait=False``: :class:`LockBusy` when the lock is held."""
        if self.read_only:
            raise StorageError(f"{what}: this memory was opened read_only=True")
        with self.lock:
            st = self._storage
            tx = {"changed": True}
            try:
                # SELECT ... FOR UPDATE [NOWAIT]: writers from every client take turns
                first_statement(st, lambda: (st.begin(), st.version(wait)))
                flushed = T.flush_pending(self, st)
                yield st, tx
                if tx["changed"] or flushed:
                    st.bump()
                st.commit()
                self._pending.clear()
            except BaseException as exc:  # Ctrl-C too: the transaction (FOR UPDATE lock) is not left open
                st.rollback()
                if not wait and isinstance(exc, st.db_errors) and st.busy(exc):
                    raise LockBusy(what) from exc
                if isinstance(exc, st.db_errors):
                    raise st.error(exc) from exc
                raise

    def _row(self, con, id: Any, cols: tuple[str, ...] = _RECORD) -> dict[str, Any]:
        row = con.execute(f"SELECT {', '.join(cols)} FROM {_M} WHERE id = %s", (id,)).fetchone() \
            if isinstance(id, str) else None
        if row is None:
            raise KeyError(f"unknown memory id {id!r}")
        return dict(zip(cols, row))

    # ------------------------------------------------------------------ records
    def __len__(self) -> int:
        with self._read() as con:
            return int(con.execute(f"SELECT count(*) FROM {_M}").fetchone()[0])

    def __contains__(self, id: object) -> bool:
        if not isinstance(id, str):
            return False
        with self._read() as con:
            return con.execute(f"SELECT 1 FROM {_M} WHERE id = %s", (id,)).fetchone() is not None

    def __iter__(self) -> Iterator[MemoryRecord]:
        last: tuple | None = None
        cols = ", ".join(_RECORD)
        while True:
            with self._read() as con:
                if last is None:
                    page = con.execute(f"SELECT {cols} FROM {_M} ORDER BY seq, id LIMIT {PAGE}").fetchall()
                else:
                    page = con.execute(f"SELECT {cols} FROM {_M} WHERE (seq, id) > (%s, %s) ORDER BY seq, id "
                                       f"LIMIT {PAGE}", last).fetchall()
            for r in page:
                yield record_of(dict(zip(_RECORD, r)))
            if len(page) < PAGE:
                return
            last = (page[-1][1], page[-1][0])

    @property
    def ids(self) -> list[str]:
        """Every id in insertion order (read from the server)."""
        with self._read() as con:
            return [r[0] for r in con.execute(f"SELECT id FROM {_M} ORDER BY seq, id")]

    def get(self, id: str) -> MemoryRecord:
        """The record of ``id`` (``KeyError`` if unknown)."""
        with self._read() as con:
            return record_of(self._row(con, id))

    # ------------------------------------------------------------------ navigation
    def parent(self, id: str) -> str | None:
        with self._read() as con:
            return self._row(con, id, ("parent_id",))["parent_id"]

    def _children(self, con, id: str) -> list[str]:
        return [r[0] for r in con.execute(f"SELECT id FROM {_M} WHERE parent_id = %s ORDER BY sib, seq", (id,))]

    def children(self, id: str) -> list[str]:
        with self._read() as con:
            self._row(con, id, ("id",))
            return self._children(con, id)

    def _ancestors(self, con, id: str) -> list[str]:
        chain = W.subtree_up(con, id) if isinstance(id, str) else []
        if not chain:
            raise KeyError(f"unknown memory id {id!r}")
        return chain[1:]

    def ancestors(self, id: str) -> list[str]:
        """Ancestors from the parent up to the root."""
        with self._read() as con:
            return self._ancestors(con, id)

    def descendants(self, id: str) -> list[str]:
        """All descendants, breadth first."""
        with self._read() as con:
            order = W.subtree(con, id) if isinstance(id, str) else []
            if not order:
                raise KeyError(f"unknown memory id {id!r}")
            return [i for i, _ in order[1:]]

    def siblings(self, id: str) -> list[str]:
        with self._read() as con:
            p = self._row(con, id, ("parent_id",))["parent_id"]
            pool = self._children(con, p) if p is not None else self._roots(con)
            return [i for i in pool if i != id]

    def _roots(self, con) -> list[str]:
        return [r[0] for r in con.execute(f"SELECT id FROM {_M} WHERE parent_id IS NULL ORDER BY seq, id")]

    def roots(self) -> list[str]:
        with self._read() as con:
            return self._roots(con)

    def level(self, id: str) -> int:
        with self._read() as con:
            return len(self._ancestors(con, id))

    def depth(self, id: str) -> float:
        """Hyperbolic distance of ``id``'s point from the origin."""
        with self._read() as con:
            return float(self._row(con, id, ("depth",))["depth"])

    def point(self, id: str) -> torch.Tensor:
        """The point ``(dim,)`` of ``id`` (store dtype)."""
        with self._read() as con:
            r = self._row(con, id, ("direction", "depth"))
        u = vector_from(r["direction"], self.dim, "direction", id).to(self.dtype)
        return P.point_at(u, torch.tensor(r["depth"], dtype=self.dtype), self.curvature)

    def embedding(self, id: str) -> torch.Tensor:
        """The raw embedding of ``id`` (float64)."""
        with self._read() as con:
            return vector_from(self._row(con, id, ("embedding",))["embedding"], self.dim, "embedding", id)

    def stats(self, at_time: datetime | None = None) -> dict[str, Any]:
        """Summary numbers, as ``Memory.stats`` (computed by the server and a streamed pass
        over the time columns for the mean weight); at an explicit ``at_time`` of the rows
        recorded by then (``t <= at_time``, as search: :mod:`hypermem.store.as_of`)."""
        now = self._query.now(at_time)
        t_max = None if at_time is None else now
        where, params = W.recorded_by(t_max)
        with self._read() as con:
            n, roots, dmin, dmax, tmin, tmax, acc = con.execute(
                f"SELECT count(*), count(*) FILTER (WHERE parent_id IS NULL), min(depth), max(depth), min(t), max(t), "
                f"coalesce(sum(access_count), 0) FROM {_M}{where}", params).fetchone()
            hist = W.level_histogram(con, t_max) if n else {}
            mean_w = W.mean_weight(con, self.decay, now, n, t_max) if n else None
        return {"count": int(n), "roots": int(roots), "max_level": max(hist, default=0), "levels": hist,
                "dim": self.dim, "curvature": self.curvature, "metric": self.metric, "decay": policy_spec(self.decay),
                "depth_min": None if not n else float(dmin), "depth_max": None if not n else float(dmax),
                "oldest": from_seconds(to_seconds(tmin)).isoformat() if n else None,
                "newest": from_seconds(to_seconds(tmax)).isoformat() if n else None,
                "mean_time_weight": mean_w, "accesses": int(acc),
                "dtype": str(self.dtype).replace("torch.", ""), "device": str(self.device)}

    # ------------------------------------------------------------------ searching
    def search(self, query: Any = None, k: int = 5, mode: str = "nearest", root: str | None = None,
               at_time: datetime | None = None, filters: Mapping[str, Any] | None = None, metric: str | None = None,
               query_depth: float | None = None, touch: bool = True, use_index: bool | None = None,
               oversample: int = 4, valid_only: bool = False, ann: bool = False, ef_search: int = 100,
               stats: dict | None = None, hybrid: float | None = None) -> list[SearchResult]:
        """``Memory.search``, run by the server: exact (certified early stop) or ``ann=True``
        (HNSW, ``ef_search``, ``k * oversample`` first candidates, re-scored exactly);
        ``stats`` receives ``rows_read``.  Cone mode, the hyperbolic metric, callable
        filters and ``use_index`` raise a ``ValueError`` (they run in process)."""
        opts = dict(mode=mode, root=root, at_time=at_time, filters=filters, metric=metric, query_depth=query_depth,
                    touch=touch, use_index=use_index, oversample=oversample, valid_only=valid_only, ann=ann,
                    ef_search=ef_search, stats=stats, hybrid=hybrid)
        return self._run([query], k, opts, allow_none=True)[0]

    def search_batch(self, queries: Iterable[Any], k: int = 5, **kwargs: Any) -> list[list[SearchResult]]:
        """:meth:`search` for many queries (one embedding call, one snapshot, one touch)."""
        if isinstance(queries, str):
            raise TypeError("search_batch takes a list of queries, got a single string")
        queries = list(queries)
        unknown = set(kwargs) - set(_SEARCH_DEFAULTS)
        if unknown:
            raise TypeError(f"search_batch got unexpected keyword arguments {sorted(unknown)}")
        if not queries:
            return []
        if kwargs.get("touch", True) and uses_access_counts(self.decay):
            return [self.search(q, k=k, **kwargs) for q in queries]  # each search's touches feed the next
        opts = {**_SEARCH_DEFAULTS, **kwargs}
        return self._run(queries, k, opts, allow_none=False)

    def _check(self, k, opts) -> None:
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise ValueError(f"k must be an integer >= 1, got {k!r}")
        mode, metric, filters = opts["mode"], opts["metric"] or self.metric, opts["filters"]
        if mode not in MODES:
            raise ValueError(f"unknown mode {mode!r}; choose one of {MODES}")
        if mode == "cone":
            raise ValueError(f"mode='cone' runs in process: open the store with {_MIRROR}")
        if metric not in METRICS:
            raise ValueError(f"unknown metric {metric!r}; choose one of {METRICS}")
        if metric != "shell":
            raise ValueError(f"the server search ranks with metric='shell'; metric={metric!r} runs in process: {_MIRROR}")
        if filters is not None and not isinstance(filters, Mapping):
            if callable(filters):
                raise ValueError(f"the server search takes a metadata dict as filters; a callable runs in process: "
                                 f"{_MIRROR}")
            raise TypeError(f"filters must be a dict or a callable, got {type(filters).__name__}")
        if opts["use_index"]:
            raise ValueError("the server client has no in-process index: pass ann=True for the server's HNSW index")
        hybrid = opts["hybrid"]
        if hybrid is not None and (isinstance(hybrid, bool) or not isinstance(hybrid, (int, float)) or
                                   not 0 <= hybrid < float("inf")):
            raise ValueError(f"hybrid must be a finite number >= 0, got {hybrid!r}")
        over = opts["oversample"]
        if isinstance(over, bool) or not isinstance(over, int) or over < 1:
            raise ValueError(f"oversample must be an integer >= 1, got {over!r}")

    def _run(self, queries: list, k: int, opts: dict, allow_none: bool) -> list[list[SearchResult]]:
        self._check(k, opts)
        mode, root, at_time, filters = opts["mode"], opts["root"], opts["at_time"], opts["filters"]
        no_query = allow_none and queries[0] is None
        if no_query and mode == "nearest":
            raise ValueError("mode='nearest' needs a query; omit the query only with a structural mode")
        Q = None if no_query else self._query.query_directions(queries, opts["query_depth"])[0]
        empty = [[] for _ in queries]
        with self._read() as con:
            if con.execute(f"SELECT NOT EXISTS (SELECT 1 FROM {_M})").fetchone()[0]:
                if root is not None and mode != "nearest":
                    self._row(con, root, ("id",))
                return empty
            if mode != "nearest":
                self._row(con, root, ("id",))
            valid_at = self._query.now(at_time) if opts["valid_only"] else None
            where, params = where_clause(mode, root, None if at_time is None else to_utc(at_time), valid_at, filters)
            if opts["ann"]:
                ann_settings(con, opts["ef_search"])
            bounds = candidate_bounds(con, where, params)
            now = to_seconds(self._query.now(at_time))
            if bounds is None:
                results = empty
            elif no_query:
                results = [rank_by_bias(con, self, k, now, where, params, filters)]
            else:
                results, read = [], 0
                weight = self.hybrid if opts["hybrid"] is None else float(opts["hybrid"])
                for text, q in zip(queries, Q.to("cpu", torch.float64)):
                    one: dict = {}
                    lexical = lexical_terms(con, text, weight, where, params) if weight and isinstance(text, str) \
                        else None
                    results.append(scan(con, self, q, k, now, bounds, where, params, filters, opts["ann"],
                                        opts["oversample"], one, lexical))
                    read += one.get("rows_read", 0)
                if opts["stats"] is not None:
                    opts["stats"]["rows_read"] = read
            if filters and not any(results):
                self._query.warn_unknown_keys(filters, lambda key: con.execute(
                    f"SELECT EXISTS (SELECT 1 FROM {_M} WHERE meta ? %s)", (key,)).fetchone()[0])
        if opts["touch"]:
            self._touch_results(results)
        return results

    def _touch_results(self, results: list[list[SearchResult]]) -> None:
        T.touch_results(self, results)

    def touch(self, ids: Iterable[str]) -> None:
        """Count one access now (the clock's) of each id in ``ids`` (a repeated id counts each time)."""
        T.touch_ids(self, ids)

    # ------------------------------------------------------------------ changing
    def add(self, text: str, parent: str | None = None, t: datetime | None = None, id: str | None = None,
            meta: Mapping[str, Any] | None = None, valid_from: datetime | None = None,
            valid_until: datetime | None = None) -> str:
        """Store a memory; returns its id (``Memory.add``; many: :meth:`add_many`, one transaction)."""
        item = {"text": text, "parent": parent, "t": t, "id": id, "meta": meta, "valid_from": valid_from,
                "valid_until": valid_until}
        start = self.one_by_one.start()  # a hint due is given before this add writes
        new = self._add_many([item], single=True)[0]
        self.one_by_one.record(start, OneByOne.clock(), self.embedder)
        return new

    def add_many(self, items: Iterable[Mapping[str, Any]]) -> list[str]:
        """Store many memories in one transaction (``Memory.add_many``: ``embedding=`` and
        ``point=`` items too); all or nothing."""
        ids = self._add_many(items)
        trim_after(len(ids))  # the batch's temporaries back to the OS (hypermem.store.heap)
        return ids

    def _add_many(self, items, single: bool = False) -> list[str]:
        batch = Batch.check(list(items), self.dim, self.ball, single)
        if not batch.texts:
            return []
        emb, _ = batch.embed(self.embedder, self.dim)
        with self._write("add") as (st, _):
            return W.insert(self, st, batch, emb)

    def update(self, id: str, text: str | None = None, meta: Mapping[str, Any] | None = None,
               t: datetime | None = None, valid_from: Any = UNSET, valid_until: Any = UNSET,
               embedding: Any = None) -> None:
        """``Memory.update``: new text (or ``embedding``) re-embeds the memory and re-places its subtree."""
        self.get(id)
        where, new_meta, t, vf, vu = check_update(id, text, meta, t, valid_from, valid_until)
        e = embedding_for_update(self.embedder, self.dim, text, embedding, where)
        with self._write("update") as (st, _):
            rec = record_of(self._row(st.con, id))
            check_window(rec, vf, vu, where)
            if e is not None:
                new = {"embedding": W.embedding_bytes(e, st)} | ({} if text is None else {"text": text})
                W.replace_subtree(self, st, id, new)
            fields: dict[str, Any] = {} if new_meta is None else {"meta": new_meta}
            if t is not None:
                fields["t"] = t
            if vf is not UNSET:
                fields["valid_from"] = vf
            if vu is not UNSET:
                fields["valid_until"] = vu
            W.update_fields(st, id, fields)

    def remove(self, id: str, cascade: bool = False) -> list[str]:
        """Remove a memory; with ``cascade`` its whole subtree.  Returns the removed ids."""
        return self.remove_many([id], cascade=cascade)

    def remove_many(self, ids, cascade: bool = False) -> list[str]:
        """Remove several memories in one transaction (:meth:`Memory.remove_many`'s checks)."""
        ids = list(ids)
        with self._write("remove") as (st, _):
            trees = {i: W.subtree(st.con, i) if isinstance(i, str) else [] for i in ids}
            for i in ids:
                if not trees[i]:
                    raise KeyError(f"unknown memory id {i!r}")
                kids = [c for c, g in trees[i] if g == 1]
                if kids and not cascade and not set(kids) <= trees.keys():
                    raise ValueError(f"{i!r} has {len(kids)} children; pass cascade=True to remove the subtree")
            gone = list(dict.fromkeys(c for i in ids for c, _ in (trees[i] if cascade else trees[i][:1])))
            st.delete(gone)
            return gone

    def link(self, child: str, parent: str | None) -> None:
        """Re-parent ``child`` under ``parent`` (``None``: a root) and re-place its subtree."""
        with self._write("link") as (st, tx):
            rec = self._row(st.con, child, ("id", "parent_id"))
            if parent is not None:
                up = W.subtree_up(st.con, parent) if isinstance(parent, str) else []
                if not up:
                    raise KeyError(f"unknown memory id {parent!r}")
                if parent == child:
                    raise ValueError(f"cannot link {child!r} under itself")
                if child in up:
                    raise ValueError(f"linking {child!r} under its descendant {parent!r} would make a cycle")
            if rec["parent_id"] == parent:
                tx["changed"] = False
                return
            W.replace_subtree(self, st, child, {"parent_id": parent, "sib": W.next_counter(st.con)})

