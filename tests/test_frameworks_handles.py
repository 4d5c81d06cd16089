"""The framework adapters over a durable store that another handle (another process) writes:
every read and delete sees what the other committed; a read-only handle reads, TTLs and all;
LangGraph's values are copies and its raw ``PutOp(ttl=None)`` means no expiry; a
``ServerMemory`` is accepted where the adapter works on it, refused with the fix elsewhere."""

from __future__ import annotations

import pytest

pytest.importorskip("langgraph.store.base", reason="the langgraph extra is not installed (pip install '.[langgraph]')")
pytest.importorskip("langchain_core", reason="the langchain extra is not installed (pip install '.[langchain]')")
pytest.importorskip("llama_index.core", reason="the llama-index extra is not installed (pip install '.[llama-index]')")

from langgraph.store.base import GetOp, PutOp  # noqa: E402
from langgraph.store.memory import InMemoryStore  # noqa: E402
from llama_index.core.schema import TextNode  # noqa: E402

from hypermem import HashingEmbedder, Memory  # noqa: E402
from hypermem.integrations.langchain import HypermemVectorStore as LangChainStore  # noqa: E402
from hypermem.integrations.langgraph import HypermemStore  # noqa: E402
from hypermem.integrations.llama_index import HypermemVectorStore as LlamaStore  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_thread")


def _open(path, **kw):
    return Memory.open(path, embedder=HashingEmbedder(dim=32), **kw)


def test_langgraph_reads_what_another_handle_wrote(tmp_path):
    path = tmp_path / "s.db"
    a, b = HypermemStore(_open(path)), HypermemStore(_open(path))
    a.put(("u",), "k1", {"text": "first"})
    assert b.get(("u",), "k1").value == {"text": "first"}
    assert [i.key for i in b.search(("u",))] == ["k1"]
    assert [i.key for i in b.search(("u",), query="first")] == ["k1"]
    assert b.list_namespaces() == [("u",)]
    b.delete(("u",), "k1")                      # a delete of an item b learned of from the file
    assert a.get(("u",), "k1") is None and a.list_namespaces() == []
    a.put(("u",), "k2", {"text": "second"})
    b.put(("u",), "k2", {"text": "second, changed"})  # a replace, not a second add of the id
    assert a.get(("u",), "k2").value == {"text": "second, changed"}


def test_langchain_reads_and_deletes_what_another_handle_wrote(tmp_path):
    path = tmp_path / "s.db"
    a, b = LangChainStore(memory=_open(path)), LangChainStore(memory=_open(path))
    a.add_texts(["dogs are loyal"], ids=["x"])
    assert [d.page_content for d in b.get_by_ids(["x"])] == ["dogs are loyal"]
    b.delete(["x"])
    assert a.get_by_ids(["x"]) == [] and len(_open(path)) == 0
    a.add_texts(["cats sleep"], ids=["y"])
    b.add_texts(["cats sleep all day"], ids=["y"])    # b replaces it
    assert [d.page_content for d in a.get_by_ids(["y"])] == ["cats sleep all day"]


def test_llama_index_reads_and_deletes_what_another_handle_wrote(tmp_path):
    path = tmp_path / "s.db"
    a, b = LlamaStore(_open(path)), LlamaStore(_open(path))
    a.add([TextNode(id_="x1", text="dogs are loyal"), TextNode(id_="x2", text="cats sleep")])
    assert [n.node_id for n in b.get_nodes(["x1"])] == ["x1"]
    b.delete_nodes(["x1"])
    assert [n.node_id for n in a.get_nodes()] == ["x2"]
    a.add([TextNode(id_="x3", text="birds sing")])
    b.clear()
    assert a.get_nodes() == [] and len(_open(path)) == 0


def test_llama_index_on_postgres_does_not_return_nodes_another_handle_cleared(pg_url):
    a, b = LlamaStore(_open(pg_url)), LlamaStore(_open(pg_url))
    a.add([TextNode(id_="x1", text="dogs are loyal")])
    assert [n.node_id for n in b.get_nodes(["x1"])] == ["x1"]
    a.clear()
    assert b.get_nodes(["x1"]) == [] and b.get_nodes() == []


def test_langchain_works_on_a_memory_without_mirror_the_others_say_what_to_do(pg_url):
    _open(pg_url).close()                                   # create the store
    server = _open(pg_url, mirror=False)
    store = LangChainStore(memory=server)
    store.add_texts(["dogs are loyal", "cats sleep all day"], [{"kind": "pet"}, {"kind": "pet"}], ids=["d", "c"])
    store.add_texts(["dogs are very loyal"], ids=["d"])
    assert [d.page_content for d in store.get_by_ids(["d"])] == ["dogs are very loyal"]
    assert store.similarity_search("loyal dogs", k=1)[0].id == "d"
    assert store.similarity_search("loyal dogs", k=1, filter={"kind": "none"}) == []
    assert len(store.max_marginal_relevance_search("loyal dogs", k=2)) == 2
    store.delete(["d"])
    assert store.get_by_ids(["d", "c"])[0].id == "c" and len(server) == 1
    for adapter in (HypermemStore, LlamaStore):
        with pytest.raises(TypeError, match=r"mirror=False.*Memory\.open\(url\)"):
            adapter(server)


def test_a_read_only_handle_reads_items_with_a_ttl(tmp_path):
    path = tmp_path / "s.db"
    g = HypermemStore(_open(path))
    g.put(("n",), "k", {"text": "v"}, ttl=5)
    r = HypermemStore(_open(path, read_only=True))
    assert r.get(("n",), "k").value == {"text": "v"}
    assert [i.key for i in r.search(("n",))] == ["k"] and [i.key for i in r.search(("n",), query="v")] == ["k"]


def test_an_explicit_ttl_none_means_no_expiry_as_in_langgraphs_store(clock):
    s = HypermemStore(embedder=HashingEmbedder(dim=16), clock=clock, ttl={"default_ttl": 5})
    s.batch([PutOp(("n",), "raw", {"text": "kept"}, ttl=None)])
    s.put(("n",), "given", {"text": "kept too"}, ttl=None)
    s.put(("n",), "default", {"text": "goes"})                # no ttl given: default_ttl
    assert s.memory.get("item:" + '[["n"], "raw"]').valid_until is None
    clock.tick(minutes=10)
    assert s.get(("n",), "raw") is not None and s.get(("n",), "given") is not None
    assert s.get(("n",), "default") is None
    ref = InMemoryStore()
    ref.batch([PutOp(("n",), "raw", {"text": "kept"}, ttl=None)])
    assert ref.batch([GetOp(("n",), "raw")])[0].value == s.batch([GetOp(("n",), "raw")])[0].value


def test_langgraph_values_are_copies_in_and_out(tmp_path):
    s = HypermemStore(embedder=HashingEmbedder(dim=16))
    value = {"text": "v", "tags": ["a"]}
    s.put(("n",), "k", value)
    value["text"] = "changed by the caller"
    value["tags"].append("b")
    got = s.get(("n",), "k").value
    assert got == {"text": "v", "tags": ["a"]}
    got["tags"].append("c")
    s.search(("n",))[0].value["text"] = "changed too"
    assert s.get(("n",), "k").value == {"text": "v", "tags": ["a"]}
    assert s.search(("n",))[0].value == {"text": "v", "tags": ["a"]}
