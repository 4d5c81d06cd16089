"""What an open storage handle guards besides its connection.

* Its **lock** (``storage.lock``): the memory it is bound to shares its own lock with it
  (:meth:`~.durable.DurableStore._bind`), which every call using the connection holds for its
  whole transaction; ``close()`` takes it too, so a close from another thread waits for the
  call in flight instead of freeing the connection under it (SQLite: a crash in C).  In a
  forked child a lock that a thread of the parent held is replaced (:func:`lock_after_fork`):
  that thread does not run in the child to release it.
* The **identity** of a SQLite file (:func:`file_identity`, :func:`check_identity`): the
  ``(device, inode)`` it had when opened, compared (one ``os.stat``) at each write and each
  read that looks for other writers' changes; a removed or replaced file is refused, where
  SQLite would go on reading, and acknowledging writes into, the unlinked file.
* The process's **descriptor limit** (:func:`descriptor_note`): a store that cannot be opened
  because the process holds as many files as ``RLIMIT_NOFILE`` allows says so, where SQLite
  says only "unable to open database file".
* The files of a **failed create** (:func:`new_files`, :func:`remove_unused`): the files a
  create made that never got the tables are removed, so the path is no half-made store.
"""

from __future__ import annotations

import contextlib
import errno
import os
import threading

from .storage_errors import StorageError

try:
    import resource
except ImportError:  # pragma: no cover - Windows
    resource = None

DESCRIPTORS_A_STORE = 3
"""Descriptors one open SQLite store in WAL mode holds: the file, its ``-wal`` and its ``-shm``."""
_SIDE = ("-wal", "-shm", "-journal")
_NO_FILES = (errno.EMFILE, errno.ENFILE)


def file_identity(path: str) -> tuple[int, int] | None:
    """``(device, inode)`` of the file at ``path``, ``None`` when there is none."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino


def check_identity(path: str, identity: tuple[int, int] | None, writing: bool) -> None:
    """:class:`StorageError` when the file at ``path`` is not the one opened (``identity``)."""
    if file_identity(path) != identity:
        then = ("nothing of this call was written" if writing else
                "this handle no longer reads the store at this path")
        raise StorageError(f"SQLite storage {path!r}: the file was removed or replaced since this process opened "
                           f"it; {then}: open the store again")


def lock_after_fork(lock):
    """The lock a storage keeps in a forked child: ``lock``, or a new one where another thread
    of the parent held it at the fork (it is not in the child to release it)."""
    if lock.acquire(blocking=False):
        lock.release()
        return lock
    return threading.RLock()


def _limit() -> int | None:
    if resource is None:
        return None
    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    return None if soft == resource.RLIM_INFINITY else int(soft)


def at_descriptor_limit() -> bool:
    """Whether this process cannot open the descriptors of one more store: it is at its
    ``RLIMIT_NOFILE`` (a probe open fails with ``EMFILE``), or fewer than
    :data:`DESCRIPTORS_A_STORE` remain (``/proc/self/fd`` counted)."""
    soft = _limit()
    try:
        n = len(os.listdir("/proc/self/fd")) - 1  # less the descriptor that lists them
    except OSError as exc:
        if exc.errno in _NO_FILES:
            return True
        try:  # no /proc: one probe
            fd = os.open(os.devnull, os.O_RDONLY)
        except OSError as probe:
            return probe.errno in _NO_FILES
        os.close(fd)
        return False
    return soft is not None and soft - n <= DESCRIPTORS_A_STORE


def descriptor_note(exc: BaseException) -> str:
    """``": too many open files (...)"`` when ``exc`` (a SQLite open or I/O error, an
    ``OSError``) came from the process's descriptor limit, else ``""``."""
    if isinstance(exc, OSError):
        hit = exc.errno in _NO_FILES
    else:
        hit = getattr(exc, "sqlite_errorcode", 0) & 0xFF in (10, 14) and at_descriptor_limit()  # IOERR, CANTOPEN
    return limit_note() if hit else ""


def limit_note() -> str:
    """``": too many open files (the process's limit RLIMIT_NOFILE is N; ...)"``."""
    soft = _limit()
    limit = "" if soft is None else f"the process's limit RLIMIT_NOFILE is {soft}; "
    return (f": too many open files ({limit}each open SQLite store holds about {DESCRIPTORS_A_STORE} "
            "descriptors): close the stores this process no longer uses, or raise the limit (ulimit -n)")


def new_files(path: str) -> tuple[str, ...]:
    """The files of the store at ``path`` that opening it may create: none when the store file
    exists (a file that existed before is never removed), else it and its side files that do not."""
    if os.path.lexists(path):
        return ()
    return (path, *(path + s for s in _SIDE if not os.path.lexists(path + s)))


def remove_unused(path: str, created: tuple[str, ...], page_size: int) -> None:
    """Remove ``created`` (:func:`new_files`) when the store at ``path`` holds no tables: the
    file is at most its first page (a table needs a page of its own) and its ``-wal`` holds no
    commit.  Another process that opened the file meanwhile then finds it removed
    (:func:`check_identity`)."""
    if not created:
        return
    try:
        if os.path.getsize(path) > page_size or (os.path.exists(path + "-wal") and os.path.getsize(path + "-wal")):
            return
    except OSError:
        return
    for f in created:
        with contextlib.suppress(FileNotFoundError):
            os.remove(f)
