"""The errors of durable storage, and the retry of a call's first statement after a lost
connection (:func:`first_statement`); :mod:`.durable` re-exports them."""

from __future__ import annotations

__all__ = ["StorageError", "ConnectionLost", "first_statement"]


class StorageError(RuntimeError):
    """Durable storage failed (connection lost, disk full, read-only store...)."""


class ConnectionLost(StorageError):
    """The connection to the database server was lost (a restart, a network cut); nothing of
    the call was committed and the next call reconnects."""


def first_statement(st, run):
    """``run()``, once more on a new connection when the connection turns out lost before any
    of it took effect: a server restarted since the last call, which the client sees only at
    its first statement.  Only a read, or a write's opening (taking the write lock), is run
    this way: nothing of it ran, so the retry is safe.  Any other error is raised as it was."""
    try:
        return run()
    except st.db_errors as exc:
        if not isinstance(st.error(exc), ConnectionLost):   # classified; a lost one is dropped
            raise
    return run()
