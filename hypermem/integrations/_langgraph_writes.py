"""The LangGraph store's writes (:class:`~hypermem.integrations.langgraph.HypermemStore`):
embedded outside the store's lock, applied under it in the order of the calls.

A write's texts (its items' and its new namespaces') are embedded first, without the store's
lock, so reads of other threads and coroutines go on meanwhile (an async-only embedding function
awaited on the caller's loop never runs while that lock is held, so a sync read inside that loop
waits for no embedding: no deadlock).  A write then waits for its :class:`Turn` (a ticket taken
when it was called: two writes of the same key end with the later call's value whichever
embeds faster), takes the lock, and applies everything at once with the vectors it computed;
a text found missing there (a namespace another handle removed meanwhile) is embedded outside
the lock again, before the write is applied.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from typing import Any

import torch

from ..store import Memory
from ..store.checks import embed_for_store, json_problem
from . import _async_embed as AE
from .langchain import LangChainEmbedder

__all__ = ["Turn", "WriteOrder", "chains", "check_puts", "check_wait", "embed", "replace_changed", "stored_text",
           "texts", "ttl_until", "wanted"]


def ttl_until(ttl: Any, now: datetime | None = None, clamp: bool = False) -> datetime | None:
    """The ``valid_until`` of an item put at ``now`` with ``ttl`` minutes (``None``: no expiry);
    ``now=None`` checks the number only.  A ``ValueError`` unless ``ttl`` is a positive real
    number (not a bool) small enough that ``now + ttl`` is a datetime (``clamp``: else the last
    datetime, for a refresh of a ttl accepted earlier)."""
    if ttl is None:
        return None
    if isinstance(ttl, bool) or not isinstance(ttl, (int, float)) or not ttl > 0:  # NaN fails ttl > 0
        raise ValueError(f"ttl must be a positive number of minutes, got {ttl!r:.60}")
    try:
        span = timedelta(minutes=ttl)
        return None if now is None else now + span
    except OverflowError:
        if clamp and now is not None:
            return datetime.max.replace(tzinfo=now.tzinfo)
        raise ValueError(f"ttl must be a positive number of minutes small enough that now + ttl is before "
                         f"year 10000, got {ttl!r:.60}") from None


def check_puts(writes: Sequence[Any], now: datetime) -> dict[int, datetime | None]:
    """Every ``PutOp``'s value and ttl checked before anything is written; the ends of their windows."""
    until = {}
    for op in writes:
        ns = tuple(op.namespace)
        if not isinstance(op.value, dict):
            raise TypeError(f"the value of {ns}/{op.key!r} must be a dict, got {type(op.value).__name__}")
        if (bad := json_problem(op.value)) is not None:
            raise ValueError(f"the value of {ns}/{op.key!r} must be JSON: {bad}")
        until[id(op)] = ttl_until(op.ttl, now)  # None: no expiry (BaseStore.put puts default_ttl in)
    return until


def chains(writes: Sequence[Any]) -> list[tuple[str, ...]]:
    """The namespaces the ``PutOp`` s ``writes`` need, with every prefix, parents first."""
    return sorted({tuple(op.namespace)[:n] for op in writes for n in range(1, len(op.namespace) + 1)}, key=len)


def texts(writes: Sequence[Any], namespace_id: Callable, item_id: Callable,
          text: Callable[[dict, Any], str | None]) -> list[tuple[str, str]]:
    """``(id, text)`` of the namespace nodes and the items that ``writes`` store (an item's
    ``text(value, index)``, else its value as JSON)."""
    return [(namespace_id(ns), "/".join(ns)) for ns in chains(writes)] + [
        (item_id(tuple(op.namespace), op.key),
         text(op.value, op.index) or json.dumps(op.value, sort_keys=True, ensure_ascii=False)) for op in writes]


def check_wait(order: WriteOrder, embedder: Any) -> None:
    """A ``RuntimeError`` for a sync write inside a running event loop while an async write of
    the store with async-only embeddings is under way: it would wait for that write, which
    awaits its embeddings on this very loop (a deadlock)."""
    if isinstance(embedder, LangChainEmbedder) and AE.async_only(embedder.embeddings) and order.busy():
        AE.check_no_loop("an async write of this store is under way, and this sync write would wait for it; "
                         "use the async methods (await store.aput / adelete / abatch)")


class WriteOrder:
    """Tickets that apply a store's writes one at a time, in the order they were taken."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._next = 0      # the next ticket to give
        self._serving = 0   # the ticket whose turn it is
        self._finished: set[int] = set()

    def take(self) -> Turn:
        with self._cond:
            self._next += 1
            return Turn(self, self._next - 1)

    def busy(self) -> bool:
        """Whether a write taken earlier has not finished."""
        with self._cond:
            return self._serving < self._next

    def wait(self, n: int) -> None:
        with self._cond:
            self._cond.wait_for(lambda: self._serving >= n)

    def finish(self, n: int) -> None:
        with self._cond:
            self._finished.add(n)
            while self._serving in self._finished:
                self._finished.discard(self._serving)
                self._serving += 1
            self._cond.notify_all()


class Turn:
    """One write's ticket.  The worker that runs the write :meth:`claim` s it and :meth:`finish` es it;
    :meth:`drop` finishes it for a write that never ran (an ``abatch`` cancelled before its worker
    started), so the writes after it are not held up."""

    def __init__(self, order: WriteOrder, n: int):
        self.order, self.n = order, n
        self._lock = threading.Lock()
        self._state = "new"

    def claim(self) -> bool:
        """Whether the write is to run (``False``: it was dropped)."""
        with self._lock:
            if self._state != "new":
                return False
            self._state = "running"
            return True

    def drop(self) -> None:
        with self._lock:
            if self._state != "new":
                return
            self._state = "dropped"
        self.order.finish(self.n)

    def wait(self) -> None:
        """Until every write taken before this one has finished."""
        self.order.wait(self.n)

    def finish(self) -> None:
        self.order.finish(self.n)


def wanted(memory: Memory, texts: Sequence[tuple[str, str]], have: dict[str, torch.Tensor]) -> list[str]:
    """The texts of ``(id, text)`` pairs that the write must embed: the id is not stored, or
    stored with another text (one stored with the same text is not embedded again), and
    ``have`` holds no vector for the text; each once."""
    out: dict[str, None] = {}
    for i, text in texts:
        if text not in have and text not in out and stored_text(memory, i) != text:
            out[text] = None
    return list(out)


def stored_text(memory: Memory, id: str) -> str | None:
    """The stored text of ``id`` (the store's text column, no record built); ``None`` when not stored."""
    try:
        return memory.state.records.text(id)
    except KeyError:
        return None


def embed(memory: Memory, texts: list[str]) -> dict[str, torch.Tensor]:
    """The memory's embedder's vectors of ``texts`` (one call, checked as the store checks its
    own: :func:`~hypermem.store.checks.embed_for_store`)."""
    if not texts:
        return {}
    emb = embed_for_store(memory.embedder, texts, lambda i: f"the item text {texts[i]!r:.60}")
    return dict(zip(texts, emb))


def replace_changed(memory: Memory, items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Replace in place the stored items whose text changes (those carrying an ``embedding``),
    with :meth:`Memory.update` and the precomputed vector (an item's parent, its namespace, is
    part of its id: it stays); the items left for :func:`~._upserts.upsert`: the new ones, the
    unchanged ones without their vector (no embedding again), and any another process removed
    meanwhile (added again)."""
    rest = []
    for it in items:
        old = stored_text(memory, it["id"])
        if old == it["text"]:
            it = {k: v for k, v in it.items() if k != "embedding"}
        elif old is not None and it.get("embedding") is not None:
            try:
                memory.update(it["id"], text=it["text"], meta=it["meta"], t=it["t"], valid_from=None,
                              valid_until=it["valid_until"], embedding=it["embedding"])
                continue
            except KeyError:
                if it["id"] in memory:
                    raise
        rest.append(it)
    return rest
