r"""The SQLite file of :func:`hypermem.store.persistence.save` (format 1, laid out in that
module's docstring) written and read :data:`CHUNK` rows at a time.

**Writing.**  The store's lock is held while the rows are written (other threads' calls wait
for the save, as they waited for the copy it used to make), so nothing of the store is copied
whole: a chunk's points ``p = tanh(sqrt(c) r / 2) / sqrt(c) * u`` (:func:`P.point_at`, Ganea
et al., *Hyperbolic Entailment Cones*, ICML 2018, eq. 3 with the exponential map at the
origin), its blobs and its rows exist only while that chunk is written (``executemany``).  The tables are filled in the order the whole-store
writer used (config, every ``records`` row, every ``hypermem_rows`` row), so a file holds
the same rows, value for value, as before.

**Reading.**  The declared dimension is checked against the first record's blobs and the
file's size (:func:`check_sizes`) before any column is allocated.  Rows are then fetched
``CHUNK`` at a time (``fetchmany``); a chunk's blobs are checked
(:func:`~hypermem.store.load_checks.stack_rows`) and written into the fresh memory's columns,
already allocated for the file's row count, its records parsed, and its stored points
compared with ``point_at(direction, depth)``: the file's vectors are never held as Python
objects, nor as one more ``(n, dim)`` array, for the whole store.
"""

from __future__ import annotations

import json
import math
import sqlite3
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

import torch

from ..geometry import poincare as P
from ..temporal.clock import to_seconds
from .load_checks import check_count, floats, hierarchy_levels, parse_records, stack_rows
from .placement import unit
from .state import COLUMNS as STATE_COLUMNS
from .validation import (
    MemoryFileError,
    check_geometry,
    check_json_depth,
    direction_problem,
    is_int,
    short,
)

CHUNK = 8192
"""Rows written or read at a time (a multiple of the vector width: chunked points are the whole store's)."""
RECORD_COLUMNS = ("pos", "id", "text", "parent_id", "t", "valid_from", "valid_until", "access_count",
                  "last_accessed", "meta", "point", "embedding")
POINT_TOLERANCE = 1e-6
"""Largest disagreement allowed between a stored point and ``point_at(direction, depth)``."""


def exact_json(value: Any, what: str) -> str:
    """``json.dumps(value)``, refusing anything that would not load back equal (or that
    nests deeper than the loaders accept)."""
    check_json_depth(value, what)
    try:
        text = json.dumps(value, allow_nan=False, ensure_ascii=False)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{what} cannot be saved as JSON ({exc}); refusing to stringify it") from None
    if json.loads(text) != value:
        raise ValueError(f"{what} would not load back equal from JSON (tuples, non-string keys and the like "
                         f"change); use lists and string keys")
    return text


def iso(t: datetime | None) -> str | None:
    return None if t is None else t.isoformat()


def not_saveable(problem: str) -> ValueError:
    return ValueError(f"cannot save: {problem} (it was stored without a direction, as an older version stored a "
                      f"text without words): update(id, text=...) or remove it, then save")


def write_rows(con: sqlite3.Connection, memory, config: dict[str, Any], blob: Callable[[torch.Tensor], bytes],
               chunk: int | None = None) -> None:
    """Fill the tables of a new format-1 file with ``memory``'s ``config`` and rows (the caller
    holds ``memory.state.lock`` and created the tables); ``blob(row)``: the bytes of one float64
    CPU row."""
    st, c, chunk = memory.state, config["curvature"], chunk or CHUNK
    n, ids = st.n, st.ids
    sibling = {k: j for kids in st.children.values() for j, k in enumerate(kids)}
    con.executemany("INSERT INTO config VALUES (?, ?)", [(k, json.dumps(v, allow_nan=False)) for k, v in config.items()])
    insert = f"INSERT INTO records VALUES ({', '.join('?' * len(RECORD_COLUMNS))})"
    for lo in range(0, n, chunk):
        hi = min(n, lo + chunk)
        dirs = st.direction[lo:hi].detach().to("cpu", torch.float64)
        if (problem := direction_problem(dirs, ids[lo:hi])) is not None:  # what the loaders would refuse
            raise not_saveable(problem)
        points = P.point_at(dirs, st.depth[lo:hi].detach().to("cpu", torch.float64), c)
        del dirs
        embeddings = st.embeddings_of(list(range(lo, hi)))
        recs = st.records.at_rows(range(lo, hi), copies=False)   # serialised, never kept
        con.executemany(insert, [
            (lo + j, r.id, r.text, r.parent_id, iso(r.t), iso(r.valid_from), iso(r.valid_until), int(r.access_count),
             iso(r.last_accessed), exact_json(r.meta, f"the meta of memory {r.id!r}"), blob(points[j]), blob(embeddings[j]))
            for j, r in enumerate(recs)])
    for lo in range(0, n, chunk):
        hi = min(n, lo + chunk)
        dirs = st.direction[lo:hi].detach().to("cpu", torch.float64)
        depths = st.depth[lo:hi].detach().to("cpu", torch.float64).tolist()
        con.executemany("INSERT INTO hypermem_rows VALUES (?, ?, ?, ?)",
                        [(lo + j, blob(dirs[j]), depths[j], sibling.get(ids[lo + j], 0)) for j in range(hi - lo)])


def _chunk_rows(rows: list[tuple], last: list, where: str) -> list[dict]:
    """A fetched chunk of ``records`` rows as dicts (``parent_id`` as ``parent``), positions
    checked (integers, increasing: ``last[0]`` is the previous chunk's last); the meta text is
    parsed by :func:`~hypermem.store.load_checks.parse_records`."""
    out = []
    for row in rows:
        r = dict(zip(RECORD_COLUMNS, row))
        r["parent"] = r.pop("parent_id")
        if not is_int(r["pos"]) or (last[0] is not None and r["pos"] <= last[0]):
            raise MemoryFileError(f"{where}: the records table has a bad or repeated pos (the row order)")
        last[0] = r["pos"]
        out.append(r)
    return out


def _chunk_geometry(ext: sqlite3.Cursor, rows: list[dict], last: list, dim: int, where: str):
    """The ``hypermem_rows`` of a chunk of records: ``(directions, depths, siblings)``."""
    ex = ext.fetchmany(len(rows))
    for e, r in zip(ex, rows):
        if not is_int(e[0]) or e[0] == last[0]:
            raise MemoryFileError(f"{where}: hypermem_rows has a bad or repeated pos {short(e[0])}")
        last[0] = e[0]
        if e[0] != r["pos"]:
            break
    else:
        if len(ex) == len(rows):
            return (stack_rows([e[1] for e in ex], dim, "direction", rows, where),
                    floats([e[2] for e in ex], "depth", rows, where), [e[3] for e in ex])
    raise MemoryFileError(f"{where}: hypermem_rows does not match the records table")


def check_sizes(con: sqlite3.Connection, n: int, dim: int, where: str) -> None:
    """Refuse a declared ``dim`` that the file's rows do not hold, before the columns of its
    ``n`` rows are allocated: the first record's point and embedding must be blobs of
    ``8 dim`` bytes (every later blob is checked as its chunk is read), and the ``2 n`` vectors
    of ``8 dim`` bytes each must fit in the file (page count times page size), so that a small
    file cannot ask for more memory than it holds."""
    if not n:
        return
    first = con.execute("SELECT id, typeof(point), length(point), typeof(embedding), length(embedding) "
                        "FROM records ORDER BY pos LIMIT 1").fetchone()
    for what, kind, size in (("point", first[1], first[2]), ("embedding", first[3], first[4])):
        if kind != "blob":
            raise MemoryFileError(f"{where}: the {what} of memory {short(first[0])} is missing or of type {kind}")
        if size != 8 * dim:
            raise MemoryFileError(f"{where}: the {what} of memory {short(first[0])} has {size} bytes, expected "
                                  f"{8 * dim} (the declared dim {dim}: dimension mismatch or a truncated file)")
    size = con.execute("PRAGMA page_count").fetchone()[0] * con.execute("PRAGMA page_size").fetchone()[0]
    if 16 * n * dim > size:
        raise MemoryFileError(f"{where}: {n} records of dim {dim} hold {16 * n * dim} bytes of vectors, more than "
                              f"the file's {size} bytes: the declared dim or the row count is wrong")


def read_rows(con: sqlite3.Connection, tables: set[str], config: dict, dim: int, where: str,
              new_memory: Callable[[], Any], chunk: int | None = None):
    """The memory of an opened format-1 file whose config was read and checked: ``new_memory()``
    makes the empty store (settings checked), filled here a chunk at a time (the columns are
    allocated once :func:`check_sizes` found the file able to hold them)."""
    n, chunk = con.execute("SELECT COUNT(*) FROM records").fetchone()[0], chunk or CHUNK
    check_count(config, range(n), where)
    check_sizes(con, n, dim, where)
    memory = new_memory()
    st, c = memory.state, memory.curvature
    # an empty hypermem_rows: a file of the reference, directions derived from the points
    geo = "hypermem_rows" in tables and con.execute("SELECT 1 FROM hypermem_rows LIMIT 1").fetchone() is not None
    ext = con.execute("SELECT pos, direction, depth, sibling_index FROM hypermem_rows ORDER BY pos") if geo else None
    cur = con.execute(f"SELECT {', '.join(RECORD_COLUMNS)} FROM records ORDER BY pos")
    records: list = []
    siblings: list = []
    seen: set[str] = set()
    last, last_ext = [None], [None]
    lo = 0
    with st.lock:
        st.alloc(n)
        while lo < n and (fetched := cur.fetchmany(min(chunk, n - lo))):
            rows = _chunk_rows(fetched, last, where)
            hi = lo + len(rows)
            points = stack_rows([r.pop("point") for r in rows], dim, "point", rows, where)
            emb = stack_rows([r.pop("embedding") for r in rows], dim, "embedding", rows, where)
            records.extend(parse_records(rows, where, seen, meta_text=True))
            try:
                memory.ball.check_inside(points, name=f"{where}: point (rows {lo}-{hi - 1})")
            except ValueError as exc:
                raise MemoryFileError(str(exc)) from None
            if geo:
                dirs, depths, sibs = _chunk_geometry(ext, rows, last_ext, dim, where)
                check_geometry(dirs, depths, [], [], [r["id"] for r in rows], where)
                gap = float(P.point_at(dirs, depths, c).sub_(points).abs_().max())
                if not gap <= POINT_TOLERANCE:
                    raise MemoryFileError(f"{where}: stored points and directions/depths disagree by {gap:.3g}")
                siblings.extend(sibs)
            else:
                dirs, depths = unit(points), P.distance_to_origin(points, c).reshape(-1)
                siblings.extend(range(lo, hi))
            st.direction[lo:hi] = dirs.to(memory.device, memory.dtype)
            st.depth[lo:hi] = depths.to(memory.device, memory.dtype)
            st.set_embeddings(slice(lo, hi), emb)
            lo = hi
        if lo != n or (geo and ext.fetchone() is not None):
            raise MemoryFileError(f"{where}: hypermem_rows does not match the records table")
        if geo:  # the siblings of the whole store (directions and depths were checked a chunk at a time)
            check_geometry(torch.ones(1, 1), torch.zeros(1), siblings, [r.parent_id for r in records],
                           [r.id for r in records], where)
        finish_restore(memory, records, hierarchy_levels(records, where), siblings)
    return memory


def restore_state(memory, records, levels, siblings, directions, depths, embeddings) -> None:
    """Fill a fresh, empty memory's state directly (no embedding, no placement): the JSON
    loaders and the durable backends restore a store through this function."""
    n = len(records)
    dev, dt = memory.device, memory.dtype
    with memory.state.lock:
        memory.state.alloc(n)
        memory.state.direction[:n] = directions.to(dev, dt)
        memory.state.depth[:n] = depths.to(dev, dt)
        memory.state.set_embeddings(slice(0, n), embeddings)
        finish_restore(memory, records, levels, siblings)


def restore_columns(memory, records, levels, siblings, direction, depth, embedding) -> None:
    """:func:`restore_state` with columns built for ``len(records)`` rows (``direction`` and
    ``depth`` in the store's dtype and device, ``embedding`` float32 or float64 on the CPU):
    they become the state's own, not copied into freshly allocated ones."""
    st = memory.state
    with st.lock:
        st.alloc(0)   # empty columns, the counters a rewrite resets
        n = len(records)
        built = {"direction": direction, "depth": depth, "embedding": embedding}
        for name in STATE_COLUMNS:
            col = getattr(st, name)
            setattr(st, name, built[name] if name in built else col.new_zeros((n, *col.shape[1:])))
        finish_restore(memory, records, levels, siblings)


def finish_restore(memory, records: Sequence, levels: list[int], siblings: list) -> None:
    """The rest of a restore once the vector columns of ``len(records)`` rows are filled:
    time columns, ids, records, children (ordered by ``siblings``), levels, the row count."""
    n = len(records)
    st, dev = memory.state, memory.device
    f64 = {"dtype": torch.float64, "device": dev}
    st.time[:n] = torch.tensor([to_seconds(r.t) for r in records], **f64)
    st.access[:n] = torch.tensor([float(r.access_count) for r in records], **f64)
    st.valid_from[:n] = torch.tensor([to_seconds(r.valid_from, -math.inf) for r in records], **f64)
    st.valid_until[:n] = torch.tensor([to_seconds(r.valid_until, math.inf) for r in records], **f64)
    st.ids = [r.id for r in records]
    st.row = {r.id: i for i, r in enumerate(records)}
    st.records.reset(records)
    children: dict[str, list[tuple[Any, int, str]]] = {}
    for i, r in enumerate(records):
        if r.parent_id is not None:
            children.setdefault(r.parent_id, []).append((siblings[i], i, r.id))
    st.children = {p: [k for _, _, k in sorted(kids)] for p, kids in children.items()}
    st.levels = list(levels)
    st.n = n
    st.changed()
