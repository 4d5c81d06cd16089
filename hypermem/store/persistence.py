r"""Saving and loading a :class:`~hypermem.store.Memory` without losing anything.

**SQLite file (format 1).**  One file, written with the standard library ``sqlite3``:

* ``config (key TEXT PRIMARY KEY, value TEXT)`` — every value JSON-encoded: ``format``
  (``1``), ``curvature``, ``dim``, ``base_depth``, ``depth_step``, ``inherit``,
  ``cone_constrained``, ``cone_k``, ``metric``, ``time_coef``, ``depth_bias``,
  ``embedder`` and ``decay`` (specs, see :func:`embedder_spec` and
  :func:`hypermem.temporal.policy_spec`); hypermem adds ``dtype``, ``count``, ``hybrid``,
  ``recency_weight`` and ``lexical`` (:mod:`hypermem.store.search_settings`).
* ``records (pos, id, text, parent_id, t, valid_from, valid_until, access_count,
  last_accessed, meta, point, embedding)`` — one row per memory in insertion order;
  times as ISO 8601 text, ``meta`` as JSON text, ``point`` and ``embedding`` as raw
  little-endian float64 bytes.
* ``hypermem_rows (pos, direction, depth, sibling_index)`` — what makes hypermem's own
  round trip exact: the stored unit direction (float64 bytes), the hyperbolic depth
  (SQLite ``REAL`` is an IEEE double) and the position among the parent's children.

The first two tables are the layout of the NumPy reference ``poincare-memory`` 0.1.4
(format 1): its files load here (directions and depths are then derived from the points,
``u = p / ||p||``, ``r = 2/sqrt(c) artanh(sqrt(c) ||p||)``) and it can read hypermem's.

**JSON.**  ``{"config": {...}, "records": [{"id", "text", "parent", "t", "valid_from",
"valid_until", "access_count", "last_accessed", "meta", "point", "embedding",
"direction", "depth", "sibling_index"}, ...]}``; floats are written with Python's
shortest round-trip ``repr``, so the round trip is exact.

**Safety.**  Saving is atomic (:mod:`hypermem.store.atomic`): a crash or an exception
leaves the previous file intact.  Metadata that JSON cannot hold *exactly* (a set, an
object, a tuple, a non-string key, NaN) is refused, never stringified.  Loading never
executes code from the file (no pickle) and never writes (a read-only, immutable SQLite
connection); it checks every field it reads (:mod:`hypermem.store.load_checks`,
:mod:`hypermem.store.validation`: the format version, the count, the dimensions against
every blob before allocating, types without conversion, unit directions, JSON depth and
NaN, the parents, the integrity of the SQLite file) and raises :class:`MemoryFileError`
(a ``ValueError``) naming the file and the field.  A missing file is a
``FileNotFoundError`` and creates nothing.  The hashing embedder and the built-in decay
policies are rebuilt from their specs; anything custom must be passed back.
"""

from __future__ import annotations

import errno
import json
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import torch

from ..embed.spec import embedder_spec
from ..geometry import poincare as P
from ..temporal import policy_spec
from .atomic import atomic_sqlite, atomic_write_text
from .checks import check_replaceable, check_sqlite_name
from .embedder_dim import check_passed_embedder
from .encoder_points import ENCODER_KEY, check_encoder, encoder_record
from .json_reader import read_document
from .load_checks import (
    FORMAT_VERSION,
    check_count,
    check_format,
    config_dim,
    floats,
    hierarchy_levels,
    parse_records,
    stack_rows,
)
from .placement import unit
from .search_settings import apply_search_settings, restore_lexical, search_settings
from .sqlite_stream import (
    POINT_TOLERANCE,
    RECORD_COLUMNS,
    exact_json,
    iso,
    not_saveable,
    read_rows,
    restore_state,
    write_rows,
)
from .validation import (
    MAX_JSON_DEPTH,
    SQLITE_READ_ERRORS,
    MemoryFileError,
    check_config_types,
    check_geometry,
    check_regular_file,
    decay_from_spec,
    direction_problem,
    embedder_from_spec,
    json_depth_over,
    load_json,
    open_sqlite_readonly,
    read_sqlite_header,
    sqlite_problem,
)

CONFIG_KEYS = ("curvature", "base_depth", "depth_step", "inherit", "cone_constrained", "cone_k", "metric",
               "time_coef", "depth_bias")
__all__ = ["FORMAT_VERSION", "MemoryFileError", "embedder_spec", "embedder_from_spec",
           "save", "load", "to_json", "from_json", "to_payload", "from_payload"]


# ---------------------------------------------------------------------------- snapshot
def memory_config(memory) -> dict[str, Any]:
    """The settings of ``memory`` as the JSON config that save, to_json and the durable
    backends store (format, curvature, dim, the Memory arguments, embedder and decay specs)."""
    cfg: dict[str, Any] = {"format": FORMAT_VERSION, "curvature": float(memory.curvature), "dim": int(memory.dim)}
    for key in CONFIG_KEYS[1:]:
        cfg[key] = getattr(memory, key)
    cfg["embedder"] = embedder_spec(memory.embedder)
    cfg["decay"] = policy_spec(memory.decay)
    if (enc := encoder_record(memory.embedder)) is not None:  # which encoder placed the points (store.encoder_points)
        cfg[ENCODER_KEY] = enc
    cfg.update(search_settings(memory))  # hybrid, recency_weight, lexical (store.search_settings)
    cfg["dtype"] = str(memory.dtype).replace("torch.", "")
    cfg["count"] = len(memory)
    return cfg


def _snapshot(memory) -> dict[str, Any]:
    """Everything :func:`save` writes, copied under the memory's lock: config, records
    (plain values, meta already JSON text) and float64 CPU tensors."""
    with memory.state.lock:
        n = memory.state.n
        ids = list(memory.state.ids)
        records = []
        sibling = {}
        for kids in memory.state.children.values():
            sibling.update((k, j) for j, k in enumerate(kids))
        for i, rec in zip(ids, memory.state.records.values(copies=False)):   # serialised, never kept
            records.append({
                "id": rec.id, "text": rec.text, "parent": rec.parent_id, "t": iso(rec.t),
                "valid_from": iso(rec.valid_from), "valid_until": iso(rec.valid_until),
                "access_count": int(rec.access_count), "last_accessed": iso(rec.last_accessed),
                "meta": exact_json(rec.meta, f"the meta of memory {rec.id!r}"),
                "sibling_index": sibling.get(i, 0),
            })
        directions = memory.state.direction[:n].detach().to("cpu", torch.float64).clone()
        depths = memory.state.depth[:n].detach().to("cpu", torch.float64).clone()
        embeddings = memory.state.embeddings_of().detach().clone()
        config = memory_config(memory)
    if (problem := direction_problem(directions, ids)) is not None:  # what the loaders would refuse
        raise not_saveable(problem)
    points = P.point_at(directions, depths, config["curvature"])
    return {"config": config, "records": records, "points": points, "directions": directions, "depths": depths,
            "embeddings": embeddings}


def _blob(row: torch.Tensor) -> bytes:
    return row.numpy().astype("<f8", copy=False).tobytes()


# ---------------------------------------------------------------------------- SQLite
def save(memory, path: str | os.PathLike, *, force: bool = False) -> None:
    """Write ``memory`` to the SQLite file ``path``, atomically (see the module docstring).

    >>> import os, tempfile
    >>> from hypermem import Memory
    >>> mem = Memory(); _ = mem.add("hello")
    >>> path = os.path.join(tempfile.mkdtemp(), "mem.db")
    >>> save(mem, path); len(Memory.load(path))
    1

    A name ending in another format's extension (``.json``, ``.csv``, ``.html``...) is a
    ``ValueError`` before anything is written; JSON is :func:`to_json`.  A snapshot replaces
    an earlier snapshot or an empty file, never a file that is no SQLite database (unless
    ``force``: the CLI's ``--force``), a durable store, an episodic file or another SQLite
    database (``FileExistsError``: :func:`~hypermem.store.checks.check_replaceable`).
    """
    check_sqlite_name(path)
    check_replaceable(path, force=force)
    with memory.state.lock, atomic_sqlite(path) as con:   # written a chunk at a time (store.sqlite_stream)
        con.execute("CREATE TABLE config (key TEXT PRIMARY KEY, value TEXT)")
        con.execute("CREATE TABLE records (pos INTEGER PRIMARY KEY, id TEXT UNIQUE, text TEXT, parent_id TEXT, "
                    "t TEXT, valid_from TEXT, valid_until TEXT, access_count INTEGER, last_accessed TEXT, "
                    "meta TEXT, point BLOB, embedding BLOB)")
        con.execute("CREATE TABLE hypermem_rows (pos INTEGER PRIMARY KEY, direction BLOB, depth REAL, "
                    "sibling_index INTEGER)")
        write_rows(con, memory, memory_config(memory), lambda row: _blob(row))   # _blob looked up a call


def load(path: str | os.PathLike, embedder: Any = None, decay: Any = None, clock: Callable | None = None,
         device: str | torch.device | None = None, dtype: torch.dtype | None = None, *, cls: type):
    """Read a memory written by :func:`save` (or by ``poincare-memory`` 0.1.4) as an instance
    of ``cls`` (``Memory.load`` passes itself; this module does not import the store class).

    The embeddings stored in the file are used as they are: nothing is re-embedded.
    ``embedder`` / ``decay`` are needed only when the file was saved with custom ones;
    ``dtype`` defaults to the saved one, ``device`` to the CPU.  The rows are read a chunk at
    a time into the new store's columns (:mod:`hypermem.store.sqlite_stream`).
    """
    where = f"{os.fspath(path)!r}"
    con = open_sqlite_readonly(path)
    try:
        try:
            tables, config = read_sqlite_header(con, where, {"config", "records"}, "a memory")
            check_format(config, where)
            cols = [r[1] for r in con.execute("PRAGMA table_info(records)")]
            missing = [c for c in RECORD_COLUMNS if c not in cols]
            if missing:
                raise MemoryFileError(f"{where}: the records table lacks columns {missing}")
            dim = config_dim(config, where)
            return read_rows(con, tables, config, dim, where,
                             lambda: _new_memory(config, where, embedder, decay, clock, device, dtype, cls))
        except SQLITE_READ_ERRORS as exc:
            with open(path, "rb") as f:
                hint = "; it looks like JSON: use Memory.from_json" if f.read(64).lstrip().startswith(b"{") else ""
            raise MemoryFileError(f"{where} is not a readable memory file ({sqlite_problem(exc)}){hint}") from None
    finally:
        con.close()


# ---------------------------------------------------------------------------- JSON
def to_payload(memory) -> dict[str, Any]:
    """The JSON document of :func:`to_json` as Python objects."""
    snap = _snapshot(memory)
    return {"config": snap["config"], "records": list(_records(snap))}


def _records(snap: dict[str, Any]):
    """The snapshot's records as JSON objects, one at a time: a record's vectors become Python
    floats only while it is written, not the whole store's at once (4 GB at 100k memories)."""
    pts, emb, dirs, dep = snap["points"], snap["embeddings"], snap["directions"], snap["depths"].tolist()
    for pos, r in enumerate(snap["records"]):
        yield {"id": r["id"], "text": r["text"], "parent": r["parent"], "t": r["t"],
               "valid_from": r["valid_from"], "valid_until": r["valid_until"],
               "access_count": r["access_count"], "last_accessed": r["last_accessed"],
               "meta": json.loads(r["meta"]), "point": pts[pos].tolist(), "embedding": emb[pos].tolist(),
               "direction": dirs[pos].tolist(), "depth": dep[pos], "sibling_index": r["sibling_index"]}


def _dumps(obj: Any, indent: int | None, level: int) -> str:
    """``json.dumps(obj, indent=indent)`` as it reads nested ``level`` deep in a document: the
    same text ``json.dumps`` writes for the whole document, one part at a time (a JSON string
    holds no raw newline, so the lines of ``obj`` are indented by prefixing each)."""
    text = json.dumps(obj, indent=indent, allow_nan=False)
    return text if indent is None else text.replace("\n", "\n" + " " * (indent * level))


def json_chunks(memory, indent: int | None = None):
    """The text of :func:`to_json` in pieces (a record at a time), for writing a large store to
    a file or a stream without the whole text in memory: ``"".join(json_chunks(m))`` is
    ``to_json(m)``, the same text as ``json.dumps`` of :func:`to_payload`."""
    snap = _snapshot(memory)
    one, two = ("", "") if indent is None else ("\n" + " " * indent, "\n" + " " * (2 * indent))
    sep = ", " if indent is None else ","
    yield "{" + one + '"config": ' + _dumps(snap["config"], indent, 1) + sep + one + '"records": ['
    empty = True
    for rec in _records(snap):
        yield ("" if empty else sep) + two + _dumps(rec, indent, 2)
        empty = False
    yield ("]" if empty else one + "]") + ("}" if indent is None else "\n}")


def to_json(memory, path: str | os.PathLike | None = None, indent: int | None = None) -> str:
    """Portable JSON (config, records, points, embeddings, directions, depths).  Returns
    the text; also writes it (atomically) when ``path`` is given.  The text is the same as
    ``json.dumps`` of :func:`to_payload`, built one record at a time (:func:`json_chunks`).

    >>> from hypermem import Memory
    >>> mem = Memory(); _ = mem.add("hello", id="h")
    >>> Memory.from_json(to_json(mem)).get("h").text
    'hello'
    """
    text = "".join(json_chunks(memory, indent))
    if path is not None:
        atomic_write_text(path, text)
    return text


def from_json(source: str | os.PathLike | Mapping, embedder: Any = None, decay: Any = None,
              clock: Callable | None = None, device: str | torch.device | None = None,
              dtype: torch.dtype | None = None, *, cls: type):
    """Inverse of :func:`to_json` (``Memory.from_json`` calls it with ``cls=Memory``):
    ``source`` is a path, the JSON text itself, or the parsed document (a dict)."""
    if isinstance(source, Mapping):
        return from_payload(source, embedder, decay, clock, device, dtype, cls=cls, where="the JSON document")
    text, where = _json_source(source)
    if isinstance(text, Path) and not text.is_file():   # a pipe is read once
        text = text.read_bytes()
    if isinstance(text, Path):   # a file: decoded and parsed a record at a time (store.json_reader)
        with open(text, "rb") as f:
            parts = read_document(f, os.fstat(f.fileno()).st_size)
    else:
        parts = read_document(text) if isinstance(text, str) else None
    if parts is None:   # not laid out as to_json writes it, or not valid: read whole, checked as ever
        doc = load_json(text.read_bytes() if isinstance(text, Path) else text, where, "the document", depth=None)
        return from_payload(doc, embedder, decay, clock, device, dtype, cls=cls, where=where)
    check_count(parts[0], parts[1], where)
    return _build(*parts, where, embedder, decay, clock, device, dtype, cls)


def _json_source(source: Any) -> tuple[str | Path, str]:
    """``(text or path, where)`` of a ``from_json`` source: a string that names an existing file
    is that file (``"[draft] notes.json"`` too); any other string is the JSON text when it starts
    like JSON or parses as JSON, else a missing file."""
    if not isinstance(source, (str, os.PathLike)):
        raise TypeError(f"from_json takes a path, JSON text or a dict, got {type(source).__name__}")
    if not _names_file(source):
        text = source if isinstance(source, str) else None
        if text is not None and text.lstrip()[:1] in ("{", "["):
            return text, "the JSON text" + (" (no file of that name either)" if _meant_as_path(text) else "")
        if text is not None:
            try:
                json.loads(text)
                return text, "the JSON text"
            except (ValueError, RecursionError):
                pass
        raise FileNotFoundError(errno.ENOENT, "no such memory file", os.fspath(source))
    p = Path(os.fspath(source))
    if p.is_dir():
        raise IsADirectoryError(errno.EISDIR, "a folder, not a memory file", str(p))
    check_regular_file(p)
    return p, f"{str(p)!r}"


def _names_file(source: str | os.PathLike) -> bool:
    """Whether ``source`` names something that exists (a JSON text longer than ``PATH_MAX``,
    4096, is not looked up)."""
    name = os.fspath(source)
    if len(name) > 4096:
        return False
    try:
        return os.path.exists(name)
    except (OSError, ValueError):  # a name too long for the file system, a NUL byte
        return False


def _meant_as_path(text: str) -> bool:
    """Whether ``text`` (it names no file) could have been meant as a file name: one short line
    that is not valid JSON (so its errors say no such file exists either)."""
    if "\n" in text or "\0" in text or len(text) > 4096:
        return False
    try:
        json.loads(text)
        return False
    except (ValueError, RecursionError):
        return True


def from_payload(doc: Any, embedder: Any = None, decay: Any = None, clock: Callable | None = None,
                 device: str | torch.device | None = None, dtype: torch.dtype | None = None,
                 *, cls: type, where: str = "the JSON document"):
    """Build a memory from the parsed JSON document of :func:`to_payload`."""
    if not isinstance(doc, Mapping) or not isinstance(doc.get("config"), Mapping) \
            or not isinstance(doc.get("records"), list):
        raise MemoryFileError(f"{where} is not a memory document (needs 'config' and 'records')")
    config = dict(doc["config"])
    if json_depth_over(config, MAX_JSON_DEPTH):
        raise MemoryFileError(f"{where}: the config nests deeper than {MAX_JSON_DEPTH} levels")
    check_format(config, where)
    dim = config_dim(config, where)
    rows = []
    for i, r in enumerate(doc["records"]):
        if not isinstance(r, Mapping):
            raise MemoryFileError(f"{where}: record #{i} is not an object")
        missing = [k for k in ("id", "text", "point", "embedding") if k not in r]
        if missing:
            raise MemoryFileError(f"{where}: record #{i} lacks {missing}")
        rows.append(dict(r, pos=i))
    check_count(config, rows, where)
    points = stack_rows([r["point"] for r in rows], dim, "point", rows, where)
    embeddings = stack_rows([r["embedding"] for r in rows], dim, "embedding", rows, where)
    geometry = None
    has = ["direction" in r for r in rows]
    if rows and all(has):
        geometry = (stack_rows([r["direction"] for r in rows], dim, "direction", rows, where),
                    floats([r.get("depth") for r in rows], "depth", rows, where),
                    [r.get("sibling_index", 0) for r in rows])
    elif any(has):
        raise MemoryFileError(f"{where}: some records have a direction and others do not")
    return _build(config, rows, points, embeddings, geometry, where, embedder, decay, clock, device, dtype, cls)


# ---------------------------------------------------------------------------- restore
def _dtype_of(config: Mapping, dtype: torch.dtype | None, where: str) -> torch.dtype:
    if dtype is not None:
        return dtype
    name = config.get("dtype", "float64")
    if name not in ("float32", "float64"):
        raise MemoryFileError(f"{where}: unknown dtype {name!r} in the config")
    return getattr(torch, name)


def _new_memory(config, where, embedder, decay, clock, device, dtype, cls):
    """An empty ``cls`` with the settings of ``config`` (checked), its dimension the file's."""
    check_passed_embedder(embedder)   # the embedder's own fault named as Memory(embedder=...) names it
    check_encoder(config, embedder, where)
    emb = embedder_from_spec(config.get("embedder"), embedder, where)
    dec = decay_from_spec(config.get("decay"), decay, where)
    check_config_types(config, CONFIG_KEYS, where)
    kwargs = {key: config[key] for key in CONFIG_KEYS}
    apply_search_settings(config, kwargs)
    try:
        memory = cls(embedder=emb, decay=dec, clock=clock, dtype=_dtype_of(config, dtype, where),
                     device=device if device is not None else "cpu", **kwargs)
    except (TypeError, ValueError) as exc:
        raise MemoryFileError(f"{where}: invalid config ({exc})") from None
    restore_lexical(memory, config, where)  # the tokenizer, k1, b... (store.lexical_settings)
    if memory.dim != config["dim"]:
        raise ValueError(f"dimension mismatch: {where} was made with a {config['dim']}-dimensional embedder but "
                         f"the embedder has dim={memory.dim}")
    return memory


def _build(config, rows, points, embeddings, geometry, where, embedder, decay, clock, device, dtype, cls):
    memory = _new_memory(config, where, embedder, decay, clock, device, dtype, cls)
    records = parse_records(rows, where)
    levels = hierarchy_levels(records, where)
    c = memory.curvature
    if records:
        try:
            memory.ball.check_inside(points, name=f"{where}: point")
        except ValueError as exc:
            raise MemoryFileError(str(exc)) from None
    if geometry is None:
        directions = unit(points)
        depths = P.distance_to_origin(points, c).reshape(-1)
        siblings = list(range(len(records)))
    else:
        directions, depths, siblings = geometry
        check_geometry(directions, depths, siblings, [r.parent_id for r in records], [r.id for r in records], where)
        if records:
            again = P.point_at(directions, depths, c)
            gap = float(again.sub_(points).abs_().max())   # in place: no two more (n, dim) tensors
            del again
            if not gap <= POINT_TOLERANCE:
                raise MemoryFileError(f"{where}: stored points and directions/depths disagree by {gap:.3g}")
    restore_state(memory, records, levels, siblings, directions, depths, embeddings)
    return memory
