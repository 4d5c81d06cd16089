"""The records of a memory store, kept as columns: a :class:`MemoryRecord` is built when read.

A store of a million memories cannot afford a Python object, a datetime and a dict per
memory (about 300 bytes beside the text, more than the rest of a row's columns).
:class:`RecordTable` keeps, row-aligned with :attr:`MemoryState.ids
<hypermem.store.state.MemoryState.ids>`:

* ``texts`` (a :class:`~hypermem.store.text_column.TextColumn`: one UTF-8 buffer, about half
  the bytes of a list of strings), ``parents`` (the parent's id object, shared with
  the parent's row, or None) and ``metas`` (the metadata dict, None when empty);
* nothing for the times: ``t``, ``valid_from``, ``valid_until`` and the access count are
  read back from the state's float64 columns (``time``, ``valid_from``, ``valid_until``,
  ``access``), POSIX seconds that give back the same UTC datetime to the microsecond for
  any date between 1970 +- 270 years; a datetime that does not survive the round trip
  (far past or future) is kept as it is in ``exact``, so every record reads back exactly
  what was stored;
* ``last`` (id -> last access) for the memories touched at least once.

A record read from the table is a fresh object: change a memory through
:meth:`Memory.update <hypermem.store.Memory.update>` (which calls :meth:`RecordTable.put`),
not by assigning to a record's fields.  A record's ``meta`` is a copy too: editing it changes
nothing stored.

Reading: ``table[id]``, ``id in table``, ``len``, iteration over ids, :meth:`at_rows` (many
records from one gather of the columns), and the single fields without building a record
(:meth:`parent`, :meth:`text`, :meth:`meta_at`).
"""

from __future__ import annotations

import copy
import math
from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Iterator, Mapping, Sequence
from datetime import datetime
from itertools import accumulate

import torch

from ..temporal.clock import from_seconds, to_seconds
from .compaction import delete_blocks
from .records import MemoryRecord
from .text_column import TextColumn, as_text_column

__all__ = ["RecordTable"]

_TIMES = ("t", "valid_from", "valid_until")


def meta_copy(m: dict) -> dict:
    """A copy of stored metadata that shares nothing mutable with the store: a flat dict's
    shallow copy, else a deep one (metadata is plain JSON, ``checks.check_meta``)."""
    for v in m.values():
        if type(v) in (list, dict):
            return copy.deepcopy(m)
    return dict(m)


def _round_trips(t: datetime, s: float) -> bool:
    try:
        return from_seconds(s) == t
    except (OverflowError, OSError, ValueError):
        return False


class RecordTable(Mapping):
    """id -> :class:`MemoryRecord` of one :class:`~hypermem.store.state.MemoryState`, stored
    as columns (module docstring).  The state owns the ids, rows and time columns; the
    table owns the texts, parents, metadata and last accesses, and keeps them row-aligned
    through :meth:`append`, :meth:`put`, :meth:`keep_from` and :meth:`reset`."""

    def __init__(self, state) -> None:
        self.state = state
        self.texts = TextColumn()
        self.parents: list[str | None] = []
        self.metas: list[dict | None] = []
        self.exact: dict[str, dict[str, datetime]] = {}
        """id -> the datetimes of that record that float seconds do not give back exactly."""
        self.last: dict[str, datetime] = {}
        """id -> last access time, for the memories touched at least once."""
        self.relaid()

    def relaid(self) -> None:
        """Start a new :attr:`layout`: the rows were renumbered or replaced (or the journal of
        rewrites grew past the rows), so a reader that follows :attr:`rewrites` rescans."""
        self.layout = object()
        """A token that changes when the rows are replaced (:meth:`reset`) or the journal is full."""
        self.rewrites: list[int] = []
        """Rows rewritten in place by :meth:`put` since :attr:`layout` began, in order (renumbered
        by a removal; -1: removed since): with the rows appended since, what a reader of the
        texts and parents (the lexical and title indexes) must look at again, instead of every
        row."""
        self.removed: list[str] = []
        """Ids removed by :meth:`keep_from` since :attr:`layout` began, in order."""
        self.removals: list[list[int]] = []
        """The rows each removal since :attr:`layout` began took out (increasing, numbered as
        they were then): how a reader's count of rows read moves down."""

    def mark(self) -> tuple:
        """Where a reader has read up to: give it back to :meth:`since` at its next sync."""
        return self.layout, len(self.rewrites), self.state.n, len(self.removed), len(self.removals)

    def removals_since(self, mark: tuple) -> list[list[int]]:
        """The rows each removal after ``mark`` took out, in order (numbered as they were then),
        for a reader that keeps row-aligned columns of its own; valid when :meth:`since` of the
        same mark is not ``None``."""
        return self.removals[mark[4]:]

    def since(self, mark: tuple | None) -> tuple[list[int], list[str]] | None:
        """What changed after ``mark`` (:meth:`mark`): the rows a reader must read again (in
        order: rewritten, or appended since) and the ids removed since (each once; an id
        removed and added again is among both); ``None`` when the rows were relaid and it
        must read them all."""
        if mark is None or mark[0] is not self.layout:
            return None
        _, seen_rewrites, seen_rows, seen_removed, seen_removals = mark
        n = self.state.n
        for rows in self.removals[seen_removals:]:
            seen_rows -= bisect_left(rows, seen_rows)
        changed = {r for r in self.rewrites[seen_rewrites:] if 0 <= r < n}
        changed.update(range(min(seen_rows, n), n))
        return sorted(changed), list(dict.fromkeys(self.removed[seen_removed:]))

    # ------------------------------------------------------------------ Mapping
    def __getitem__(self, id: str) -> MemoryRecord:
        with self.state.lock:   # the row and its columns of one moment: a remove compacts rows under it
            return self.at_rows([self.state.row[id]])[0]

    def __contains__(self, id: object) -> bool:
        try:
            return id in self.state.row
        except TypeError:
            return False

    def __len__(self) -> int:
        return self.state.n

    def __iter__(self) -> Iterator[str]:
        return iter(self.state.ids[: self.state.n])

    def values(self, copies: bool = True) -> list[MemoryRecord]:  # type: ignore[override]
        """Every record, in row order (one gather of the columns); ``copies`` as :meth:`at_rows`."""
        return self.at_rows(range(self.state.n), copies)

    def __repr__(self) -> str:
        return f"RecordTable(n={self.state.n})"

    # ------------------------------------------------------------------ fields
    def parent(self, id: str) -> str | None:
        """The parent id of ``id`` (None: a root); ``KeyError`` when unknown."""
        with self.state.lock:
            return self.parents[self.state.row[id]]

    def text(self, id: str) -> str:
        """The text of ``id``; ``KeyError`` when unknown."""
        with self.state.lock:
            return self.texts[self.state.row[id]]

    def meta_at(self, row: int) -> dict:
        """The metadata of row ``row`` (an empty dict when it has none)."""
        m = self.metas[row]
        return {} if m is None else m

    def last_accessed(self, id: str) -> datetime | None:
        return self.last.get(id)

    def at_rows(self, rows: Iterable[int], copies: bool = True) -> list[MemoryRecord]:
        """The records of ``rows`` (one gather of each time column, on any device).  Their
        ``meta`` is a copy (:func:`meta_copy`); ``copies=False`` hands out the stored dicts, for
        the store's own readers that only serialise them (saving, the durable writes)."""
        rows = list(rows)
        if not rows:
            return []
        st = self.state
        idx = torch.tensor(rows, dtype=torch.long, device=st.time.device)
        cols = torch.stack([st.time[idx], st.valid_from[idx], st.valid_until[idx], st.access[idx]]).tolist()
        ids, parents, metas, exact, last = st.ids, self.parents, self.metas, self.exact, self.last
        texts = self.texts.many(rows)
        out = []
        for j, r in enumerate(rows):
            i = ids[r]
            t, vf, vu, acc = cols[0][j], cols[1][j], cols[2][j], cols[3][j]
            m = metas[r]
            x = exact.get(i) if exact else None  # datetimes float seconds would not give back
            out.append(MemoryRecord(
                i, texts[j], parents[r],
                x["t"] if x and "t" in x else from_seconds(t),
                {} if m is None else meta_copy(m) if copies else m,
                x["valid_from"] if x and "valid_from" in x else (None if vf == -math.inf else from_seconds(vf)),
                x["valid_until"] if x and "valid_until" in x else (None if vu == math.inf else from_seconds(vu)),
                int(acc), last.get(i)))
        return out

    # ------------------------------------------------------------------ writing
    def _remember_exact(self, rec: MemoryRecord) -> None:
        """Keep the datetimes of ``rec`` that float seconds would not give back exactly."""
        keep = {}
        for name in _TIMES:
            t = getattr(rec, name)
            if t is not None and not _round_trips(t, to_seconds(t)):
                keep[name] = t
        if keep:
            self.exact[rec.id] = keep
        elif self.exact:
            self.exact.pop(rec.id, None)

    def _shared_parent(self, parent: str | None) -> str | None:
        """The parent's own id object (one string for the parent and all its children)."""
        if parent is None:
            return None
        r = self.state.row.get(parent)
        return parent if r is None else self.state.ids[r]

    def put(self, rec: MemoryRecord) -> None:
        """Store ``rec``'s text, parent, metadata, last access and exact times at the row of
        ``rec.id`` (which the state has already given it); the time and access columns are
        the caller's to write."""
        r = self.state.row[rec.id]
        if r >= len(self.texts):
            grow = r + 1 - len(self.texts)
            self.texts.extend([""] * (grow - 1) + [rec.text])
            self.parents.extend([None] * grow)
            self.metas.extend([None] * grow)
        else:
            self.texts[r] = rec.text
            self.rewrites.append(r)
            if len(self.rewrites) > max(1024, len(self.texts)):
                self.relaid()
        self.parents[r] = self._shared_parent(rec.parent_id)
        self.metas[r] = rec.meta if rec.meta else None
        if rec.last_accessed is not None:
            self.last[rec.id] = rec.last_accessed
        elif self.last:
            self.last.pop(rec.id, None)
        self._remember_exact(rec)

    def __setitem__(self, id: str, rec: MemoryRecord) -> None:
        if rec.id != id:
            raise ValueError(f"record {rec.id!r} stored under id {id!r}")
        self.put(rec)

    def append(self, records: Sequence[MemoryRecord]) -> None:
        """Rows ``len(texts) ..`` for ``records``, in order (their rows are already in the state)."""
        self.texts.extend(r.text for r in records)
        self.parents.extend(self._shared_parent(r.parent_id) for r in records)
        self.metas.extend(r.meta if r.meta else None for r in records)
        for r in records:
            if r.last_accessed is not None:
                self.last[r.id] = r.last_accessed
            if r.t is not None and (r.valid_from is not None or r.valid_until is not None
                                    or not _round_trips(r.t, to_seconds(r.t))):
                self._remember_exact(r)

    def reset(self, records: Sequence[MemoryRecord]) -> None:
        """Hold exactly ``records``, row ``i`` being ``records[i]`` (the state's ids and rows
        already set)."""
        self.texts, self.parents, self.metas, self.exact, self.last = TextColumn(), [], [], {}, {}
        self.relaid()
        self.append(records)

    def keep_from(self, blocks: Sequence[tuple[int, int]], gone: Sequence[str], removed_rows: list[int],
                  rows: Sequence[int] | None = None) -> None:
        """Remove the rows of ``blocks`` (increasing ``[a, b)`` ranges): the ``gone`` ids, at
        ``removed_rows``, their last accesses and times forgotten.  The rows after the first
        block move down (``rows``: the kept rows from there on, gathered at once where the
        blocks are many), the journal (:attr:`rewrites`, :attr:`removed`, :attr:`removals`)
        carries on through it."""
        first = blocks[0][0]
        if rows is None:
            self.texts.delete_blocks(blocks)
            delete_blocks(self.parents, blocks)
            delete_blocks(self.metas, blocks)
        else:
            self.texts.keep_from(first, rows)
            self.parents[first:] = [self.parents[r] for r in rows]
            self.metas[first:] = [self.metas[r] for r in rows]
        if any(r >= first for r in self.rewrites):
            starts = [a for a, _ in blocks]
            shifts = list(accumulate(b - a for a, b in blocks))

            def new_row(r: int) -> int:  # -1: removed
                j = bisect_right(starts, r) - 1
                return r if j < 0 else (-1 if r < blocks[j][1] else r - shifts[j])
            self.rewrites = [new_row(r) if r >= 0 else r for r in self.rewrites]
        self.removed.extend(gone)
        self.removals.append(removed_rows)
        if len(self.removed) > max(1024, len(self.texts) // 8):  # the journal keeps the ids alive: bounded
            self.relaid()
        if self.exact or self.last:
            for i in gone:
                self.exact.pop(i, None)
                self.last.pop(i, None)

    def touched(self, id: str, when: datetime | None) -> None:
        """Record ``when`` as the last access of ``id`` (None: never accessed)."""
        if when is None:
            self.last.pop(id, None)
        else:
            self.last[id] = when


def table_of(state, records: Mapping[str, MemoryRecord] | RecordTable) -> RecordTable:
    """``records`` as the table of ``state`` (a state pickled when records were a dict)."""
    if isinstance(records, RecordTable):
        records.texts = as_text_column(records.texts)  # a list in tables pickled before the column
        if not hasattr(records, "removals"):  # pickled before the journal (of removals)
            records.relaid()
        return records
    table = RecordTable(state)
    table.reset([records[i] for i in state.ids[: state.n]])
    return table
