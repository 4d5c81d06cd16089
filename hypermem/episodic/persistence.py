r"""Saving and loading a :class:`~hypermem.episodic.MemoryStorage` without losing anything.

One SQLite file, written atomically by :func:`hypermem.store.atomic.atomic_sqlite` (the
mechanism of :meth:`hypermem.Memory.save`: a temporary file in the same folder, fsync,
rename; an exception or a crash leaves the previous file intact):

* ``config (key TEXT PRIMARY KEY, value TEXT)`` — JSON values: ``kind``
  (``"hypermem.episodic"``), ``format`` (``1``), ``importance_threshold``,
  ``telic_predicates``, ``decay`` (a :func:`hypermem.temporal.policy_spec` or ``null``),
  ``embedder`` (a :func:`hypermem.store.persistence.embedder_spec` or ``null``),
  ``curvature``, ``dtype``, ``next`` (the next memory key number), ``count``.
* ``memories (seq, wff, event_ep, episodes, importance, telic, start_time, end_time,
  last_access, access_count, in_context, embedding)`` — one row per memory in insertion
  order: the formula printed by :func:`~hypermem.episodic.format_sexpr`, the episodes as
  a JSON list, times as ISO 8601 text, the embedding of its point in the hyperbolic store
  as raw little-endian float64 bytes (``NULL`` without an embedder).

The hash tables are functions of the memories (``ep_ht`` of the episode lists, ``wff_ht``
of the formulas), so :func:`load_storage` rebuilds them equal.  Loading executes nothing
from the file (no pickle), checks every field and raises
:class:`~hypermem.store.persistence.MemoryFileError` (a ``ValueError``) naming the problem;
a missing file is ``FileNotFoundError``.  Embeddings are reused, never recomputed.
"""

from __future__ import annotations

import json
import math
import os
import sqlite3
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ..store.atomic import atomic_sqlite
from ..store.persistence import MemoryFileError, embedder_from_spec, embedder_spec
from ..temporal import policy_from_spec, policy_spec
from ..temporal.clock import to_utc
from .eventuality import Eventuality
from .memory import EpisodicMemory, check_importance
from .sexpr import SExprSyntaxError, format_sexpr, is_symbol, parse_sexpr

KIND = "hypermem.episodic"
FORMAT_VERSION = 1
COLUMNS = ("seq", "wff", "event_ep", "episodes", "importance", "telic", "start_time", "end_time", "last_access",
           "access_count", "in_context", "embedding")
_DTYPES = {"float32": torch.float32, "float64": torch.float64}

__all__ = ["KIND", "FORMAT_VERSION", "save_storage", "load_storage"]


def save_storage(storage, path: str | os.PathLike) -> None:
    """Write ``storage`` to the SQLite file ``path``, atomically (see the module docstring)."""
    with storage._lock:
        mems = storage._ordered(storage.memories)
        hyper = storage.hyperbolic
        emb = None
        if hyper is not None:
            row = {k: r for r, k in enumerate(hyper.ids)}
            rows = [row[storage.key_of(m)] for m in mems]
            emb = hyper.embeddings[rows].detach().to("cpu", torch.float64).numpy().astype("<f8")
        config = {
            "kind": KIND, "format": FORMAT_VERSION, "importance_threshold": storage.importance_threshold,
            "telic_predicates": sorted(storage.telic_predicates),
            "decay": None if storage.decay is None else policy_spec(storage.decay),
            "embedder": None if storage.embedder is None else embedder_spec(storage.embedder),
            "curvature": float(storage._hyper_config["curvature"]),
            "dtype": str(storage._hyper_config["dtype"]).replace("torch.", ""),
            "next": storage._next, "count": len(mems),
        }
        records = [(storage._seq[m], format_sexpr(m.get_wff()), m.event.ep, json.dumps(m.episodes),
                    m.importance, None if m.telic is None else int(m.telic), m.start_time.isoformat(),
                    None if m.end_time is None else m.end_time.isoformat(), m.last_access.isoformat(),
                    int(m.access_count), int(m in storage.context), None if emb is None else emb[j].tobytes())
                   for j, m in enumerate(mems)]
    with atomic_sqlite(path) as con:
        con.execute("CREATE TABLE config (key TEXT PRIMARY KEY, value TEXT)")
        con.execute("CREATE TABLE memories (seq INTEGER PRIMARY KEY, wff TEXT, event_ep TEXT, episodes TEXT, "
                    "importance REAL, telic INTEGER, start_time TEXT, end_time TEXT, last_access TEXT, "
                    "access_count INTEGER, in_context INTEGER, embedding BLOB)")
        con.executemany("INSERT INTO config VALUES (?, ?)",
                        [(k, json.dumps(v, allow_nan=False)) for k, v in config.items()])
        con.executemany(f"INSERT INTO memories VALUES ({', '.join('?' * len(COLUMNS))})", records)


def _read(path: str | os.PathLike) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    where = repr(os.fspath(path))
    if not os.path.exists(path):
        raise FileNotFoundError(f"no such episodic memory file: {where}")
    if os.path.isdir(path):
        raise IsADirectoryError(f"{where} is a folder, not an episodic memory file")
    try:
        con = sqlite3.connect(Path(os.fspath(path)).resolve().as_uri() + "?mode=ro", uri=True)
    except sqlite3.Error as exc:
        raise MemoryFileError(f"{where} cannot be opened ({exc})") from None
    try:
        check = con.execute("PRAGMA quick_check").fetchall()
        if check != [("ok",)]:
            raise MemoryFileError(f"{where} is corrupt (SQLite integrity check: {check[0][0]})")
        tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        if not {"config", "memories"} <= tables:
            raise MemoryFileError(f"{where} is not an episodic memory file (tables: {sorted(tables)})")
        config = {}
        for key, value in con.execute("SELECT key, value FROM config"):
            try:
                config[key] = json.loads(value)
            except (TypeError, json.JSONDecodeError):
                raise MemoryFileError(f"{where}: the config value of {key!r} is not JSON") from None
        if config.get("kind") != KIND:
            raise MemoryFileError(f"{where} is not an episodic memory file (kind {config.get('kind')!r})")
        if config.get("format") != FORMAT_VERSION:
            raise MemoryFileError(f"{where} has format version {config.get('format')!r}; this hypermem reads "
                                  f"format {FORMAT_VERSION}")
        cols = [r[1] for r in con.execute("PRAGMA table_info(memories)")]
        if cols != list(COLUMNS):
            raise MemoryFileError(f"{where}: the memories table has columns {cols}, expected {list(COLUMNS)}")
        rows = [dict(zip(COLUMNS, r)) for r in con.execute(f"SELECT {', '.join(COLUMNS)} FROM memories ORDER BY seq")]
    except sqlite3.DatabaseError as exc:
        raise MemoryFileError(f"{where} is not a readable episodic memory file (SQLite: {exc})") from None
    finally:
        con.close()
    return config, rows


def _time(value: Any, what: str, seq: Any, where: str, optional: bool = False) -> datetime | None:
    if value is None and optional:
        return None
    if not isinstance(value, str):
        raise MemoryFileError(f"{where}: the {what} of memory {seq} is not an ISO 8601 time: {value!r}")
    try:
        t = datetime.fromisoformat(value)
    except ValueError:
        raise MemoryFileError(f"{where}: the {what} of memory {seq} is not an ISO 8601 time: {value!r}") from None
    if t.tzinfo is None:
        raise MemoryFileError(f"{where}: the {what} of memory {seq} has no time zone: {value!r}")
    return to_utc(t)


def _memory(r: dict[str, Any], clock: Callable, where: str) -> EpisodicMemory:
    seq = r["seq"]
    try:
        wff = parse_sexpr(r["wff"]) if isinstance(r["wff"], str) else None
    except SExprSyntaxError as exc:
        raise MemoryFileError(f"{where}: the formula of memory {seq} is malformed ({exc})") from None
    if wff is None:
        raise MemoryFileError(f"{where}: memory {seq} has no formula")
    try:
        episodes = json.loads(r["episodes"]) if isinstance(r["episodes"], str) else None
    except json.JSONDecodeError:
        episodes = None
    if not isinstance(episodes, list) or not episodes or not all(is_symbol(e) for e in episodes) \
            or len(set(episodes)) != len(episodes):
        raise MemoryFileError(f"{where}: memory {seq} has a bad episode list {r['episodes']!r}")
    if not is_symbol(r["event_ep"]):
        raise MemoryFileError(f"{where}: memory {seq} has a bad episode {r['event_ep']!r}")
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
    m = EpisodicMemory(Eventuality(wff, r["event_ep"]), importance,
                       telic=None if r["telic"] is None else bool(r["telic"]), clock=clock)
    m.episodes = list(episodes)
    m.start_time = _time(r["start_time"], "start time", seq, where)
    m.end_time = _time(r["end_time"], "end time", seq, where, optional=True)
    m.last_access = _time(r["last_access"], "last access", seq, where)
    m.access_count = acc
    return m


def _embeddings(rows: list[dict[str, Any]], dim: int, where: str) -> torch.Tensor:
    out = torch.zeros(len(rows), dim, dtype=torch.float64)
    for j, r in enumerate(rows):
        blob = r["embedding"]
        if not isinstance(blob, bytes) or len(blob) != 8 * dim:
            got = "none" if blob is None else f"{len(blob)} bytes" if isinstance(blob, bytes) else type(blob).__name__
            raise MemoryFileError(f"{where}: the embedding of memory {r['seq']} is {got}, expected {8 * dim} bytes "
                                  f"(dimension mismatch or a truncated file)")
        arr = np.frombuffer(blob, dtype="<f8")
        if not np.isfinite(arr).all():
            raise MemoryFileError(f"{where}: the embedding of memory {r['seq']} has non-finite values")
        out[j] = torch.from_numpy(arr.astype(np.float64))
    return out


def load_storage(path: str | os.PathLike, embedder: Any = None, clock: Callable | None = None, decay: Any = None,
                 cls: type | None = None, device: str | torch.device = "cpu"):
    """Read a storage written by :func:`save_storage` (see the module docstring).

    ``embedder`` is needed when the file was saved with a custom embedder (a hashing
    embedder is rebuilt from its spec); its ``dim`` must match.  A file saved without an
    embedder loads with the ``embedder`` given (the formulas are then embedded) or none.
    ``decay`` likewise for a custom decay policy.
    """
    from .storage import MemoryStorage

    cls = cls or MemoryStorage
    where = repr(os.fspath(path))
    config, rows = _read(path)
    spec = config.get("embedder")
    saved_dim = None
    if spec is not None:
        embedder = embedder_from_spec(spec, embedder, where)
        saved_dim = spec.get("dim")
    decay_spec = config.get("decay")
    if decay is None and decay_spec is not None:
        try:
            decay = policy_from_spec(decay_spec)
        except ValueError:
            raise ValueError(f"{where} was saved with a custom decay policy {decay_spec.get('type')!r}: pass "
                             f"decay=<the same policy> to load it") from None
        except (KeyError, TypeError, AttributeError) as exc:
            raise MemoryFileError(f"{where}: bad decay spec {decay_spec!r} ({exc!r})") from None
    dtype = _DTYPES.get(config.get("dtype"))
    curvature = config.get("curvature")
    if dtype is None or isinstance(curvature, bool) or not isinstance(curvature, (int, float)) \
            or not math.isfinite(curvature) or curvature <= 0:
        raise MemoryFileError(f"{where}: bad dtype {config.get('dtype')!r} or curvature {curvature!r}")
    try:
        storage = cls(embedder=embedder, importance_threshold=config.get("importance_threshold"), clock=clock,
                      telic_predicates=config.get("telic_predicates"), decay=decay, curvature=curvature,
                      dtype=dtype, device=device)
    except (TypeError, ValueError) as exc:
        raise MemoryFileError(f"{where}: bad storage settings ({exc})") from None
    mems = [_memory(r, storage.clock, where) for r in rows]
    seqs = [r["seq"] for r in rows]
    nxt = config.get("next")
    if isinstance(nxt, bool) or not isinstance(nxt, int) or any(s >= nxt for s in seqs):
        raise MemoryFileError(f"{where}: bad next key number {nxt!r}")
    wffs = [m.get_wff() for m in mems]
    if len(set(wffs)) != len(wffs):
        raise MemoryFileError(f"{where}: a formula is stored twice (duplicates are merged when stored)")
    if storage.hyperbolic is not None:
        if saved_dim is not None:
            emb = _embeddings(rows, int(saved_dim), where)
            items = [{"text": format_sexpr(w), "id": f"m{s}", "t": m.start_time, "embedding": emb[j]}
                     for j, (w, s, m) in enumerate(zip(wffs, seqs, mems))]
        else:
            items = [{"text": format_sexpr(w), "id": f"m{s}", "t": m.start_time} for w, s, m in zip(wffs, seqs, mems)]
        storage.hyperbolic.add_many(items)
    for m, s, r in zip(mems, seqs, rows):
        storage._register(m, s)
        if r["in_context"]:
            storage.context.add(m)
    storage._next = nxt
    return storage
