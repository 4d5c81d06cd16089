"""Store paths handed to SQLite: always a file name, never a URI; and SQLite's path-length limit.

* :func:`connect`: this SQLite is built with ``SQLITE_USE_URI``, so a plain
  ``sqlite3.connect("file:notes.db")`` opens ``notes.db`` and ``"file:mem.db?mode=memory"``
  a database in memory, while ``os.path`` calls read the same string as the file literally
  named ``file:notes.db``.  Every store path is therefore connected as a URI built from its
  absolute path, every byte but ``/`` percent-encoded (``file:`` + ``urllib.parse.quote``): a
  name that begins with ``file:`` or holds ``?``, ``#`` or ``%`` is the file of that name,
  in every call.
* :func:`path_too_long`: SQLite's Unix VFS builds the full path of a database (relative to
  the working folder, every symlink followed) in a buffer of ``SQLITE_MAX_PATHNAME`` = 512
  bytes, and needs room for ``-journal`` after it, so a path over 504 bytes cannot be opened;
  SQLite then says only "unable to open database file".  A symlink to the folder does not
  help (SQLite opens the path it points to): only a shorter folder does.
"""

from __future__ import annotations

import os
import sqlite3
from urllib.parse import quote

SQLITE_PATH_LIMIT = 504
"""The longest path (bytes, absolute, symlinks followed) SQLite's Unix VFS opens: 512 less ``-journal``."""


def path_uri(path: str | os.PathLike, query: str | None = None) -> str:
    """The SQLite URI of the file ``path`` (absolute, percent-encoded), with ``query`` when given."""
    uri = "file:" + quote(os.fsencode(os.path.abspath(os.fspath(path))))
    return uri if query is None else f"{uri}?{query}"


def connect(path: str | os.PathLike, query: str | None = None, **kwargs) -> sqlite3.Connection:
    """``sqlite3.connect`` of the file ``path`` (never read as a URI of its own: module docstring).
    A path too long for SQLite is a ``sqlite3.OperationalError`` saying so (:func:`path_too_long`),
    not SQLite's "unable to open database file": each caller's SQLite errors carry it."""
    if (too_long := path_too_long(path)) is not None:
        raise sqlite3.OperationalError(too_long)
    return sqlite3.connect(path_uri(path, query), uri=True, **kwargs)


def path_too_long(path: str | os.PathLike) -> str | None:
    """What is wrong when SQLite cannot open ``path`` for its length (module docstring), or None."""
    if os.name == "nt":   # the Windows VFS has its own limits
        return None
    size = len(os.fsencode(os.path.realpath(os.fspath(path))))
    if size <= SQLITE_PATH_LIMIT:
        return None
    return (f"SQLite cannot open a path longer than {SQLITE_PATH_LIMIT} bytes (this one is {size}, absolute, "
            f"symlinks followed): use a shorter folder (a symlink to it does not help: SQLite opens the path it "
            f"points to)")
