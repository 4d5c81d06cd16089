"""Atomic file replacement: a crash or an exception in the middle of a write never
leaves a half-written file where the old one was.

The new content is written to a temporary file in the *same folder* (so the final
rename stays within one file system), flushed and ``fsync``-ed, then moved over the
target with :func:`os.replace` (atomic on POSIX and Windows), and finally the folder is
``fsync``-ed so the rename itself survives a power cut.  On any exception the temporary
file is removed and the old file is untouched.  A process killed with ``SIGKILL`` at the
wrong moment may leave a stray ``.<name>.*.tmp`` file next to the target, never a broken
target (``<name>``: its first 100 bytes, :func:`temp_prefix`).

File mode: a replaced file keeps its mode; a new one gets ``0o666`` less the process
umask, as ``open()`` would give it (the temporary file's private ``0o600`` from
:func:`tempfile.mkstemp` is not left on the result).  The mode is set after the content is
written, so a read-only (``0o444``) file in a writable folder is replaced and stays read-only.
Set the umask (e.g. ``umask 077``) to keep memory files private.

A file that must be new (a backup) is written with :func:`atomic_new_path`: the finished
temporary file is hard-linked to the name, which fails when another process created it
meanwhile, so that file is never replaced.

Errors: a failure to write the temporary file (disk full, an I/O error; SQLite's "database or
disk is full" in :func:`atomic_sqlite`) is raised as an ``OSError`` of the same errno whose
``filename`` is the path asked for, never the temporary file's name or no name.

Example::

    >>> import os, tempfile
    >>> folder = tempfile.mkdtemp()
    >>> target = os.path.join(folder, "notes.txt")
    >>> atomic_write_text(target, "hello")
    >>> open(target).read()
    'hello'
    >>> with atomic_sqlite(os.path.join(folder, "data.db")) as con:
    ...     _ = con.execute("CREATE TABLE t (x INTEGER)")
"""

from __future__ import annotations

import errno
import os
import sqlite3
import tempfile
import webbrowser
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ..embed.file_modes import normal_file_mode
from .page_file import check_page_path
from .sqlite_paths import connect, path_too_long

__all__ = ["NotARegularFileError", "atomic_new_path", "atomic_path", "atomic_write_bytes", "atomic_write_text", "atomic_sqlite", "fsync_path", "write_page"]


def fsync_path(path: str | os.PathLike, directory: bool = False) -> None:
    """``fsync`` a file (or a folder's entry table) by path; folders are skipped where the OS
    cannot open them (Windows)."""
    flags = os.O_RDONLY
    if directory:
        flags |= getattr(os, "O_DIRECTORY", 0)
    try:
        fd = os.open(os.fspath(path), flags)
    except OSError:
        if directory:
            return
        raise
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _check_target(path: str | os.PathLike) -> Path:
    """The regular file to replace: a symlink's target (written through, so the link keeps
    pointing at the new file); a folder, a device, a named pipe or a socket is refused."""
    target = Path(os.fspath(path))
    if target.is_symlink():
        target = Path(os.path.realpath(target))
    if target.is_dir():
        raise IsADirectoryError(f"cannot write {str(path)!r}: it is a folder")
    if target.exists() and not target.is_file():
        raise NotARegularFileError(f"cannot write {str(path)!r}: it is {_kind(target)}, not a regular file "
                                   "(only a regular file is replaced atomically)")
    folder = target.parent
    if not folder.is_dir():
        raise FileNotFoundError(f"cannot write {str(target)!r}: the folder {str(folder)!r} does not exist")
    return target


class NotARegularFileError(OSError):
    """The target exists and is a device, a named pipe or a socket: it cannot be replaced atomically."""


def _kind(path: Path) -> str:
    if path.is_fifo():
        return "a named pipe"
    if path.is_char_device() or path.is_block_device():
        return "a device"
    return "a socket" if path.is_socket() else "not a regular file"


def _mode_for(target: Path) -> int:
    """The mode the new file gets: the replaced file's, or ``0o666`` less the umask."""
    try:
        return target.stat().st_mode & 0o7777
    except FileNotFoundError:
        return normal_file_mode()


@contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a fresh temporary path next to ``path``; write the new content there.

    When the ``with`` block ends normally the temporary file is ``fsync``-ed and renamed
    over ``path`` and the folder is ``fsync``-ed.  A symlink ``path`` is written through: its
    target is replaced and the link kept.  A folder, a device, a named pipe or a socket at
    ``path`` is refused (:class:`NotARegularFileError` for the last three) before anything is written.  When it raises, the temporary file is
    deleted and ``path`` keeps its old content (or stays absent).
    """
    target = _check_target(path)
    with _written(path, target, _mode_for(target), os.replace) as tmp:
        yield tmp


@contextmanager
def atomic_new_path(path: str | os.PathLike, mode: int | None = None) -> Iterator[Path]:
    """:func:`atomic_path` for a file that must not exist, and is never replaced: the finished
    temporary file is hard-linked to ``path`` (``os.link``), which fails when ``path`` exists, so a
    file another process created there while this one was written is left as it was
    (``FileExistsError``; nothing is written).  Checking the name first and renaming over it
    would destroy that file.  ``mode``: the new file's permission bits (default ``0o666`` less
    the umask).  Where the folder takes no hard link (some network and FAT file systems), the
    name is checked once more and the file moved there: the window is then the move's.  An
    existing ``path`` (a dangling symlink included) is refused before anything is written."""
    target = Path(os.fspath(path))
    if os.path.lexists(target):
        raise FileExistsError(errno.EEXIST, "the file exists (this write never replaces a file)", os.fspath(path))
    if not target.parent.is_dir():
        raise FileNotFoundError(f"cannot write {str(target)!r}: the folder {str(target.parent)!r} does not exist")
    with _written(path, target, normal_file_mode() if mode is None else mode, _link_new) as tmp:
        yield tmp


def _link_new(tmp: Path, target: Path) -> None:
    """Publish ``tmp`` as the new file ``target``: a hard link (refused when ``target`` exists),
    then ``tmp`` unlinked; a move after one more check where the file system takes no hard link."""
    try:
        os.link(tmp, target)
    except FileExistsError:
        raise FileExistsError(errno.EEXIST, "another process created the file while this one was written; it is "
                              "left as it was (nothing written: choose another name)", str(target)) from None
    except OSError as exc:
        if exc.errno not in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EXDEV, errno.EMLINK):
            raise
        if os.path.lexists(target):
            raise FileExistsError(errno.EEXIST, "another process created the file while this one was written; it "
                                  "is left as it was (nothing written)", str(target)) from None
        os.replace(tmp, target)
        return
    tmp.unlink()


TEMP_STEM_BYTES = 100
"""The most bytes of the target's name in its temporary file's name (:func:`temp_prefix`)."""


def temp_prefix(name: str) -> str:
    """The start of the temporary file's name beside the file ``name``: ``.<name>.``, the name
    cut to its first :data:`TEMP_STEM_BYTES` bytes (on a character boundary), so that with the
    8 random characters and ``.tmp`` it stays within ``NAME_MAX`` (255 bytes) for any name the
    folder accepts: ``.<name>.XXXXXXXX.tmp`` of a 242-byte name would be 256."""
    raw = os.fsencode(name)
    if len(raw) > TEMP_STEM_BYTES:
        cut = raw[:TEMP_STEM_BYTES]
        while cut and (cut[-1] & 0xC0) == 0x80:   # a UTF-8 continuation byte: drop the cut character
            cut = cut[:-1]
        if cut and cut[-1] >= 0xC0:   # a lead byte whose continuation was cut off
            cut = cut[:-1]
        name = os.fsdecode(cut)
    return f".{name}."


@contextmanager
def _written(path: str | os.PathLike, target: Path, mode: int, publish) -> Iterator[Path]:
    """A temporary file beside ``target``, written in the block, ``fsync``-ed, given ``mode``
    and published with ``publish(tmp, target)``; the folder ``fsync``-ed.  Removed on any exception."""
    try:
        fd, tmp_name = tempfile.mkstemp(prefix=temp_prefix(target.name), suffix=".tmp", dir=target.parent)
    except OSError as exc:   # name the file asked for, not the temporary one beside it
        why = "is not writable" if exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS) else "took no new file"
        raise type(exc)(exc.errno, f"cannot write {str(target)!r}: the folder {str(target.parent)!r} {why} "
                                   f"({exc.strerror})") from None
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        try:
            yield tmp
            fsync_path(tmp)
            os.chmod(tmp, mode)  # after writing: a read-only (0o444) mode would refuse the write
        except OSError as exc:
            if exc.filename is not None and str(exc.filename) != tmp_name:  # another file's error: as it was
                raise
            raise _named(exc, path) from exc
        publish(tmp, target)
    except BaseException:
        try:
            tmp.unlink()
        except FileNotFoundError:
            pass
        raise
    fsync_path(target.parent, directory=True)


_SQLITE_ERRNO = {13: errno.ENOSPC, 8: errno.EACCES, 10: errno.EIO, 14: errno.EACCES}
"""errno for SQLite's result codes that mean the file could not be written: SQLITE_FULL,
SQLITE_READONLY, SQLITE_IOERR, SQLITE_CANTOPEN."""


def _named(exc: OSError, path: str | os.PathLike) -> OSError:
    """``exc`` (a write to the temporary file failed: disk full, ...) as the same ``OSError``
    subclass naming ``path``, the file asked for, instead of the temporary file or no file."""
    return type(exc)(exc.errno, f"{exc.strerror or exc} (nothing written: an old file there is untouched)", os.fspath(path))


@contextmanager
def sqlite_write_errors(path: str | os.PathLike) -> Iterator[None]:
    """Inside the block, a SQLite error that means the temporary file of ``path`` could not be
    written (disk full, ...) is raised as an ``OSError`` naming ``path`` (:func:`_sqlite_write_error`)."""
    try:
        yield
    except sqlite3.Error as exc:
        named = _sqlite_write_error(exc, path)
        if named is None:
            raise
        raise named from exc


def _sqlite_write_error(exc: sqlite3.Error, path: str | os.PathLike) -> OSError | None:
    """An ``OSError`` naming ``path`` for a SQLite error that means its temporary file could not
    be written (disk full, read-only, I/O error); ``None`` for any other SQLite error."""
    code = getattr(exc, "sqlite_errorcode", None)  # Python 3.11+
    if code is None:  # the primary code from the message otherwise
        text = str(exc)
        code = 13 if "is full" in text else 8 if "readonly" in text else 10 if "I/O error" in text else None
    number = _SQLITE_ERRNO.get(code & 0xFF if code is not None else None)
    if number is None:
        return None
    return OSError(number, f"{exc} (nothing written: an old file there is untouched)", os.fspath(path))  # EACCES: PermissionError


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> None:
    """Replace ``path`` with ``data`` atomically."""
    with atomic_path(path) as tmp, open(tmp, "wb") as f:
        f.write(data)
        f.flush()


def atomic_write_text(path: str | os.PathLike, text: str, encoding: str = "utf-8") -> None:
    """Replace ``path`` with ``text`` atomically."""
    atomic_write_bytes(path, text.encode(encoding))


def atomic_write_chunks(path: str | os.PathLike, chunks, encoding: str = "utf-8") -> None:
    """Replace ``path`` atomically with the text of the iterable ``chunks``, written as they
    come (a large document never whole in memory)."""
    with atomic_path(path) as tmp, open(tmp, "w", encoding=encoding, newline="") as f:
        for chunk in chunks:
            f.write(chunk)
        f.flush()


@contextmanager
def atomic_sqlite(path: str | os.PathLike) -> Iterator[sqlite3.Connection]:
    """A connection to a brand-new SQLite database that replaces ``path`` atomically.

    Fill it inside the ``with`` block (tables, rows); on a normal exit the transaction
    is committed, the connection closed, and the file moved over ``path`` as in
    :func:`atomic_path`.  On an exception nothing is committed and ``path`` is untouched.
    The temporary database needs no rollback journal (it is thrown away on failure), so
    it is written with ``journal_mode=OFF`` and ``synchronous=OFF``; durability comes from
    the ``fsync`` before the rename.
    """
    if (too_long := path_too_long(path)) is not None:   # written, it could not be opened
        raise OSError(errno.ENAMETOOLONG, f"{too_long}; nothing written", os.fspath(path))
    with atomic_path(path) as tmp, sqlite_write_errors(path):
        if (too_long := path_too_long(tmp)) is not None:   # a short name's temporary name is longer
            raise OSError(errno.ENAMETOOLONG, f"{too_long}; this is the path of the temporary file written first "
                          f"beside it; nothing written", os.fspath(path))
        con = connect(tmp, isolation_level=None)
        try:
            con.execute("PRAGMA journal_mode=OFF")
            con.execute("PRAGMA synchronous=OFF")
            con.execute("BEGIN")
            yield con
            con.execute("COMMIT")
        finally:
            con.close()


def write_page(page: str, path: str | os.PathLike | None, open_browser: bool = False, *,
               own: str | os.PathLike | None = None, force: bool = False) -> None:
    """Write an HTML ``page`` to ``path`` atomically (when given); with ``open_browser`` open it
    in the default browser, from a temporary ``hypermem-*.html`` file when there is no ``path``.
    ``path`` must not be ``own`` (the memory's durable file) nor, without ``force``, an existing
    file that is no inspector page (:func:`hypermem.store.page_file.check_page_path`)."""
    if path is not None:
        check_page_path(path, own=own, force=force)
        atomic_write_text(path, page)
    if open_browser:
        if path is None:
            fd, name = tempfile.mkstemp(prefix="hypermem-", suffix=".html")
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(page)
            path = name
        webbrowser.open(Path(path).resolve().as_uri())
