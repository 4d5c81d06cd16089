"""The adapters' filters as the store's own fast filters: a
:class:`~hypermem.store.filters.RecordFilter` (metadata by value groups, ``parent`` by the parents'
codes, times from the time columns, ids by row; :mod:`hypermem.store.meta_columns`) instead of a
Python predicate run on every record.  Each gives exactly the predicate's answer:

* LangChain (:func:`store_filter`): a filter naming ``parent``, ``t``, ``valid_from`` or
  ``valid_until`` reads them from the record (:func:`~hypermem.integrations._common.meta_field`),
  times as instants (:func:`~hypermem.integrations._common.instants` rewrites the operands to the
  UTC text the record's times have);
* LlamaIndex (:func:`node_filter`): the same, but a ``parent`` in a node's own metadata is that
  metadata, and ``node_ids`` restrict the rows (``query``, and ``get_nodes`` / ``delete_nodes``
  through :meth:`Memory.select <hypermem.store.Memory.select>`);
* LangGraph (:func:`item_filter`): an item (``{"langgraph": "item"}``), live (no ``valid_until``
  or one after now), whose value passes the filter (each field ``f: want`` of the value filter
  is the nested metadata filter ``{"value": {f: want}}``), indexed or not; the namespaces of the
  live items (:func:`item_namespaces`) from the groups of their ``namespace`` field; the expired
  items ``sweep_ttl`` removes (:func:`expired_items`).

A ``ServerMemory`` (no in-process search) gets the predicate, as before.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

import torch

from ..store import Memory
from ..store.filters import MISSING, RecordFilter, check_filter, filter_keys, map_fields
from ..store.selection import kept_rows
from . import _common as C

__all__ = ["TRUTHY", "expired_items", "item_filter", "item_namespaces", "kept_rows", "newest_first", "newest_records",
           "node_filter", "store_filter"]

TRUTHY = {"$exists": True, "$nin": [False, None, 0, "", [], {}]}
"""A field whose JSON value is true in Python (``bool(v)``): present, and none of the false ones."""

_TIMES = {k: k for k in C.TIME_KEYS}


def store_filter(memory: Any, spec: Any) -> Any:
    """:func:`hypermem.integrations._common.store_filter` (LangChain's ``filter``) as the store's
    fast filter: a dict naming the store's fields becomes a :class:`RecordFilter` on a
    :class:`Memory` (the predicate elsewhere)."""
    if not isinstance(memory, Memory) or not isinstance(spec, Mapping) or not filter_keys(spec) & set(C.STORE_KEYS):
        return C.store_filter(spec)
    spec = C.instants(spec)
    check_filter(spec)
    return RecordFilter(spec, {"parent": "parent", **_TIMES})


def node_filter(spec: Mapping | None, ids: Any = None) -> RecordFilter:
    """A LlamaIndex filter (``filter_spec``) and ``node_ids`` (``None``: any) as a
    :class:`RecordFilter`: ``parent`` is the node metadata's ``parent`` where it has one, else the
    memory's parent; times as instants."""
    spec = C.instants(spec or {})
    check_filter(spec)
    keys = filter_keys(spec)
    name = "parent"
    if "parent" in keys:   # the memory's parent goes by a name the filter does not use
        name = "\x00parent"
        while name in keys:
            name += "'"
        spec = _node_parents(spec, name)
    return RecordFilter(spec, {name: "parent", **_TIMES}, ids)


def _node_parents(spec: Mapping, name: str) -> dict:
    """``spec`` with each ``{"parent": want}`` read as a node reads it: ``(metadata has parent
    and it matches) or (it has none and the memory's parent, named ``name``, matches)``."""
    def field(key: Any, want: Any) -> dict:
        if key != "parent":
            return {key: want}
        return {"$or": [{"parent": {"$exists": True}, "$and": [{"parent": want}]},
                        {"parent": {"$exists": False}, name: want}]}
    return map_fields(spec, field)


def item_filter(values: Mapping | None, now: datetime, indexed: bool | None = None, ids: Any = None) -> RecordFilter:
    """LangGraph's items live at ``now`` whose value passes ``values`` (a checked filter, lists
    already ``$eq``: :func:`~hypermem.integrations._common.lists_as_values`), ``indexed`` (True:
    ``meta["indexed"]`` true; False: false; None: either), among ``ids`` (None: any)."""
    parts: list[dict] = [{"langgraph": "item"}, {"$not": {"valid_until": {"$lte": C.iso(now)}}}]
    if values:
        parts.append(_in_value(values))
    if indexed is not None:
        parts.append({"indexed": TRUTHY} if indexed else {"$not": {"indexed": TRUTHY}})
    return RecordFilter({"$and": parts}, {"valid_until": "valid_until"}, ids)


def expired_items(now: datetime) -> RecordFilter:
    """LangGraph's items whose window has ended at ``now`` (``valid_until <= now``, from the time
    column): the items :func:`item_filter` does not find live, what ``sweep_ttl`` removes."""
    return RecordFilter({"langgraph": "item", "valid_until": {"$lte": C.iso(now)}}, {"valid_until": "valid_until"})


def _in_value(spec: Mapping) -> dict:
    return map_fields(spec, lambda key, want: {"value": {key: want}})


def item_namespaces(memory: Memory, now: datetime) -> list:
    """The distinct metadata ``namespace`` values (lists of labels) of LangGraph's items live at
    ``now`` (:func:`item_filter`): the values of the field's groups at those rows
    (:meth:`MetaColumns.values <hypermem.store.meta_columns.MetaColumns.values>`), not a pass over
    every record; a namespace's group holds exactly the lists equal to it."""
    st = memory.state
    with st.lock:
        rows = kept_rows(memory, item_filter(None, now))
        return [v for v in memory.searcher.meta.values(st.records, "namespace", rows) if v is not MISSING]


def newest_records(memory: Memory, n: int) -> list:
    """The ``n`` newest memories, newest first, ties in store order: ``heapq.nlargest(n, memory,
    key=lambda r: r.t)`` from the time column, building only those ``n`` records."""
    memory.refresh()   # a store bound by Memory.open: what others committed
    st = memory.state
    with st.lock:
        rows = newest_first(st, torch.arange(st.n))[: max(0, int(n))]
        return st.records.at_rows(rows.tolist())


def newest_first(state: Any, rows: torch.Tensor) -> torch.Tensor:
    """``rows`` by time ``t``, newest first, ties in their order: ``sorted(records, key=t,
    reverse=True)`` from the time column (equal floats are equal times for the times that come
    back from their float; the records' own times where one does not)."""
    exact = state.records.exact
    if exact and any("t" in exact.get(state.ids[r], ()) for r in rows.tolist()):
        recs = state.records.at_rows(rows.tolist())
        order = sorted(range(len(recs)), key=lambda j: recs[j].t, reverse=True)
        return rows[torch.tensor(order, dtype=torch.long)]
    t = state.time[rows.to(state.time.device)].to("cpu", torch.float64)
    return rows[torch.sort(-t, stable=True).indices]
