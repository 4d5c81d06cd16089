r"""PostgreSQL + pgvector storage for a durable memory (the ``postgres`` extra).

Schema (in the first schema of the search path: one memory per schema, e.g. a URL with
``options=-csearch_path%3Dtenant_a``; pgvector in ``public``, appended to the path):

* ``hypermem_config (key text PRIMARY KEY, value jsonb)``: the store's settings;
* ``hypermem_state (key text PRIMARY KEY, value bigint)``: ``version``; a write
  transaction starts with ``SELECT ... FOR UPDATE`` on it, which serialises writers from
  any number of clients;
* ``hypermem_memories``: the record (``text``, ``meta jsonb``, ``parent_id`` with an index
  for the recursive subtree / ancestor queries, ``t``, ``valid_from`` / ``valid_until``
  and ``last_accessed`` as ``timestamptz``, ``access_count``), ``depth float8``, the raw
  ``embedding`` and the unit ``direction`` as float64 bytes, and two pgvector columns the
  server searches with:

  - ``dirv vector(d)``: the direction in float32.  The shell distance decreases with the
    cosine (:class:`hypermem.index.ShellDistance`), so ``ORDER BY dirv <#> q`` reads rows in
    order of distance (up to float32 rounding, bounded in :mod:`.pg_search`);
  - ``lor vector(d + 2)``: the shell point on the hyperboloid
    (:func:`hypermem.geometry.poincare.to_lorentz`), time coordinate negated
    (:func:`hypermem.geometry.lorentz.to_mips_vectors`: then ``x' . y = <x, y>_L``) and
    made Euclidean by one more coordinate ``sqrt(M^2 - |x'|^2)`` (0 for the query), so that
    ``|x~ - y~|^2 = M^2 + |y|^2 - 2 <x, y>_L`` orders by hyperbolic distance.  An HNSW
    index ``vector_l2_ops`` on it (:meth:`PostgresStorage.build_ann_index`) is a metric
    index; ``vector_ip_ops`` on raw Lorentz vectors is not (inner products are no metric).

The change stamps of :mod:`~hypermem.store.backends.changes`: ``changed_at`` /
``touched_at`` (``bigint``, indexed), the version of the transaction that last wrote /
touched the row, and ``hypermem_removed (version bigint, ids text[])``, the removal log.
A database of layout 1 is upgraded when opened for writing; the first ``removed_floor`` takes it to
layout 3 (:mod:`.layouts`, :mod:`.pg_layout`).

Ingest: one binary ``COPY`` in the call's transaction (:meth:`PostgresStorage.insert`); rewrites: upserts.
``meta`` is sent with its floats of ``1e16`` or more as exact decimals with ``.0``
(:func:`~hypermem.store.json_values.exact_numbers`): written with an exponent, jsonb kept them as ints.

A lost connection raises :class:`StorageError` naming it; the next call reconnects.  A lock or statement
timeout, a deadlock, a serialization failure or a full disk rolls back and keeps it (:func:`.pg_errors.describe`).
In a process forked since, the inherited connection is set aside, never closed, and a new one opened (:mod:`.fork_guard`).

Clients opening a new database at once: the extension, the tables and every index (a role that is no
owner then creates none) are made under an advisory lock, the check for the tables repeated under it.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import re
import threading
from typing import Any

import numpy as np
import torch

from ...geometry import poincare as P
from ...geometry.lorentz import to_mips_vectors
from ..json_values import exact_numbers
from . import fork_guard
from .changes import REMOVAL_LOG_VERSIONS, collect_changes, issue_changes, prune_removal_log
from .durable import ConnectionLost, StorageError, first_statement
from .handles import lock_after_fork
from .layouts import FLOOR_LAYOUT, STAMPS_LAYOUT, behind, check_layout, raise_floor, unstamped, warn_upgraded
from .pg_ann import ANN_OPS, build_hnsw
from .pg_errors import CREATE_LOCK, RECREATED, describe, is_lost, libpq_text, recreated_type, redact
from .pg_layout import STAMPS, upgrade
from .pg_search import server_search
from .rows import COLUMNS, VECTOR_DTYPES, vector_from

try:
    import psycopg
    from psycopg.copy import QueuedLibpqWriter
    from psycopg.types.json import Jsonb

    from .pg_session import begin_write, pipeline, prepare
except ImportError as exc:  # pragma: no cover - the extra is missing
    raise ImportError('PostgreSQL storage needs the postgres extra: pip install "hypermem-torch[postgres]"') from exc

LAYOUT = STAMPS_LAYOUT
_JSON_NUL = re.compile(r"(?:^|[^\\])(?:\\\\)*\\u0000")  # an escaped NUL, not an escaped backslash + "u0000"
_COLS = COLUMNS + ("dirv", "lor", "changed_at")
_UPSERT = (f"INSERT INTO hypermem_memories ({', '.join(_COLS)}) VALUES ("
           + ", ".join("%s::jsonb" if c == "meta" else "%s" for c in _COLS)
           + ") ON CONFLICT (id) DO UPDATE SET " + ", ".join(f"{c} = excluded.{c}" for c in _COLS[1:]))
_CONFIG_COLUMNS = ("SELECT (SELECT coalesce(string_agg(attname, ',' ORDER BY attnum), '') FROM pg_attribute WHERE "
                   "attrelid = c.oid AND attnum > 0 AND NOT attisdropped) FROM pg_class c WHERE relname = "
                   "'hypermem_config' AND relnamespace = current_schema()::regnamespace")
_CLIENT_INDEXES = {"hypermem_memories_seq": "seq", "hypermem_memories_sib": "sib"}
_INDEXES_THERE = "SELECT indexname FROM pg_indexes WHERE schemaname = current_schema() AND tablename = 'hypermem_memories'"
_COPY = f"COPY hypermem_memories ({', '.join(_COLS)}) FROM STDIN (FORMAT BINARY)"
_COPY_TYPES = ("text", "int8", "int8", "text", "text", "timestamptz", "timestamptz", "timestamptz", "int8",
               "timestamptz", "jsonb", "float8", "bytea", "bytea", "vector", "vector", "int8")
_BUMP = ("WITH s AS (SELECT value FROM hypermem_state WHERE key = 'stamped') UPDATE hypermem_state SET value = %s "
         "WHERE key IN ('version', 'stamped') RETURNING (SELECT value FROM s)")  # stamped as it was (.layouts)


def _as_is(text: str) -> str:
    """The ``dumps`` of a :class:`Jsonb` whose value is JSON text already."""
    return text


def check_nul(rows: list[tuple]) -> None:
    """Refuse a NUL (``"\\x00"``: PostgreSQL cannot store it) in the id, text or meta of row tuples."""
    for r in rows:
        if "\x00" in r[0] or "\x00" in r[3] or ("\\u0000" in r[10] and _JSON_NUL.search(r[10])):
            field = "id" if "\x00" in r[0] else "text" if "\x00" in r[3] else "meta"
            raise ValueError(f"the {field} of memory {r[0]!r} holds a NUL character (\\x00), which PostgreSQL "
                             f"cannot store (SQLite can); nothing was written")


def shell_lorentz(directions: torch.Tensor, depth: float, c: float) -> torch.Tensor:
    """Negated-time hyperboloid coordinates ``(n, d + 1)`` of the shell points of unit
    ``directions`` (float64)."""
    return to_mips_vectors(P.to_lorentz(P.point_at(directions, depth, c), c))


class PostgresStorage:
    """Storage in a PostgreSQL database with pgvector (see the module docstring)."""

    time_text = False
    always_direction = True
    incremental = True
    """Whether the database has change stamps (layout 2): refresh reads only the changed rows."""
    next_version = 0
    """The version the current write transaction commits (set by :meth:`version`)."""
    removal_log_versions = REMOVAL_LOG_VERSIONS
    """Versions of removals the log keeps at least (:func:`~.changes.prune_removal_log`)."""
    lock_wait: float | None = None
    """Seconds a write waits for the write lock (:func:`.pg_session.begin_write`); None: the server's lock_timeout."""

    def __init__(self, url: str, read_only: bool = False, vector_dtype: str | None = None):
        if vector_dtype is not None and vector_dtype not in VECTOR_DTYPES:
            raise ValueError(f"vector_dtype must be one of {tuple(VECTOR_DTYPES)}, got {vector_dtype!r}")
        self.url = url
        self.read_only = read_only
        self.vector_dtype = vector_dtype or "float64"
        self.db_errors = (psycopg.Error,)
        self._con = None
        self.closed = False
        self.lock = threading.RLock()
        """Held by every call of a mirrored store using the connection, and by :meth:`close` (:mod:`.handles`)."""
        self.dim: int | None = None
        self.shell: tuple[float, float] | None = None
        self._opened = False  # until the first connection: a failure is "cannot open", not "lost"
        self.con.rollback()  # connect now: a bad URL fails here
        self._pid = os.getpid()
        fork_guard.watch(self)

    def after_fork(self) -> None:
        """In a forked child: the parent's connection kept, never closed nor used; the next call opens one."""
        con, self._con, self._pid = self._con, None, os.getpid()
        self.lock = lock_after_fork(self.lock)
        if con is not None:
            fork_guard.keep(con)

    def __repr__(self) -> str:
        return f"PostgresStorage({self._safe_url()!r}{', read_only' if self.read_only else ''})"

    def _safe_url(self) -> str:
        """The URL (or ``key=value`` string) without its user and password (:func:`.pg_errors.redact`)."""
        return redact(self.url)

    @property
    def con(self):
        """The connection, opened again after a lost one."""
        if self.closed:
            raise StorageError("this memory's storage is closed")
        if self._con is None or self._con.closed or self._con.broken:
            try:
                con = psycopg.connect(self.url, autocommit=False)
                try:
                    prepare(con, self.read_only, self._safe_url())
                except BaseException:
                    con.close()
                    raise
            except psycopg.Error as exc:
                if not self._opened:
                    raise StorageError(f"could not open the PostgreSQL database {self._safe_url()!r}: "
                                       f"{libpq_text(exc, self.url)}") from exc
                raise self.error(exc) from exc
            self._con, self._opened = con, True
        return self._con

    def error(self, exc: BaseException) -> StorageError:
        """The :class:`StorageError` of a failed call: a lost connection is dropped (the next
        call reconnects); any other error rolls back and keeps it (:mod:`.pg_errors`)."""
        if is_lost(exc, self._con):
            self._drop()
            if recreated_type(exc):
                return ConnectionLost(f"PostgreSQL storage: {RECREATED} ({str(exc).strip()})")
            return ConnectionLost(f"PostgreSQL connection lost or refused ({libpq_text(exc, self.url)}); nothing of this call "
                                f"was committed; the next call reconnects")
        self.rollback()
        return StorageError(describe(exc))

    @staticmethod
    def busy(exc: BaseException) -> bool:
        """Whether ``exc`` says another client holds the write lock (``NOWAIT``: lock_not_available)."""
        return getattr(exc, "sqlstate", None) == "55P03"

    def _drop(self) -> None:
        con, self._con = self._con, None
        if con is not None:
            try:
                con.close()
            except Exception:  # noqa: BLE001 - a broken connection may fail to close
                pass

    # ------------------------------------------------------------------ layout
    def config(self) -> dict[str, Any] | None:
        con = self.con
        cols = con.execute(_CONFIG_COLUMNS).fetchone()
        if cols is None or cols[0] != "key,value":
            con.rollback()
            if cols is None:
                return None
            raise StorageError(f"a table hypermem_config exists in {self._safe_url()!r} but was not written by "
                               f"hypermem (its columns: {cols[0]}); open another database or schema")
        cfg = dict(con.execute("SELECT key, value FROM hypermem_config").fetchall())
        con.rollback()
        layout = check_layout(cfg, "the database")
        if layout < FLOOR_LAYOUT and not self.read_only:  # one-way, in one transaction (pg_layout)
            cfg["layout"] = upgrade(con, layout, repr(self._safe_url()))
        self.incremental = cfg["layout"] >= STAMPS_LAYOUT
        self._configure(cfg)
        return cfg

    def _configure(self, cfg: dict[str, Any]) -> None:
        self.vector_dtype = cfg.get("vector_dtype", "float64")
        self.dim = int(cfg["dim"])
        self.shell = (float(cfg["base_depth"]), float(cfg["curvature"]))
        self.m2 = float(cfg["lorentz_m2"])

    def create(self, config: dict[str, Any]) -> bool:
        """Create the tables; False (nothing written) when another client created them since
        :meth:`config` found none (checked again under the advisory lock)."""
        d = int(config["dim"])
        rho, c = float(config["base_depth"]), float(config["curvature"])
        e = torch.zeros(1, d, dtype=torch.float64)
        e[0, 0] = 1.0
        m2 = float(shell_lorentz(e, rho, c).pow(2).sum()) * (1 + 1e-9)  # every shell point has this norm
        cfg = dict(config, layout=LAYOUT, vector_dtype=self.vector_dtype, lorentz_m2=m2)
        con = self.con
        try:
            con.execute(f"SELECT pg_advisory_xact_lock({CREATE_LOCK}, hashtext(current_schema()))")
            # pg_class read with this statement's snapshot (to_regclass may answer from a stale cache)
            if con.execute("SELECT EXISTS (SELECT 1 FROM pg_class WHERE relname = 'hypermem_config' AND "
                           "relnamespace = current_schema()::regnamespace)").fetchone()[0]:
                con.rollback()  # another client created the store since config() looked
                return False
            con.execute("CREATE TABLE hypermem_config (key text PRIMARY KEY, value jsonb NOT NULL)")
            con.execute("CREATE TABLE hypermem_state (key text PRIMARY KEY, value bigint NOT NULL)")
            con.execute(f"CREATE TABLE hypermem_memories (id text PRIMARY KEY, seq bigint NOT NULL, sib bigint NOT "
                        f"NULL, text text NOT NULL, parent_id text, t timestamptz NOT NULL, valid_from timestamptz, "
                        f"valid_until timestamptz, access_count bigint NOT NULL, last_accessed timestamptz, meta "
                        f"jsonb NOT NULL, depth float8 NOT NULL, embedding bytea NOT NULL, direction bytea NOT NULL, "
                        f"dirv vector({d}) NOT NULL, lor vector({d + 2}) NOT NULL, changed_at bigint NOT NULL DEFAULT 0, "
                        f"touched_at bigint NOT NULL DEFAULT 0)")
            con.execute("CREATE INDEX hypermem_memories_parent ON hypermem_memories (parent_id)")
            for name, col in _CLIENT_INDEXES.items():  # the creator makes them: a client that is no owner cannot
                con.execute(f"CREATE INDEX {name} ON hypermem_memories ({col})")
            for sql in STAMPS:
                con.execute(sql)
            with pipeline(con), con.cursor() as cur:  # pipeline: a lost connection is raised once
                cur.executemany("INSERT INTO hypermem_config VALUES (%s, %s::jsonb)",
                                [(k, json.dumps(v, allow_nan=False)) for k, v in cfg.items()])
            con.execute("INSERT INTO hypermem_state VALUES ('version', 0)")
            con.commit()
        except BaseException:
            con.rollback()
            raise
        self._configure(cfg)
        return True

    def build_ann_index(self, m: int = 16, ef_construction: int = 128, on: str = "dirv",
                        maintenance_work_mem: str | None = None, workers: int | None = None) -> None:
        """Create (or re-create) the store's one HNSW index; build it after a bulk load (an
        index present during ``COPY`` is maintained row by row, far slower).  ``on="lor"``:
        ``vector_l2_ops`` over the Lorentz vectors made Euclidean (module docstring);
        ``on="dirv"``: ``vector_ip_ops`` over the float32 unit directions, whose order is the
        shell metric's, an ordinary cosine index.  ``maintenance_work_mem`` (e.g. ``"2GB"``:
        the graph should fit) and ``workers`` (``max_parallel_maintenance_workers``) are set
        for this build only.  :meth:`search` with ``ann=True`` reads rows in the order of
        whichever index exists.  The defaults kept recall@10 at 0.975 at ``ef_search=200`` on 1M rows (docs/storage.md)."""
        if on not in ANN_OPS:
            raise ValueError(f"on must be one of {tuple(ANN_OPS)}, got {on!r}")
        con = self.con
        try:
            build_hnsw(con, on, m, ef_construction, maintenance_work_mem, workers)  # in the store's schema (.pg_ann)
            con.commit()
        except BaseException as exc:  # Ctrl-C too: no transaction (table lock) is left open
            self.rollback()
            if not isinstance(exc, psycopg.Error):
                raise
            raise self.error(exc) from exc

    def ensure_client_indexes(self) -> None:
        """The indexes the mirror-free client reads by (:mod:`.server`): ``seq`` and ``sib``."""
        con = self.con
        try:  # only the missing ones: CREATE INDEX IF NOT EXISTS needs the table's owner even when they exist
            missing = set(_CLIENT_INDEXES) - {r[0] for r in con.execute(_INDEXES_THERE)}
            if missing:  # clients opening at once: concurrent CREATE INDEX IF NOT EXISTS can collide
                con.execute(f"SELECT pg_advisory_xact_lock({CREATE_LOCK}, hashtext(current_schema()))")
            for name in sorted(missing):
                con.execute(f"CREATE INDEX IF NOT EXISTS {name} ON hypermem_memories ({_CLIENT_INDEXES[name]})")
            con.commit()
        except BaseException as exc:  # Ctrl-C too: no transaction (table lock) is left open
            self.rollback()
            if not isinstance(exc, psycopg.Error):
                raise
            if getattr(exc, "sqlstate", None) == "42501":  # insufficient_privilege: not the tables' owner
                raise StorageError("the client indexes (seq, sib) are missing and this role does not own "
                                   "hypermem_memories: open the store once as its owner with mirror=False") from exc
            raise self.error(exc) from exc

    # ------------------------------------------------------------------ transactions
    def begin(self, wait: bool = True) -> None:
        if self._pid != os.getpid():  # forked by C code (no fork hook ran)
            self.after_fork()
        begin_write(self.con, self.lock_wait if wait else None)  # the property reconnects if needed

    def version(self, wait: bool = True) -> int:
        """The committed version, under the write lock (this transaction's rows get the next);
        ``wait=False`` (a touch): fail at once (lock_not_available) while another client holds it."""
        v = int(self.con.execute("SELECT value FROM hypermem_state WHERE key = 'version' FOR UPDATE"
                                 + ("" if wait else " NOWAIT")).fetchone()[0])
        self.next_version = v + 1
        return v

    def current_version(self) -> int:
        con = self.con
        v = int(con.execute("SELECT value FROM hypermem_state WHERE key = 'version'").fetchone()[0])
        con.rollback()
        return v

    def bump(self) -> int:
        """``version`` and ``stamped`` raised in one statement; after unstamped writes, the floor (:mod:`.layouts`)."""
        v, was = self.next_version, self.con.execute(_BUMP, (self.next_version,)).fetchone()[0]
        if unstamped(was, v - 1) and raise_floor(self.con, "hypermem", "%s", v - 1):
            warn_upgraded(repr(self._safe_url()), STAMPS_LAYOUT, FLOOR_LAYOUT, "a writer that does not stamp wrote")
        return v

    def commit(self) -> None:
        self.con.commit()

    def rollback(self) -> None:
        con = self._con
        if con is not None and not con.closed and not con.broken:
            try:
                con.rollback()
            except psycopg.Error:
                self._drop()

    # ------------------------------------------------------------------ rows
    def _vectors(self, rows: list[tuple]) -> tuple[np.ndarray, np.ndarray]:
        """The float32 ``dirv`` and augmented ``lor`` of each row (from its stored direction)."""
        rho, c = self.shell
        blob = b"".join(r[13] for r in rows)
        if len(blob) == 8 * self.dim * len(rows):
            dirs = torch.from_numpy(np.frombuffer(blob, dtype="<f8").reshape(len(rows), self.dim).copy())
        else:
            dirs = torch.stack([vector_from(r[13], self.dim, "direction", r[0]) for r in rows])
        # Every shell point lies at the one depth rho: its Lorentz vector is (-X_0, s u) with the
        # same X_0 and s for every unit u, so shell_lorentz runs once, on e_1, and scales.
        e1 = torch.zeros(1, self.dim, dtype=torch.float64)
        e1[0, 0] = 1.0
        ref = shell_lorentz(e1, rho, c)[0]
        lor = np.empty((len(rows), self.dim + 2), dtype=np.float32)
        lor[:, 0] = float(ref[0])
        lor[:, 1:-1] = (dirs * ref[1]).numpy()
        lor[:, -1] = math.sqrt(max(self.m2 - float(ref.pow(2).sum()), 0.0))
        return dirs.numpy().astype(np.float32), lor

    def upsert(self, rows: list[tuple]) -> None:
        """Insert or rewrite rows (:data:`~.rows.COLUMNS` tuples), stamped ``changed_at``."""
        if not rows:
            return
        check_nul(rows)
        d32, lor = self._vectors(rows)
        v = self.next_version
        with pipeline(self.con), self.con.cursor() as cur:
            cur.executemany(_UPSERT, [(*r[:10], exact_numbers(r[10]), *r[11:], d32[j], lor[j], v)
                                      for j, r in enumerate(rows)])

    def insert(self, rows: list[tuple]) -> None:
        """Insert new rows (ids not stored yet) with one binary ``COPY`` in this transaction."""
        if not rows:
            return
        with self.insert_stream() as put:
            put(rows)

    @contextlib.contextmanager
    def insert_stream(self):
        """One binary ``COPY`` of new rows kept open: yields ``put(rows)``, which sends rows
        as they come, so the server stores one part of a large ``add_many`` while the client
        embeds and places the next (:meth:`DurableStore._add_many`); nothing else may run on
        the connection until the block ends.  A queued writer sends from a thread, so the
        client's encoding does not wait for the socket either."""
        v = self.next_version
        with self.con.cursor() as cur, cur.copy(_COPY, writer=QueuedLibpqWriter(cur)) as copy:
            copy.set_types(_COPY_TYPES)

            def put(rows: list[tuple]) -> None:
                if not rows:
                    return
                check_nul(rows)
                d32, lor = self._vectors(rows)
                for j, r in enumerate(rows):
                    copy.write_row((*r[:10], Jsonb(exact_numbers(r[10]), dumps=_as_is), *r[11:], d32[j], lor[j], v))

            yield put

    def delete(self, ids: list[str]) -> None:
        self.con.execute("DELETE FROM hypermem_memories WHERE id = ANY(%s)", (list(ids),))
        if ids:
            self.con.execute("INSERT INTO hypermem_removed VALUES (%s, %s)", (self.next_version, list(ids)))
            prune_removal_log(self.con, "hypermem", "%s", self.next_version, self.removal_log_versions,
                              repr(self._safe_url()))

    def touch(self, items: list[tuple]) -> None:
        """``(increment, last_accessed, id)`` per touched memory, stamped ``touched_at``."""
        v = self.next_version
        with pipeline(self.con), self.con.cursor() as cur:
            cur.executemany("UPDATE hypermem_memories SET access_count = access_count + %s, last_accessed = %s, "
                            "touched_at = %s WHERE id = %s", [(n, t, v, i) for n, t, i in items])

    def changes_since(self, version: int, in_transaction: bool = False):
        """``(version, removed ids, changed rows, touched (id, access_count, last_accessed))``
        committed after ``version``, read in one snapshot (:mod:`.changes`); removed ids
        ``None`` when the pruned log no longer reaches back to ``version``."""
        con = self.con
        try:
            with pipeline(con):  # one round trip for the snapshot, the version and the changes
                if not in_transaction:
                    con.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
                head = con.execute("SELECT key, value FROM hypermem_state")  # version, removed_floor, stamped
                cursors = issue_changes(con, version, "hypermem", "%s")
            state = dict(head.fetchall())
            now = int(state["version"])
            removed, rows, touched = collect_changes(cursors)
            if now != version and behind(version, state):
                removed = None  # pruned log, or a writer that does not stamp: re-read whole (.layouts)
        finally:
            if not in_transaction:
                con.rollback()
        return now, removed, rows, touched

    def embedding_blobs(self, ids: list[str]) -> dict[str, bytes]:
        """id -> stored embedding bytes of the stored ones of ``ids`` (inside the caller's
        transaction, or a read of its own)."""
        con = self.con
        idle = con.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
        try:
            return dict(con.execute("SELECT id, embedding FROM hypermem_memories WHERE id = ANY(%s)",
                                    (list(ids),)).fetchall())
        finally:
            if idle:
                con.rollback()

    def stored_ids(self, ids: list[str]) -> set[str]:
        """The stored ones of ``ids`` (their rows are not read), inside the caller's transaction."""
        return {r[0] for r in self.con.execute("SELECT id FROM hypermem_memories WHERE id = ANY(%s)", (list(ids),))}

    def load_rows(self, in_transaction: bool = False) -> tuple[int, list[dict[str, Any]]]:
        con = self.con
        try:
            if not in_transaction:
                con.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
            version = int(con.execute("SELECT value FROM hypermem_state WHERE key = 'version'").fetchone()[0])
            cur = con.execute(f"SELECT {', '.join(COLUMNS)} FROM hypermem_memories ORDER BY seq")
            rows = [dict(zip(COLUMNS, r)) for r in cur]
        finally:
            if not in_transaction:
                con.rollback()
        return version, rows

    def search(self, memory, query, k: int = 5, **kwargs: Any):
        """The server's own search (:func:`hypermem.store.backends.pg_search.server_search`)."""
        try:   # a read: run again on a new connection when the old one was lost (first_statement)
            return first_statement(self, lambda: server_search(self, memory, query, k, **kwargs))
        except psycopg.Error as exc:
            self.rollback()
            raise self.error(exc) from exc

    def close(self) -> None:
        """Close the connection, once the call another thread has in flight on it ends (:attr:`lock`)."""
        if self._pid != os.getpid():  # never the parent's connection
            self.after_fork()
        with self.lock:
            if not self.closed:
                self._drop()
                self.closed = True

