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

import math
from collections.abc import Mapping
from datetime import datetime, timezone
from typing import Any

import torch

from ..store import Memory
from ..store.filters import MISSING, FilterError, RecordFilter, check_filter, filter_keys
from ..store.selection import kept_rows
from . import _common as C

__all__ = ["TRUTHY", "check_seconds", "expired_items", "item_filter", "item_namespaces", "kept_rows", "newest_first", "newest_records", "node_filter",
           "store_filter"]

TRUTHY = {"$exists": True, "$nin": [False, None, 0, "", [], {}]}
"""A field whose JSON value is true in Python (``bool(v)``): present, and none of the false ones."""

_TIMES = {k: k for k in C.TIME_KEYS}
_INSTANT_OPS = ("$eq", "$ne", "$gt", "$gte", "$lt", "$lte")
_LISTS = (list, tuple, set, frozenset)
_FIRST = round(datetime.min.replace(tzinfo=timezone.utc).timestamp())   # -62135596800
_LAST = round(datetime.max.replace(tzinfo=timezone.utc).timestamp())    # 253402300800


def store_filter(memory: Any, spec: Any) -> Any:
    """:func:`hypermem.integrations._common.store_filter` (LangChain's ``filter``) as the store's
    fast filter: a dict naming the store's fields becomes a :class:`RecordFilter` on a
    :class:`Memory` (the predicate elsewhere)."""
    if isinstance(spec, Mapping):
        check_seconds(spec)
    if not isinstance(memory, Memory) or not isinstance(spec, Mapping) or not filter_keys(spec) & set(C.STORE_KEYS):
        return C.store_filter(spec)
    spec = C.instants(spec)
    check_filter(spec)
    return RecordFilter(spec, {"parent": "parent", **_TIMES})


def node_filter(spec: Mapping | None, ids: Any = None) -> RecordFilter:
    """A LlamaIndex filter (``filter_spec``) and ``node_ids`` (``None``: any) as a
    :class:`RecordFilter`: ``parent`` is the node metadata's ``parent`` where it has one, else the
    memory's parent; times as instants."""
    check_seconds(spec or {})
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


def check_seconds(spec: Mapping) -> None:
    """A :class:`FilterError` naming the field when an operand of a time field (plain, of
    ``$eq $ne $gt $gte $lt $lte``, in ``$in``/``$nin``) is finite POSIX seconds outside the times a
    datetime holds (years 1..9999 in UTC), before :func:`~hypermem.integrations._common.instants`
    reads it (an ``OverflowError`` or a year out of range there).  Iterative: any depth."""
    stack: list[Any] = [spec]
    while stack:
        part = stack.pop()
        if not isinstance(part, Mapping):
            continue
        for key, want in part.items():
            if key in ("$and", "$or") and isinstance(want, (list, tuple)):
                stack.extend(want)
            elif key == "$not":
                stack.append(want)
            elif key in C.TIME_KEYS:
                for x in _time_operands(want):
                    _seconds_ok(x, key)


def _time_operands(want: Any) -> list:
    if isinstance(want, Mapping):
        ops = [x for op, x in want.items() if op in _INSTANT_OPS]
        return ops + [i for op, x in want.items() if op in ("$in", "$nin") and isinstance(x, _LISTS) for i in x]
    return list(want) if isinstance(want, _LISTS) else [want]


def _seconds_ok(x: Any, key: str) -> None:
    if not isinstance(x, (int, float)) or isinstance(x, bool) or not math.isfinite(x):
        return   # not seconds, or C.instants' own error (infinite, NaN)
    if not _FIRST <= x < _LAST:
        raise FilterError(f"the filter value for {key!r}: {x!r} POSIX seconds is outside the times a datetime "
                          f"holds (years 1..9999 in UTC: from {_FIRST} up to, not including, {_LAST}); "
                          f"pass a time in that range")


def _node_parents(spec: Mapping, name: str) -> dict:
    """``spec`` with each ``{"parent": want}`` read as a node reads it: ``(metadata has parent
    and it matches) or (it has none and the memory's parent, named ``name``, matches)``."""
    parts: list[dict] = []
    for key, want in spec.items():
        if key in ("$and", "$or"):
            parts.append({key: [_node_parents(s, name) for s in want]})
        elif key == "$not":
            parts.append({key: _node_parents(want, name)})
        elif key == "parent":
            parts.append({"$or": [{"parent": {"$exists": True}, "$and": [{"parent": want}]},
                                  {"parent": {"$exists": False}, name: want}]})
        else:
            parts.append({key: want})
    return {"$and": parts}


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
    parts: list[dict] = []
    for key, want in spec.items():
        if key in ("$and", "$or"):
            parts.append({key: [_in_value(s) for s in want]})
        elif key == "$not":
            parts.append({key: _in_value(want)})
        else:
            parts.append({"value": {key: want}})
    return {"$and": parts}


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
