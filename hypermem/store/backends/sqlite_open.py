"""Opening a SQLite store: the WAL switch under contention, read-only handles, messages.

* :func:`set_wal`: ``PRAGMA journal_mode = WAL`` needs an exclusive lock and SQLite does not
  call the busy handler for it, so several processes opening a new file at once got an
  immediate "database is locked"; it is retried with a bounded backoff.
* :func:`open_read_only`: a ``read_only=True`` handle.  Where the file and its folder are
  writable it is an ordinary connection with ``PRAGMA query_only``: it writes nothing, and
  the last connection to close removes the ``-wal`` / ``-shm`` files (a ``mode=ro``
  connection cannot, and left them beside the store).  Where this process may not write the
  file or its folder (a read-only mount, another user's store) and no writer has the store
  open (no ``-wal`` file), it is opened ``immutable=1``: SQLite reads the file as it is, creates
  nothing beside it (a ``-shm`` of this user's could block the owner's writes later), and
  does **not** see writes another process makes while the handle is open.  With a ``-wal``
  (a writer has it open) ``mode=ro`` reads the log too, and ``immutable=1`` is the fallback
  where that fails for a folder that is not writable.
* :func:`explain`: the error text, with what to do when the write lock was busy or the
  folder is not writable.
* :func:`release_inherited`: a connection a forked child inherited, closed without a checkpoint.
"""

from __future__ import annotations

import os
import sqlite3
import struct
import sys
import time

from ..file_access import may_not_read
from ..sqlite_paths import connect
from .durable import StorageError

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows (no fork either)
    fcntl = None

BUSY_TIMEOUT = 60.0
"""Seconds a write waits for another process's write lock."""

_BUSY = (5, 6)  # SQLITE_BUSY, SQLITE_LOCKED
_NO_WRITE = (8, 14)  # SQLITE_READONLY, SQLITE_CANTOPEN


def _code(exc: BaseException) -> int:
    return getattr(exc, "sqlite_errorcode", 0) & 0xFF


def folder_of(path: str) -> str:
    return os.path.dirname(os.path.abspath(path))


def set_wal(con: sqlite3.Connection) -> None:
    """``PRAGMA journal_mode = WAL``, retried while another connection holds the lock
    (doubling pauses from 5 ms to 250 ms, :data:`BUSY_TIMEOUT` in all)."""
    pause, waited = 0.005, 0.0
    while True:
        try:
            con.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as exc:
            if _code(exc) not in _BUSY or waited >= BUSY_TIMEOUT:
                raise
        time.sleep(pause)
        waited += pause
        pause = min(2 * pause, 0.25)


def _connect(path: str, query: str | None = None) -> sqlite3.Connection:
    """A connection to the file ``path`` (a name beginning ``file:`` too: :mod:`..sqlite_paths`)."""
    return connect(path, query, isolation_level=None, timeout=BUSY_TIMEOUT, check_same_thread=False)


def open_read_only(path: str) -> tuple[sqlite3.Connection, bool]:
    """A connection that only reads ``path`` (see the module docstring), and whether it is
    ``immutable`` (a folder that is not writable: other processes' writes are not seen).
    A file or ``-wal`` this process may not read is a :class:`StorageError` saying so."""
    if (denied := may_not_read(path, path + "-wal")) is not None:
        raise StorageError(f"SQLite storage {path!r}: {denied}")
    folder = folder_of(path)
    if os.access(path, os.W_OK) and os.access(folder, os.W_OK):
        con = _connect(path)
        try:
            con.execute("PRAGMA query_only = ON")
        except BaseException:
            con.close()
            raise
        return con, False
    wal = path + "-wal"
    if not os.path.exists(wal):  # no writer has it open: the file is all there is
        return _connect(path, "immutable=1"), True  # mode=ro would leave a -wal / -shm of this user's
    con = _connect(path, "mode=ro")
    try:
        con.execute("SELECT count(*) FROM sqlite_master").fetchone()  # WAL opens its -shm here
        return con, False
    except sqlite3.OperationalError as exc:
        con.close()
        if os.access(folder, os.W_OK) or _code(exc) not in _NO_WRITE:
            raise
    if os.path.getsize(wal) > 0:
        raise StorageError(f"SQLite storage {path!r}: the folder {folder!r} is not writable and {wal!r} holds "
                           f"writes not yet copied into the file, which a reader that cannot write there cannot "
                           f"apply: open the store once where its folder is writable (its owner), then read it here")
    return _connect(path, "immutable=1"), True


def explain(exc: BaseException, path: str, read_only: bool = False) -> str:
    """The text of a SQLite error, with the likely cause and remedy where it is known
    (``read_only``: the error of a ``read_only=True`` handle, which is not told to use one)."""
    text = str(exc)
    if _code(exc) in _BUSY:
        return (f"{text}: another process holds this store's write lock (a long write, or a stopped or hung "
                f"process) and kept it past the {BUSY_TIMEOUT:g} s this call waited; nothing of this call was "
                f"written: retry when that write ends, or end that process (searches with touch=False and "
                f"read_only=True handles do not wait for it)")
    folder = folder_of(path)
    if _code(exc) in _NO_WRITE and (denied := may_not_read(path, path + "-wal", path + "-shm")) is not None:
        return f"{text}: {denied}"
    if _code(exc) in _NO_WRITE and not os.path.isdir(folder):
        missing = folder
        while not os.path.isdir(os.path.dirname(missing)) and os.path.dirname(missing) != missing:
            missing = os.path.dirname(missing)
        return (f"{text}: the folder {folder!r} does not exist ({missing!r} is missing): create it first, or "
                f"choose a path in an existing folder")
    if _code(exc) in _NO_WRITE and read_only_mount(folder):
        return (f"{text}: the folder {folder!r} is on a read-only file system; a store needs its folder "
                f"writable (SQLite keeps its -wal and -shm files beside the file)"
                + ("" if read_only else "; to only read it, open it with read_only=True" if os.path.exists(path)
                   else ": choose a folder on a writable file system"))
    if _code(exc) in _NO_WRITE and not os.access(folder, os.W_OK):
        exists = os.path.exists(path)
        return (f"{text}: the folder {folder!r} is not writable (permission denied); a store needs its folder "
                f"writable to be {'written' if exists else 'created'} (SQLite keeps its -wal and -shm files "
                f"beside the file)" + ("" if read_only else "; to only read it, open it with read_only=True"
                                       if exists else ": choose a writable folder"))
    if _code(exc) in _NO_WRITE:
        locked = [f for f in (path, path + "-wal", path + "-shm") if os.path.exists(f) and not os.access(f, os.W_OK)]
        if locked:
            return (f"{text}: this process may not write {', '.join(repr(f) for f in locked)} (permission denied): "
                    f"open it as the user that owns it" + ("" if read_only else ", or with read_only=True to only read"))
    return text


def read_only_mount(folder: str) -> bool:
    """Whether ``folder`` lies on a file system mounted read-only (``ST_RDONLY``)."""
    try:
        return bool(os.statvfs(folder).f_flag & os.ST_RDONLY)
    except (OSError, AttributeError):  # no statvfs (Windows) or no such folder
        return False


_SHARED_FIRST, _SHARED_SIZE = 0x40000002, 510
"""The byte range of SQLite's SHARED lock on the database file (``PENDING_BYTE + 2``, 510 bytes)."""


def _hold_shared(path: str) -> int | None:
    """An open-file-description read lock on SQLite's SHARED range of ``path`` (Linux), or None.
    Unlike a POSIX lock of this same process, it conflicts with this process's own attempt at
    SQLite's EXCLUSIVE lock."""
    if fcntl is None or not sys.platform.startswith("linux") or not hasattr(fcntl, "F_OFD_SETLK"):
        return None
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return None
    try:
        fcntl.fcntl(fd, fcntl.F_OFD_SETLK, struct.pack("hhqqi4x", fcntl.F_RDLCK, os.SEEK_SET, _SHARED_FIRST,
                                                       _SHARED_SIZE, 0))
    except OSError:
        os.close(fd)
        return None
    return fd


def release_inherited(con: sqlite3.Connection, path: str) -> None:
    """Close ``con``, a connection this process inherited at ``fork``, without a checkpoint.

    It must be closed: while it is open, SQLite's per-process record of the file's locks
    (shared by every connection of the process to the file) says this process holds the
    parent's locks, so a new connection here takes none, and when the parent closes, SQLite
    deletes the WAL the child goes on writing into (acknowledged commits lost).  Its close
    would checkpoint and delete the WAL when it gets the EXCLUSIVE lock (no other process
    holds the file: its stale view could then delete another process's log); a read lock
    held meanwhile through a separate open file description (Linux) makes that attempt fail,
    so the close only releases this process's record, maps and descriptors."""
    guard = _hold_shared(path)
    try:
        con.close()
    finally:
        if guard is not None:
            os.close(guard)
