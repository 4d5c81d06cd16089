"""A durable store used across ``os.fork()``: what the child inherited is set aside.

A SQLite or libpq connection must not be carried across ``fork``: the child shares the
parent's socket (PostgreSQL: the two processes' statements and replies interleave) or
holds no real POSIX lock on the file while SQLite's in-process bookkeeping says it does
(SQLite: once the parent closes, the WAL file is deleted under the child, whose commits
are acknowledged and lost).  So every open storage is watched (:func:`watch`); in the
child, :func:`os.register_at_fork` calls its ``after_fork()``, which sets the inherited
connection aside (SQLite: closed without a checkpoint, :func:`.sqlite_open.release_inherited`;
PostgreSQL: kept referenced and never closed, :func:`keep`, as its close would end the
parent's session), and the storage's next call opens a connection of its own.  Pending
access counts (:class:`.touches.PendingTouches`) are the parent's to write: the child's
copies are emptied the same way.  The per-call cost is none: the hook runs once per fork;
a storage's write also compares :func:`os.getpid` with the pid it opened in (a ``fork``
made by C code runs no hook).
"""

from __future__ import annotations

import os
import weakref

_WATCHED: weakref.WeakSet = weakref.WeakSet()
_KEPT: list = []
"""Inherited connections the child must never close nor free (PostgreSQL): referenced until it exits."""


def watch(obj) -> None:
    """Call ``obj.after_fork()`` in every child forked from now on (while ``obj`` lives)."""
    _WATCHED.add(obj)


def keep(con) -> None:
    """Hold an inherited connection for the life of the child (never closed there)."""
    _KEPT.append(con)


def _after_in_child() -> None:
    for obj in list(_WATCHED):
        try:
            obj.after_fork()
        except Exception:  # noqa: BLE001 - one storage's failure must not stop the others
            pass


if hasattr(os, "register_at_fork"):  # no fork on Windows
    os.register_at_fork(after_in_child=_after_in_child)
