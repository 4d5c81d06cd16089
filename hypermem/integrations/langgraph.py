"""LangGraph adapter: :class:`HypermemStore`, a ``langgraph`` ``BaseStore`` (long-term memory
across threads) over a :class:`~hypermem.store.Memory`.

Install with ``pip install "hypermem-torch[langgraph]"``.  Example::

    from hypermem.integrations.langgraph import HypermemStore
    store = HypermemStore()
    store.put(("users", "alice", "prefs"), "food", {"text": "likes spicy ramen"})
    store.search(("users", "alice"), query="what does alice eat?", limit=3)

**Namespaces are the hierarchy.**  A namespace ``(a, b, c)`` is a parent chain of
memories ``a -> a.b -> a.b.c`` (ids ``ns:a``, ``ns:a.b``, ``ns:a.b.c``; their texts are the
paths ``a/b/c``) and its items are children of its last node, so a namespace-prefix search
is a ``subtree`` search of :meth:`Memory.search`, and items sit near their namespaces in
the ball.  Namespace nodes without items are removed with their last item.

**TTL is the validity window.**  ``put(..., ttl=minutes)`` sets the item's ``valid_until``
to ``now + ttl`` (``now`` from the memory's clock); ``put`` without ``ttl`` takes ``default_ttl``, and
``ttl=None`` (also a raw ``PutOp``'s) means no expiry.  Reads refresh it when ``refresh_ttl``, except on
a memory opened ``read_only=True``.
An item whose window has ended is gone for every read, before :meth:`HypermemStore.sweep_ttl`
removes it: call it, or let the sweeper thread do it (``TTLConfig``'s ``sweep_interval_minutes``
starts it; :meth:`HypermemStore.start_ttl_sweeper` / ``stop_ttl_sweeper`` as in LangGraph's stores;
:meth:`HypermemStore.close` stops it).

**Search.**  With a ``query``, items are ranked by hypermem's score (``-distance +
time_coef * log(time_weight) + ...``: the memory's decay policy applies) and
``SearchItem.score`` is ``min(1, exp(score))``; items put with ``index=False`` follow
unscored.  Without a query, the most recently updated come first.  The text of an item
is its ``index`` fields (``index={"fields": [...]}``, default the whole value as JSON).
``filter`` matches the item's value with LangGraph's operators (``$eq``, ``$ne``, ``$gt``,
``$gte``, ``$lt``, ``$lte``) and hypermem's others (see
:func:`~hypermem.integrations._common.compile_filter`); as in LangGraph, a list value is
compared for equality (in :meth:`Memory.search` it means ``$in``).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import copy
import json
import threading
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

try:
    from langgraph.store.base import (
        BaseStore,
        GetOp,
        IndexConfig,
        InvalidNamespaceError,
        Item,
        ListNamespacesOp,
        MatchCondition,
        Op,
        PutOp,
        Result,
        SearchItem,
        SearchOp,
        TTLConfig,
    )
    from langgraph.store.base import validate_op_namespace as _validate_labels
    from langgraph.store.base.embed import ensure_embeddings, get_text_at_path, tokenize_path
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError("hypermem.integrations.langgraph needs langgraph-checkpoint: "
                      "pip install 'hypermem-torch[langgraph]'") from exc

import torch

from ..store import Memory, MemoryRecord
from ..store.filters import check_filter
from . import _async_embed as AE
from . import _common as C
from . import _langgraph_writes as W
from . import _record_filters as RF
from . import _ttl_sweeper as TS
from . import _upserts as U
from ._langgraph_writes import ttl_until as _ttl_until
from .langchain import LangChainEmbedder

_KIND = "langgraph"


def namespace_id(namespace: tuple[str, ...]) -> str:
    """Memory id of a namespace node (labels cannot contain ``.``, so the join is unambiguous)."""
    return "ns:" + ".".join(namespace)


def item_id(namespace: tuple[str, ...], key: str) -> str:
    """Memory id of an item."""
    return "item:" + json.dumps([list(namespace), key], ensure_ascii=False)


def _value_field(rec: MemoryRecord, key: str) -> Any:
    return rec.meta["value"].get(key, C.MISSING)


def _is_item(rec: MemoryRecord) -> bool:
    return rec.meta.get(_KIND) == "item"


def _now(memory: Memory) -> datetime:
    """The memory's clock's time (aware UTC); a ``TypeError`` naming the clock unless it is a datetime."""
    now = memory.clock()
    if not isinstance(now, datetime):
        raise TypeError(f"the memory's clock must return a datetime, got {type(now).__name__} ({now!r:.40}): for a "
                        f"clock of POSIX seconds, clock=lambda: datetime.fromtimestamp(seconds(), timezone.utc)")
    return C.to_time(now)


def _matches_path(cond: MatchCondition, ns: tuple[str, ...]) -> bool:
    path = tuple(cond.path)
    if len(ns) < len(path):
        return False
    if cond.match_type == "prefix":
        part = ns[: len(path)]
    elif cond.match_type == "suffix":
        part = ns[len(ns) - len(path):]
    else:
        raise ValueError(f"unknown namespace match type {cond.match_type!r}; use 'prefix' or 'suffix'")
    return all(p == "*" or p == n for p, n in zip(path, part))


class HypermemStore(BaseStore):
    """A LangGraph ``BaseStore`` backed by a hypermem :class:`~hypermem.store.Memory`.

    Parameters
    ----------
    memory: a ``Memory`` (``Memory.open("agent.db")`` for a durable store, written through on
        every call), the path of a snapshot file (:meth:`Memory.save`, or ``.json``; loaded, or
        a new in-process memory that :meth:`save` writes there), or ``None`` (a new memory).
        A snapshot belongs to one process: two that load it each :meth:`save` their own copy
        over the file, and the later save loses the other's writes; agents that share a store
        give ``Memory.open(path)`` (durable, shared, nothing to save).
    index: LangGraph's ``IndexConfig``: ``embed`` (LangChain ``Embeddings`` or a function of
        texts) becomes a new memory's embedder (``dims`` its dimension); ``fields`` choose the
        text of each item.  Without ``embed`` the memory's own embedder is used.
    ttl: LangGraph's ``TTLConfig`` (``default_ttl`` in minutes, ``refresh_on_read``;
        ``sweep_interval_minutes`` starts :meth:`start_ttl_sweeper`, unless the memory is read-only).
    search_mode: ``"nearest"`` (default) or ``"ancestors"``: a search with a ``query`` returns the
        items that subsume the query, ranked by the store's hierarchy encoder (``Memory.search(query,
        mode="ancestors")`` without a root, :mod:`hypermem.store.suggest`), inside the namespace prefix.
        Like every search of this store it returns LangGraph items only (those ``put`` through
        it): memories added to the ``Memory`` directly are candidates of no search here.
    memory_kwargs: ``Memory`` arguments for a new memory (``decay``, ``clock``, ...).
    """

    supports_ttl: bool = True

    def __init__(self, memory: Memory | str | None = None, *, index: IndexConfig | None = None,
                 ttl: TTLConfig | None = None, search_mode: str = "nearest", **memory_kwargs: Any):
        if search_mode not in ("nearest", "ancestors"):
            raise ValueError(f"search_mode must be 'nearest' or 'ancestors', got {search_mode!r}")
        self.search_mode = search_mode
        index = dict(index or {})
        embedder = memory_kwargs.pop("embedder", None)
        if index.get("embed") is not None:
            if isinstance(memory, Memory) or embedder is not None:
                raise ValueError("pass either index={'embed': ...} or memory=<Memory> / embedder=, not both")
            embedder = LangChainEmbedder(ensure_embeddings(index["embed"]), dim=index.get("dims"))
        self.path = None if memory is None or isinstance(memory, Memory) else memory
        self.memory = C.open_memory(memory, embedder, name="HypermemStore (LangGraph)", **memory_kwargs)
        self.index_config = index
        self._fields = [(f, f if f == "$" else tokenize_path(f)) for f in (index.get("fields") or ["$"])]
        interval = None
        if ttl is not None:
            _ttl_until(ttl.get("default_ttl"))
            interval = TS.check_interval(ttl.get("sweep_interval_minutes"))
        self.ttl_config = ttl
        self._lock = threading.RLock()
        self._order = W.WriteOrder()   # writes applied in the order of their calls
        self._queries: dict[int, Any] = {}
        self._sweeper = TS.TTLSweeper(self.sweep_ttl, lambda: bool(getattr(self.memory.storage, "closed", False)))
        if interval is not None and not C.read_only(self.memory):   # a read-only handle removes nothing
            self.start_ttl_sweeper()

    # ------------------------------------------------------------------ batch
    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """Run the operations: reads see the store as it was before the batch, then the
        writes are applied (the last write of a key wins).  Texts are embedded before the
        store's lock is taken, and writes are applied in the order of their calls
        (:mod:`hypermem.integrations._langgraph_writes`)."""
        return self._batch(list(ops), None)

    def _batch(self, ops: list[Op], turn: W.Turn | None) -> list[Result]:
        if turn is not None and not turn.claim():
            raise asyncio.CancelledError()   # its abatch was cancelled before this worker started
        try:
            for op in ops:
                _validate_labels(op)
                if isinstance(op, PutOp) and not op.namespace:
                    raise InvalidNamespaceError("Namespace cannot be empty.")
            writes = [op for op in ops if isinstance(op, PutOp)]
            mem = self.memory
            if isinstance(mem.embedder, LangChainEmbedder) and (
                    any(op.value is not None for op in writes) or any(isinstance(op, SearchOp) and op.query for op in ops)):
                mem.embedder.check_sync()   # async-only embeddings: refused before the lock, not deadlocked
            if writes and turn is None:
                W.check_wait(self._order, mem.embedder)
            if writes and C.read_only(mem):  # before any read: the batch does nothing
                from ..store.backends.durable import StorageError

                verb = "delete" if all(op.value is None for op in writes) else "put"
                raise StorageError(f"{verb}: this store's memory was opened read_only=True: it answers get, search and "
                                   f"list_namespaces only; open it without read_only to write")
            queries = {id(op): mem.embedder.embed_query(op.query) for op in ops  # outside the lock, as the writes
                       if isinstance(op, SearchOp) and op.query and isinstance(mem.embedder, LangChainEmbedder)}
            if writes and turn is None:
                turn = self._order.take()
            return self._run(ops, writes, queries, turn)
        finally:
            if turn is not None:
                turn.finish()

    def _run(self, ops: list[Op], writes: list[PutOp], queries: dict, turn: W.Turn | None) -> list[Result]:
        mem, vectors = self.memory, {}
        puts = {(tuple(op.namespace), op.key): op for op in writes}   # the last write of a key wins
        values = [op for op in puts.values() if op.value is not None]
        W.check_puts(values, _now(mem))   # a bad value refused before anything is embedded
        texts = W.texts(values, namespace_id, item_id, self._text)
        for attempt in range(U.TRIES):
            vectors.update(W.embed(mem, W.wanted(mem, texts, vectors)))   # without the store's lock
            if turn is not None:
                turn.wait()   # the writes called before this one are applied first
            with self._lock:
                if (cancel := AE.CANCEL.get()) is not None and cancel.cancelled:
                    raise asyncio.CancelledError()   # cancelled before it was applied: nothing is written
                mem.refresh()  # what other handles committed (a no-op in process)
                self._queries = queries   # the query embeddings of this batch's searches (read under the lock)
                if attempt + 1 < U.TRIES and W.wanted(mem, texts, vectors):
                    continue   # a namespace removed meanwhile: its text is embedded outside the lock
                now = _now(mem)
                results: list[Result] = []
                for op in ops:
                    if isinstance(op, GetOp):
                        results.append(self._get(op, now))
                    elif isinstance(op, SearchOp):
                        results.append(self._search(op, now))
                    elif isinstance(op, ListNamespacesOp):
                        results.append(self._list_namespaces(op, now))
                    elif isinstance(op, PutOp):
                        results.append(None)
                    else:
                        raise TypeError(f"unknown store operation {type(op).__name__}")
                if puts:
                    self._apply_puts(list(puts.values()), now, vectors)
                return results
        raise AssertionError("unreachable: the last attempt applies")  # pragma: no cover

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        """:meth:`batch` in a worker thread; async-only embeddings are awaited on this loop
        (:mod:`hypermem.integrations._async_embed`).  A write cancelled before it is applied
        (while its texts are embedded, or it waits for earlier writes) is not applied."""
        ops = list(ops)
        turn = self._order.take() if any(isinstance(op, PutOp) for op in ops) else None  # its place: this call
        cancel = AE.Cancel()
        loop_token, cancel_token = AE.CALLER_LOOP.set(asyncio.get_running_loop()), AE.CANCEL.set(cancel)
        try:
            return await asyncio.to_thread(self._batch, ops, turn)   # the worker sees both (a copied context)
        except asyncio.CancelledError:
            cancel.cancel()
            raise
        finally:
            if turn is not None:
                turn.drop()   # a worker that never started leaves its place
            AE.CANCEL.reset(cancel_token)
            AE.CALLER_LOOP.reset(loop_token)

    # ------------------------------------------------------------------ reads
    def _live(self, rec: MemoryRecord, now: datetime) -> bool:
        return rec.valid_until is None or rec.valid_until > now

    def _item(self, rec: MemoryRecord, score: float | None = None, search: bool = False) -> Item:
        m = rec.meta
        fields = dict(value=copy.deepcopy(m["value"]), key=m["key"], namespace=tuple(m["namespace"]),
                      created_at=C.to_time(m["created_at"]), updated_at=rec.t)
        return SearchItem(score=score, **fields) if search else Item(**fields)

    def _refresh(self, recs: list[MemoryRecord], refresh: bool, now: datetime) -> None:
        if not refresh or C.read_only(self.memory):  # a read-only handle reads, and refreshes no TTL
            return
        for r in recs:
            if r.meta.get("ttl") is not None:
                try:
                    self.memory.update(r.id, valid_until=_ttl_until(r.meta["ttl"], now, clamp=True))
                except KeyError:
                    if r.id in self.memory:
                        raise   # removed by another process since it was read: no ttl to refresh

    def _get(self, op: GetOp, now: datetime) -> Item | None:
        rec = U.get_or_none(self.memory, item_id(tuple(op.namespace), op.key))  # None: removed meanwhile too
        if rec is None or not self._live(rec, now):
            return None
        self._refresh([rec], op.refresh_ttl, now)
        return self._item(rec)

    def _search(self, op: SearchOp, now: datetime) -> list[SearchItem]:
        mem, prefix = self.memory, tuple(op.namespace_prefix)
        if op.limit < 0 or op.offset < 0:
            raise ValueError(f"search needs limit >= 0 and offset >= 0, got limit={op.limit}, offset={op.offset}")
        if op.limit == 0:   # as LangGraph's InMemoryStore: an empty page
            return []
        root = namespace_id(prefix) if prefix else None
        if root is not None and root not in mem:
            return []
        values, user = C.lists_as_values(op.filter), None
        if values is not None and not isinstance(values, Mapping):
            user = C.compile_filter(values, _value_field, times=())  # a predicate on the record (or the store's error)
            values = None
        elif values is not None:
            check_filter(values)
        try:
            page = self._page(op, now, root, values, user)
        except KeyError:
            if root is None or root in mem:
                raise
            return []   # another process removed the namespace (its last item) since the check above
        self._refresh([r for r, _ in page], op.refresh_ttl, now)
        # the records as the search saw them where another process removed one since
        return [self._item(U.get_or_none(mem, r.id) or r, s, search=True) for r, s in page]

    def _page(self, op: SearchOp, now: datetime, root: str | None, values: Mapping | None,
              user: Any) -> list[tuple[MemoryRecord, float | None]]:
        """The records of the page ``op`` asks for, with their relevance (``None``: unscored); the
        query's embedding from ``_queries`` (LangChain embeddings: computed before the store's lock)."""
        mem, want = self.memory, op.offset + op.limit
        if op.query:
            qv = self._queries.get(id(op))
            q, vector = (op.query, False) if qv is None else (qv, True)
            if self.search_mode == "ancestors":  # the prefix is a filter, not the root of the ranking
                inside = None if root is None else mem.descendants(root)
                hits = C.search(mem, q, want, self._where(values, user, now, True, inside), vector=vector,
                                mode="ancestors")
            else:
                hits = C.search(mem, q, want, self._where(values, user, now, True), vector=vector,
                                mode="nearest" if root is None else "subtree", root=root)
            scored: list[tuple[MemoryRecord, float | None]] = [(h.record, C.relevance(h.score)) for h in hits]
            page = scored[op.offset: want]
            if len(scored) < want:  # unindexed items follow, unscored (the records of the page's alone)
                page += [(r, None) for r in self._pool(values, user, now, root, False,
                                                       max(0, op.offset - len(scored)), want - len(scored))]
        else:
            page = [(r, None) for r in self._pool(values, user, now, root, None, op.offset, want, newest=True)]
        return page

    def _where(self, values: Mapping | None, user: Any, now: datetime, indexed: bool | None, ids: Any = None) -> Any:
        """The search filter of the live items whose value passes ``values`` (the store's
        columns, :func:`~hypermem.integrations._record_filters.item_filter`), and ``user`` (a
        predicate on the record, run on those alone)."""
        f = RF.item_filter(values, now, indexed, ids)
        if user is None:
            return f
        mem = self.memory
        with mem.state.lock:
            keep = {mem.state.ids[r] for r in RF.kept_rows(mem, f).tolist()}
        return lambda r: r.id in keep and user(r)

    def _pool(self, values: Mapping | None, user: Any, now: datetime, root: str | None, indexed: bool | None,
              start: int, stop: int, newest: bool = False) -> list[MemoryRecord]:
        """The live items ``start`` to ``stop`` (the records of those alone) of those that pass, in
        the store's order (under ``root``: its descendants' order), or ``newest`` first (by ``t``;
        ties in that order)."""
        mem = self.memory
        st = mem.state
        with st.lock:
            f = RF.item_filter(values, now, indexed)
            rows = RF.kept_rows(mem, f, None if root is None else mem.descendants(root))
            if user is not None:
                rows = torch.tensor([r for r, rec in zip(rows.tolist(), st.records.at_rows(rows.tolist())) if user(rec)],
                                    dtype=torch.long)
            if newest:
                rows = RF.newest_first(st, rows)
            return st.records.at_rows(rows[start:stop].tolist())

    def _list_namespaces(self, op: ListNamespacesOp, now: datetime) -> list[tuple[str, ...]]:
        """The namespaces of the live items: the distinct values of their metadata ``namespace``
        (a list of labels: lists that no filter tells apart are equal), from the store's columns
        (:func:`~hypermem.integrations._record_filters.item_namespaces`), not a pass over every record."""
        spaces = {tuple(ns) for ns in RF.item_namespaces(self.memory, now)}
        if op.match_conditions:
            spaces = {ns for ns in spaces if all(_matches_path(c, ns) for c in op.match_conditions)}
        if op.max_depth is not None:
            spaces = {ns[: op.max_depth] for ns in spaces}
        return sorted(spaces)[op.offset: op.offset + op.limit]

    # ------------------------------------------------------------------ writes
    def _text(self, value: dict, index: Any) -> str | None:
        if index is False:
            return None
        fields = self._fields if index is None else [(f, f if f == "$" else tokenize_path(f)) for f in index]
        texts = [t for _, path in fields for t in get_text_at_path(value, path)]
        text = "\n".join(t for t in texts if t.strip())
        return text or None

    def _apply_puts(self, puts: list[PutOp], now: datetime, vectors: Mapping[str, Any]) -> None:
        """Apply the writes with the ``vectors`` of their texts, computed before the lock (a text
        without one, only after every retry of :meth:`_run`, is embedded by the memory)."""
        mem = self.memory
        until = W.check_puts([op for op in puts if op.value is not None], now)
        gone = [item_id(tuple(op.namespace), op.key) for op in puts if op.value is None]
        removed = C.remove(mem, gone)   # unknown ids (removed by another process too) are ignored
        writes = [op for op in puts if op.value is not None]
        nodes = [{"id": namespace_id(ns), "text": "/".join(ns), "parent": namespace_id(ns[:-1]) if len(ns) > 1 else None,
                  "meta": {_KIND: "namespace", "namespace": list(ns)}, "embedding": vectors.get("/".join(ns))}
                 for ns in W.chains(writes)]
        items = []
        for op in writes:
            ns, i = tuple(op.namespace), item_id(tuple(op.namespace), op.key)
            text = self._text(op.value, op.index)
            whole = text or json.dumps(op.value, sort_keys=True, ensure_ascii=False)
            rec = U.get_or_none(mem, i)
            created = rec.meta["created_at"] if rec is not None and self._live(rec, now) else C.iso(now)
            items.append({"id": i, "parent": namespace_id(ns), "t": now, "text": whole,
                          "valid_until": until[id(op)], "embedding": vectors.get(whole),
                          "meta": {_KIND: "item", "namespace": list(ns), "key": op.key,
                                   "value": copy.deepcopy(op.value),
                                   "created_at": created, "indexed": text is not None, "ttl": op.ttl}})
        for attempt in range(U.TRIES):
            U.add_missing(mem, nodes)   # a namespace another process creates meanwhile exists once
            try:
                if items:
                    C.upsert(mem, W.replace_changed(mem, items))   # changed texts replaced with their vectors
                break
            except KeyError:   # another process removed a namespace (its last item) since: create it again
                if attempt + 1 == U.TRIES or all(n["id"] in mem for n in nodes):
                    raise
        self._prune(set(removed))

    def _prune(self, removed: set[str]) -> None:
        """Remove namespace nodes left without children, and those only such nodes are under
        (the store's order reversed: a namespace after its parent), in one removal; the
        namespace nodes from the store's columns (:meth:`Memory.select`)."""
        if not removed:
            return
        mem = self.memory
        for _ in range(U.TRIES):
            try:
                empty: set[str] = set()
                spaces = mem.select({_KIND: "namespace"})
                for i in reversed(spaces):
                    if all(c in empty for c in mem.children(i)):
                        empty.add(i)
                mem.remove_many([i for i in spaces if i in empty])
                return
            except (KeyError, ValueError):  # another process removed one, or put an item under one, meanwhile
                continue   # decide again; after the last try the empty nodes wait for the next removal

    def sweep_ttl(self) -> int:
        """Remove the items whose TTL has run out (and namespaces left empty); returns how many items."""
        with self._lock:
            self.memory.refresh()
            now = _now(self.memory)
            dead = self.memory.select(RF.expired_items(now))   # the store's columns, not every record
            C.remove(self.memory, dead)
            self._prune(set(dead))
            return len(dead)

    def start_ttl_sweeper(self, sweep_interval_minutes: float | None = None) -> concurrent.futures.Future[None]:
        """Call :meth:`sweep_ttl` every ``sweep_interval_minutes`` (default the ``TTLConfig``'s, else 5) in a
        daemon thread, as LangGraph's stores do; the store starts it itself when its ``TTLConfig`` has
        ``sweep_interval_minutes``.  Returns a future done when the loop ends (cancelling it stops the
        loop); the running loop's when one runs; a done one without a ``TTLConfig`` or an interval."""
        minutes = TS.check_interval(sweep_interval_minutes)
        if minutes is None and not self.ttl_config:
            done: concurrent.futures.Future[None] = concurrent.futures.Future()
            done.set_result(None)
            return done
        if C.read_only(self.memory):
            from ..store.backends.durable import StorageError

            raise StorageError("start_ttl_sweeper: this store's memory was opened read_only=True and removes "
                               "nothing; sweep from a handle opened without read_only")
        minutes = minutes or TS.check_interval((self.ttl_config or {}).get("sweep_interval_minutes"))
        return self._sweeper.start(minutes or TS.DEFAULT_MINUTES)

    def stop_ttl_sweeper(self, timeout: float | None = None) -> bool:
        """Stop the TTL sweeper thread; whether it ended within ``timeout`` seconds (``True`` if none ran)."""
        return self._sweeper.stop(timeout)

    def close(self) -> None:
        """Stop the TTL sweeper and close the memory (:meth:`Memory.close`; a no-op in process)."""
        self._sweeper.stop()
        self.memory.close()

    def __enter__(self) -> HypermemStore:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def save(self, path: str | None = None) -> None:
        """Write a snapshot of the memory (:meth:`Memory.save`, or :meth:`Memory.to_json` for a ``.json``
        name) to ``path`` or the file it was opened from; a durable memory needs no save."""
        C.save_memory(self.memory, path, self.path)

    def __repr__(self) -> str:
        return f"HypermemStore({self.memory!r})"
