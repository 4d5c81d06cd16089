"""A walk over a PostgreSQL store: the MCP server writes to it (no SQLite PRAGMA; a held write
lock answers "store busy"), `hypermem import` takes a URL as source and as --durable target and
never prints a password, vector_dtype= must agree with the stored one, a read-only open of a
database without pgvector says it holds no store, and a restarted server leaves no psycopg
"error ignored" line on stderr."""

from __future__ import annotations

import logging
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest
from test_cli_walk_outputs import run

from hypermem import HashingEmbedder, Memory
from hypermem.store.backends import StorageError

pytestmark = pytest.mark.usefixtures("one_thread")
SECRET = "Sup3rSecretPW"


def test_mcp_tools_write_to_a_postgresql_store(pg_url):
    pytest.importorskip("mcp")
    from mcp_helpers import _call, _data

    from hypermem.integrations.mcp_server import build_server

    mem = Memory.open(pg_url, embedder=HashingEmbedder(dim=32))

    async def script(c):
        home = _data(await c.call_tool("remember", {"text": "plain note"}))["id"]
        keys = _data(await c.call_tool("remember", {"text": "the keys are on the table", "parent": home}))["id"]
        new = _data(await c.call_tool("update", {"id": keys, "text": "the keys are in the drawer"}))
        hits = _data(await c.call_tool("recall", {"query": "the keys are in the drawer", "k": 1}))["results"]
        gone = _data(await c.call_tool("forget", {"id": home}))
        return keys, home, new, hits, gone

    keys, home, new, hits, gone = _call(build_server(mem), script)
    assert new["text"] == "the keys are in the drawer" and hits[0]["id"] == keys and gone["removed"] == [home]
    with Memory.open(pg_url, read_only=True) as again:   # committed on the server
        assert again.ids == [keys] and again.get(keys).text == "the keys are in the drawer"
    assert mem.storage.lock_wait is None                 # the short wait is the tool call's only
    mem.close()


def test_mcp_write_behind_another_clients_write_lock_answers_busy(pg_url):
    pytest.importorskip("mcp")
    from mcp_helpers import _call, _data, _error

    from hypermem.integrations.mcp_server import build_server

    mem = Memory.open(pg_url, embedder=HashingEmbedder(dim=32))
    mem.add("a memory", id="a")
    with psycopg.connect(pg_url) as holder:   # another client in the middle of a write
        holder.execute("SELECT value FROM hypermem_state WHERE key = 'version' FOR UPDATE")

        async def script(c):
            busy = await c.call_tool("remember", {"text": "blocked"})
            read = await c.call_tool("recall", {"query": "memory", "k": 1})
            return busy, read

        busy, read = _call(build_server(mem, write_wait=0.2), script)
        holder.rollback()
    text = _error(busy)
    assert ": store busy" in text and "retry" in text and _data(read)["results"][0]["id"] == "a"
    mem.add("after the lock", id="b")                     # the connection is fine, and waits again as before
    assert mem.ids == ["a", "b"]
    mem.close()


def _with_password(url: str, user: str = "app") -> str:
    parts = urlsplit(url)
    return urlunsplit(parts._replace(netloc=f"{user}:{SECRET}@{parts.netloc.rpartition('@')[2]}"))


@pytest.fixture
def app_role(pg_server):
    """A role ``app`` with the password SECRET that may create databases' contents."""
    with psycopg.connect(pg_server.uri, autocommit=True) as con:
        if con.execute("SELECT NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'app')").fetchone()[0]:
            con.execute(f"CREATE ROLE app LOGIN SUPERUSER PASSWORD '{SECRET}'")


def test_import_into_and_out_of_postgresql(capsys, tmp_path, pg_server, app_role):
    src = tmp_path / "agent.db"
    with Memory.open(src, embedder=HashingEmbedder(dim=32)) as mem:
        mem.add("pets", id="pets")
        mem.add("Rex, a dog", id="rex", parent="pets")
        mem.touch(["rex"])
    url = _with_password(pg_server.create_database())
    code, out, err = run(capsys, "import", src, url, "--durable")
    assert code == 0, err
    assert SECRET not in out + err and "durable store" in out
    with Memory.open(url, read_only=True) as pg:
        assert pg.ids == ["pets", "rex"] and pg.parent("rex") == "pets" and pg.get("rex").access_count == 1
    back = tmp_path / "back.db"                           # and back: a URL as SOURCE
    code, out, err = run(capsys, "import", url, back, "--durable")
    assert code == 0, err
    assert SECRET not in out + err
    with Memory.open(back, read_only=True) as again:
        assert again.ids == ["pets", "rex"] and again.get("rex").text == "Rex, a dog"
    code, out, err = run(capsys, "import", url, tmp_path / "snap.db")   # a snapshot of it
    assert code == 0, err
    assert Memory.load(tmp_path / "snap.db").ids == ["pets", "rex"]
    code, out, err = run(capsys, "import", src, url, "--durable")      # it holds memories now
    assert code != 0 and "already holds 2 memories" in err and SECRET not in err


def test_import_error_messages_never_print_the_password(capsys, tmp_path, pg_server, app_role):
    ex = tmp_path / "ex.json"
    with Memory.open(tmp_path / "a.db", embedder=HashingEmbedder(dim=16)) as mem:
        mem.add("one", id="one")
        mem.to_json(ex)
    missing = f"{pg_server.url('nosuchdb')}"
    host = urlsplit(missing).query.split("host=")[1]
    for target in (_with_password(missing), f"host={host} dbname=nosuchdb user=app password={SECRET}"):
        code, out, err = run(capsys, "import", ex, target, "--durable")
        assert code != 0 and "nosuchdb" in err and SECRET not in out + err, err
        code, out, err = run(capsys, "import", target, tmp_path / "x.db", "--durable")
        assert code != 0 and SECRET not in out + err and "no such file" not in err, err
    code, out, err = run(capsys, "import", ex, _with_password(missing))  # no --durable: said, not leaked
    assert code != 0 and "--durable" in err and SECRET not in err
    code, out, err = run(capsys, "import", ex, f"postgresq://app:{SECRET}@/x?host=/tmp/nowhere", "--durable")
    assert code != 0 and SECRET not in out + err        # a misspelled scheme is a path: still redacted


@pytest.mark.parametrize("where", ["sqlite", "postgres"])
def test_vector_dtype_must_agree_with_the_stored_one(tmp_path, pg_url, where):
    target = tmp_path / "f.db" if where == "sqlite" else pg_url
    Memory.open(target, embedder=HashingEmbedder(dim=16)).close()      # float64
    with pytest.raises(ValueError, match="was created with vector_dtype='float64'; cannot open it with "
                                         "vector_dtype='float32'"):
        Memory.open(target, vector_dtype="float32")
    with Memory.open(target, vector_dtype="float64") as same:           # the stored one is accepted
        assert same.storage.vector_dtype == "float64"


def test_a_read_only_open_of_a_database_without_pgvector_says_it_holds_no_store(capsys, pg_url):
    with pytest.raises(StorageError, match="holds no hypermem store: it has no pgvector extension.*without "
                                           "read_only"):
        Memory.open(pg_url, read_only=True)
    code, out, err = run(capsys, "stats", pg_url)
    assert code != 0 and "holds no hypermem store" in err and "vector type not found" not in err


def test_a_restarted_server_leaves_no_error_ignored_line(pg_server, pg_url, caplog):
    mem = Memory.open(pg_url, embedder=HashingEmbedder(dim=16))
    mem.add("before the restart", id="a")
    with caplog.at_level(logging.WARNING, logger="psycopg"):
        pg_server.restart()
        assert [r.id for r in mem.search("before the restart", k=1)] == ["a"]   # refresh's pipeline met the loss
        pg_server.restart()
        assert mem.refresh() is False
    assert not [r for r in caplog.records if "error ignored" in r.getMessage()]
    mem.close()
