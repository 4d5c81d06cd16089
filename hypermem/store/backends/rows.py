r"""Rows of durable storage: what one memory is on disk, and the store rebuilt from rows.

**One vector per memory.**  A row holds the raw embedding (float64 bytes, or float32
with ``vector_dtype="float32"``), the hyperbolic depth (one double) and the record's
fields.  The unit direction is *not* stored when it is what placement derives from the
embedding (:mod:`hypermem.store.placement`: a root's direction is ``unit(e)``, a child's
``child_directions(unit(e), u_parent, r_parent, r, ...)``); it is stored (``direction``,
float64 bytes) only for a memory whose direction differs bit for bit from that
derivation (an explicit ``point=``, a store loaded from a file).  Rebuilding applies the
same placement functions generation by generation, so a reopened float64 store has the
directions it had when it was written.

``seq`` is the insertion order (the store's row order); ``sib`` orders the children of
one parent (a counter value given when a memory is added or linked).

**Rows read back are data from anywhere** (a file can be edited, a database shared): every
row is checked as :meth:`Memory.load <hypermem.store.Memory.load>` checks a file's, with the
same functions (:func:`~hypermem.store.load_checks.parse_records` for the fields,
:func:`~hypermem.store.validation.check_finite_rows`, ``direction_problem`` and
``check_depths`` for the columns, one vectorised pass per part of :data:`PART` rows), and a
bad one is a :class:`~hypermem.store.validation.MemoryFileError` naming the store, the
memory and the field before the store is replaced.
"""

from __future__ import annotations

import json
import os
import warnings
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

import numpy as np
import torch

from ...temporal.clock import to_utc
from ..load_checks import boundary_depth, parse_records
from ..placement import child_directions, unit
from ..records import MemoryRecord
from ..sqlite_stream import restore_columns
from ..state import exactly_float32, take
from ..validation import (
    MemoryFileError,
    check_depths,
    check_finite_rows,
    direction_problem,
    is_number,
    short,
)

COLUMNS = ("id", "seq", "sib", "text", "parent_id", "t", "valid_from", "valid_until", "access_count",
           "last_accessed", "meta", "depth", "embedding", "direction")
"""Columns of the memories table, in the order of a row tuple."""

VECTOR_DTYPES = {"float64": "<f8", "float32": "<f4"}


def vector_bytes(v: torch.Tensor, dtype: str = "float64") -> bytes:
    """Little-endian bytes of a 1-d tensor (``float64`` or ``float32``)."""
    return v.detach().to("cpu", torch.float64).numpy().astype(VECTOR_DTYPES[dtype], copy=False).tobytes()


def vector_from(blob: bytes, dim: int, what: str, id: str) -> torch.Tensor:
    """Float64 tensor ``(dim,)`` from the bytes of :func:`vector_bytes` (either width)."""
    width = len(blob) // dim if dim else 0
    if width not in (4, 8) or width * dim != len(blob):
        raise ValueError(f"the stored {what} of memory {id!r} has {len(blob)} bytes, not {dim} floats")
    arr = np.frombuffer(blob, dtype="<f8" if width == 8 else "<f4").astype(np.float64)
    return torch.from_numpy(arr)


def _iso(t: datetime | None) -> str | None:
    return None if t is None else t.isoformat()


def stored_time(s: Any) -> datetime | None:
    """A stored time (ISO 8601 text or a datetime) as an aware UTC datetime; None stays None."""
    if s is None:
        return None
    return to_utc(s if isinstance(s, datetime) else datetime.fromisoformat(s))


def derived_directions(memory, rows: Sequence[int]) -> torch.Tensor:
    """What placement gives rows ``rows`` of ``memory`` from their embeddings and their
    parents' current directions (store dtype, store device)."""
    rows = list(rows)
    st = memory.state
    e = unit(st.embeddings_of(rows).to(memory.device))
    par = [st.records.parents[r] for r in rows]
    kid = [j for j, p in enumerate(par) if p is not None]
    if kid:
        prow = [st.row[par[j]] for j in kid]
        e[kid] = child_directions(e[kid], st.direction[prow].to(torch.float64), st.depth[prow].to(torch.float64),
                                  st.depth[[rows[j] for j in kid]].to(torch.float64), memory.inherit,
                                  memory.cone_constrained, memory.cone_k, memory.curvature)
    return e.to(memory.dtype)


def _blobs(v: torch.Tensor, dtype: str = "float64") -> list[bytes]:
    """Little-endian bytes of each row of ``v`` (:func:`vector_bytes` of every row, at once)."""
    arr = v.detach().to("cpu", torch.float64).numpy().astype(VECTOR_DTYPES[dtype], copy=False)
    if arr.ndim != 2 or not len(arr):
        return [r.tobytes() for r in arr]
    buf, w = arr.tobytes(), arr.shape[1] * arr.itemsize  # one copy, then a slice a row
    return [buf[i:i + w] for i in range(0, len(buf), w)]


def encode(memory, ids: Sequence[str], seq: Mapping[str, int], sib: Mapping[str, int],
           vector_dtype: str = "float64", time_text: bool = True, always_direction: bool = False) -> list[tuple]:
    """Row tuples (:data:`COLUMNS`) of the memories ``ids`` as they are now in ``memory``;
    ``time_text``: times as ISO 8601 text (else datetimes); ``always_direction``: store
    every direction (for a server that searches them), not only the underived ones."""
    if not ids:
        return []
    st = memory.state
    rows = [st.row[i] for i in ids]
    stored = take(st.direction, rows)
    if always_direction:
        directions: list = _blobs(stored)
    else:
        same = (derived_directions(memory, rows) == stored).all(dim=1).tolist()
        keep = [j for j, s in enumerate(same) if not s]
        directions = [None] * len(rows)
        for j, b in zip(keep, _blobs(stored[keep]) if keep else []):
            directions[j] = b
    depths = take(st.depth, rows).to(torch.float64).tolist()
    embeddings = _blobs(st.embeddings_of(rows), vector_dtype)
    tt = _iso if time_text else (lambda t: t)
    dumps = json.dumps
    out = []
    for j, (i, rec) in enumerate(zip(ids, st.records.at_rows(rows, copies=False))):   # serialised, never kept
        meta = dumps(rec.meta, allow_nan=False) if rec.meta else "{}"
        out.append((i, seq[i], sib[i], rec.text, rec.parent_id, tt(rec.t), tt(rec.valid_from), tt(rec.valid_until),
                    int(rec.access_count), tt(rec.last_accessed), meta, depths[j], embeddings[j], directions[j]))
    return out


def _vectors(blobs: Sequence[bytes], dim: int, ids: Sequence[str], what: str, where: str) -> torch.Tensor:
    """``(len(blobs), dim)`` values of one chunk of blobs, in their stored width (float32 or
    float64: one join, no float64 copy) when they all have one, else float64 row by row;
    a blob of another length, or holding a NaN or an infinity (one ``isfinite`` pass over the
    chunk), is a :class:`MemoryFileError`."""
    width = len(blobs[0]) if blobs and isinstance(blobs[0], bytes) else 8 * dim
    if width in (4 * dim, 8 * dim) and all(type(b) is bytes and len(b) == width for b in blobs):
        kind = np.float64 if width == 8 * dim else np.float32
        arr = np.frombuffer(bytearray().join(blobs), dtype="<f8" if kind is np.float64 else "<f4")
        out = torch.from_numpy(arr.astype(kind, copy=False).reshape(len(blobs), dim))
    else:
        for b, i in zip(blobs, ids):
            if not isinstance(b, (bytes, bytearray, memoryview)):
                raise MemoryFileError(f"{where}: the stored {what} of memory {i!r} is {short(b)}, not a blob")
        try:
            out = torch.stack([vector_from(b, dim, what, i) for b, i in zip(blobs, ids)])
        except ValueError as exc:
            raise MemoryFileError(f"{where}: {exc}") from None
    check_finite_rows(out.numpy(), lambda i: f"{where}: the stored {what} of memory {ids[i]!r}")
    return out


def _column(values: list, dtype: torch.dtype, what: str, ids: Sequence[str], where: str) -> torch.Tensor:
    """One number a row (a depth, a sibling counter) as a tensor, converted at once; a value
    that is no number is a :class:`MemoryFileError` naming its memory."""
    try:
        if dtype is torch.float64 or all(type(v) is int for v in values):
            return torch.tensor(values, dtype=dtype)
    except (TypeError, ValueError, OverflowError):
        pass
    bad = next((i for i, v in enumerate(values) if not is_number(v) or (dtype is not torch.float64 and
                                                                          type(v) is not int)), 0)
    raise MemoryFileError(f"{where}: the stored {what} of memory {ids[bad]!r} is {short(values[bad])}, not "
                          f"{'a finite number' if dtype is torch.float64 else 'an integer'}")


def record_of(r: Mapping[str, Any], where: str = "the storage") -> MemoryRecord:
    """The record of a stored row (times as ISO text or datetimes, meta as JSON text or a dict),
    every field checked (:func:`~hypermem.store.load_checks.parse_records`)."""
    return parse_records([r], where, parent="parent_id", datetimes=True, meta_text=True)[0]


def _levels(records: list[MemoryRecord], pos: Mapping[str, int]) -> list[int]:
    """Hierarchy level of every record (parents may sit after their children once links
    moved them); an unknown parent or a cycle is a ``ValueError``."""
    level: dict[int, int] = {}
    for j in range(len(records)):
        chain, cur = [], j
        while cur not in level and records[cur].parent_id is not None:
            if len(chain) > len(records):
                raise MemoryFileError(f"the stored parents of memory {records[j].id!r} form a cycle")
            chain.append(cur)
            p = records[cur].parent_id
            if p not in pos:
                raise MemoryFileError(f"stored memory {records[cur].id!r} has an unknown parent {p!r}")
            cur = pos[p]
        base = level.setdefault(cur, 0) if records[cur].parent_id is None else level[cur]
        for k, node in enumerate(reversed(chain)):
            level[node] = base + 1 + k
    return [level[j] for j in range(len(records))]


def _orphans_as_roots(records: list[MemoryRecord], pos: Mapping[str, int], stacklevel: int = 4) -> None:
    """A stored row whose parent is not stored (written before parents were checked in the
    write transaction, or by a restore) is loaded as a root, with a warning naming it: one
    such row does not make the whole store unreadable.  Its row keeps its parent id until a
    write of that memory stores it as the root it now is."""
    orphans = [rec for rec in records if rec.parent_id is not None and rec.parent_id not in pos]
    if not orphans:
        return
    names = ", ".join(f"{rec.id!r} (parent {rec.parent_id!r})" for rec in orphans[:5])
    more = f" and {len(orphans) - 5} more" if len(orphans) > 5 else ""
    warnings.warn(f"{len(orphans)} stored memories have a parent that is not stored: {names}{more}; "
                  "loaded as roots (link() them to a parent, or update() them, to store that)",
                  RuntimeWarning, stacklevel=stacklevel)
    for rec in orphans:
        rec.parent_id = None


_FIELDS = ("id", "seq", "text", "parent_id", "t", "valid_from", "valid_until", "access_count", "last_accessed", "meta")
"""The columns :func:`~hypermem.store.load_checks.parse_records` reads (a dict a row: its ``get`` is C's)."""

PART = 8192
"""Rows whose vectors are joined and written at a time by :func:`restore_stream`."""


def restore(memory, rows: list[Mapping[str, Any]], stacklevel: int = 5,
            where: str = "the storage") -> tuple[dict[str, int], dict[str, int]]:
    """Replace ``memory``'s whole state by ``rows`` (dicts keyed by :data:`COLUMNS`, any
    order); returns the ``seq`` and ``sib`` of every id."""
    seqs = _column([r["seq"] for r in rows], torch.int64, "seq", [r["id"] for r in rows], where)
    order = [rows[j] for j in torch.argsort(seqs, stable=True).tolist()]
    return restore_stream(memory, len(rows), [order], stacklevel, where)


def restore_stream(memory, n: int, chunks: Iterable[Sequence[Mapping[str, Any]]], stacklevel: int = 4,
                   where: str = "the storage", size_bound: int | None = None) -> tuple[dict[str, int], dict[str, int]]:
    """Replace ``memory``'s whole state by the ``n`` rows of ``chunks`` (in ``seq`` order);
    returns ``(seq, sib)`` of every id.  Each chunk's embeddings (and stored directions) are
    written into columns allocated for ``n`` rows, :data:`PART` rows at a time, so neither
    every row's blobs nor a second ``(n, dim)`` array is held; the state is replaced only once
    every row was read and checked (a bad row leaves it as it was: a :class:`MemoryFileError`
    naming ``where``).  ``size_bound``: the bytes the rows can take at most (a file's size),
    so that a declared dimension the rows cannot hold (``n`` embeddings of at least ``4 dim``
    bytes) is refused before the columns are allocated."""
    st, dim, dev, dt = memory.state, memory.dim, memory.device, memory.dtype
    if size_bound is not None and 4 * n * dim > size_bound:
        raise MemoryFileError(f"{where}: {n} stored memories of dim {dim} need at least {4 * n * dim} bytes of "
                              f"embeddings, more than the {size_bound} bytes stored: the stored dim is wrong")
    top = boundary_depth(memory.curvature)
    seen: set[str] = set()
    emb = torch.empty(n, dim, dtype=torch.float32 if st.narrow_embeddings else torch.float64)
    direction = torch.zeros(n, dim, dtype=dt, device=dev)
    depth = torch.empty(n, dtype=dt, device=dev)
    records: list[MemoryRecord] = []
    siblings: list[int] = []
    stored_dir: list[bool] = []
    seq: dict[str, int] = {}
    sib: dict[str, int] = {}
    lo = 0
    for chunk in chunks:
        for a in range(0, len(chunk), PART):
            part = chunk[a:a + PART]
            hi = lo + len(part)
            if hi > n:
                raise ValueError(f"the storage holds more than the {n} memories it counted (changed while read)")
            got = parse_records([{k: r[k] for k in _FIELDS} for r in part], where, seen, parent="parent_id",
                                datetimes=True, meta_text=True)
            records.extend(got)
            ids = [rec.id for rec in got]
            siblings.extend(_column([r["sib"] for r in part], torch.int64, "sib", ids, where).tolist())
            seq.update(zip(ids, _column([r["seq"] for r in part], torch.int64, "seq", ids, where).tolist()))
            sib.update(zip(ids, siblings[lo:hi]))
            depths = _column([r["depth"] for r in part], torch.float64, "depth", ids, where)
            check_depths(depths, ids, where, top)
            depth[lo:hi] = depths.to(dev, dt)
            values = _vectors([r["embedding"] for r in part], dim, ids, "embedding", where)
            if emb.dtype == torch.float32 and not exactly_float32(values):   # as MemoryState.set_embeddings widens
                wide = torch.empty(n, dim, dtype=torch.float64)
                wide[:lo] = emb[:lo]
                emb = wide
            emb[lo:hi] = values
            del values
            has = [r["direction"] is not None for r in part]
            stored_dir.extend(has)
            keep = [j for j, h in enumerate(has) if h]
            if keep:   # final values: a derived direction depends only on its parent's
                named = [ids[j] for j in keep]
                stored = _vectors([part[j]["direction"] for j in keep], dim, named, "direction", where)
                if (problem := direction_problem(stored, named)) is not None:
                    raise MemoryFileError(f"{where}: {problem}")
                direction[[lo + j for j in keep]] = stored.to(dev, dt)
            lo = hi
    if lo != n:
        raise ValueError(f"the storage holds {lo} memories, not the {n} it counted (changed while read)")
    pos = {rec.id: j for j, rec in enumerate(records)}
    _orphans_as_roots(records, pos, stacklevel)
    try:
        levels = _levels(records, pos)
    except MemoryFileError as exc:
        raise MemoryFileError(f"{where}: {exc}") from None
    gen_of: list[list[int]] = [[] for _ in range(max(levels, default=-1) + 1)]
    for j, lv in enumerate(levels):
        gen_of[lv].append(j)
    with st.lock:
        restore_columns(memory, records, levels, siblings, direction, depth, emb)
        del direction, depth, emb
        for gen in gen_of:  # parents are placed before their children
            derive = [j for j in gen if not stored_dir[j]]
            for a in range(0, len(derive), PART):   # row by row maths: a part's temporaries, not a generation's
                st.direction[derive[a:a + PART]] = derived_directions(memory, derive[a:a + PART])
        st.changed()
        memory.searcher.invalidate()
    return seq, sib


def load_state(memory, storage, in_transaction: bool = False) -> tuple[int, dict[str, int], dict[str, int]]:
    """Rebuild ``memory`` from ``storage``: ``(version, seq, sib)``.  A storage that
    ``streams_rows`` (SQLite) hands its rows to :func:`restore_stream` a fetch at a time;
    otherwise ``load_rows`` gives them all at once."""
    path = getattr(storage, "path", None)
    where = repr(path) if isinstance(path, str) else repr(storage)   # a URL's repr hides its password
    if getattr(storage, "streams_rows", False):
        bound = stored_bytes(storage)
        version, (seq, sib) = storage.load_rows(
            in_transaction=in_transaction, consume=lambda n, chunks: restore_stream(memory, n, chunks, 7, where, bound))
        return version, seq, sib
    version, rows = storage.load_rows(in_transaction=in_transaction)
    seq, sib = restore(memory, rows, 6, where)
    return version, seq, sib


def stored_bytes(storage) -> int | None:
    """The bytes a SQLite storage's rows can take at most: its file and its write-ahead log
    (``None`` for a storage that is not a file)."""
    path = getattr(storage, "path", None)
    if not isinstance(path, str) or not os.path.isfile(path):
        return None
    wal = path + "-wal"
    return os.path.getsize(path) + (os.path.getsize(wal) if os.path.isfile(wal) else 0)
