"""The memories a filter keeps, without a search: :meth:`Memory.select <hypermem.store.Memory.select>`.

A listing by filter (LlamaIndex's ``get_nodes`` / ``delete_nodes``, LangGraph's namespaces and
pages) needs no ranking, only the rows a filter keeps.  Testing each record in Python costs a
few microseconds a memory (about 1 s at 100,000); the search's own filter columns
(:mod:`hypermem.store.meta_columns`: a metadata field by value groups, a
:class:`~hypermem.store.filters.RecordFilter`'s parent, times and ids from the store's columns)
answer it in one vectorised pass, the same answer as the row-by-row test.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch

from .checks import Filter

__all__ = ["kept_rows", "select"]


def kept_rows(memory: Any, filters: Filter, order: Sequence[str] | None = None) -> torch.Tensor:
    """The rows (CPU ``long``, ascending) of the memories of ``memory`` that pass ``filters``:
    ``None`` (all), a dict or :class:`~hypermem.store.filters.RecordFilter` (the search's filter
    columns, ``memory.searcher.meta``), or a callable on the record (read row by row).  With
    ``order`` (ids; a dict filter only) the kept rows of those ids, in that order.  The caller
    holds ``memory.state.lock``."""
    st = memory.state
    if filters is None:
        return torch.arange(st.n, dtype=torch.long)
    if isinstance(filters, Mapping):
        mask = memory.searcher.meta.mask(st.records, filters)
        if order is None:
            return mask.nonzero().squeeze(1)
        cand = torch.tensor(st.rows_of(list(order)), dtype=torch.long)
        return cand[mask[cand]] if cand.numel() else cand
    if not callable(filters):
        raise TypeError(f"filters must be a dict or a callable, got {type(filters).__name__}")
    keep = [r for r, rec in enumerate(st.records.at_rows(range(st.n))) if filters(rec)]
    return torch.tensor(keep, dtype=torch.long)


def select(memory: Any, filters: Filter = None) -> list[str]:
    """The ids, in the store's order, of the memories that pass ``filters``, without a search:
    what ``search(..., filters=filters)`` would choose its candidates from.  ``filters`` is what
    :meth:`~hypermem.store.Memory.search` takes: ``None`` (every id), a metadata dict
    (:mod:`hypermem.store.filters`), a :class:`~hypermem.store.filters.RecordFilter` (the
    record's parent, times and ids too), or a callable on the record (tested record by record).
    A dict is answered by the search's filter columns (:mod:`hypermem.store.meta_columns`), the
    same ids as the row-by-row test; a malformed one is a ``FilterError`` naming the problem, and one
    that keeps nothing and names a metadata key no memory has warns as ``search`` does.  A
    store bound by :meth:`~hypermem.store.Memory.open` first reads what others committed.  A
    ``ServerMemory`` (``Memory.open(url, mirror=False)``) has no ``select``: its filters run in
    the server search.

    >>> from hypermem import Memory
    >>> mem = Memory()
    >>> _ = mem.add_many([{"text": "a dog", "id": "d", "meta": {"kind": "pet", "n": 2}},
    ...                   {"text": "a fox", "id": "f", "meta": {"kind": "wild", "n": 7}},
    ...                   {"text": "a cat", "id": "c", "meta": {"kind": "pet", "n": 9}}])
    >>> mem.select({"kind": "pet"})
    ['d', 'c']
    >>> mem.select({"$or": [{"n": {"$gt": 8}}, {"kind": "wild"}]})
    ['f', 'c']
    >>> mem.select(lambda r: r.text.endswith("x")), len(mem.select())
    (['f'], 3)
    """
    memory.refresh()
    st = memory.state
    with st.lock:
        ids = st.ids
        out = [ids[r] for r in kept_rows(memory, filters).tolist()]
        if not out and st.n and isinstance(filters, Mapping):  # an empty store: no warning, as in search
            memory.searcher.warn_unknown_keys(filters, what="select()")  # the search's warning, once per key
        return out
