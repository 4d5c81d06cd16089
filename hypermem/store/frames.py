"""Items in parents-first order, and a memory back from a ``pandas.DataFrame``.

:func:`parents_first` is the order ``add_many`` needs (a parent before its children), found
for a list of items in any order: ``hypermem import`` puts a file's items in it, and
:func:`memory_from_dataframe` (``Memory.from_dataframe``, ``hypermem.store.from_dataframe``)
the rows of a DataFrame, which ``Memory.to_dataframe`` writes in insertion order but a user
may have sorted otherwise.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from numbers import Number
from typing import Any

__all__ = ["parents_first", "memory_from_dataframe", "FRAME_COLUMNS", "COMPUTED_COLUMNS"]

FRAME_COLUMNS = ("id", "text", "parent", "t", "time", "meta", "valid_from", "valid_until", "embedding", "point")
"""Columns :func:`memory_from_dataframe` reads: ``add_many``'s keys, and ``time`` (``to_dataframe``'s
second name of ``t``)."""
COMPUTED_COLUMNS = ("level", "depth", "weight", "accesses")
"""Columns of ``to_dataframe`` that the new memory computes itself (from the parents, the clock and
its searches): read past."""
_TIMES = ("t", "time", "valid_from", "valid_until")


def parents_first(items: Sequence[Mapping[str, Any]], where: Sequence[str] | None = None) -> list[int]:
    """The positions of ``items`` in an order with every parent that ``items`` hold before its
    children; items already in such an order keep it (``order == range(len(items))``).  A parent
    id that no item has (a stored memory, or unknown) does not constrain the order.  ``where``
    names the items in errors (default ``item #i``): a duplicate id (``ValueError`` naming both
    places), an item that is its own parent, a parent cycle (naming its items).  One pass: each
    item is visited once, following parents up to an item already placed."""
    where = [f"item #{i}" for i in range(len(items))] if where is None else where
    index: dict[str, int] = {}
    for i, it in enumerate(items):
        if isinstance(it.get("id"), str):
            if it["id"] in index:
                raise ValueError(f"duplicate id {it['id']!r} ({where[index[it['id']]]} and {where[i]})")
            index[it["id"]] = i
    done: set[int] = set()
    order: list[int] = []
    for start in range(len(items)):
        chain, seen, i = [], set(), start
        while i is not None and i not in done and i not in seen:
            chain.append(i)
            seen.add(i)
            parent = items[i].get("parent")
            i = index.get(parent) if isinstance(parent, str) else None
        if i is not None and i in seen:
            _refuse_cycle(items, where, chain[chain.index(i):])
        for j in reversed(chain):
            done.add(j)
            order.append(j)
    return order


def _refuse_cycle(items: Sequence[Mapping[str, Any]], where: Sequence[str], cycle: list[int]) -> None:
    if len(cycle) == 1:
        raise ValueError(f"{where[cycle[0]]}: id {items[cycle[0]]['id']!r} is its own parent")
    steps = " -> ".join(f"{items[j]['id']!r} ({where[j]})" for j in cycle)
    raise ValueError(f"parent cycle: {steps} -> {items[cycle[0]]['id']!r}: each names the next as its "
                     "parent, so none can be first; drop one of these parents")


def memory_from_dataframe(cls, df, **memory_kwargs: Any):
    """A new ``cls`` (``Memory``) made with ``memory_kwargs`` holding the rows of ``df``, the
    inverse of ``Memory.to_dataframe``: ``from_dataframe(mem.to_dataframe(), embedder=...)`` has
    the same ids, texts, parents, times and metadata in the same order, so (with the same
    embedder and settings) the same points and search results.

    Columns: ``text`` (required), ``id``, ``parent``, ``t`` or ``time`` (equal where both are
    given), ``meta``, ``valid_from``, ``valid_until``, ``embedding``, ``point``
    (:data:`FRAME_COLUMNS`, as ``add_many`` reads them); ``level``, ``depth``, ``weight`` and
    ``accesses`` (:data:`COMPUTED_COLUMNS`) are computed afresh; any other column is a
    ``ValueError`` naming it.  A missing value (``NaN``, ``None``, ``NaT``, ``pd.NA``) is left
    out: a missing parent makes a root, a missing time is the clock's now, a missing id a new
    one.  Times may be datetimes or ISO 8601 text.  Rows are stored parents first
    (:func:`parents_first`; a frame in that order keeps it), all or nothing (``add_many``)."""
    try:
        import pandas as pd
    except ImportError as exc:
        raise ImportError('from_dataframe needs pandas: pip install "hypermem-torch[pandas]"') from exc
    if not isinstance(df, pd.DataFrame):
        raise TypeError(f"from_dataframe reads a pandas.DataFrame, got {type(df).__name__}")
    names = [str(c) for c in df.columns]
    if len(set(names)) != len(names):
        raise ValueError(f"from_dataframe: the DataFrame has duplicate columns {sorted({n for n in names if names.count(n) > 1})}")
    unknown = [n for n in names if n not in FRAME_COLUMNS and n not in COMPUTED_COLUMNS]
    if unknown:
        raise ValueError(f"from_dataframe: unknown columns {unknown}; it reads {list(FRAME_COLUMNS)} "
                         f"(to_dataframe's and add_many's) and computes {list(COMPUTED_COLUMNS)} afresh")
    if "text" not in names:
        raise ValueError(f"from_dataframe: the DataFrame has no 'text' column (columns: {names})")
    cols = {n: _column(pd, df[c], n) for n, c in zip(names, df.columns) if n in FRAME_COLUMNS}
    where = [f"row {label!r}" for label in df.index]
    _refuse_number_ids(cols, where)
    items = [{k: v for k, v in zip(cols, values) if v is not None} for values in zip(*cols.values())]
    if "time" in cols:
        for item, at in zip(items, where):
            when = item.pop("time", None)
            if when is not None and "t" in item and item["t"] != when:
                raise ValueError(f"from_dataframe: {at}: t {item['t']} and time {when} differ (to_dataframe "
                                 "writes one time twice; keep one column)")
            if when is not None:
                item["t"] = when
    order = parents_first(items, where)
    mem = cls(**memory_kwargs)
    try:
        mem.add_many([items[i] for i in order])
    except (ValueError, TypeError, KeyError) as exc:
        _name_rows(exc, [where[i] for i in order])
        raise
    return mem


def _refuse_number_ids(cols: Mapping[str, list], where: Sequence[str]) -> None:
    """Refuse ids and parents that are numbers (``pd.read_csv`` reads ``1,2,3`` as integers,
    and a parent column holding a root's blank as floats), naming the row and the conversion
    that loads them: ids are strings (the seed's API), so a number is not taken as one silently
    (``1`` and ``"1"`` would be two ids elsewhere).  ``astype(str)`` is not it: a float parent
    becomes ``'1.0'`` (and before pandas 3 a missing one ``'nan'``); through ``Int64`` a number keeps
    its digits and a missing value stays missing."""
    numeric = [name for name in ("id", "parent") if name in cols
               and any(isinstance(v, Number) for v in cols[name])]
    if not numeric:
        return
    name = numeric[0]
    row, value = next((at, v) for at, v in zip(where, cols[name]) if isinstance(v, Number))
    to_int = ", ".join(f"{n!r}: 'Int64'" for n in numeric)
    to_str = ", ".join(f"{n!r}: 'string'" for n in numeric)
    raise ValueError(f"from_dataframe: {row}: {name} must be a string (a memory id), got {type(value).__name__} "
                     f"{value!r}; read the file with pd.read_csv(path, dtype={{'id': str, 'parent': str}}) or "
                     f"convert the frame: df.astype({{{to_int}}}).astype({{{to_str}}}) (astype(str) alone "
                     f"turns a float parent into '1.0')")


def _name_rows(exc: Exception, where: Sequence[str]) -> None:
    """Rewrite ``add_many``'s ``item #i`` in ``exc``'s message, a position in the parents-first
    list, as the DataFrame row it came from (``where[i]``: ``row 'label'``), in place: the
    exception keeps its type and traceback."""
    if exc.args and isinstance(exc.args[0], str):
        def row(m: re.Match) -> str:
            i = int(m.group(1))
            return where[i] if i < len(where) else m.group(0)
        exc.args = (re.sub(r"item #(\d+)", row, exc.args[0]), *exc.args[1:])


def _column(pd, col, name: str) -> list:
    """A column's values as ``add_many`` takes them: missing values as None, times as pandas
    Timestamps (text read as ISO 8601, naive as UTC; the store turns them into datetimes)."""
    if name in _TIMES and not pd.api.types.is_datetime64_any_dtype(col.dtype):
        if col.isna().all():
            return [None] * len(col)
        try:
            col = pd.to_datetime(col, utc=True, format="ISO8601")
        except (ValueError, TypeError) as exc:
            raise ValueError(f"from_dataframe: column {name!r} holds something that is no time: {exc}") from None
    return [None if _missing(pd, v) else v for v in col.tolist()]


def _missing(pd, value: Any) -> bool:
    """NaN, None, NaT or pd.NA (a list, an array or a dict is a value, never missing)."""
    if value is None or isinstance(value, (str, Mapping, list, tuple)):
        return value is None
    if getattr(value, "ndim", 0):   # an array (an embedding)
        return False
    return bool(pd.isna(value))
