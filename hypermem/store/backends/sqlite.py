r"""SQLite storage for a durable memory: one file, WAL mode, one transaction per call.

Tables (``hm_`` prefix; a file written by :meth:`Memory.save` is a different format):

* ``hm_config (key TEXT PRIMARY KEY, value TEXT)``: the store's settings as JSON (the
  keys of :func:`hypermem.store.persistence.save`, plus ``layout`` and ``vector_dtype``);
* ``hm_state (key TEXT PRIMARY KEY, value INTEGER)``: ``version``, raised by every write
  transaction (other processes compare it to know when to re-read);
* ``hm_memories``: one row per memory (:data:`~hypermem.store.backends.rows.COLUMNS`;
  times as ISO 8601 text, ``meta`` as JSON text, ``embedding`` / ``direction`` as
  little-endian bytes; see :mod:`~hypermem.store.backends.rows`), and the change stamps of
  :mod:`~hypermem.store.backends.changes`: ``changed_at`` / ``touched_at``, the version of
  the transaction that last wrote / touched the row, each with an index;
* ``hm_removed (version INTEGER, ids TEXT)``: the removal log, the JSON list of
  the ids each removing transaction deleted, pruned to the last
  :data:`~.changes.REMOVAL_LOG_VERSIONS` versions (``removed_floor`` in ``hm_state``).

Layouts (:mod:`.layouts`): a file of layout 1 (no change stamps) is upgraded to 2 when opened
for writing (opened read-only, it is re-read whole after another process wrote, as before); the
first ``removed_floor`` takes it to layout 3.  Each upgrade is one transaction and warns once.

Ingest: a batch of new memories is one ``INSERT`` prepared once and run for every row
(``executemany``) in the call's one transaction.

Writes take the write lock at ``BEGIN IMMEDIATE``; WAL lets readers go on meanwhile.  A
write waits up to 60 s for another process's write lock; a search's touches do not wait
(:mod:`.touches`).  Several processes may create the same new file at once: one creates
the tables (the check for them is repeated under the write lock), the others open them.
Read-only handles: :mod:`.sqlite_open`.  Used in a process forked after the open (pre-forked
web workers), a storage sets the inherited connection aside and opens its own
(:mod:`.fork_guard`); the process that opened it keeps its own.
``synchronous=FULL`` (default) syncs the WAL at every commit, so a committed call
survives a power cut; ``NORMAL`` survives a killed process.  Pages are 16 KiB so that
several rows of a 256-dimensional store share a page (4 KiB pages would hold one).
"""

from __future__ import annotations

import errno
import json
import os
import sqlite3
import threading
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

from ..file_access import may_not_read
from ..sqlite_paths import connect, path_too_long
from ..validation import load_json, short, sqlite_problem
from . import fork_guard
from .changes import REMOVAL_LOG_VERSIONS, collect_changes, issue_changes, prune_removal_log
from .durable import StorageError
from .handles import check_identity, descriptor_note, file_identity, lock_after_fork, new_files, remove_unused
from .layouts import FLOOR_LAYOUT, STAMPS_LAYOUT, behind, check_layout, raise_floor, unstamped, warn_upgraded
from .rows import COLUMNS, VECTOR_DTYPES
from .sqlite_open import (
    BUSY_TIMEOUT,
    explain,
    folder_of,
    open_read_only,
    read_only_mount,
    release_inherited,
    set_wal,
)
from .touches import TOUCH_WAIT_MS

LAYOUT = STAMPS_LAYOUT
"""The layout a new file is created at (:mod:`.layouts`)."""
PAGE_SIZE = 16384
WAL_PAGES = 256
"""Pages after which a commit checkpoints the WAL into the file (SQLite's default is 1,000: 16 MiB
at this page size, left on disk beside even a tiny store); 256 bounds a steady -wal at ~4 MiB."""
WAL_KEEP_BYTES = WAL_PAGES * PAGE_SIZE
"""``journal_size_limit``: after a checkpoint the -wal is cut back to this size (a bulk write's
large -wal is not kept at its peak size for the life of the store)."""
SYNCHRONOUS = ("FULL", "NORMAL", "EXTRA", "OFF")
_UPSERT = (f"INSERT INTO hm_memories ({', '.join(COLUMNS)}, changed_at) "
           f"VALUES ({', '.join('?' * (len(COLUMNS) + 1))})") + " ON CONFLICT(id) DO UPDATE SET " + ", ".join(
    f"{c} = excluded.{c}" for c in (*COLUMNS[1:], "changed_at"))
_UPGRADE = ("ALTER TABLE hm_memories ADD COLUMN changed_at INTEGER NOT NULL DEFAULT 0",
            "ALTER TABLE hm_memories ADD COLUMN touched_at INTEGER NOT NULL DEFAULT 0",
            "CREATE INDEX hm_memories_changed ON hm_memories (changed_at)",
            "CREATE INDEX hm_memories_touched ON hm_memories (touched_at)",
            "CREATE TABLE hm_removed (version INTEGER NOT NULL, ids TEXT NOT NULL)",
            "CREATE INDEX hm_removed_version ON hm_removed (version)",
            "INSERT INTO hm_state SELECT 'stamped', value FROM hm_state WHERE key = 'version'")
_STATE = "SELECT key, value FROM hm_state"


_INDEX = {c: j for j, c in enumerate(COLUMNS)}
FETCH = 8192
"""Rows fetched at a time when the whole table is read (:meth:`SqliteStorage.load_rows`)."""


class StoredRow(Mapping):
    """One row of ``hm_memories`` read by :meth:`SqliteStorage.load_rows`: the fetched tuple,
    read by column name (:data:`~.rows.COLUMNS`) without a dict a row (a dict of 14 keys is
    some 650 bytes; the tuple is kept as it came)."""

    __slots__ = ("_values",)

    def __init__(self, values: tuple):
        self._values = values

    def __getitem__(self, key: str) -> Any:
        return self._values[_INDEX[key]]

    def __iter__(self) -> Iterator[str]:
        return iter(COLUMNS)

    def __len__(self) -> int:
        return len(COLUMNS)


class SqliteStorage:
    """Storage in one SQLite file (see the module docstring)."""

    db_errors = (sqlite3.Error,)
    time_text = True
    always_direction = False
    incremental = True
    """Whether the file has change stamps (layout 2): refresh reads only the changed rows."""
    streams_rows = True
    """:meth:`load_rows` takes ``consume`` (the rows a fetch at a time: :func:`~.rows.load_state`)."""
    next_version = 0
    """The version the current write transaction commits (read by :meth:`version`)."""
    removal_log_versions = REMOVAL_LOG_VERSIONS
    """Versions of removals the log keeps at least (:func:`~.changes.prune_removal_log`)."""
    identity: tuple[int, int] | None = None
    """``(device, inode)`` of the file this handle opened (checked at each write and refresh: :mod:`.handles`)."""
    _unstamped = False
    """Whether the current write transaction found writes that did not stamp (set by :meth:`version`)."""
    _created: tuple[str, ...] = ()
    """The files this handle created, until the store has its tables (removed at close otherwise)."""

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
        if (too_long := path_too_long(self.path)) is not None:
            raise StorageError(f"SQLite storage {self.path!r}: {too_long}; nothing was opened")
        self.read_only = read_only
        self.synchronous = synchronous
        self.lock = threading.RLock()
        """Held by every call using the connection, and by :meth:`close` (:mod:`.handles`)."""
        self._con = None
        self._pid = os.getpid()
        self._lost_at_fork = False
        self.immutable = False
        try:
            if read_only:
                self._con, self.immutable = open_read_only(self.path)
                self.identity = file_identity(self.path)
            else:
                locked = [f for f in (self.path, self.path + "-wal", self.path + "-shm")
                          if os.path.exists(f) and not os.access(f, os.W_OK)]
                folder = folder_of(self.path)
                if locked and read_only_mount(folder):
                    raise StorageError(f"SQLite storage {self.path!r}: the folder {folder!r} is on a "
                                       "read-only file system; to only read it, open it with read_only=True; "
                                       "nothing was opened")
                if (denied := may_not_read(self.path, self.path + "-wal")) is not None:
                    raise StorageError(f"SQLite storage {self.path!r}: {denied}; nothing was opened")
                if locked:  # before any connection: a read would leave -wal / -shm files of this user behind
                    raise StorageError(f"SQLite storage {self.path!r}: this process may not write "
                                       f"{', '.join(repr(f) for f in locked)} (permission denied): open it as the "
                                       "user that owns it, or with read_only=True to only read; nothing was opened")
                self._created = new_files(self.path)
                self._con = connect(self.path, isolation_level=None, timeout=BUSY_TIMEOUT, check_same_thread=False)
                tables = self._tables()  # a read: a file refused here is left as it was (no WAL switch)
                self._check_ours(tables)
                if not tables:
                    self.con.execute(f"PRAGMA page_size = {PAGE_SIZE}")
                set_wal(self.con)
                self._settings(self.con, synchronous)
                self.identity = file_identity(self.path)
        except BaseException as exc:
            if self._con is not None:
                self._con.close()
            remove_unused(self.path, self._created, PAGE_SIZE)
            if isinstance(exc, sqlite3.Error):
                raise self.error(exc) from exc
            raise
        self.vector_dtype = vector_dtype or "float64"
        self.closed = False
        fork_guard.watch(self)

    def __repr__(self) -> str:
        return f"SqliteStorage({self.path!r}{', read_only' if self.read_only else ''})"

    @property
    def con(self) -> sqlite3.Connection:
        """The connection; in a process forked since the last one was opened, a new one of its own."""
        con = self._con
        return con if con is not None else self._reconnect()

    def after_fork(self) -> None:
        """In a forked child (:mod:`.fork_guard`): set the parent's connection aside (closed
        without a checkpoint, :func:`.sqlite_open.release_inherited`); the next call opens one."""
        con, self._con, self._pid = self._con, None, os.getpid()
        self.lock = lock_after_fork(self.lock)
        if con is None or self.closed:
            return
        if con.in_transaction:  # another thread of the parent was inside a call: its state is not ours to end
            fork_guard.keep(con)
            self._lost_at_fork = True
            return
        try:
            release_inherited(con, self.path)
        except sqlite3.Error:
            fork_guard.keep(con)

    @staticmethod
    def _settings(con: sqlite3.Connection, synchronous: str) -> None:
        """A writable connection's own settings: durability and the -wal's size on disk."""
        con.execute(f"PRAGMA synchronous = {synchronous}")
        con.execute(f"PRAGMA wal_autocheckpoint = {WAL_PAGES}")
        con.execute(f"PRAGMA journal_size_limit = {WAL_KEEP_BYTES}")

    def _reconnect(self) -> sqlite3.Connection:
        if self.closed:
            raise StorageError(f"SQLite storage {self.path!r} is closed")
        if self._lost_at_fork:
            raise StorageError(f"SQLite storage {self.path!r}: this process was forked while another thread was "
                               "inside a call on this store; its connection cannot be used or closed here: close "
                               "the store before forking (or fork while no call runs) and open it in this process")
        try:
            if self.read_only:
                self._con, self.immutable = open_read_only(self.path)
            else:
                con = connect(self.path, isolation_level=None, timeout=BUSY_TIMEOUT, check_same_thread=False)
                try:
                    self._settings(con, self.synchronous)
                except BaseException:
                    con.close()
                    raise
                self._con = con
        except sqlite3.Error as exc:
            raise self.error(exc) from exc
        return self._con

    def error(self, exc: BaseException) -> StorageError:
        return StorageError(f"SQLite storage {self.path!r}: {explain(exc, self.path, self.read_only)}"
                            f"{descriptor_note(exc)}")

    @staticmethod
    def busy(exc: BaseException) -> bool:
        """Whether ``exc`` says another connection holds the lock (SQLITE_BUSY / SQLITE_LOCKED)."""
        return getattr(exc, "sqlite_errorcode", 0) & 0xFF in (5, 6)

    def _tables(self) -> set[str]:
        try:
            return {r[0] for r in self.con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        except UnicodeDecodeError as exc:  # a corrupt schema (store.validation.SQLITE_READ_ERRORS)
            raise StorageError(f"SQLite storage {self.path!r}: {sqlite_problem(exc)}") from None

    def _check_ours(self, tables: set[str]) -> None:
        """``StorageError`` for a database of tables but no ``hm_config`` (a snapshot of
        ``Memory.save``, another application's file)."""
        if tables and "hm_config" not in tables:
            hint = " (a file written by Memory.save: open it with Memory.load)" if "records" in tables else ""
            raise StorageError(f"{self.path!r} is not a durable memory database{hint}")

    # ------------------------------------------------------------------ layout
    def config(self) -> dict[str, Any] | None:
        """The stored settings, or ``None`` for a new (empty) database."""
        tables = self._tables()
        if not tables:
            return None
        self._check_ours(tables)
        self._created = ()  # a store with tables: never removed by this handle
        where = repr(self.path)   # the stored settings are data from anywhere: NaN, deep nesting refused
        cfg = {k: load_json(v, where, f"the stored setting {short(k)}") for k, v in
               self.con.execute("SELECT key, value FROM hm_config")}
        layout = check_layout(cfg, repr(self.path))
        if layout < FLOOR_LAYOUT and not self.read_only:
            cfg["layout"] = self._upgrade(layout)
        self.incremental = cfg["layout"] >= STAMPS_LAYOUT
        self.vector_dtype = cfg.get("vector_dtype", "float64")
        return cfg

    def _upgrade(self, layout: int) -> int:
        """Layout 1 -> 2: add the change stamps, the removal log and ``stamped``; layout 2 with a
        ``removed_floor`` (pruned by a version before layout 3) -> 3 (:mod:`.layouts`).  One
        transaction, the layout read again under the write lock; returns the layout now."""
        con = self.con
        if layout == STAMPS_LAYOUT and con.execute("SELECT 1 FROM hm_state WHERE key = 'removed_floor'").fetchone() \
                is None:
            return layout  # the common case: nothing to do, no write lock taken
        con.execute("BEGIN IMMEDIATE")
        try:
            was = now = json.loads(con.execute("SELECT value FROM hm_config WHERE key = 'layout'").fetchone()[0])
            if now == 1:
                for sql in _UPGRADE:
                    con.execute(sql)
                con.execute("UPDATE hm_config SET value = ? WHERE key = 'layout'", (json.dumps(STAMPS_LAYOUT),))
                now = STAMPS_LAYOUT
            state = dict(con.execute(_STATE).fetchall())
            if now == STAMPS_LAYOUT and "removed_floor" in state:
                raise_floor(con, "hm", "?", int(state["removed_floor"]))
                now = FLOOR_LAYOUT
            con.execute("COMMIT")
        except BaseException:
            con.execute("ROLLBACK")
            raise
        if now != was:
            warn_upgraded(repr(self.path), was, now, "opened for writing by this version")
        return now

    def create(self, config: dict[str, Any]) -> bool:
        """Create the tables; False (nothing written) when another process created them since
        :meth:`config` found none (the check is repeated under the write lock)."""
        cfg = dict(config, layout=LAYOUT, vector_dtype=self.vector_dtype)
        con = self.con
        con.execute("BEGIN IMMEDIATE")
        try:
            if self._tables():
                con.execute("ROLLBACK")
                self._created = ()
                return False
            con.execute("CREATE TABLE hm_config (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
            con.execute("CREATE TABLE hm_state (key TEXT PRIMARY KEY, value INTEGER NOT NULL)")
            con.execute("CREATE TABLE hm_memories (id TEXT NOT NULL UNIQUE, seq INTEGER NOT NULL, sib INTEGER NOT "
                        "NULL, text TEXT NOT NULL, parent_id TEXT, t TEXT NOT NULL, valid_from TEXT, valid_until "
                        "TEXT, access_count INTEGER NOT NULL, last_accessed TEXT, meta TEXT NOT NULL, depth REAL "
                        "NOT NULL, embedding BLOB NOT NULL, direction BLOB, changed_at INTEGER NOT NULL DEFAULT 0, "
                        "touched_at INTEGER NOT NULL DEFAULT 0)")
            for sql in _UPGRADE[2:-1]:
                con.execute(sql)
            con.executemany("INSERT INTO hm_config VALUES (?, ?)",
                            [(k, json.dumps(v, allow_nan=False)) for k, v in cfg.items()])
            con.execute("INSERT INTO hm_state VALUES ('version', 0)")
            con.execute("COMMIT")
        except BaseException:
            con.execute("ROLLBACK")
            raise
        self._created = ()
        return True

    # ------------------------------------------------------------------ transactions
    def begin(self, wait: bool = True) -> None:
        """Take the write lock; ``wait=False`` (a touch) waits :data:`~.touches.TOUCH_WAIT_MS` at most.

        Refused when the file at the path is no longer the one opened (removed, or replaced by
        another file): SQLite would go on writing into the unlinked file, and every write
        would be acknowledged and lost."""
        if self._pid != os.getpid():  # forked by C code (no fork hook ran)
            self.after_fork()
        check_identity(self.path, self.identity, writing=True)
        if wait:
            self.con.execute("BEGIN IMMEDIATE")
            return
        self.con.execute(f"PRAGMA busy_timeout = {TOUCH_WAIT_MS}")
        try:
            self.con.execute("BEGIN IMMEDIATE")
        finally:
            self.con.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT * 1000)}")

    def commit(self) -> None:
        self.con.execute("COMMIT")

    def rollback(self) -> None:
        con = self._con
        if con is not None and con.in_transaction:
            con.execute("ROLLBACK")

    def current_version(self) -> int:
        """The committed version; outside a transaction (a refresh), first the file's identity."""
        if not self.con.in_transaction:
            check_identity(self.path, self.identity, writing=False)
        return int(self.con.execute("SELECT value FROM hm_state WHERE key = 'version'").fetchone()[0])

    def version(self, wait: bool = True) -> int:
        """The committed version, inside a write transaction (whose rows get the next one); notes
        whether a write since the last stamped one did not stamp (:func:`.layouts.unstamped`)."""
        state = dict(self.con.execute(_STATE).fetchall())
        v = int(state["version"])
        self.next_version = v + 1
        self._unstamped = unstamped(state.get("stamped"), v)
        return v

    def bump(self) -> int:
        """Raise ``version`` and ``stamped`` to this transaction's version; after unstamped
        writes, their last version becomes the floor (:func:`.layouts.raise_floor`)."""
        self.con.execute("UPDATE hm_state SET value = ? WHERE key IN ('version', 'stamped')", (self.next_version,))
        if self._unstamped and raise_floor(self.con, "hm", "?", self.next_version - 1):
            warn_upgraded(repr(self.path), STAMPS_LAYOUT, FLOOR_LAYOUT, "a writer that does not stamp its rows wrote")
        return self.next_version

    # ------------------------------------------------------------------ rows
    # Only a writable storage writes, and a writable one has layout 2 (config() upgrades it).
    def upsert(self, rows: list[tuple]) -> None:
        """Insert or rewrite rows (:data:`~.rows.COLUMNS` tuples), stamped ``changed_at``."""
        v = (self.next_version,)
        self.con.executemany(_UPSERT, [r + v for r in rows])

    def insert(self, rows: list[tuple]) -> None:
        """Insert new rows (ids not stored yet): the upsert's one prepared statement, run for
        every row of the batch (``ON CONFLICT`` costs nothing when no id is stored yet)."""
        self.upsert(rows)

    def delete(self, ids: list[str]) -> None:
        self.con.executemany("DELETE FROM hm_memories WHERE id = ?", [(i,) for i in ids])
        if ids:
            self.con.execute("INSERT INTO hm_removed VALUES (?, ?)", (self.next_version, json.dumps(ids)))
            prune_removal_log(self.con, "hm", "?", self.next_version, self.removal_log_versions, repr(self.path))

    def touch(self, items: list[tuple]) -> None:
        """``(increment, last_accessed, id)`` per touched memory, stamped ``touched_at``."""
        v = self.next_version
        self.con.executemany("UPDATE hm_memories SET access_count = access_count + ?, last_accessed = ?, "
                             "touched_at = ? WHERE id = ?",
                             [(n, None if t is None else t.isoformat(), v, i) for n, t, i in items])

    def changes_since(self, version: int, in_transaction: bool = False):
        """``(version, removed ids, changed rows, touched (id, access_count, last_accessed))``
        committed after ``version``, read in one snapshot (:mod:`.changes`); removed ids
        ``None`` when the client must re-read the store whole (:func:`.layouts.behind`: the
        pruned log no longer reaches back to ``version``, or a writer did not stamp its rows)."""
        con = self.con
        if not in_transaction:  # a refresh: the file first (one os.stat); a write's begin() checked it
            check_identity(self.path, self.identity, writing=False)
            con.execute("BEGIN")
        try:
            state = dict(con.execute(_STATE).fetchall())  # version, removed_floor, stamped: one read
            now = int(state["version"])
            if now == version:
                return now, [], [], []
            if behind(version, state):
                return now, None, [], []
            removed, rows, touched = collect_changes(issue_changes(con, version, "hm", "?"), json.loads)
        finally:
            if not in_transaction:
                con.execute("COMMIT")
        return now, removed, rows, touched

    def embedding_blobs(self, ids: list[str]) -> dict[str, bytes]:
        """id -> stored embedding bytes of the stored ones of ``ids``."""
        out: dict[str, bytes] = {}
        for lo in range(0, len(ids), 500):
            part = ids[lo:lo + 500]
            out.update(self.con.execute(f"SELECT id, embedding FROM hm_memories WHERE id IN ({', '.join('?' * len(part))})",
                                        part).fetchall())
        return out

    def stored_ids(self, ids: list[str]) -> set[str]:
        """The stored ones of ``ids`` (their rows are not read)."""
        out: set[str] = set()
        for lo in range(0, len(ids), 500):
            part = ids[lo:lo + 500]
            out.update(r[0] for r in self.con.execute(
                f"SELECT id FROM hm_memories WHERE id IN ({', '.join('?' * len(part))})", part))
        return out

    def load_rows(self, in_transaction: bool = False,
                  consume: Callable[[int, Iterator[list[StoredRow]]], Any] | None = None) -> tuple[int, Any]:
        """``(version, rows)`` read in one consistent snapshot, :data:`FETCH` rows a fetch, each
        a :class:`StoredRow` (no dict a row).  With ``consume``: ``(version, consume(n,
        chunks))``, ``chunks`` yielding the ``n`` rows a fetch at a time (``seq`` order), so
        the caller holds one fetch of them at a time, not the whole table."""
        con = self.con
        if not in_transaction:
            con.execute("BEGIN")
        try:
            version = self.current_version()
            if consume is not None:
                n = con.execute("SELECT COUNT(*) FROM hm_memories").fetchone()[0]
            cur = con.execute(f"SELECT {', '.join(COLUMNS)} FROM hm_memories ORDER BY seq")
            chunks = iter(lambda: list(map(StoredRow, cur.fetchmany(FETCH))), [])
            out = consume(n, chunks) if consume is not None else [r for part in chunks for r in part]
        finally:
            if not in_transaction:
                con.execute("COMMIT")
        return version, out

    def close(self) -> None:
        """Close the connection, once the call another thread has in flight on it ends (:attr:`lock`);
        the files of a create that never got its tables are removed (:func:`.handles.remove_unused`)."""
        if self._pid != os.getpid():
            self.after_fork()  # never the parent's connection: set aside, not closed
        with self.lock:
            if not self.closed:
                if self._con is not None:
                    self._con.close()
                self.closed = True
                if self._created and file_identity(self.path) == self.identity:
                    remove_unused(self.path, self._created, PAGE_SIZE)
