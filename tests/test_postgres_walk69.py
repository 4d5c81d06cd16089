"""A walk over a PostgreSQL store serving a team (walk 69): ``hypermem mcp --store URL`` /
``open_store(URL)`` creates a store in a new database without pgvector; the server learns the
store's embedder from its stored settings without reading its rows (SQLite too); a mirrored
search whose hit another handle removes counts nothing for it (as on SQLite); a connection lost
inside ``executemany`` (a touch, an upsert) leaves no psycopg "error ignored" line."""

from __future__ import annotations

import logging
import time

import psycopg
import pytest
import test_refresh
from test_races_walk69 import _remove_during_search

from hypermem import HashingEmbedder, Memory
from hypermem.embed import StandIn
from hypermem.embed.spec import MINILM
from hypermem.integrations import mcp_server
from hypermem.store.backends import StorageError
from hypermem.store.backends.postgres import PostgresStorage
from hypermem.store.backends.sqlite import SqliteStorage

pytestmark = pytest.mark.usefixtures("one_thread")
target = test_refresh.target   # a new SQLite path, or a new PostgreSQL database


def _emb():
    return HashingEmbedder(dim=24)


def _has_pgvector(url: str) -> bool:
    with psycopg.connect(url) as con:
        return con.execute("SELECT count(*) FROM pg_extension WHERE extname = 'vector'").fetchone()[0] == 1


# ---------------------------------------------------------------------- 1. a new database
def test_open_store_creates_a_store_in_a_new_database_without_pgvector(pg_url, monkeypatch):
    assert not _has_pgvector(pg_url)
    with pytest.raises(StorageError, match="no pgvector") as err:
        Memory.open(pg_url, read_only=True)
    assert isinstance(err.value, FileNotFoundError)           # as an empty database's, or a missing file's
    named = []
    monkeypatch.setattr(mcp_server, "embedder_named", lambda name: named.append(name) or _emb())
    with mcp_server.open_store(pg_url) as mem:                 # was StorageError: holds no hypermem store
        mem.add("the first note", id="a")
    assert named == ["minilm"] and _has_pgvector(pg_url)       # a new store gets the default embedder
    assert mcp_server.choose_embedder(pg_url) is None          # now the store's own (here hashing)
    with Memory.open(pg_url, read_only=True) as back:
        assert back.ids == ["a"] and back.embedder.dim == 24


# ---------------------------------------------------------------------- 2. the settings alone
def test_choose_embedder_reads_the_settings_not_the_rows(target, monkeypatch):
    with Memory.open(target, embedder=_emb()) as mem:
        mem.add_many([{"text": f"note {i}"} for i in range(5)])

    def no_rows(*args, **kwargs):
        raise AssertionError("choose_embedder read the store's rows")
    for cls in (SqliteStorage, PostgresStorage):
        monkeypatch.setattr(cls, "load_rows", no_rows)
    assert mcp_server.choose_embedder(target) is None          # a hashing store: its own


def test_choose_embedder_still_picks_minilm_or_names_a_custom_embedder(target, monkeypatch):
    other = target + "_2" if target.endswith(".db") else None
    Memory.open(target, embedder=StandIn({"type": "SentenceTransformerEmbedder", "dim": 384, "model": MINILM})).close()
    monkeypatch.setattr(mcp_server, "embedder_named", lambda name: f"<{name}>")
    assert mcp_server.choose_embedder(target) == "<minilm>"   # a MiniLM store: MiniLM, without loading a row
    if other is not None:                                      # a custom embedder: the way to pass it
        Memory.open(other, embedder=StandIn({"type": "MyEmbedder", "dim": 8, "custom": True})).close()
        with pytest.raises(ValueError, match="made with the embedder 'MyEmbedder' \\(dim 8\\).*--embedder module:MyEmbedder"):
            mcp_server.choose_embedder(other)


# ---------------------------------------------------------------------- 4. a search's touch
@pytest.fixture(name="ab")
def ab_fixture(pg_url):
    """Two mirrored handles (A, B) of one new PostgreSQL store."""
    handles = [Memory.open(pg_url, embedder=_emb()) for _ in "ab"]
    yield handles
    for mem in handles:
        mem.close()


def test_a_mirrored_search_counts_no_access_of_a_hit_another_handle_removed(ab, pg_url):
    a, b = ab
    a.add_many([{"text": "the cat is in the kitchen", "id": "x"}, {"text": "the cat sleeps", "id": "y"}])
    b.refresh()
    _remove_during_search(a, lambda: b.remove("x"))            # after the search read, before its touch
    hits = a.search("the cat", k=2)
    assert {h.id for h in hits} == {"x", "y"}                  # as the search saw the store
    assert "x" not in a and a.get("y").access_count == 1
    with Memory.open(pg_url, read_only=True) as c:
        assert c.ids == ["y"] and c.get("y").access_count == 1


def test_a_pending_touch_drops_an_id_another_handle_removed(ab, pg_url):
    a, b = ab
    a.add("x", id="x")
    b.add("z", id="z")
    b.remove("x")
    with psycopg.connect(pg_url) as lock:                      # another writer holds the write lock
        lock.execute("SELECT value FROM hypermem_state WHERE key = 'version' FOR UPDATE")
        a.touch(["x", "z"])                                    # pending: counted here, written later
        assert a.get("z").access_count == 1 and "x" not in a
    a.add("w", id="w")                                         # the next write stores the pending count
    with Memory.open(pg_url, read_only=True) as c:
        assert sorted(c.ids) == ["w", "z"] and c.get("z").access_count == 1


# ---------------------------------------------------------------------- 5. executemany's pipeline
def _kill_before(mem, method, admin):
    """Terminate ``mem``'s server connection right before its storage's ``method`` runs."""
    st = mem.storage
    orig = getattr(st, method)

    def call(*args, **kwargs):
        pid = st.con.info.backend_pid
        admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
        for _ in range(500):                                   # gone: the server closed its end
            if not admin.execute("SELECT 1 FROM pg_stat_activity WHERE pid = %s", (pid,)).fetchone():
                break
            time.sleep(0.01)
        return orig(*args, **kwargs)
    setattr(st, method, call)


@pytest.mark.parametrize("method", ["touch", "upsert"])
def test_a_connection_lost_inside_executemany_leaves_no_error_ignored_line(pg_url, method, caplog):
    mem = Memory.open(pg_url, embedder=_emb())
    mem.add("a note", id="a")
    with psycopg.connect(pg_url, autocommit=True) as admin, caplog.at_level(logging.WARNING, logger="psycopg"):
        _kill_before(mem, method, admin)
        if method == "touch":
            with pytest.warns(RuntimeWarning, match="writing the access counts of a search failed"):
                assert [h.id for h in mem.search("a note", k=1)] == ["a"]   # a touch is best effort
        else:
            with pytest.raises(StorageError, match="connection lost"):
                mem.update("a", text="an edited note")
    assert not [r for r in caplog.records if "error ignored" in r.getMessage()]
    mem.storage.__dict__.pop(method)
    mem.update("a", text="after the loss")                     # the next call reconnects
    assert mem.get("a").text == "after the loss"
    mem.close()
