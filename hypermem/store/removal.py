"""Removing memories from a store: the ids checked, the hierarchy's lists brought in step,
then one compaction of the rows (:meth:`~hypermem.store.state.MemoryState.keep_rows`).

Each compaction moves the rows after the first removed one once
(:mod:`hypermem.store.compaction`), so removing many memories in one call
(:meth:`Memory.remove_many <hypermem.store.Memory.remove_many>`) costs one move of the store
where a loop of :meth:`~hypermem.store.Memory.remove` costs one per memory.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

__all__ = ["descendants", "remove_memories"]


def descendants(state, id: str) -> list[str]:
    """All descendants of ``id`` in ``state``, breadth first (``KeyError`` when unknown)."""
    state.row_of(id)
    out: list[str] = []
    frontier = list(state.children.get(id, ()))
    while frontier:
        out.extend(frontier)
        frontier = [c for p in frontier for c in state.children.get(p, ())]
    return out


def remove_memories(state, ids: Sequence[str], cascade: bool = False) -> list[str]:
    """Remove ``ids`` from ``state`` (with ``cascade``, their subtrees too) in one compaction;
    returns the removed ids, each subtree after its root, in the order given.  Every id is
    checked before anything changes: an unknown one is a ``KeyError``, one with children is a
    ``ValueError`` unless ``cascade`` or all its children are among ``ids``."""
    with state.lock:
        named = set()
        for i in ids:
            state.row_of(i)
            named.add(i)
        if not cascade:
            for i in ids:
                kids = state.children.get(i, ())
                if kids and not named.issuperset(kids):
                    raise ValueError(f"{i!r} has {len(kids)} children; pass cascade=True to remove the subtree")
        gone: dict[str, None] = {}
        for i in ids:
            if i not in gone:
                gone[i] = None
                if cascade:
                    gone.update(dict.fromkeys(descendants(state, i)))
        if not gone:
            return []
        keep = torch.ones(state.n, dtype=torch.bool)
        keep[[state.row[i] for i in gone]] = False
        by_parent: dict[str, set[str]] = {}
        for i in gone:
            p = state.records.parent(i)
            if p is not None and p not in gone:
                by_parent.setdefault(p, set()).add(i)
        for p, out in by_parent.items():
            kids = [k for k in state.children[p] if k not in out]
            if kids:
                state.children[p] = kids
            else:
                del state.children[p]
        for i in gone:
            state.children.pop(i, None)
        state.keep_rows(keep)  # the records' rows go with the columns'
        state.changed(compacted=True)
        return list(gone)
