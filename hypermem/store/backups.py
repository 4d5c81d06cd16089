"""A consistent backup of a durable SQLite store, taken while it is open and written to.

Copying ``agent.db`` with ``cp`` while a process has the store open copies a stale (often
empty) database: in WAL mode the recent commits live in ``agent.db-wal`` until a checkpoint
moves them into the file, and copying the ``-wal`` along with the file races the writers
(a copy taken between two of their writes can be torn).  :func:`backup` instead reads the
store through SQLite's online backup API (``sqlite3.Connection.backup``, in one step): it
copies one committed snapshot (the file plus the committed part of the ``-wal``) and
neither blocks nor is broken by the processes writing meanwhile (WAL readers never wait for
a writer).  Commits made after the snapshot began are not in the backup.

>>> import os, tempfile
>>> from hypermem import Memory
>>> from hypermem.store import backup
>>> folder = tempfile.mkdtemp()
>>> mem = Memory.open(os.path.join(folder, "agent.db"))
>>> _ = mem.add("the meeting moved to Friday")
>>> backup(mem, os.path.join(folder, "agent-backup.db"))  # the store stays open
>>> len(Memory.open(os.path.join(folder, "agent-backup.db"), read_only=True))
1
"""

from __future__ import annotations

import errno
import os
import sqlite3
import stat
from pathlib import Path
from typing import Any

from ..embed.file_modes import normal_file_mode
from .atomic import atomic_new_path, sqlite_write_errors
from .backends.handles import at_descriptor_limit, descriptor_note, limit_note
from .backends.sqlite import SqliteStorage
from .backends.sqlite_open import BUSY_TIMEOUT
from .backends.storage_errors import StorageError
from .sqlite_paths import connect, path_too_long

__all__ = ["backup"]

_SIDE_FILES = ("", "-wal", "-shm", "-journal")
_WAL_FILES = ("-wal", "-shm")


def _source_path(source: Any) -> str:
    """The SQLite file of ``source``: a path, or a memory opened with ``Memory.open(path)``."""
    if isinstance(source, (str, os.PathLike)):
        return os.fspath(source)
    storage = getattr(source, "storage", None)
    if isinstance(storage, SqliteStorage):
        return storage.path
    if storage is not None:
        raise ValueError(f"backup() copies a SQLite store; {storage!r} is not one (back up PostgreSQL with "
                         "pg_dump)")
    if hasattr(source, "storage"):
        raise ValueError("backup() copies a durable store of Memory.open(path); this memory lives in the "
                         "process: write it with save(path) or to_json(path)")
    raise TypeError(f"backup() takes a path or a memory opened with Memory.open(path), got {type(source).__name__}")


def backup(source: str | os.PathLike | Any, dest: str | os.PathLike) -> None:
    """Write a consistent copy of the SQLite store ``source`` (a path, or a memory opened with
    ``Memory.open(path)``) to the new file ``dest``, safely while processes have it open and
    write to it (module docstring).  ``dest`` is written atomically (a temporary file beside
    it, hard-linked to ``dest`` when complete: :func:`hypermem.store.atomic.atomic_new_path`) and
    opens with ``Memory.open``.  It gets the store's permission bits, less the umask (a
    private ``0o600`` store's backup is ``0o600``).  The ``-wal`` and ``-shm`` that reading a store
    no process has open makes beside it are removed again (by SQLite, as its last connection).

    Refused before anything is written: an existing ``dest`` (``FileExistsError``: a backup
    never replaces a file, nor one that another process creates at ``dest`` while it is
    written), ``dest`` naming the store or its ``-wal`` / ``-shm`` / ``-journal`` file
    (``ValueError``), a missing ``source`` (``FileNotFoundError``), a PostgreSQL or an
    in-process memory (``ValueError``: ``pg_dump``; ``save``).  The access counts a process
    still holds pending (:mod:`hypermem.store.backends.touches`) are not in the file yet, so
    not in the backup.  Restoring it: docs/storage.md (Operations).
    """
    src = _source_path(source)
    out = os.fspath(dest)
    real = os.path.realpath(src)
    if os.path.realpath(out) in {real + side for side in _SIDE_FILES}:
        raise ValueError(f"backup() to {out!r}: that is the store {src!r} itself (or one of its files); "
                         "write the backup to a new file")
    if os.path.lexists(out):
        raise FileExistsError(errno.EEXIST, "a backup never replaces a file: choose a new name", out)
    if not Path(src).is_file():
        raise FileNotFoundError(errno.ENOENT, "no such SQLite store to back up", src)
    if (too_long := path_too_long(out)) is not None:   # written, it could not be opened
        raise OSError(errno.ENAMETOOLONG, f"{too_long}; nothing written", out)
    mode = stat.S_IMODE(os.stat(real).st_mode) & normal_file_mode()  # a private store's backup stays private
    closed = not any(os.path.lexists(real + side) for side in _WAL_FILES)  # no WAL connection has it open
    try:
        con = connect(real, "mode=ro", timeout=BUSY_TIMEOUT)
    except sqlite3.Error as exc:
        raise _failed(src, out, exc) from exc
    try:
        try:
            con.execute("SELECT count(*) FROM sqlite_master").fetchone()  # the source's errors first
        except sqlite3.Error as exc:
            if descriptor_note(exc):
                raise _failed(src, out, exc) from exc
            raise ValueError(f"backup() cannot read {src!r}: {exc} (is it a SQLite store?)") from exc
        # a new file only: one that another process created at dest meanwhile is never replaced
        with atomic_new_path(out, mode) as tmp, sqlite_write_errors(out):  # disk full, ...: an OSError naming dest
            copy = connect(tmp)
            try:
                con.backup(copy)  # pages=-1: every page in one step, from one read snapshot
            finally:
                copy.close()
    except sqlite3.Error as exc:
        raise _failed(src, out, exc) from exc
    except PermissionError as exc:  # SQLite's "unable to open" for dest (sqlite_write_errors) at the limit
        if at_descriptor_limit():
            raise _failed(src, out, exc) from exc
        raise
    finally:
        con.close()
        if closed and any(os.path.lexists(real + side) for side in _WAL_FILES):
            _close_as_last(real)


def _failed(src: str, out: str, exc: Exception) -> StorageError:
    """The :class:`StorageError` of a backup that SQLite could not take, naming the store and ``dest``
    (and the process's descriptor limit when that is the cause)."""
    note = limit_note() if isinstance(exc, PermissionError) else descriptor_note(exc)  # the caller checked the limit
    return StorageError(f"backup() of {src!r} to {out!r}: {exc}{note}; nothing was written")


def _close_as_last(real: str) -> None:
    """Let SQLite remove the ``-wal`` and ``-shm`` that the read-only connection of :func:`backup`
    made beside a store no process had open: a read-only connection never removes them, a
    read-write one does when it closes as the store's last connection (SQLite's own test, under
    its locks: a process that opened the store meanwhile keeps them, and they stay).  The
    ``-wal`` holds nothing to move into the file.  A store this process may not write keeps them, as any
    read-only reader leaves them."""
    try:
        con = connect(real, "mode=rw", timeout=BUSY_TIMEOUT)
        try:
            con.execute("SELECT count(*) FROM sqlite_master").fetchone()
        finally:
            con.close()
    except sqlite3.Error:  # the backup is written; the side files then stay, as before
        pass
