"""Durable storage walked as a user does: a refused file left untouched, structural server
searches without a query, the mirror-free client's missing methods named, open-time messages."""

from __future__ import annotations

import os
import sqlite3

import pytest

from hypermem import HashingEmbedder, Memory
from hypermem.store.backends import StorageError

pytestmark = pytest.mark.usefixtures("one_thread")


def _emb():
    return HashingEmbedder(dim=16)


def _kitchen(mem) -> None:
    mem.add("home", id="home")
    mem.add("kitchen", parent="home", id="kitchen")
    mem.add("the kettle is on the stove", parent="kitchen", id="kettle")
    mem.add("the knives are in the drawer", parent="kitchen", id="knives")
    mem.add("garden", parent="home", id="garden")


def _snapshot(folder) -> dict[str, bytes]:
    return {name: (folder / name).read_bytes() for name in sorted(os.listdir(folder))}


# ---------------------------------------------------------------------- 1. refused files stay as they were
def test_open_leaves_a_save_snapshot_untouched(tmp_path):
    path = tmp_path / "fresh.db"
    Memory(embedder=_emb()).save(str(path))
    before = _snapshot(tmp_path)
    assert before["fresh.db"][18:20] == b"\x01\x01"  # rollback journal, not WAL
    with pytest.raises(StorageError, match="Memory.load"):
        Memory.open(str(path), embedder=_emb())
    assert _snapshot(tmp_path) == before  # same bytes, no -wal / -shm left behind
    assert len(Memory.load(str(path), embedder=_emb())) == 0


def test_open_leaves_another_applications_file_untouched(tmp_path):
    path = tmp_path / "other.db"
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE notes (body TEXT)")
    con.execute("INSERT INTO notes VALUES ('keep me')")
    con.commit()
    con.close()
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"not a database at all\n" * 10)
    before = _snapshot(tmp_path)
    with pytest.raises(StorageError, match="not a durable memory database"):
        Memory.open(str(path), embedder=_emb())
    with pytest.raises(StorageError):
        Memory.open(str(junk), embedder=_emb())
    assert _snapshot(tmp_path) == before


def test_new_and_empty_files_still_become_durable_stores(tmp_path):
    empty = tmp_path / "empty.db"
    empty.write_bytes(b"")
    for path in (tmp_path / "new.db", empty):
        mem = Memory.open(str(path), embedder=_emb())
        mem.add("hello", id="h")
        mem.close()
        assert path.read_bytes()[18:20] == b"\x02\x02"  # WAL
        again = Memory.open(str(path), embedder=_emb())
        assert again.ids == ["h"]
        again.close()


# ---------------------------------------------------------------------- 2. structural server search, no query
def test_search_server_without_a_query_ranks_the_structural_modes(pg_url):
    mem = Memory.open(pg_url, embedder=_emb())
    _kitchen(mem)
    for mode, root in (("subtree", "kitchen"), ("ancestors", "kettle"), ("children", "home"),
                       ("siblings", "kettle")):
        want = mem.search(None, k=10, mode=mode, root=root, touch=False)
        got = mem.search_server(None, k=10, mode=mode, root=root)
        assert want, mode
        assert [r.id for r in got] == [r.id for r in want], mode
        assert [r.score for r in got] == pytest.approx([r.score for r in want], abs=1e-12)
        assert all(r.distance == 0.0 for r in got)
    assert [r.id for r in mem.search_server(None, k=2, mode="subtree", root="kitchen")] == \
        [r.id for r in mem.search(None, k=2, mode="subtree", root="kitchen", touch=False)]
    with pytest.raises(ValueError, match="needs a query"):
        mem.search_server(None)
    with pytest.raises(KeyError, match="nowhere"):
        mem.search_server(None, mode="subtree", root="nowhere")
    mem.close()


# ---------------------------------------------------------------------- 3. what a mirror-free store offers
MISSING = ("points", "directions", "depths", "embeddings", "save", "to_json", "inspect", "plot", "build_index",
           "index_recall", "suggest_parents", "reranker", "select")


def test_mirror_free_store_offers_the_views_and_names_what_it_lacks(pg_url, clock):
    from datetime import timedelta

    from hypermem.temporal import HalfLife

    mem = Memory.open(pg_url, embedder=_emb(), decay=HalfLife(hours=24), clock=clock)
    _kitchen(mem)
    clock.tick(hours=5)
    mem.add("the shed", parent="garden", id="shed\nline")
    mem.add("x" * 80, id="long")
    mem.link("knives", "garden")
    mem.search("kettle", k=2)  # touches: access counts in the weights
    mem.close()
    srv = Memory.open(pg_url, mirror=False, embedder=_emb(), clock=clock)
    ref = Memory.open(pg_url, read_only=True, embedder=_emb(), clock=clock)
    at = clock.now + timedelta(hours=30)
    assert srv.tree() == ref.tree()
    assert srv.tree(root="home", max_text=4) == ref.tree(root="home", max_text=4)
    assert srv.tree("kitchen") == ref.tree("kitchen")
    with pytest.raises(KeyError, match="nowhere"):
        srv.tree("nowhere")
    want, got = ref.table(at), srv.table(at)
    assert [{**r, "weight": None, "depth": None} for r in got] == [{**r, "weight": None, "depth": None} for r in want]
    assert [r["weight"] for r in got] == pytest.approx([r["weight"] for r in want], abs=1e-12)
    assert [r["depth"] for r in got] == pytest.approx([r["depth"] for r in want], abs=1e-9)
    assert list(srv.to_dataframe(at).columns) == list(ref.to_dataframe(at).columns)
    assert srv.to_dataframe(at)["id"].tolist() == ref.ids
    assert srv.time_weights(at_time=at).tolist() == pytest.approx(ref.time_weights(at_time=at).tolist(), abs=1e-12)
    assert srv.time_weights(["kettle", "home"], at_time=at).tolist() == \
        pytest.approx(ref.time_weights(["kettle", "home"], at_time=at).tolist(), abs=1e-12)
    with pytest.raises(KeyError, match="nowhere"):
        srv.time_weights(["home", "nowhere"])
    assert srv.embed_query("kettle").tolist() == pytest.approx(ref.embed_query("kettle").tolist(), abs=1e-12)
    for name in MISSING:
        assert not hasattr(srv, name)
        with pytest.raises(AttributeError, match=rf"no {name}\(\).*(Memory\.open\(url\)|hypermem|build_ann_index)"):
            getattr(srv, name)
    with pytest.raises(AttributeError, match="'ServerMemory' object has no attribute 'nonsense'"):
        srv.nonsense  # noqa: B018
    srv.close()
    ref.close()


# ---------------------------------------------------------------------- 4. what open says
def test_open_of_a_json_memory_says_to_read_it_with_from_json(tmp_path):
    path = tmp_path / "mammals.json"
    mem = Memory(embedder=_emb())
    _kitchen(mem)
    mem.to_json(str(path))
    before = _snapshot(tmp_path)
    with pytest.raises(ValueError, match=r"Memory\.from_json\(path\)") as err:
        Memory.open(str(path), embedder=_emb())
    assert "to_json(path) for that format" not in str(err.value)
    assert _snapshot(tmp_path) == before
    assert Memory.from_json(str(path), embedder=_emb()).ids == mem.ids
    with pytest.raises(ValueError, match=r"give a \.db name.*to_json.*from_json"):  # a new .json name
        Memory.open(str(tmp_path / "new.json"), embedder=_emb())


def test_open_of_a_missing_postgres_database_says_it_could_not_open_it(pg_server):
    url = pg_server.url("nosuchdb")
    for kwargs in ({}, {"read_only": True}, {"mirror": False}):
        with pytest.raises(StorageError, match="could not open the PostgreSQL database") as err:
            Memory.open(url, embedder=_emb(), **kwargs)
        assert "nosuchdb" in str(err.value)
        assert "reconnects" not in str(err.value) and "connection lost" not in str(err.value)


def test_a_connection_lost_after_open_still_says_the_next_call_reconnects(pg_server, pg_url, monkeypatch):
    import psycopg
    mem = Memory.open(pg_url, embedder=_emb())
    mem.add("hello", id="h")
    pg_server.restart()
    real = psycopg.connect

    def refused(*a, **kw):   # the server still down when the call reconnects once
        raise psycopg.OperationalError("connection refused")
    monkeypatch.setattr(psycopg, "connect", refused)
    with pytest.raises(StorageError, match="connection lost or refused.*next call reconnects"):
        mem.add("again", id="a")
    monkeypatch.setattr(psycopg, "connect", real)
    assert mem.search_server("hello", k=1)[0].id == "h" and mem.ids == ["h"]
    mem.close()
