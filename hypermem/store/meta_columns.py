"""Metadata filters answered by value groups, not by a Python pass over every memory.

A dict filter (:mod:`hypermem.store.filters`) tests each memory's metadata field by field.
Read row by row, that is a few microseconds of Python per memory: about 0.3-0.6 s a search at
100,000 memories, several times the search itself.  But an agent's filters name fields with
few distinct values (a user, a session, a kind, a tag), and a field's test depends only on its
value.  So :class:`MetaColumns` keeps, for each field a filter has named, every row's *value
code* (row-aligned, an ``int64`` tensor; code 0 = the field is missing) and one representative
value per code.  A filter is then answered as

    mask(key: want) = isin(codes[key], {c : matches(value[c], want)})

with ``$and`` / ``$or`` / ``$not`` as ``&`` / ``|`` / ``~`` of the masks: one test per distinct
value, one vectorised pass per field.  The answer is the row-by-row one exactly: values that
share a code are equal in every way a filter can tell (strings as they are; numbers by value,
booleans apart from them; lists and dicts by their canonical JSON), and the test is the very
function the row-by-row pass calls.  ``$in``/``$nin`` (and a plain list) look each value up in a set
of hashed JSON keys (:func:`~hypermem.store.filters.value_test`), so a long list over many distinct
values costs O(values + list), not a comparison per pair.

The order operators (``$gt``, ``$gte``, ``$lt``, ``$lte``) with number operands compare a
row-aligned ``float64`` column of the field's numbers instead (NaN where the value is no
number, which fails every comparison as it does row by row), so a timestamp or a counter is
filtered in one vectorised pass too; a field that holds an integer beyond ``2^53`` (inexact as
a float64) is compared row by row.

The columns follow the record table's journal (:meth:`RecordTable.since
<hypermem.store.record_table.RecordTable.since>`): rows appended or rewritten since the last
filter are read again, a removal takes its rows out of the columns, and a relayout reads the
field's rows anew.  A field with
more than :data:`MAX_GROUPS` distinct values (an id, a timestamp) keeps no codes from then on:
its operators other than the order ones with a number operand test its rows' values one by
one, as before.  Metadata changes only
through ``Memory.update`` (the store copies it on the way in and out), so the journal sees
every change.
"""

from __future__ import annotations

import json
import math
import operator
from collections.abc import Mapping
from typing import Any

import torch

from .filters import MISSING, RecordFilter, check_filter, is_ops, value_test
from .json_values import Singleton
from .record_times import time_mask

__all__ = ["MAX_GROUPS", "MetaColumns"]

MAX_GROUPS = 65_536
"""A field with more distinct values than this is tested row by row (its codes would cost
more than they save)."""


EXACT = 2 ** 53
"""Integers up to this size are exact as float64."""

_ORDER = {"$gt": operator.gt, "$gte": operator.ge, "$lt": operator.lt, "$lte": operator.le}


class _NotDict(Singleton):
    """:data:`NOT_DICT`'s type, one object like ``MISSING`` (:class:`~.json_values.Singleton`)."""

    global_name, shown = "NOT_DICT", "<under no dict>"


NOT_DICT: Any = _NotDict()
"""The value at a nested path (``("place", "room")``) of a row where a value above it is no dict
(or is missing): every nested filter fails there."""


def at_path(meta: Mapping | None, path: tuple) -> Any:
    """The value at ``path`` in a row's metadata (``None``: empty): ``MISSING`` when its last
    key is absent, :data:`NOT_DICT` when a value above it is no dict."""
    v = MISSING if meta is None else meta.get(path[0], MISSING)
    for key in path[1:]:
        if not isinstance(v, Mapping):
            return NOT_DICT
        v = v.get(key, MISSING)
    return v


def read(metas: list, key: Any, rows) -> list:
    """The values of ``rows``: at the top-level ``key`` (a str) or the nested path ``key`` (a
    tuple) of their metadata, or (``key`` None) the parent ids ``metas`` holds (``MISSING`` for a root)."""
    if key is None:
        return [MISSING if (p := metas[r]) is None else p for r in rows]
    if isinstance(key, tuple):
        return [at_path(metas[r], key) for r in rows]
    return [MISSING if (m := metas[r]) is None else m.get(key, MISSING) for r in rows]


def _group(v: Any) -> Any:
    """A hashable key shared exactly by the values no filter can tell apart."""
    if type(v) is str:
        return v
    if v is NOT_DICT:
        return ("x",)
    if isinstance(v, bool):
        return ("b", v)
    if isinstance(v, (int, float)):   # 1 and 1.0 compare alike under every operator
        return ("n", v)
    if v is None:
        return ("z",)
    return ("j", json.dumps(v, sort_keys=True))   # plain JSON (``checks.check_meta``)


class _Column:
    """One field, row-aligned: its value codes (None once it has more than
    :data:`MAX_GROUPS` values) with one representative value per code, and its numbers
    (``float64``, NaN where the value is no number) for the order operators."""

    def __init__(self) -> None:
        self.codes: torch.Tensor | None = torch.zeros(0, dtype=torch.long)
        self.nums = torch.zeros(0, dtype=torch.float64)
        self.big = False
        """An integer beyond 2^53 (not exact as a float64): the order operators go row by row."""
        self.values: list[Any] = [MISSING]
        self.groups: dict[Any, int] = {}
        self.wide = False
        """It had more than :data:`MAX_GROUPS` values once: it keeps no codes."""
        self.n = 0

    def code(self, v: Any) -> int:
        if v is MISSING:
            return 0
        g = _group(v)
        c = self.groups.get(g)
        if c is None:
            c = self.groups[g] = len(self.values)
            self.values.append(v)
        return c

    def number(self, v: Any) -> float:
        if type(v) is float:
            return v
        if type(v) is int:
            if -EXACT <= v <= EXACT:
                return float(v)
            self.big = True
        return math.nan

    def drop(self, taken: list[int]) -> None:
        """Take out the rows a removal took (increasing); rows past the ones read are the
        appended rows that the next :meth:`fill` reads."""
        taken = [r for r in taken if r < self.n]
        if not taken:
            return
        keep = torch.ones(self.n, dtype=torch.bool)
        keep[torch.as_tensor(taken, dtype=torch.long)] = False
        self.nums = self.nums[: self.n][keep]
        if self.codes is not None:
            self.codes = self.codes[: self.n][keep]
        self.n -= len(taken)

    def fill(self, metas: list, key: Any, rows: list[int] | None, n: int) -> None:
        """Read ``rows`` (None: every row, anew) of a table of ``n`` rows: the value at ``key``
        of each row's metadata (:func:`read`; ``metas`` the table's parents when ``key`` is None)."""
        if rows is None:
            self.values, self.groups, self.big = [MISSING], {}, False
            self.codes = None if self.wide else torch.zeros(n, dtype=torch.long)
            self.nums = torch.zeros(n, dtype=torch.float64)
            rows = range(n)
        elif n > self.nums.numel():   # room for the appended rows (doubling)
            size = max(n, 2 * self.nums.numel())
            for name, dtype in (("codes", torch.long), ("nums", torch.float64)):
                old = getattr(self, name)
                if old is not None:
                    grown = torch.zeros(size, dtype=dtype)
                    grown[: self.n] = old[: self.n]
                    setattr(self, name, grown)
        vals = read(metas, key, rows)
        if vals:
            at = torch.as_tensor(list(rows), dtype=torch.long)
            self.nums[at] = torch.tensor([self.number(v) for v in vals], dtype=torch.float64)
            if self.codes is not None:
                code, cap, new = self.code, MAX_GROUPS + 1, []
                for v in vals:
                    new.append(code(v))
                    if len(self.values) > cap:   # too many values to be worth codes, from now on
                        self.codes, self.values, self.groups, self.wide = None, [MISSING], {}, True
                        break
                else:
                    self.codes[at] = torch.tensor(new, dtype=torch.long)
        self.n = n

    def order(self, want: Any, n: int) -> torch.Tensor | None:
        """The mask of ``{"$gt": x, ...}`` with number operands, from the numbers; None when
        ``want`` is anything else or the column holds an inexact integer."""
        if self.big or not isinstance(want, Mapping) or not want or any(op not in _ORDER for op in want):
            return None
        out = torch.ones(n, dtype=torch.bool)
        for op, x in want.items():
            if type(x) not in (int, float) or (type(x) is int and not -EXACT <= x <= EXACT):
                return None
            out &= _ORDER[op](self.nums[:n], x)   # NaN (no number, missing) fails, as row by row
        return out


class MetaColumns:
    """The value codes of the metadata fields that filters named (module docstring), for the
    :class:`~hypermem.store.record_table.RecordTable` given to :meth:`mask`.  Callers hold the
    store's lock."""

    def __init__(self) -> None:
        self.table = None
        self.columns: dict[Any, _Column] = {}
        """field (a str; a tuple for a nested path) -> its codes and numbers; None -> the parents'."""
        self.mark: tuple | None = None

    def _sync(self) -> None:
        table, n = self.table, self.table.state.n
        got = table.since(self.mark)
        taken = [] if got is None else table.removals_since(self.mark)
        for key, col in self.columns.items():
            for rows in taken:   # the removals renumbered the rows after them
                col.drop(rows)
            col.fill(table.parents if key is None else table.metas, key, None if got is None else got[0], n)
        self.mark = table.mark()

    def _column(self, key: Any) -> _Column:
        col = self.columns.get(key)
        if col is None:
            col = self.columns[key] = _Column()
            source = self.table.parents if key is None else self.table.metas
            col.fill(source, key, None, self.table.state.n)
        return col

    def _bind(self, table) -> None:
        if table is not self.table:   # another table (a store loaded anew): start over
            self.table, self.columns, self.mark = table, {}, None
        self._sync()

    def values(self, table, key: str, rows: torch.Tensor) -> list:
        """The distinct values of the metadata field ``key`` at ``rows`` (CPU ``long``) of ``table``:
        one value per group of values no filter tells apart (``1`` and ``1.0`` are one group, shown
        as the first one seen; ``[1]`` and ``[True]`` two), ``MISSING`` where a row lacks it, in no
        set order.  From the field's codes (``unique`` of ``codes[rows]``) when it has them, else
        read row by row at ``rows`` alone."""
        self._bind(table)
        col = self._column(key)
        if col.codes is None:
            got: dict[Any, Any] = {}
            for v in read(self.table.metas, key, rows.tolist()):
                got.setdefault(MISSING if v is MISSING else _group(v), v)
            return list(got.values())
        return [col.values[c] for c in torch.unique(col.codes[rows]).tolist()]

    def mask(self, table, spec: Mapping) -> torch.Tensor:
        """The rows (a CPU bool tensor of ``table``'s length) whose metadata passes the dict
        filter ``spec``: the row-by-row answer of :func:`hypermem.store.filters.compile_filter`;
        for a :class:`~hypermem.store.filters.RecordFilter`, with its record fields read from the
        record (the parents' codes; the time columns, :func:`~hypermem.store.record_times.time_mask`)
        and its ``ids`` alone."""
        check_filter(spec)
        self._bind(table)
        n = self.table.state.n
        fields = spec.fields if isinstance(spec, RecordFilter) else {}
        out = self._mask(spec, n, fields)
        if isinstance(spec, RecordFilter) and spec.ids is not None:
            row = self.table.state.row
            keep = torch.zeros(n, dtype=torch.bool)
            keep[torch.tensor([row[i] for i in spec.ids if i in row], dtype=torch.long)] = True
            out &= keep
        return out

    def _mask(self, spec: Mapping, n: int, fields: Mapping[str, str]) -> torch.Tensor:
        out = torch.ones(n, dtype=torch.bool)
        for key, want in spec.items():
            if key == "$and":
                for sub in want:
                    out &= self._mask(sub, n, fields)
            elif key == "$or":
                any_ = torch.zeros(n, dtype=torch.bool)
                for sub in want:
                    any_ |= self._mask(sub, n, fields)
                out &= any_
            elif key == "$not":
                out &= ~self._mask(want, n, fields)
            elif key in fields and fields[key] != "parent":
                out &= time_mask(self.table, fields[key], want, n)
            else:
                out &= self._field(None if key in fields else key, want, n)
        return out

    def _field(self, key: Any, want: Any, n: int) -> torch.Tensor:
        if key is not None and isinstance(want, Mapping) and want and not is_ops(want):
            # a nested dict: the value there is a dict and each of its keys matches, so
            # mask = AND over k of mask(path + (k,), want[k]) (NOT_DICT where no dict holds it)
            path = key if isinstance(key, tuple) else (key,)
            out = torch.ones(n, dtype=torch.bool)
            for k, w in want.items():
                out &= self._field((*path, k), w, n)
            return out
        col = self._column(key)
        fast = col.order(want, n)
        if fast is not None:
            return fast
        test = value_test(want)   # matches(v, want), with $in / $nin by hashed keys
        if col.codes is None:   # many values: test each row's own
            source = self.table.parents if key is None else self.table.metas
            return torch.tensor([v is not NOT_DICT and test(v) for v in read(source, key, range(n))], dtype=torch.bool)
        passing = [c for c, v in enumerate(col.values) if v is not NOT_DICT and test(v)]
        if not passing:
            return torch.zeros(n, dtype=torch.bool)
        if len(passing) == len(col.values):
            return torch.ones(n, dtype=torch.bool)
        return torch.isin(col.codes[:n], torch.tensor(passing, dtype=torch.long))
