"""Whether this process may read a memory file, in words.

Another user's store written under ``umask 077`` (mode ``0600``) cannot be read by this
process at all: SQLite then says only "unable to open database file", and the other causes
of that error (a folder that is not writable, a read-only mount) have other remedies.  The
openers (:func:`~hypermem.store.backends.sqlite_open.open_read_only`,
:func:`~hypermem.store.validation.open_sqlite_readonly`, a writable
:class:`~hypermem.store.backends.sqlite.SqliteStorage`) ask :func:`may_not_read` first and
name the permission and its remedy.
"""

from __future__ import annotations

import os


def may_not_read(*paths: str | os.PathLike) -> str | None:
    """The first of ``paths`` that exists as a file this process may not read
    (``os.access(..., R_OK)``), in one sentence with the remedy; None when all may be read."""
    for path in paths:
        name = os.fspath(path)
        if os.path.isfile(name) and not os.access(name, os.R_OK):
            return (f"this process may not read {name!r} (permission denied): run as its owner, or have the "
                    f"owner make it readable (chmod/umask)")
    return None
