"""A filter on a memory's own times (``t``, ``valid_from``, ``valid_until``), answered from the
store's float64 time columns in one vectorised pass.

A :class:`~hypermem.store.filters.RecordFilter` reads such a field as its ISO 8601 text, as
``datetime.isoformat()`` writes the record's time (``MISSING`` where the window is open).  For
a time stored in UTC that text is ``YYYY-MM-DDTHH:MM:SS[.ffffff]+00:00``, whose code-point order
is the order of the instants, so for an operand ``x`` of that form

    text(row) op x  <=>  seconds(row) op seconds(x)

where ``seconds`` is POSIX seconds as the column holds them (``datetime.timestamp()``, a
correctly rounded ``microseconds / 10^6``, so monotone), exactly whenever both times come back
from their float to the microsecond (``from_seconds(seconds(d)) == d``: any date within
1970 +- 270 years): two such times with one float are one time.  The rows whose times do not
(:attr:`RecordTable.exact <hypermem.store.record_table.RecordTable.exact>`) are tested one by one
on their own text, and so is every row for an operator or an operand this cannot answer
(``$contains``, ``$text_match``, text that is no such time, a time that does not come back).
"""

from __future__ import annotations

import operator
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any

import torch

from ..temporal.clock import from_seconds, to_seconds
from .filters import MISSING, is_ops, matches, value_test

__all__ = ["time_mask"]

_COLUMN = {"t": "time", "valid_from": "valid_from", "valid_until": "valid_until"}
_ORDER = {"$gt": operator.gt, "$gte": operator.ge, "$lt": operator.lt, "$lte": operator.le}
_LISTS = (list, tuple, set, frozenset)


def seconds_of(x: Any) -> float | None:
    """The column's seconds of ``x`` when ``x`` is the text ``isoformat()`` writes for a UTC time
    that comes back from its float exactly; else None."""
    if type(x) is not str:
        return None
    try:
        d = datetime.fromisoformat(x)
    except ValueError:
        return None
    if d.utcoffset() != timedelta(0) or d.isoformat() != x:
        return None
    try:
        s = to_seconds(d)
        return s if from_seconds(s) == d else None
    except (OverflowError, OSError, ValueError):
        return None


class _Unanswered(Exception):
    """An operator or operand the columns cannot answer: the rows are tested one by one."""


def _equal(secs: torch.Tensor, x: Any) -> torch.Tensor:
    """Rows whose text equals ``x``.  None for anything but text (``json_equal``), and none for
    text :func:`seconds_of` does not read: every row whose time comes back from its float has the
    UTC text of that very time, which ``x`` is not (the other rows are tested one by one)."""
    s = seconds_of(x)
    return torch.zeros(secs.shape, dtype=torch.bool) if s is None else secs == s


def _member(secs: torch.Tensor, xs: Any) -> torch.Tensor:
    """Rows whose text is one of ``xs``: the seconds of those :func:`seconds_of` reads (the others
    no such row's text, as in :func:`_equal`), one ``isin``."""
    found = [s for s in map(seconds_of, xs) if s is not None]
    return torch.isin(secs, torch.tensor(found, dtype=torch.float64))


def _op(secs: torch.Tensor, present: torch.Tensor, op: str, x: Any) -> torch.Tensor:
    if op == "$eq":
        return _equal(secs, x)
    if op == "$ne":
        return ~_equal(secs, x)
    if op == "$in":
        return _member(secs, x)
    if op == "$nin":
        return ~_member(secs, x)
    if op == "$exists":
        return present == bool(x)
    if op == "$empty":   # a time's text is never empty
        return present != bool(x)
    if op in _ORDER:
        if type(x) is not str:   # a number against text: false (filters._ordered)
            return torch.zeros(secs.shape, dtype=torch.bool)
        s = seconds_of(x)
        if s is None:
            raise _Unanswered
        return present & _ORDER[op](secs, s)
    raise _Unanswered


def _vectorised(secs: torch.Tensor, present: torch.Tensor, want: Any) -> torch.Tensor:
    if is_ops(want):
        out = torch.ones(secs.shape, dtype=torch.bool)
        for op, x in want.items():
            out &= _op(secs, present, op, x)
        return out
    if isinstance(want, Mapping):   # a nested dict: never a time's text
        raise _Unanswered
    if isinstance(want, _LISTS):
        return _member(secs, want)
    return _equal(secs, want)


def time_mask(table, name: str, want: Any, n: int) -> torch.Tensor:
    """The rows (CPU bool, ``n``) whose time ``name`` (``t``, ``valid_from``, ``valid_until``) as
    ISO 8601 text passes the filter value ``want`` (:func:`~hypermem.store.filters.matches`)
    (module docstring)."""
    st = table.state
    secs = getattr(st, _COLUMN[name])[:n].to("cpu", torch.float64)
    present = torch.isfinite(secs)   # an open window is -inf / +inf
    exact = {st.row[i]: x[name] for i, x in table.exact.items() if name in x and st.row.get(i, n) < n}
    try:
        out = _vectorised(secs, present, want)
    except _Unanswered:   # every row on its text: the stored time's own where its float is not exact
        test = value_test(want)
        return torch.tensor([test(_text(r, s, ok, exact))
                             for r, (s, ok) in enumerate(zip(secs.tolist(), present.tolist()))], dtype=torch.bool)
    for r, d in exact.items():   # times their float does not give back: their own text
        out[r] = matches(d.isoformat(), want)
    return out


def _text(row: int, s: float, present: bool, exact: Mapping[int, datetime]) -> Any:
    """Row ``row``'s time as text: the stored datetime's own where its float ``s`` does not give it
    back (``exact``; 9999-12-31T23:59:59.999999 rounds to a float in year 10000), else the float's."""
    d = exact.get(row)
    if d is not None:
        return d.isoformat()
    return from_seconds(s).isoformat() if present else MISSING
