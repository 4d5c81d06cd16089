"""The adapters' writes by id (LangChain ``add_texts(ids=...)``, LlamaIndex ``add``, LangGraph
``put`` and ``delete``), correct when other processes write the same durable store.

Whether an id is new is decided on this process's view of the store, before the write lock is
taken; a write catches up with what other processes committed under the lock and may then find
the decision stale.  :func:`upsert` and :func:`add_missing` decide again after such a refusal:
an add refused because another process stored the id meanwhile (``ValueError: duplicate id``;
``add_many`` is all or nothing, so nothing of the batch was written) becomes a replacement, and
a replacement of an id another process removed meanwhile (``KeyError``) becomes an add.  A read
by id (:func:`get_or_none`) answers ``None`` for a memory removed since the caller saw it.

Concurrent writes by id in one process apply one call after the other (:func:`upsert_lock`, one
lock per memory, held over a call's adds and replacements, not over readers): two calls that
replace the same ids leave all of one call's items, never a mix.  Across processes each memory
is replaced in its own transaction, so two processes' calls may still interleave id by id.
A replacement with a new vector is :meth:`Memory.update` in place (one transaction; the memory
and its children are never missing or parentless), then :meth:`Memory.link` where the parent
changes (a second transaction on a durable store; in process both under the store's lock).
"""

from __future__ import annotations

import contextlib
import threading
import weakref
from collections.abc import Sequence
from typing import Any

from ..store import Memory, MemoryRecord
from ..store.auto_parent import AUTO

__all__ = ["TRIES", "add_missing", "get_or_none", "parents_first", "remove", "upsert", "upsert_lock"]

TRIES = 4
"""How many times a write by id decides again after another process changed the same ids
(each retry follows another process's commit of one of them)."""


_locks: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()   # memory -> its upsert lock
_locks_lock = threading.Lock()
_shared = threading.RLock()   # for a memory that cannot be a weak key


def upsert_lock(memory: Memory) -> threading.RLock:
    """The re-entrant lock that :func:`upsert` holds over one call's writes to ``memory`` (one per
    memory object, made on first use).  Readers and other writers do not take it.  It is taken
    before the store's lock (``memory.state.lock``): code holding that lock must not call an
    adapter's write, which may wait for a call that waits for that lock."""
    with _locks_lock:
        try:
            lock = _locks.get(memory)
            if lock is None:
                lock = _locks[memory] = threading.RLock()
            return lock
        except TypeError:   # not weakly referable
            return _shared


def _state_lock(memory: Memory) -> Any:
    """The store's own lock (``memory.state.lock``, what its readers hold), or none for a store
    without an in-process state (``ServerMemory``: each of its writes is one transaction)."""
    state = getattr(memory, "state", None)
    return contextlib.nullcontext() if state is None else state.lock


def get_or_none(memory: Memory, id: str) -> MemoryRecord | None:
    """The record of ``id``, or ``None`` when it is not stored (another process may have removed
    it since the caller saw it: ``id in memory`` then ``memory.get(id)`` is no answer)."""
    try:
        return memory.get(id)
    except KeyError:
        return None


def _taken(memory: Memory, items: Sequence[dict[str, Any]]) -> bool:
    """Whether one of ``items``' ids is stored now (after a refused add: another process's)."""
    return any(it.get("id") is not None and it["id"] in memory for it in items)


def add_missing(memory: Memory, items: list[dict[str, Any]]) -> None:
    """Add the ``items`` (``add_many`` dicts with ids, parents first) whose id is not stored; one
    that another process stores meanwhile is left as it is (it exists once)."""
    for attempt in range(TRIES):
        todo = [it for it in items if it["id"] not in memory]
        if not todo:
            return
        try:
            memory.add_many(todo)
            return
        except ValueError:
            if attempt + 1 == TRIES or not _taken(memory, todo):
                raise


def upsert(memory: Memory, items: Sequence[dict[str, Any]]) -> list[str]:
    """Add the items (dicts of :meth:`Memory.add_many` keys) whose id is new and replace
    those whose id exists (or repeats in ``items``; the later one wins).  New items are
    stored with one ``add_many`` call (one embedder call), parents before children; a
    replaced memory whose text is unchanged is not embedded again.  A replaced memory keeps
    its children, and its time ``t`` unless the item gives one (a corrected text is not a new
    memory: it must not become the freshest one); its text, metadata, parent and validity
    window become the item's.  Another process's add or removal of the same ids meanwhile is
    met by deciding again (module docstring); concurrent calls in this process apply one after
    the other (:func:`upsert_lock`).  Returns the ids in the order of ``items``."""
    with upsert_lock(memory):
        return _upsert(memory, items)


def _upsert(memory: Memory, items: Sequence[dict[str, Any]]) -> list[str]:
    new, old = _split(memory, items)
    named = {it["id"] for it in items if it.get("id") is not None}
    for it in old:   # a replacement's parent is checked before anything changes
        if (p := it.get("parent")) not in (None, AUTO) and p not in named and p not in memory:
            raise KeyError(f"unknown memory id {p!r}")
    added: dict[int, str] = {}
    for attempt in range(TRIES):
        last = attempt + 1 == TRIES
        ordered = parents_first(new)
        try:
            ids = memory.add_many(ordered) if ordered else []
        except ValueError:
            if last or not _taken(memory, ordered):
                raise
            new, old = _split(memory, [*new, *old], items)   # nothing was written: decide again
            continue
        added.update(zip(map(id, ordered), ids))
        left = _replace_each(memory, old, last)
        if not left:
            break
        new, old = _split(memory, left, items)
    return [added.get(id(it), it.get("id")) for it in items]


def _split(memory: Memory, todo: Sequence[dict[str, Any]],
           order: Sequence[dict[str, Any]] | None = None) -> tuple[list[dict], list[dict]]:
    """``(new, old)``: the items of ``todo`` (in the order of ``order``) whose id is not stored
    and not earlier in ``todo``, and the rest (replacements, in order)."""
    if order is not None:
        pos = {id(it): n for n, it in enumerate(order)}
        todo = sorted(todo, key=lambda it: pos[id(it)])
    new, old, seen = [], [], set()
    for it in todo:
        i = it.get("id")
        (old if i is not None and (i in seen or i in memory) else new).append(it)
        if i is not None:
            seen.add(i)
    return new, old


def _replace_each(memory: Memory, old: list[dict[str, Any]], last: bool) -> list[dict[str, Any]]:
    """Replace the memories of ``old`` in order; the items left (from the first whose memory
    another process removed meanwhile: it is to be added) or ``[]``."""
    for n, it in enumerate(old):
        try:
            _replace(memory, it)
        except KeyError:
            if last or it["id"] in memory:  # an unknown parent, or no end of others' removals
                raise
            return old[n:]
    return []


def parents_first(items: list[dict]) -> list[dict]:
    """Stable order in which every item's parent (when it is in ``items``) comes first."""
    pos = {it["id"]: n for n, it in enumerate(items) if it.get("id") is not None}
    if not any(it.get("parent") in pos for it in items):
        return items
    out, done = [], set()

    def visit(n: int, path: set) -> None:
        if n in done:
            return
        if n in path:
            raise ValueError(f"the items' parents form a cycle through {items[n].get('id')!r}")
        p = pos.get(items[n].get("parent"))
        if p is not None:
            visit(p, path | {n})
        done.add(n)
        out.append(items[n])

    for n in range(len(items)):
        visit(n, set())
    return out


def _replace(memory: Memory, it: dict[str, Any]) -> None:
    i = it["id"]
    t = it.get("t") or memory.get(i).t  # no time given: the stored one stays
    if it.get("embedding") is None and it.get("point") is None:
        same = memory.get(i).text == it["text"]  # the same text is not embedded again
        memory.update(i, text=None if same else it["text"], meta=it.get("meta") or {}, t=t,
                      valid_from=it.get("valid_from"),
                      valid_until=it.get("valid_until"))
        memory.link(i, it.get("parent"))
        return
    parent = it.get("parent")
    with _state_lock(memory):   # readers see the memory as it was or as it is now
        if it.get("point") is None and parent != AUTO:
            # A new vector, in place: the memory keeps its row, children and counts; one transaction.
            memory.update(i, text=it["text"], meta=it.get("meta") or {}, t=t, valid_from=it.get("valid_from"),
                          valid_until=it.get("valid_until"), embedding=it["embedding"])
            if memory.parent(i) != parent:
                memory.link(i, parent)
            return
        # An explicit point or an "auto" parent (add_many's alone): stored again under its id.
        kids = memory.children(i)
        for c in kids:
            memory.link(c, None)
        memory.remove(i)
        memory.add_many([{**it, "t": t}])
        for c in kids:
            memory.link(c, i)


def remove(memory: Memory, ids: Sequence[str] | None, cascade: bool = False) -> list[str]:
    """Remove the memories ``ids`` (unknown ids are ignored; ``None`` removes all).  A removed
    memory's children move up to its parent unless ``cascade`` removes them too.  Returns
    the removed ids.  An id another process removes meanwhile is not stored: it is ignored
    (the removal decides again, :data:`TRIES` times)."""
    for attempt in range(TRIES):
        try:
            return _remove(memory, ids, cascade)
        except (KeyError, ValueError):  # an id gone meanwhile; a child added meanwhile under one of them
            if attempt + 1 == TRIES:
                raise
    return []  # pragma: no cover - the loop returns or raises


def _remove(memory: Memory, ids: Sequence[str] | None, cascade: bool) -> list[str]:
    if ids is None:
        return memory.remove_many(memory.roots(), cascade=True)
    present = list(dict.fromkeys(i for i in ids if i in memory))
    if not present:
        return []   # no write (on a durable store, no transaction)
    if not cascade:
        named = set(present)
        for i in present:
            up = memory.parent(i)
            while up in named:  # the nearest ancestor that stays
                up = memory.parent(up)
            for c in memory.children(i):
                if c not in named:
                    memory.link(c, up)
    return memory.remove_many(present, cascade=cascade)  # one pass over the store's rows
