r"""SQLite storage for a durable memory: one file, WAL mode, one transaction per call.

Tables (``hm_`` prefix; a file written by :meth:`Memory.save` is a different format):

* ``hm_config (key TEXT PRIMARY KEY, value TEXT)``: the store's settings as JSON (the
  keys of :func:`hypermem.store.persistence.save`, plus ``layout`` and ``vector_dtype``);
* ``hm_state (key TEXT PRIMARY KEY, value INTEGER)``: ``version``, raised by every write
  transaction (other processes compare it to know when to re-read);
* ``hm_memories``: one row per memory (:data:`~hypermem.store.backends.rows.COLUMNS`;
  times as ISO 8601 text, ``meta`` as JSON text, ``embedding`` / ``direction`` as
  little-endian bytes; see :mod:`~hypermem.store.backends.rows`).

Writes take the write lock at ``BEGIN IMMEDIATE``; WAL lets readers go on meanwhile.
``synchronous=FULL`` (default) syncs the WAL at every commit, so a committed call
survives a power cut; ``NORMAL`` survives a killed process.  Pages are 16 KiB so that
several rows of a 256-dimensional store share a page (4 KiB pages would hold one).
"""

from __future__ import annotations

import errno
import json
import os
import sqlite3
from pathlib import Path
from typing import Any
from urllib.parse import quote

from .durable import StorageError
from .rows import COLUMNS, VECTOR_DTYPES

LAYOUT = 1
PAGE_SIZE = 16384
SYNCHRONOUS = ("FULL", "NORMAL", "EXTRA", "OFF")
_UPSERT = (f"INSERT INTO hm_memories ({', '.join(COLUMNS)}) VALUES ({', '.join('?' * len(COLUMNS))}) "
           f"ON CONFLICT(id) DO UPDATE SET " + ", ".join(f"{c} = excluded.{c}" for c in COLUMNS[1:]))


class SqliteStorage:
    """Storage in one SQLite file (see the module docstring)."""

    db_errors = (sqlite3.Error,)
    time_text = True
    always_direction = False

    def __init__(self, path: str | os.PathLike, read_only: bool = False, synchronous: str = "FULL",
                 vector_dtype: str | None = None):
        self.path = os.fspath(path)
        if synchronous not in SYNCHRONOUS:
            raise ValueError(f"synchronous must be one of {SYNCHRONOUS}, got {synchronous!r}")
        if vector_dtype is not None and vector_dtype not in VECTOR_DTYPES:
            raise ValueError(f"vector_dtype must be one of {tuple(VECTOR_DTYPES)}, got {vector_dtype!r}")
        p = Path(self.path)
        if p.is_dir():
            raise IsADirectoryError(errno.EISDIR, "a folder, not a memory database", self.path)
        if read_only and not p.exists():
            raise FileNotFoundError(errno.ENOENT, "no such memory database", self.path)
        self.read_only = read_only
        try:
            if read_only:
                self.con = sqlite3.connect(f"file:{quote(os.path.abspath(self.path))}?mode=ro", uri=True,
                                           isolation_level=None, timeout=60, check_same_thread=False)
            else:
                self.con = sqlite3.connect(self.path, isolation_level=None, timeout=60, check_same_thread=False)
                if self._tables() == set():
                    self.con.execute(f"PRAGMA page_size = {PAGE_SIZE}")
                self.con.execute("PRAGMA journal_mode = WAL")
                self.con.execute(f"PRAGMA synchronous = {synchronous}")
        except sqlite3.Error as exc:
            raise self.error(exc) from exc
        self.vector_dtype = vector_dtype or "float64"
        self.closed = False

    def __repr__(self) -> str:
        return f"SqliteStorage({self.path!r}{', read_only' if self.read_only else ''})"

    def error(self, exc: BaseException) -> StorageError:
        return StorageError(f"SQLite storage {self.path!r}: {exc}")

    def _tables(self) -> set[str]:
        return {r[0] for r in self.con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}

    # ------------------------------------------------------------------ layout
    def config(self) -> dict[str, Any] | None:
        """The stored settings, or ``None`` for a new (empty) database."""
        tables = self._tables()
        if not tables:
            return None
        if "hm_config" not in tables:
            hint = " (a file written by Memory.save: open it with Memory.load)" if "records" in tables else ""
            raise StorageError(f"{self.path!r} is not a durable memory database{hint}")
        cfg = {k: json.loads(v) for k, v in self.con.execute("SELECT key, value FROM hm_config")}
        if cfg.get("layout") != LAYOUT:
            raise StorageError(f"{self.path!r} has storage layout {cfg.get('layout')!r}; this hypermem reads {LAYOUT}")
        self.vector_dtype = cfg.get("vector_dtype", "float64")
        return cfg

    def create(self, config: dict[str, Any]) -> None:
        cfg = dict(config, layout=LAYOUT, vector_dtype=self.vector_dtype)
        con = self.con
        con.execute("BEGIN IMMEDIATE")
        try:
            con.execute("CREATE TABLE hm_config (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
            con.execute("CREATE TABLE hm_state (key TEXT PRIMARY KEY, value INTEGER NOT NULL)")
            con.execute("CREATE TABLE hm_memories (id TEXT NOT NULL UNIQUE, seq INTEGER NOT NULL, sib INTEGER NOT "
                        "NULL, text TEXT NOT NULL, parent_id TEXT, t TEXT NOT NULL, valid_from TEXT, valid_until "
                        "TEXT, access_count INTEGER NOT NULL, last_accessed TEXT, meta TEXT NOT NULL, depth REAL "
                        "NOT NULL, embedding BLOB NOT NULL, direction BLOB)")
            con.executemany("INSERT INTO hm_config VALUES (?, ?)",
                            [(k, json.dumps(v, allow_nan=False)) for k, v in cfg.items()])
            con.execute("INSERT INTO hm_state VALUES ('version', 0)")
            con.execute("COMMIT")
        except BaseException:
            con.execute("ROLLBACK")
            raise

    # ------------------------------------------------------------------ transactions
    def begin(self) -> None:
        self.con.execute("BEGIN IMMEDIATE")

    def commit(self) -> None:
        self.con.execute("COMMIT")

    def rollback(self) -> None:
        if self.con.in_transaction:
            self.con.execute("ROLLBACK")

    def version(self) -> int:
        return int(self.con.execute("SELECT value FROM hm_state WHERE key = 'version'").fetchone()[0])

    current_version = version

    def bump(self) -> int:
        self.con.execute("UPDATE hm_state SET value = value + 1 WHERE key = 'version'")
        return self.version()

    # ------------------------------------------------------------------ rows
    def upsert(self, rows: list[tuple]) -> None:
        self.con.executemany(_UPSERT, rows)

    def delete(self, ids: list[str]) -> None:
        self.con.executemany("DELETE FROM hm_memories WHERE id = ?", [(i,) for i in ids])

    def touch(self, items: list[tuple]) -> None:
        """``(increment, last_accessed, id)`` per touched memory."""
        self.con.executemany("UPDATE hm_memories SET access_count = access_count + ?, last_accessed = ? "
                             "WHERE id = ?", [(n, t.isoformat(), i) for n, t, i in items])

    def load_rows(self, in_transaction: bool = False) -> tuple[int, list[dict[str, Any]]]:
        """``(version, rows)`` read in one consistent snapshot."""
        con = self.con
        if not in_transaction:
            con.execute("BEGIN")
        try:
            version = self.version()
            cur = con.execute(f"SELECT {', '.join(COLUMNS)} FROM hm_memories ORDER BY seq")
            rows = [dict(zip(COLUMNS, r)) for r in cur]
        finally:
            if not in_transaction:
                con.execute("COMMIT")
        return version, rows

    def close(self) -> None:
        if not self.closed:
            self.con.close()
            self.closed = True
