"""Races of several agents on one durable store (walk 69), each made deterministic: two
``Memory.open`` handles of one SQLite file in this process, where handle A decides (it reads),
handle B writes, then A acts on what it read.

* an upsert (LangChain ``add_texts(ids=...)``, LlamaIndex ``add``, LangGraph ``put``) of an id the
  other handle stores, or removes, between A's decision and A's write;
* a search whose hit the other handle removes before the search's touch (also through MCP recall);
* a read by id after a membership check (LangChain ``get_by_ids``, LangGraph ``get`` and ``search``,
  LlamaIndex ``get_nodes``), and MMR's points of candidates removed after the search;
* the ``add_many`` hint, which an MCP client cannot follow, is not shown by the MCP server.
"""

from __future__ import annotations

import sqlite3
import warnings

import pytest

from hypermem import HashingEmbedder, Memory
from hypermem.integrations import _common as C
from hypermem.store import AddManyHint
from hypermem.store.add_hint import OneByOne

pytestmark = pytest.mark.usefixtures("one_thread")


def _emb():
    return HashingEmbedder(dim=32)


@pytest.fixture(name="ab")
def ab_fixture(tmp_path):
    """Two handles (A, B) of one new durable store."""
    path = tmp_path / "shared.db"
    a = Memory.open(path, embedder=_emb())
    b = Memory.open(path, embedder=_emb())
    yield a, b
    a.close()
    b.close()


def after_first_refresh(mem, action):
    """Run ``action()`` right after ``mem``'s next refresh (A has decided on what it read; B writes)."""
    orig, done = mem.refresh, []

    def refresh():
        out = orig()
        if not done:
            done.append(True)
            action()
        return out
    mem.refresh = refresh


def before_first(mem, name, action):
    """Run ``action()`` before ``mem``'s next call of its method ``name`` (A acts on what it read)."""
    orig, done = getattr(mem, name), []

    def method(*args, **kwargs):
        if not done:
            done.append(True)
            action()
        return orig(*args, **kwargs)
    setattr(mem, name, method)


def graph_stores(ab, *keys):
    """LangGraph stores over handles A and B, with items ``keys`` put in namespace ("team",)."""
    pytest.importorskip("langgraph.store.base")
    from hypermem.integrations.langgraph import HypermemStore

    sa, sb = HypermemStore(ab[0]), HypermemStore(ab[1])
    for k in keys:
        sa.put(("team",), k, {"text": f"item {k}"})
    ab[1].refresh()
    return sa, sb


# ---------------------------------------------------------------------- 1. upserts
def test_langchain_re_adds_an_id_the_other_handle_stored_meanwhile(ab):
    from hypermem.integrations.langchain import HypermemVectorStore

    a, b = ab
    vs = HypermemVectorStore(memory=a)
    after_first_refresh(a, lambda: b.add("fact by B", id="fact0"))
    assert vs.add_texts(["fact by A"], ids=["fact0"]) == ["fact0"]   # was ValueError: duplicate id
    b.refresh()
    assert b.ids == ["fact0"] and b.get("fact0").text == "fact by A"   # A's write, the later one, won


def test_an_upsert_of_an_id_the_other_handle_removed_meanwhile_adds_it(ab):
    from hypermem.integrations.langchain import HypermemVectorStore

    a, b = ab
    a.add("old text", id="f")
    b.refresh()
    vs = HypermemVectorStore(memory=a)
    after_first_refresh(a, lambda: b.remove("f"))
    assert vs.add_texts(["new text"], ids=["f"]) == ["f"]              # was KeyError: unknown memory id
    b.refresh()
    assert b.ids == ["f"] and b.get("f").text == "new text"


def test_a_refused_batch_writes_nothing_before_it_is_decided_again(ab):
    """The add refused as a duplicate wrote nothing: the other ids are stored once, by the retry."""
    a, b = ab
    after_first_refresh(a, lambda: b.add("x by B", id="x"))
    a.refresh()
    got = C.upsert(a, [{"id": "w", "text": "w"}, {"id": "x", "text": "x by A"}, {"id": "y", "text": "y"}])
    assert got == ["w", "x", "y"]
    b.refresh()
    assert sorted(b.ids) == ["w", "x", "y"] and b.get("x").text == "x by A"


def test_llama_index_add_of_a_node_the_other_handle_stored_meanwhile(ab):
    pytest.importorskip("llama_index.core")
    from llama_index.core.schema import TextNode

    from hypermem.integrations.llama_index import HypermemVectorStore

    a, b = ab
    vs = HypermemVectorStore(a)
    after_first_refresh(a, lambda: b.add("node by B", id="n1"))
    vec = _emb().embed(["node by A"])[0].tolist()
    assert vs.add([TextNode(id_="n1", text="node by A", embedding=vec)]) == ["n1"]
    b.refresh()
    assert b.ids == ["n1"] and b.get("n1").text == "node by A"


def test_langgraph_puts_into_a_namespace_the_other_handle_created_meanwhile(ab):
    a, b = ab
    sa, sb = graph_stores(ab)
    before_first(a, "add_many", lambda: sb.put(("team", "topic"), "summary", {"text": "by B"}))
    sa.put(("team", "topic"), "summary", {"text": "by A"})   # was ValueError: duplicate id 'ns:team'
    b.refresh()
    assert sorted(b.ids) == ["item:[[\"team\", \"topic\"], \"summary\"]", "ns:team", "ns:team.topic"]
    assert sb.get(("team", "topic"), "summary").value == {"text": "by A"}


def test_langgraph_puts_into_a_namespace_the_other_handle_pruned_meanwhile(ab):
    a = ab[0]
    sa, sb = graph_stores(ab, "k1")
    before_first(a, "add_many", lambda: sb.delete(("team",), "k1"))   # its last item: B removes ns:team too
    sa.put(("team",), "k2", {"text": "two"})                      # was KeyError: unknown parent id 'ns:team'
    assert sb.get(("team",), "k2").value == {"text": "two"} and sb.get(("team",), "k1") is None


def test_both_handles_delete_the_same_item(ab):
    sa, sb = graph_stores(ab, "k1", "k2")
    after_first_refresh(ab[0], lambda: sb.delete(("team",), "k1"))
    sa.delete(("team",), "k1")                                    # was KeyError: unknown memory id
    assert sa.get(("team",), "k1") is None and sa.get(("team",), "k2").value == {"text": "item k2"}


# ---------------------------------------------------------------------- 2. a search's touch
def _remove_during_search(a, action):
    """Run ``action()`` after ``a``'s search read what was committed and before it ranks and touches."""
    orig = a.searcher.query_directions

    def query_directions(*args, **kwargs):
        action()
        return orig(*args, **kwargs)
    a.searcher.query_directions = query_directions


def test_a_search_counts_no_access_of_a_hit_the_other_handle_removed(ab):
    a, b = ab
    a.add_many([{"text": "the cat is in the kitchen", "id": "x"}, {"text": "the cat sleeps", "id": "y"}])
    b.refresh()
    _remove_during_search(a, lambda: b.remove("x"))
    hits = a.search("the cat", k=2)                           # was KeyError: unknown memory id 'x'
    assert {h.id for h in hits} == {"x", "y"}                 # as the search saw the store
    assert "x" not in a and a.get("y").access_count == 1
    with Memory.open(a.storage.path, read_only=True) as c:
        assert c.ids == ["y"] and c.get("y").access_count == 1


def test_a_touch_still_names_an_id_stored_nowhere(ab):
    a, b = ab
    a.add("x", id="x")
    b.add("z", id="z")
    b.remove("x")
    a.touch(["x", "z"])                                       # x: removed by B since A read it; z: B's
    assert a.get("z").access_count == 1 and "x" not in a
    with pytest.raises(KeyError, match="nope"):
        a.touch(["z", "nope"])


def test_a_pending_touch_drops_an_id_the_other_handle_removed(ab):
    a, b = ab
    a.add("x", id="x")
    b.add("z", id="z")
    b.remove("x")
    lock = sqlite3.connect(a.storage.path, timeout=0.1)
    lock.execute("BEGIN IMMEDIATE")                           # another writer holds the lock: the touch waits here
    try:
        a.touch(["x", "z"])                                   # was KeyError after the refresh for z
        assert a.get("z").access_count == 1 and "x" not in a
    finally:
        lock.rollback()
        lock.close()


def test_mcp_recall_of_a_memory_another_agent_forgot(ab):
    pytest.importorskip("mcp")
    from mcp_helpers import _call, _data

    from hypermem.integrations.mcp_server import build_server

    a, b = ab
    a.add_many([{"text": "the cat is in room 1", "id": "x"}, {"text": "the cat is in room 2", "id": "y"}])
    b.refresh()
    _remove_during_search(a, lambda: b.remove("x"))

    async def script(c):
        return _data(await c.call_tool("recall", {"query": "where is the cat", "k": 2}))
    assert {h["id"] for h in _call(build_server(a), script)["results"]} == {"x", "y"}   # was a tool error


# ---------------------------------------------------------------------- 3. reads by id
def test_langchain_get_by_ids_skips_an_id_removed_after_the_check(ab):
    from hypermem.integrations.langchain import HypermemVectorStore

    a, b = ab
    a.add("x", id="x")
    a.add("y", id="y")
    b.refresh()
    after_first_refresh(a, lambda: b.remove("x"))
    assert [d.id for d in HypermemVectorStore(memory=a).get_by_ids(["x", "y"])] == ["y"]


def test_langgraph_get_and_search_of_an_item_removed_meanwhile(ab):
    a = ab[0]
    sa, sb = graph_stores(ab, "k1", "k2")
    after_first_refresh(a, lambda: sb.delete(("team",), "k1"))
    assert sa.get(("team",), "k1") is None                        # was KeyError
    sb.put(("team",), "k1", {"text": "one again"})
    after_first_refresh(a, lambda: sb.delete(("team",), "k1"))
    assert {it.key for it in sa.search(("team",))} == {"k1", "k2"}   # as the search saw them; was KeyError
    after_first_refresh(a, lambda: sb.delete(("team",), "k2"))   # the namespace's last item: ns:team goes
    assert sa.search(("team",), query="item k2") == []


def test_llama_index_get_nodes_skips_a_node_removed_after_the_selection(ab):
    pytest.importorskip("llama_index.core")
    from hypermem.integrations.llama_index import HypermemVectorStore

    a, b = ab
    a.add_many([{"text": "x", "id": "x"}, {"text": "y", "id": "y"}])
    b.refresh()
    vs = HypermemVectorStore(a)
    orig = a.select

    def select(*args, **kwargs):   # another thread's refresh lands between the selection and the read
        out = orig(*args, **kwargs)
        b.remove("x")
        a.refresh()
        return out
    a.select = select
    assert [n.node_id for n in vs.get_nodes(["x", "y"])] == ["y"]   # was KeyError


# ---------------------------------------------------------------------- 4. MMR
def _removing_search(monkeypatch, mem, victim):
    orig = C.search

    def search(*args, **kwargs):   # the candidates, then another thread removes one
        hits = orig(*args, **kwargs)
        mem.remove(victim)
        return hits
    monkeypatch.setattr(C, "search", search)


def _notes():
    return [f"note {j} about the kitchen" for j in range(6)]


def test_langchain_mmr_skips_a_candidate_removed_after_the_search(monkeypatch):
    from hypermem.integrations.langchain import HypermemVectorStore

    vs = HypermemVectorStore(memory=Memory(embedder=_emb()))
    vs.add_texts(_notes(), ids=[f"n{j}" for j in range(6)])
    top = vs.similarity_search("kitchen note", k=1)[0].id
    _removing_search(monkeypatch, vs.memory, top)
    docs = vs.max_marginal_relevance_search("kitchen note", k=3, fetch_k=6)   # was KeyError
    assert len(docs) == 3 and top not in {d.id for d in docs}


def test_llama_index_mmr_skips_a_candidate_removed_after_the_search(monkeypatch):
    pytest.importorskip("llama_index.core")
    from llama_index.core.vector_stores.types import VectorStoreQuery, VectorStoreQueryMode

    from hypermem.integrations.llama_index import HypermemVectorStore

    mem = Memory(embedder=_emb())
    mem.add_many([{"text": t, "id": f"n{j}"} for j, t in enumerate(_notes())])
    top = mem.search("kitchen note", k=1, touch=False)[0].id
    _removing_search(monkeypatch, mem, top)
    res = HypermemVectorStore(mem).query(VectorStoreQuery(query_str="kitchen note", similarity_top_k=3,
                                                          mode=VectorStoreQueryMode.MMR, mmr_threshold=0.5))
    assert len(res.ids) == 3 and top not in res.ids


# ---------------------------------------------------------------------- 5. the MCP server and the hint
def test_the_mcp_server_shows_no_add_many_hint(ab):
    pytest.importorskip("mcp")
    from mcp_helpers import _call, _data

    from hypermem.integrations.mcp_server import build_server

    a, _ = ab
    a.one_by_one = OneByOne(calls=2, commit_calls=2, gap=60.0, commits=True)   # the hint at the second add

    async def script(c):
        return [_data(await c.call_tool("remember", {"text": f"observation {i}"})) for i in range(3)]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = _call(build_server(a), script)
    assert [w for w in caught if issubclass(w.category, AddManyHint)] == []
    assert all("warnings" not in r for r in out) and a.one_by_one.told   # it was issued, and dropped
