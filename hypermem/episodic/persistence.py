r"""Saving and loading a :class:`~hypermem.episodic.MemoryStorage` without losing anything.

One SQLite file, written atomically by :func:`hypermem.store.atomic.atomic_sqlite` (the
mechanism of :meth:`hypermem.Memory.save`: a temporary file in the same folder, fsync,
rename; an exception or a crash leaves the previous file intact):

* ``config (key TEXT PRIMARY KEY, value TEXT)`` — JSON values: ``kind``
  (``"hypermem.episodic"``), ``format`` (``1``), ``importance_threshold``,
  ``telic_predicates``, ``decay`` (a :func:`hypermem.temporal.policy_spec` or ``null``),
  ``embedder`` (a :func:`hypermem.embed.spec.embedder_spec` or ``null``),
  ``curvature``, ``dtype``, ``next`` (the next memory key number), ``count``.
* ``memories (seq, wff, event_ep, episodes, importance, telic, start_time, end_time,
  last_access, access_count, in_context, embedding, last_access_set)`` — one row per memory
  in insertion order: the formula printed by :func:`~hypermem.episodic.format_sexpr`, the
  episodes as a JSON list, times as ISO 8601 text, the embedding of its point in the
  hyperbolic store as raw little-endian float64 bytes (``NULL`` without an embedder), and
  ``last_access_set`` (``1`` when the last access was set or made, ``0`` when it follows the
  start time: :attr:`EpisodicMemory.last_access_set`, kept so a loaded memory behaves the
  same when its start moves).  A file written before that column (its other eleven
  columns) still loads: a last access equal to the start with no access counted follows it.

The hash tables are functions of the memories (``ep_ht`` of the episode lists, ``wff_ht``
of the formulas), so :func:`load_storage` rebuilds them equal.  Loading executes nothing
from the file (no pickle) and writes nothing (a read-only, immutable connection), checks
every field with :mod:`hypermem.store.validation` (every key of :data:`CONFIG_KEYS` present,
the saved ``count`` against the rows, ``seq`` distinct integers below ``next``, each row's
``event_ep`` first in its ``episodes``, no ``end_time`` or ``last_access`` before its
``start_time``, JSON depth and NaN, the embedder's ``type`` and ``dim``
against every blob before anything is allocated, formulas within
:data:`~hypermem.episodic.sexpr.MAX_DEPTH`) and raises
:class:`~hypermem.store.validation.MemoryFileError` (a ``ValueError``) naming the file and
the field; a missing file is ``FileNotFoundError``.  Embeddings are reused, never recomputed.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from typing import Any

import torch

from ..embed.spec import embedder_spec
from ..store.atomic import atomic_sqlite
from ..store.checks import sqlite_tables
from ..store.validation import (
    SQLITE_READ_ERRORS,
    MemoryFileError,
    check_dim,
    decay_from_spec,
    embedder_from_spec,
    is_int,
    is_number,
    iso_time,
    load_json,
    open_sqlite_readonly,
    read_sqlite_header,
    short,
    sqlite_problem,
    stack_vectors,
)
from ..temporal import policy_spec
from .episodic_memory import EpisodicMemory, check_episodes, check_importance, order_problem
from .eventuality import Eventuality
from .sexpr import SExprSyntaxError, format_sexpr, is_symbol, parse_sexpr

KIND = "hypermem.episodic"
FORMAT_VERSION = 1
COLUMNS = ("seq", "wff", "event_ep", "episodes", "importance", "telic", "start_time", "end_time", "last_access",
           "access_count", "in_context", "embedding", "last_access_set")
_LEGACY_COLUMNS = COLUMNS[:-1]  # files written before last_access_set
_DTYPES = {"float32": torch.float32, "float64": torch.float64}
CONFIG_KEYS = ("kind", "format", "importance_threshold", "telic_predicates", "decay", "embedder", "curvature",
               "dtype", "next", "count")

__all__ = ["KIND", "FORMAT_VERSION", "save_storage", "load_storage"]


def _foreign(tables: set[str]) -> str | None:
    """What a SQLite file with these tables holds when it is not an episodic file (and which
    call reads it); ``None`` for an episodic file or an empty database."""
    if "hm_config" in tables:
        return "a durable memory database of hypermem.Memory.open, not an episodic memory file: use " \
               "hypermem.Memory.open"
    if "records" in tables and "memories" not in tables:
        return "a memory store file of hypermem.Memory.save, not an episodic memory file: use hypermem.Memory.load"
    if tables and not {"config", "memories"} <= tables:
        return f"a SQLite database with the tables {sorted(tables)}, not an episodic memory file"
    return None


def _existing_kind(path: str | os.PathLike) -> str | None:
    """:func:`_foreign` of the existing SQLite file ``path`` (``None``: no such file, not SQLite, or ours)."""
    tables = sqlite_tables(path)
    return None if not tables else _foreign(tables)


def save_storage(storage, path: str | os.PathLike, overwrite: bool = False) -> None:
    """Write ``storage`` to the SQLite file ``path``, atomically (see the module docstring).

    An existing episodic file (or a non-SQLite file) is replaced, as :meth:`hypermem.Memory.save`
    replaces; a SQLite file of another kind (a ``Memory`` store, any other database) is
    refused with ``FileExistsError`` unless ``overwrite=True``.  A folder that cannot be
    written is an ``OSError`` naming ``path``."""
    if not isinstance(overwrite, bool):
        raise TypeError(f"overwrite must be True or False, got {overwrite!r}")
    target = os.fspath(path)
    other = None if overwrite else _existing_kind(path)
    if other is not None:
        raise FileExistsError(f"{target!r} is {other}; not replaced (pass overwrite=True to replace it)")
    with storage.lock:
        mems = list(storage)
        hyper = storage.hyperbolic
        emb = None
        if hyper is not None:
            row = {k: r for r, k in enumerate(hyper.ids)}
            rows = [row[storage.key_of(m)] for m in mems]
            emb = hyper.embeddings[rows].detach().to("cpu", torch.float64).numpy().astype("<f8")
        settings = storage.hyperbolic_settings
        config = {
            "kind": KIND, "format": FORMAT_VERSION, "importance_threshold": storage.importance_threshold,
            "telic_predicates": sorted(storage.telic_predicates),
            "decay": None if storage.decay is None else policy_spec(storage.decay),
            "embedder": None if storage.embedder is None else embedder_spec(storage.embedder),
            "curvature": float(settings["curvature"]),
            "dtype": str(settings["dtype"]).replace("torch.", ""),
            "next": storage.next_seq, "count": len(mems),
        }
        records = [(storage.seq(m), format_sexpr(m.get_wff()), m.event.ep, json.dumps(m.episodes),
                    m.importance, None if m.telic is None else int(m.telic), m.start_time.isoformat(),
                    None if m.end_time is None else m.end_time.isoformat(), m.last_access.isoformat(),
                    int(m.access_count), int(m in storage.context), None if emb is None else emb[j].tobytes(),
                    int(m.last_access_set))
                   for j, m in enumerate(mems)]
    _write(path, config, records)


def _write(path: str | os.PathLike, config: dict[str, Any], records: list[tuple]) -> None:
    with atomic_sqlite(path) as con:
        con.execute("CREATE TABLE config (key TEXT PRIMARY KEY, value TEXT)")
        con.execute("CREATE TABLE memories (seq INTEGER PRIMARY KEY, wff TEXT, event_ep TEXT, episodes TEXT, "
                    "importance REAL, telic INTEGER, start_time TEXT, end_time TEXT, last_access TEXT, "
                    "access_count INTEGER, in_context INTEGER, embedding BLOB, last_access_set INTEGER)")
        con.executemany("INSERT INTO config VALUES (?, ?)",
                        [(k, json.dumps(v, allow_nan=False)) for k, v in config.items()])
        con.executemany(f"INSERT INTO memories VALUES ({', '.join('?' * len(COLUMNS))})", records)


def _read(path: str | os.PathLike) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    where = repr(os.fspath(path))
    if not os.path.exists(path):
        raise FileNotFoundError(f"no such episodic memory file: {where}")
    if os.path.isdir(path):
        raise IsADirectoryError(f"{where} is a folder, not an episodic memory file")
    con = open_sqlite_readonly(path)
    try:
        other = _foreign({r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")})
        if other is not None:
            raise MemoryFileError(f"{where} is {other}")
        _, config = read_sqlite_header(con, where, {"config", "memories"}, "an episodic memory")
        if config.get("kind") != KIND:
            raise MemoryFileError(f"{where} is not an episodic memory file (kind {short(config.get('kind'))})")
        fmt = config.get("format")
        if not is_int(fmt) or fmt != FORMAT_VERSION:
            raise MemoryFileError(f"{where} has format version {short(fmt)}; this hypermem reads "
                                  f"format {FORMAT_VERSION}")
        missing = [k for k in CONFIG_KEYS if k not in config]
        if missing:
            raise MemoryFileError(f"{where}: the config table lacks {missing} (an episodic file records every "
                                  f"one of {list(CONFIG_KEYS)}; null where unset)")
        cols = [r[1] for r in con.execute("PRAGMA table_info(memories)")]
        if cols not in (list(COLUMNS), list(_LEGACY_COLUMNS)):
            raise MemoryFileError(f"{where}: the memories table has columns {cols}, expected {list(COLUMNS)}")
        rows = [dict(zip(cols, r)) for r in con.execute(f"SELECT {', '.join(cols)} FROM memories ORDER BY seq")]
    except SQLITE_READ_ERRORS as exc:
        raise MemoryFileError(f"{where} is not a readable episodic memory file ({sqlite_problem(exc)})") from None
    finally:
        con.close()
    _check_rows(config, rows, where)
    return config, rows


def _check_rows(config: dict[str, Any], rows: list[dict[str, Any]], where: str) -> None:
    """The saved count matches the rows (nothing deleted or added); every ``seq`` is an
    integer, distinct, below ``next``."""
    count, nxt = config.get("count"), config.get("next")
    if not is_int(count) or count != len(rows):
        raise MemoryFileError(f"{where} holds {len(rows)} memories but was saved with count {short(count)}: "
                              f"rows were deleted or added")
    seqs = [r["seq"] for r in rows]
    bad = [s for s in seqs if not is_int(s) or s < 0]
    if bad:
        raise MemoryFileError(f"{where}: a memory has the key number (seq) {short(bad[0])}, not an integer >= 0")
    if len(set(seqs)) != len(seqs):
        dup = next(s for s in seqs if seqs.count(s) > 1)
        raise MemoryFileError(f"{where}: the key number (seq) {dup} is used by two memories")
    if not is_int(nxt) or any(s >= nxt for s in seqs):
        raise MemoryFileError(f"{where}: bad next key number {short(nxt)} (must exceed every seq)")


def _memory(r: dict[str, Any], clock: Callable, where: str) -> EpisodicMemory:
    seq = r["seq"]
    try:
        wff = parse_sexpr(r["wff"]) if isinstance(r["wff"], str) else None
    except SExprSyntaxError as exc:
        raise MemoryFileError(f"{where}: the formula of memory {seq} is malformed ({exc})") from None
    if wff is None:
        raise MemoryFileError(f"{where}: memory {seq} has no formula")
    episodes = load_json(r["episodes"], where, f"the episode list of memory {seq}", depth=1)
    try:   # the rule of EpisodicMemory.episodes: distinct constants (no ?e), at least one
        if not isinstance(episodes, list):   # a JSON object would pass as the list of its keys
            raise TypeError(f"a JSON list of episode symbols, got {type(episodes).__name__}")
        check_episodes(episodes)
    except (TypeError, ValueError) as exc:
        raise MemoryFileError(f"{where}: memory {seq} has a bad episode list {short(r['episodes'])} ({exc})") from None
    if not is_symbol(r["event_ep"]):
        raise MemoryFileError(f"{where}: memory {seq} has a bad episode {short(r['event_ep'])}")
    if r["event_ep"] != episodes[0]:
        raise MemoryFileError(f"{where}: memory {seq} has the episode (event_ep) {short(r['event_ep'])} but its "
                              f"episode list (episodes) {short(r['episodes'])} does not start with it")
    try:
        importance = check_importance(r["importance"])
    except ValueError:
        raise MemoryFileError(f"{where}: memory {seq} has importance {r['importance']!r}") from None
    if r["telic"] not in (None, 0, 1) or r["in_context"] not in (0, 1):
        raise MemoryFileError(f"{where}: memory {seq} has bad flags (telic {r['telic']!r}, "
                              f"in_context {r['in_context']!r})")
    acc = r["access_count"]
    if isinstance(acc, bool) or not isinstance(acc, int) or acc < 0:
        raise MemoryFileError(f"{where}: memory {seq} has access count {acc!r}")
    try:
        event = Eventuality(wff, r["event_ep"])
    except ValueError as exc:
        raise MemoryFileError(f"{where}: the formula of memory {seq} is not an eventuality's ({exc})") from None
    try:
        m = EpisodicMemory(event, importance, telic=None if r["telic"] is None else bool(r["telic"]), clock=clock)
    except ValueError as exc:
        raise MemoryFileError(f"{where}: memory {seq} is not a memory's event ({exc})") from None
    m.episodes = episodes   # checked above
    start = iso_time(r["start_time"], f"{where}: the start time of memory {seq}", aware=True)
    end = iso_time(r["end_time"], f"{where}: the end time of memory {seq}", required=False, aware=True)
    last = iso_time(r["last_access"], f"{where}: the last access of memory {seq}", aware=True)
    problem = order_problem(start, end, last)
    if problem:
        raise MemoryFileError(f"{where}: memory {seq} has {problem}")
    flag = r.get("last_access_set", _LEGACY_COLUMNS)
    if flag is _LEGACY_COLUMNS:  # an older file: a last access nobody set follows the start time
        followed = last == start and acc == 0
    elif isinstance(flag, bool) or not isinstance(flag, int) or flag not in (0, 1):
        raise MemoryFileError(f"{where}: memory {seq} has a bad flag last_access_set {flag!r} (0: the last access "
                              f"follows the start time, 1: it was set)")
    elif flag == 0 and last != start:
        raise MemoryFileError(f"{where}: memory {seq} has last_access_set 0 (the last access follows the start "
                              f"time) but a last access {last.isoformat()} other than its start {start.isoformat()}")
    else:
        followed = flag == 0
    m.set_times(start_time=start, end_time=end, **({} if followed else {"last_access": last}))
    m.access_count = acc
    return m


def load_storage(path: str | os.PathLike, embedder: Any = None, clock: Callable | None = None, decay: Any = None,
                 *, cls: type, device: str | torch.device = "cpu"):
    """Read a storage written by :func:`save_storage` (see the module docstring).

    ``embedder`` is needed when the file was saved with a custom embedder (a hashing
    embedder is rebuilt from its spec); its ``dim`` must match.  A file saved without an
    embedder loads with the ``embedder`` given (the formulas are then embedded) or none.
    ``decay`` likewise for a custom decay policy.
    """
    where = repr(os.fspath(path))
    config, rows = _read(path)
    seqs = [r["seq"] for r in rows]
    spec = config.get("embedder")
    emb = None
    if spec is not None:
        if not isinstance(spec, dict):
            raise MemoryFileError(f"{where}: the embedder spec is not an object")
        kind = spec.get("type")
        if not isinstance(kind, str) or not kind:
            raise MemoryFileError(f"{where}: the embedder spec has no type (type {short(kind)})")
        try:
            dim = check_dim(spec.get("dim"), where, "embedder spec dim")
        except MemoryFileError as exc:
            raise MemoryFileError(f"{exc} (in the spec of the embedder type {short(kind)})") from None
        # The declared dimension is checked against every stored blob before anything is allocated.
        emb = stack_vectors([r["embedding"] for r in rows], dim, "embedding", seqs, where)
        embedder = embedder_from_spec(spec, embedder, where)
    if config.get("decay") is not None:
        decay = decay_from_spec(config["decay"], decay, where)
    name, curvature = config.get("dtype"), config.get("curvature")
    dtype = _DTYPES.get(name) if isinstance(name, str) else None
    if dtype is None or not is_number(curvature) or curvature <= 0:
        raise MemoryFileError(f"{where}: bad dtype {short(name)} or curvature {short(curvature)}")
    if config.get("importance_threshold") is None:  # the constructor would take None as the default
        raise MemoryFileError(f"{where}: bad storage settings (importance_threshold is null)")
    try:
        storage = cls(embedder=embedder, importance_threshold=config.get("importance_threshold"), clock=clock,
                      telic_predicates=config.get("telic_predicates"), decay=decay, curvature=curvature,
                      dtype=dtype, device=device)
    except (TypeError, ValueError) as exc:
        raise MemoryFileError(f"{where}: bad storage settings ({exc})") from None
    mems = [_memory(r, storage.clock, where) for r in rows]
    wffs = [m.get_wff() for m in mems]  # a formula may recur: it held again after it ended
    if storage.hyperbolic is not None:
        if emb is not None:
            items = [{"text": format_sexpr(w), "id": f"m{s}", "t": m.start_time, "embedding": emb[j]}
                     for j, (w, s, m) in enumerate(zip(wffs, seqs, mems))]
        else:
            items = [{"text": format_sexpr(w), "id": f"m{s}", "t": m.start_time} for w, s, m in zip(wffs, seqs, mems)]
        storage.hyperbolic.add_many(items)
    storage.restore([(m, s, bool(r["in_context"])) for m, s, r in zip(mems, seqs, rows)], config["next"])
    return storage
