"""``hypermem mcp`` as a shared memory service (walk 70): an explicit ``--embedder`` that is not
the store's own is refused naming both (it was ignored, or refused as a "dimension mismatch" of
memories an empty store does not hold); a PostgreSQL role that may only read is refused at start
with what to do for the server; the tool schemas carry the running server's limits; the
descriptions are plain text and say how a score is made and when ``parent="auto"`` has no floor."""

from __future__ import annotations

from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest
from mcp_helpers import _call, _data, db_fixture  # noqa: F401

from hypermem import HashingEmbedder, Memory
from hypermem.embed import StandIn
from hypermem.embed.spec import MINILM
from hypermem.integrations import mcp_server
from hypermem.integrations.mcp_server import build_server, choose_embedder, open_store
from hypermem.store.backends import StorageError
from hypermem.store.nearest_floor import FLOOR_MIN_MEMORIES

pytestmark = pytest.mark.usefixtures("one_thread")
_MINILM = {"type": "SentenceTransformerEmbedder", "dim": 384, "model": MINILM}


def _no_load(name, dim=None):
    raise AssertionError(f"loaded the embedder {name!r} for a store made with another")


# ---------------------------------------------------------------------- 1. --embedder
def test_an_explicit_embedder_that_is_not_the_stores_own_is_refused_naming_both(tmp_path, monkeypatch):
    mini, hashed = str(tmp_path / "mini.db"), str(tmp_path / "hashed.db")
    Memory.open(mini, embedder=StandIn(dict(_MINILM))).close()
    Memory.open(hashed, embedder=HashingEmbedder(dim=256)).close()          # new and empty: no memory
    monkeypatch.setattr(mcp_server, "embedder_named", _no_load)
    with pytest.raises(ValueError, match=r"made with all-MiniLM-L6-v2 \(dim 384\), but --embedder hashing is the "
                                         r"hashing embedder.*Omit --embedder"):
        choose_embedder(mini, "hashing")                                    # was None: silently the store's own
    with pytest.raises(ValueError, match=r"made with the hashing embedder \(dim 256\), but --embedder minilm is "
                                         r"all-MiniLM-L6-v2 \(dim 384\)") as err:
        choose_embedder(hashed, "minilm")                                   # before loading MiniLM
    assert "dimensional memories" not in str(err.value)                     # it holds no memory
    with pytest.raises(ValueError, match=r"hashing embedder \(dim 256\), but the embedder passed is the hashing "
                                         r"embedder \(dim 32\)") as err:
        open_store(hashed, HashingEmbedder(dim=32))                          # Python: was "holds 256-dim... memories"
    assert "dimensional memories" not in str(err.value)


def test_no_embedder_or_the_stores_own_keeps_it(tmp_path, monkeypatch):
    mini, hashed = str(tmp_path / "mini.db"), str(tmp_path / "hashed.db")
    Memory.open(mini, embedder=StandIn(dict(_MINILM))).close()
    Memory.open(hashed, embedder=HashingEmbedder(dim=48)).close()
    monkeypatch.setattr(mcp_server, "embedder_named", lambda name, dim=None: f"<{name}>")
    assert choose_embedder(mini) == choose_embedder(mini, "minilm") == "<minilm>"
    assert choose_embedder(hashed) is None and choose_embedder(hashed, "hashing") is None   # its own (dim 48)
    assert choose_embedder(str(tmp_path / "new.db"), "hashing") is None                    # a new store: hashing


# ---------------------------------------------------------------------- 2. a role that may only read
def test_a_postgresql_role_that_may_only_read_is_refused_at_start(pg_url):
    with open_store(pg_url, HashingEmbedder(dim=16)) as mem:
        mem.add("the user prefers green tea")
    with psycopg.connect(pg_url, autocommit=True) as con:
        con.execute("DO $$BEGIN IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'hm_reader70') THEN "
                    "CREATE ROLE hm_reader70 LOGIN; END IF; END$$")
        con.execute("GRANT SELECT ON ALL TABLES IN SCHEMA public TO hm_reader70")
    parts = urlsplit(pg_url)
    reader = urlunsplit(parts._replace(netloc="hm_reader70@" + parts.netloc.rpartition("@")[2]))
    with pytest.raises(StorageError) as err:
        open_store(reader)                        # was: served, then every write refused, access counts lost
    text = str(err.value)
    assert "may only read" in text and "INSERT, UPDATE, DELETE on hypermem_memories" in text and "hm_reader70" not in text
    assert "GRANT INSERT, UPDATE, DELETE ON hypermem_memories, hypermem_state, hypermem_removed" in text
    assert "read_only=True" not in text           # advice the server cannot follow
    with psycopg.connect(pg_url, autocommit=True) as con:
        con.execute("GRANT INSERT, UPDATE, DELETE ON hypermem_memories, hypermem_state, hypermem_removed "
                    "TO hm_reader70")
    with open_store(reader) as mem:               # granted: it serves, and writes
        mem.add("the user drinks it every morning")
        assert len(mem) == 2


# ---------------------------------------------------------------------- 3. the running server's limits
def _tools(app):
    async def script(c):
        return {t.name: t for t in (await c.list_tools()).tools}
    return _call(app, script)


def test_the_schemas_carry_the_servers_limits(db):
    tools = _tools(build_server(db, max_text=100, max_meta=50))
    for tool, arg in (("remember", "text"), ("recall", "query"), ("update", "text")):
        prop = tools[tool].input_schema["properties"][arg]
        assert prop["maxLength"] == 100 and "at most 100 characters" in prop["description"], (tool, prop)
        assert "32000" not in prop["description"]
    for tool in ("remember", "update"):
        assert "at most 50 characters as JSON" in tools[tool].input_schema["properties"]["meta"]["description"]


# ---------------------------------------------------------------------- 4. descriptions
def test_descriptions_are_plain_and_say_how_a_score_is_made(tmp_path):
    with Memory.open(tmp_path / "h.db", embedder=HashingEmbedder(dim=64), hybrid=0.3) as mem:
        app = build_server(mem)
        tools = _tools(app)
        for t in tools.values():
            assert "``" not in t.description and "\n" not in t.description and "  " not in t.description, t.name
        recall = tools["recall"].description
        assert "negative distance" not in recall and "higher is better" in recall
        assert "keyword bonus of 0.3" in recall and "up to 0.78" in recall and "can be positive" in recall

        async def script(c):
            await c.call_tool("remember", {"text": "the user prefers green tea"})
            return _data(await c.call_tool("recall", {"query": "the user prefers green tea", "k": 1}))
        assert _call(app, script)["results"][0]["score"] > 0           # what the description now says
    with Memory.open(tmp_path / "z.db", embedder=HashingEmbedder(dim=64), hybrid=0) as mem:
        assert "0 or less" in _tools(build_server(mem))["recall"].description


# ---------------------------------------------------------------------- 5. parent="auto" below the floor
def test_the_parent_description_says_a_small_store_has_no_floor(db):
    parent = _tools(build_server(db))["remember"].input_schema["properties"]["parent"]["description"]
    assert f"{FLOOR_MIN_MEMORIES} filed memories" in parent and "no floor" in parent
    assert "unrelated text is filed" in parent
