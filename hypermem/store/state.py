"""The public state of a memory store: its rows, its columns and its lock.

A :class:`~hypermem.store.Memory` keeps one row per memory, in insertion order, and a set
of column tensors with one entry per row.  :class:`MemoryState` holds them; it is the one
object through which persistence, the durable backends, the inspector, the ``nn`` layer
and the episodic layer read (and, for the loaders, write) a store.  Nothing outside it
touches the store's attributes.

Columns (rows ``0 .. n-1`` are live; capacity past ``n`` is spare room)::

    direction   (cap, dim)  unit direction of each point   store dtype, store device
    depth       (cap,)      hyperbolic distance to 0        store dtype, store device
    time        (cap,)      creation time, POSIX seconds    float64, store device
    access      (cap,)      access count                    float64, store device
    valid_from  (cap,)      validity start (-inf: always)   float64, store device
    valid_until (cap,)      validity end (+inf: forever)    float64, store device
    embedding   (cap, dim)  raw text embedding              float32 or float64, CPU

The point of row ``i`` is ``point_at(direction[i], depth[i])``
(:func:`hypermem.geometry.poincare.point_at`).

**Embedding column.**  Float32 while every stored embedding is exactly a float32 (the output
of most text embedders, converted to float64 by the store: nothing is lost), float64 from the
first write of one that is not (:meth:`MemoryState.set_embeddings`): half the bytes for the
common case, the same values always.  Readers convert to float64.  A store placed by a
hierarchy encoder keeps float64 (``narrow_embeddings=False``: its parent scan multiplies
every query by the whole column in float64).

**Search mirror.**  :meth:`MemoryState.search_keys` returns the live directions at float32
for the search's scan (half the bytes a query reads at float64): the ``direction`` column
itself in a float32 store, else a float32 copy built on first use and kept in step,
row by row for appended rows, moved with the rows by a removal (:meth:`~MemoryState.keep_rows`),
in full after any other :meth:`~MemoryState.changed`.  The
float64 column stays the store's value: the search re-scores its final candidates from it
(:func:`hypermem.index.rescore.mirrored_topk`).

Bookkeeping: ``ids`` (row -> id), ``row`` (id -> row), ``records`` (id ->
:class:`~hypermem.store.records.MemoryRecord`, a
:class:`~hypermem.store.record_table.RecordTable` that keeps texts, parents and metadata as
row-aligned lists and reads the times back from the columns), ``children`` (id -> child ids in insertion
order), ``levels`` (row -> level in the hierarchy), ``n`` and ``version`` (bumped by every
change of a point, a record or the hierarchy; an index or a mirror compares it to know it
is stale).

**Locking.** ``lock`` is re-entrant; hold it while reading several fields that must agree
(``with mem.state.lock: ...``), and always while writing.
"""

from __future__ import annotations

import math
import threading
import uuid
from collections import Counter

import torch

from ..geometry.poincare import point_at
from ..temporal.clock import to_seconds
from .compaction import delete_blocks, moves_column, moves_runs, removed_blocks, shift_rows
from .record_table import RecordTable, table_of
from .records import MemoryRecord

__all__ = ["MemoryState", "COLUMNS", "batch_ids", "exactly_float32", "take"]

COLUMNS = ("direction", "depth", "time", "access", "valid_from", "valid_until", "embedding")
"""The per-row tensors of :class:`MemoryState`, in a fixed order."""


def exactly_float32(values: torch.Tensor) -> bool:
    """Whether every value of a float tensor survives a round trip through float32 unchanged."""
    return values.dtype == torch.float32 or bool(torch.equal(values.to(torch.float32).to(values.dtype), values))


def batch_ids(ids, parents, records) -> tuple[list[str], dict[str, int]]:
    """Ids for a batch (None: a fresh random one) and each id's batch position, checked
    before anything is stored: no id already in ``records`` (a container of the stored ids)
    or twice in the batch, every parent stored or earlier in the batch."""
    new: list[str] = []
    pos: dict[str, int] = {}
    for i, (id_, par) in enumerate(zip(ids, parents)):
        if id_ is None:
            id_ = uuid.uuid4().hex[:16]
            while id_ in records or id_ in pos:
                id_ = uuid.uuid4().hex[:16]
        elif id_ in records or id_ in pos:
            raise ValueError(f"duplicate id {id_!r}")
        if par is not None and par not in records and par not in pos:
            if len(new) == 0 and len(ids) == 1:
                where = ""
            elif par in ids[i + 1:]:
                where = f" (item #{i}; parents must precede their children)"
            else:
                where = f" (item #{i}; neither a stored memory nor an item of the batch has that id)"
            raise KeyError(f"unknown parent id {par!r}{where}")
        pos[id_] = i
        new.append(id_)
    return new, pos


def take(column: torch.Tensor, rows: list[int]) -> torch.Tensor:
    """``column[rows]``: a view when the rows are one ascending run (a batch just appended)."""
    if rows and rows[-1] - rows[0] == len(rows) - 1 and all(b - a == 1 for a, b in zip(rows, rows[1:])):
        return column[rows[0]: rows[-1] + 1]
    return column[torch.tensor(rows, dtype=torch.long, device=column.device)]


def _row_list(index) -> list[int]:
    """Rows named by a slice (with a stop), an int, a list or a tensor."""
    if isinstance(index, slice):
        return list(range(index.start or 0, index.stop, index.step or 1))
    if isinstance(index, int):
        return [index]
    return torch.as_tensor(index).reshape(-1).tolist()


class MemoryState:
    """Rows and columns of one store (see the module docstring for the layout).

    >>> import torch
    >>> s = MemoryState(dim=3, dtype=torch.float64, device="cpu")
    >>> s.reserve(2); s.direction.shape[0] >= 2, s.n
    (True, 0)
    """

    def __init__(self, dim: int, dtype: torch.dtype, device: torch.device | str, narrow_embeddings: bool = True):
        self.dim, self.dtype, self.device = int(dim), dtype, torch.device(device)
        self.narrow_embeddings = bool(narrow_embeddings)
        """Whether the embedding column may be float32 (module docstring); a store placed by a
        hierarchy encoder keeps float64, which its parent scan multiplies every query by."""
        self.lock = threading.RLock()
        self.ids: list[str] = []
        self.row: dict[str, int] = {}
        self.records = RecordTable(self)
        self.children: dict[str, list[str]] = {}
        self.levels: list[int] = []
        self.n = 0
        self.version = 0
        self.mirror: torch.Tensor | None = None
        """The float32 copy of ``direction`` (None until :meth:`search_keys` builds it)."""
        self.mirror_rows = 0
        """Rows ``0 .. mirror_rows-1`` of :attr:`mirror` agree with ``direction``."""
        self.rewrites = 0
        """Counts the changes that were not appends (an index built at the same count and
        ``m`` rows only needs rows ``m .. n-1`` added)."""
        self.edits = 0
        """Counts the changes of records and of the time and validity columns in place (no
        point moved: a banded index keeps its graphs and recomputes its bands' extremes)."""
        self.embedding_source = None
        """Set by :meth:`release_embeddings` (a bound store): ids -> their stored embeddings."""
        self.pending: dict[str, torch.Tensor] = {}
        """Without a column: the embeddings written since the storage last took them."""
        self.alloc(0)

    def __getstate__(self) -> dict:
        """Everything but the lock (``copy.deepcopy`` and ``pickle`` of a store go through here)."""
        state = dict(self.__dict__)
        state.pop("lock", None)
        state["mirror"], state["mirror_rows"] = None, 0  # rebuilt on the copy's first search
        return state

    def __setstate__(self, state: dict) -> None:
        # a state pickled before the mirror or the float32 embedding column
        state = {"mirror": None, "mirror_rows": 0, "rewrites": 0, "edits": 0, "narrow_embeddings": True,
                 "embedding_source": None, "pending": {}, **state}
        self.__dict__.update(state)
        self.records = table_of(self, self.records)
        self.lock = threading.RLock()

    # ------------------------------------------------------------------ capacity
    def alloc(self, cap: int) -> None:
        """Fresh, zeroed columns of capacity ``cap`` (the rows are not touched)."""
        d, dev, dt = self.dim, self.device, self.dtype
        self.direction = torch.zeros(cap, d, dtype=dt, device=dev)
        self.depth = torch.zeros(cap, dtype=dt, device=dev)
        f64 = {"dtype": torch.float64, "device": dev}
        self.time = torch.zeros(cap, **f64)
        self.access = torch.zeros(cap, **f64)
        self.valid_from = torch.zeros(cap, **f64)
        self.valid_until = torch.zeros(cap, **f64)
        narrow = self.narrow_embeddings  # widened by set_embeddings when needed
        self.embedding = torch.zeros(cap, d, dtype=torch.float32 if narrow else torch.float64)
        self.mirror, self.mirror_rows = None, 0
        self.rewrites = getattr(self, "rewrites", -1) + 1

    def reserve(self, extra: int) -> None:
        """Room for ``extra`` more rows (capacity at least doubles, so appends are amortised O(1))."""
        need = self.n + extra
        cap = self.direction.shape[0]
        if need <= cap:
            return
        new_cap = max(need, 2 * cap, 64)
        for name in COLUMNS:
            old = getattr(self, name)
            if old is None:  # a released embedding column
                continue
            new = old.new_empty((new_cap,) + tuple(old.shape[1:]))
            new[: self.n] = old[: self.n]
            setattr(self, name, new)
        if self.mirror is not None:
            new = self.mirror.new_empty((new_cap, self.dim))
            new[: self.mirror_rows] = self.mirror[: self.mirror_rows]
            self.mirror = new

    def keep_rows(self, keep: torch.Tensor) -> None:
        """Compact the columns, the float32 mirror, ``ids`` and ``levels`` to the rows where
        ``keep`` (CPU bool, length ``n``) is true, the records' fields with them; ``children``
        is the caller's to update.  Rows before the first removed one are not touched
        (:mod:`hypermem.store.compaction`): removing a recent memory costs little whatever
        the store's size.  An index over the points is stale after it (:attr:`rewrites`)."""
        drop = (~keep[: self.n]).nonzero().squeeze(1)
        if drop.numel() == 0:
            return
        blocks = removed_blocks(drop)
        first, m = blocks[0][0], self.n - int(drop.numel())
        drop_rows = drop.tolist()
        gone = [self.ids[r] for r in drop_rows]
        runs = moves_runs(blocks, self.n)   # the row-aligned lists move runs, else one gather
        tail = None if runs else keep[first: self.n].nonzero().squeeze(1) + first
        for name in COLUMNS:
            t = getattr(self, name)
            if t is None:
                continue
            if runs or moves_column(t, blocks, self.n):
                shift_rows(t, blocks, self.n)
            else:
                t[first:m] = t.index_select(0, tail.to(t.device))
        if self.mirror is not None and self.mirror_rows > first:
            if runs or moves_column(self.mirror, blocks, self.mirror_rows):
                self.mirror_rows = shift_rows(self.mirror, blocks, self.mirror_rows)
            else:
                mt = tail[tail < self.mirror_rows]
                self.mirror[first: first + mt.numel()] = self.mirror.index_select(0, mt.to(self.mirror.device))
                self.mirror_rows = first + int(mt.numel())
        if runs:
            self.records.keep_from(blocks, gone, drop_rows)
            delete_blocks(self.ids, blocks)
            delete_blocks(self.levels, blocks)
        else:
            kept = tail.tolist()
            self.records.keep_from(blocks, gone, drop_rows, kept)
            self.ids[first:] = [self.ids[r] for r in kept]
            self.levels[first:] = [self.levels[r] for r in kept]
        row = self.row
        for i in gone:
            del row[i]
        row.update(zip(self.ids[first:m], range(first, m)))
        self.n = m
        self.rewrites += 1

    def touch(self, ids, now) -> None:
        """One access of each id in ``ids`` at ``now`` (a repeated id counts each time):
        the records' ``access_count`` / ``last_accessed`` and the ``access`` column."""
        if not ids:
            return
        with self.lock:
            rows = []
            for i in ids:
                rows.append(self.row[i])
                self.records.touched(i, now)
            uniq = Counter(rows)
            idx = torch.tensor(list(uniq), dtype=torch.long, device=self.device)
            self.access[idx] += torch.tensor(list(uniq.values()), dtype=torch.float64, device=self.device)

    def set_access(self, id: str, count: int, last_accessed=None) -> None:
        """Set the access count (record and column) and last access time of ``id``."""
        with self.lock:
            self.rows_of([id])
            self.records.touched(id, last_accessed)
            self.access[self.row[id]] = float(count)

    # ------------------------------------------------------------------ appending
    def new_ids(self, ids, parents) -> tuple[list[str], dict[str, int]]:
        """Ids for a batch (None: a fresh random one) and each id's batch position, checked
        before anything is stored (:func:`batch_ids` against the ids stored here)."""
        return batch_ids(ids, parents, self.row)

    def batch_levels(self, parents, batch_pos: dict[str, int]) -> tuple[list[int], list[int]]:
        """Levels of a batch's memories and their generations (a memory whose parent is in
        the batch comes one generation after it; the rest are generation 0)."""
        levels, gen = [0] * len(parents), [0] * len(parents)
        for i, par in enumerate(parents):
            if par is None:
                continue
            j = batch_pos.get(par)
            if j is not None:
                levels[i], gen[i] = levels[j] + 1, gen[j] + 1
            else:
                levels[i] = self.levels[self.row[par]] + 1
        return levels, gen

    def append_rows(self, records: list[MemoryRecord], levels: list[int], embeddings: torch.Tensor,
                    owned: bool = False) -> None:
        """Commit rows ``n .. n+m-1`` (their ``direction`` and ``depth`` already written, in
        reserved capacity): times, validity, zero accesses, embeddings, records, hierarchy.
        ``owned``: nobody else holds ``embeddings``, so an empty state may keep the tensor as
        its column instead of copying it."""
        n0, m = self.n, len(records)
        sl, f64 = slice(n0, n0 + m), {"dtype": torch.float64, "device": self.device}
        if m == 1:  # one add(): the same float64 values, written without a tensor each
            r = records[0]
            self.time[n0], self.access[n0] = r.t.timestamp(), 0.0
            self.valid_from[n0] = to_seconds(r.valid_from, -math.inf)
            self.valid_until[n0] = to_seconds(r.valid_until, math.inf)
        else:
            self.time[sl] = torch.tensor([r.t.timestamp() for r in records], **f64)
            self.access[sl] = 0.0
            self.valid_from[sl] = torch.tensor([to_seconds(r.valid_from, -math.inf) for r in records], **f64)
            self.valid_until[sl] = torch.tensor([to_seconds(r.valid_until, math.inf) for r in records], **f64)
        ids = [r.id for r in records]
        self.row.update(zip(ids, range(n0, n0 + m)))
        self.ids.extend(ids)
        self.records.append(records)
        col = self.embedding
        if (owned and n0 == 0 and col is not None and col.shape == embeddings.shape and embeddings.is_contiguous()
                and not (col.dtype == torch.float32 and exactly_float32(embeddings))):
            self.embedding = embeddings  # the first batch's fresh float64 embeddings become the column (no copy)
        else:
            self.set_embeddings(sl, embeddings)
        for i, p in zip(ids, self.records.parents[n0:]):  # p: the parent's own id object
            if p is not None:
                self.children.setdefault(p, []).append(i)
        self.levels.extend(levels)
        self.n = n0 + m
        self.changed(appended=True)

    def set_embeddings(self, index, values: torch.Tensor) -> None:
        """Write ``values`` into rows ``index`` of the embedding column, widening the column
        to float64 first when one of them is not exactly a float32 (module docstring); without
        a column (released), keep them in :attr:`pending` until the storage has them."""
        if self.embedding is None:
            rows = _row_list(index)
            vals = values.detach().to("cpu", torch.float64).reshape(len(rows), self.dim).clone()
            self.pending.update(zip((self.ids[r] for r in rows), vals))
            return
        if self.embedding.dtype == torch.float32 and values.dtype != torch.float32 and not exactly_float32(values):
            self.embedding = self.embedding.to(torch.float64)
        self.embedding[index] = values.to("cpu", self.embedding.dtype)

    def stored_embeddings(self, index, values: torch.Tensor) -> None:
        """Embeddings the storage already holds (another process's rows): written to a held
        column, not kept without one."""
        if self.embedding is not None:
            self.set_embeddings(index, values)

    # ------------------------------------------------------------------ released embeddings
    def release_embeddings(self, source) -> None:
        """Hold no embedding column from now on (a bound store: its storage has them):
        ``source(ids)`` returns the stored embeddings of ``ids`` (float64 ``(len(ids), dim)``),
        read when a re-placement, a save or a reader needs rows of them; the ones written
        since the storage last took them wait in :attr:`pending` (:meth:`flushed`).  A reader
        of the whole column (:meth:`embedding_column`) brings it back, kept in step from then."""
        with self.lock:
            self.embedding_source, self.embedding, self.pending = source, None, {}

    def flushed(self, ids=None) -> None:
        """The storage holds the pending embeddings of ``ids`` now (None: all of them; a
        bound store's write, or its commit)."""
        if ids is None:
            self.pending = {}
        elif self.pending:
            for i in ids:
                self.pending.pop(i, None)

    def embeddings_of(self, rows=None) -> torch.Tensor:
        """Embeddings of ``rows`` (None: every live row; an int, a list or a tensor of rows)
        as float64 CPU values: from the column (a view when it is float64 and ``rows`` is one
        ascending run), else from :attr:`pending` and the storage."""
        with self.lock:
            col = self.embedding
            if col is not None:
                if rows is None:
                    return col[: self.n].to(torch.float64)
                return (take(col, rows) if isinstance(rows, list) else col[rows]).to(torch.float64)
            single = isinstance(rows, int)
            ids = [self.ids[r] for r in (range(self.n) if rows is None else _row_list(rows))]
            missing = [i for i in ids if i not in self.pending]
            got = dict(zip(missing, self.embedding_source(missing))) if missing else {}
            pend = self.pending
            out = torch.stack([pend[i] if i in pend else got[i] for i in ids]) if ids else \
                torch.empty(0, self.dim, dtype=torch.float64)
            return out[0] if single else out

    def embedding_column(self) -> torch.Tensor:
        """The whole embedding column ``(n, dim)`` in its own dtype, read back from the
        storage first when it was released (and held from then on)."""
        with self.lock:
            if self.embedding is None:
                values = self.embeddings_of()
                narrow = self.narrow_embeddings and exactly_float32(values)
                col = torch.zeros(self.direction.shape[0], self.dim, dtype=torch.float32 if narrow else torch.float64)
                col[: self.n] = values
                self.embedding, self.pending = col, {}
            return self.embedding[: self.n]

    def changed(self, appended: bool = False, rows=None, compacted: bool = False) -> None:
        """Mark a change (an index or a mirror built at an older ``version`` is stale).
        ``appended``: only rows past the previous ``n`` were written; ``rows``: only the
        points of these rows (and any past the previous ``n``) were written (empty: no
        point, only records or the time and validity columns); ``compacted``: rows were
        removed by :meth:`keep_rows`, which kept the mirror in step (``rows`` then names
        the points rewritten besides).  The float32 search mirror then converts just those;
        otherwise (a re-placement of unknown rows) it is rebuilt on the next search, and
        :attr:`rewrites` counts up."""
        self.version += 1
        if appended:
            return
        if rows is not None or compacted:
            rows = list(rows or ())
            if not rows:  # records or time columns only: every point, the mirror and an index stay
                self.edits += 1
                return
            if self.mirror is not None:
                idx = torch.as_tensor(rows, dtype=torch.long, device=self.device)
                idx = idx[idx < self.mirror_rows]
                self.mirror[idx] = self.direction[idx].to(torch.float32)
            self.rewrites += 1  # rows moved: an index over the points is stale, the mirror is not
            return
        self.mirror_rows = 0
        self.rewrites += 1

    def search_keys(self) -> torch.Tensor:
        """The live directions ``(n, dim)`` at float32, for the search's scan (see the module
        docstring: the column itself in a float32 store, else the mirror brought up to date)."""
        with self.lock:
            if self.dtype == torch.float32:
                return self.direction[: self.n]
            cap = self.direction.shape[0]
            if self.mirror is None or self.mirror.shape[0] != cap or self.mirror.device != self.device:
                self.mirror = torch.empty(cap, self.dim, dtype=torch.float32, device=self.device)
                self.mirror_rows = 0
            if self.mirror_rows < self.n:
                sl = slice(self.mirror_rows, self.n)
                self.mirror[sl] = self.direction[sl]
                self.mirror_rows = self.n
            return self.mirror[: self.n]

    # ------------------------------------------------------------------ reading
    def record(self, id: str) -> MemoryRecord:
        """The record of ``id``; ``KeyError`` naming it when unknown."""
        try:
            return self.records[id]
        except (KeyError, TypeError):
            raise KeyError(f"unknown memory id {id!r}") from None

    def row_of(self, id: str) -> int:
        """The row of ``id`` without building its record; ``KeyError`` naming it when unknown."""
        try:
            return self.row[id]
        except (KeyError, TypeError):
            raise KeyError(f"unknown memory id {id!r}") from None

    def rows_of(self, ids) -> list[int]:
        """Rows of ``ids`` (``KeyError`` for an unknown one)."""
        out = []
        for i in ids:
            try:
                out.append(self.row[i])
            except (KeyError, TypeError):
                raise KeyError(f"unknown memory id {i!r}") from None
        return out

    def points(self, curvature: float, rows=None) -> torch.Tensor:
        """Points of ``rows`` (all live rows when None) in float64: ``point_at(direction, depth)``."""
        d = self.direction[: self.n] if rows is None else self.direction[rows]
        r = self.depth[: self.n] if rows is None else self.depth[rows]
        return point_at(d.to(torch.float64), r.to(torch.float64), curvature)

    def __repr__(self) -> str:
        return f"MemoryState(n={self.n}, dim={self.dim}, dtype={self.dtype}, device={self.device}, " \
               f"version={self.version})"
