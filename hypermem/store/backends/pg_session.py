"""A PostgreSQL connection made ready for a store (:class:`.postgres.PostgresStorage`): pgvector
found or created and on the search path, a write's lock wait, and a pipeline that reports a
lost connection once."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import psycopg
from pgvector.psycopg import register_vector

from .durable import StorageError
from .pg_errors import CREATE_LOCK, is_lost

_VECTOR_AT = ("SELECT current_schema(), n.nspname, n.nspname = ANY(current_schemas(false)), current_setting("
              "'search_path'), EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = 'public') FROM (SELECT 1) one "
              "LEFT JOIN pg_extension e ON e.extname = 'vector' LEFT JOIN pg_namespace n ON n.oid = e.extnamespace")


class NoStore(StorageError, FileNotFoundError):
    """A read-only open of a PostgreSQL database without pgvector: it holds no store (as for an
    empty database, or a missing SQLite file, a ``FileNotFoundError``; a first open creates it)."""


def prepare(con, read_only: bool, where: str) -> None:
    """pgvector on a new connection: created when missing (in ``public`` where it exists, shared
    by every tenant schema), its schema appended to the session's ``search_path`` when not on it.
    Read-only, a database without pgvector is refused: it holds no store (:class:`NoStore`;
    ``where``: its redacted URL)."""
    home, schema, seen, path, public = con.execute(_VECTOR_AT).fetchone()
    if schema is None and read_only:
        raise NoStore(f"the PostgreSQL database {where!r} holds no hypermem store: it has no pgvector "
                      f"extension (a store's first open, without read_only, creates it and the store); open "
                      f"it once without read_only, or have its owner run CREATE EXTENSION vector")
    if schema is None:
        con.execute(f"SELECT pg_advisory_xact_lock({CREATE_LOCK})")  # concurrent CREATE EXTENSION fails
        con.execute("CREATE EXTENSION IF NOT EXISTS vector" + (" SCHEMA public" if public else ""))
        home, schema, seen, path, public = con.execute(_VECTOR_AT).fetchone()
    if home is None:
        raise StorageError(f"could not open the PostgreSQL database {where!r}: no schema of its "
                           f"search_path ({path}) exists; create it first (CREATE SCHEMA ...)")
    if schema is not None and not seen:  # config() and create() look in the first schema alone
        con.execute("SELECT set_config('search_path', %s || ', ' || quote_ident(%s), false)", (path, schema))
    con.commit()
    register_vector(con)
    if read_only:
        con.execute("SET default_transaction_read_only = on")
    con.commit()


def begin_write(con, lock_wait: float | None) -> None:
    """Open a write transaction; ``lock_wait`` (seconds, None: the server's ``lock_timeout``) bounds
    how long it waits for a lock another client holds (``SET LOCAL lock_timeout``: this transaction
    only; at least 1 ms, as 0 would mean no limit).  Its timeout is ``lock_not_available`` (55P03)."""
    if lock_wait is None:
        return  # psycopg opens the transaction at its first statement
    con.execute(f"SET LOCAL lock_timeout = {max(1, int(lock_wait * 1000))}")


@contextlib.contextmanager
def pipeline(con) -> Iterator[None]:
    """``con.pipeline()``, a lost connection raised once: a pipeline left by that error cannot
    end either, and psycopg logs the loss a second time ("error ignored terminating
    <psycopg.Pipeline [BAD]>") on stderr; left without an error, it raises that loss itself.
    ``cursor.executemany`` inside it rides this pipeline (alone, it opens one that logs so)."""
    lost = None
    try:
        with con.pipeline():
            try:
                yield
            except psycopg.OperationalError as exc:
                if not is_lost(exc, con):
                    raise
                lost = exc
    except psycopg.OperationalError:
        if lost is None:
            raise
    if lost is not None:  # the pipeline ended (psycopg does not raise on a connection it saw close)
        raise lost
