"""An agent builder's walk through the adapters on one store: filters on the store's time
fields compare instants (any offset, ``Z``, a datetime), ``t`` filters, LlamaIndex filters on
``parent`` and the validity window of memories other adapters wrote, LlamaIndex's own
``mmr_threshold`` keyword, a read-only LangGraph store refusing ``put`` up front, and
``from_documents`` without an ``embedding``."""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta, timezone

import pytest

from hypermem import HashingEmbedder, Memory
from hypermem.integrations import _common as C
from hypermem.store.filters import FilterError

pytest.importorskip("langchain_core")
from langchain_core.documents import Document  # noqa: E402

from hypermem.integrations.langchain import HypermemVectorStore as LCStore  # noqa: E402


def _ids(docs):
    return sorted(d.id for d in docs)


# ---------------------------------------------------------------------------- 1, 2: time filters
def _until_store():
    s = LCStore(memory=Memory(embedder=HashingEmbedder(dim=32)))
    s.add_texts(["b"], ids=["b"], metadatas=[{"valid_until": "2026-05-01T12:00+02:00"}])  # 10:00 UTC
    return s


@pytest.mark.parametrize("flt, want", [
    ({"valid_until": {"$eq": "2026-05-01T10:00Z"}}, ["b"]),
    ({"valid_until": "2026-05-01T05:00-05:00"}, ["b"]),
    ({"valid_until": ["2026-01-01T00:00Z", "2026-05-01T11:00+01:00"]}, ["b"]),
    ({"valid_until": {"$lt": "2026-05-01T10:30:00+01:00"}}, []),      # 09:30 UTC
    ({"valid_until": {"$gt": "2026-05-01T10:30:00+01:00"}}, ["b"]),
    ({"valid_until": {"$gte": datetime(2026, 5, 1, 10, tzinfo=timezone.utc)}}, ["b"]),
    ({"valid_until": {"$lt": datetime(2026, 5, 1, 10, tzinfo=timezone(timedelta(hours=-1)))}}, ["b"]),
    ({"valid_until": {"$ne": "2026-05-01T11:00+01:00"}}, []),
    ({"$not": {"valid_until": {"$nin": ["2026-05-01T10:00Z"]}}}, ["b"]),
    ({"$or": [{"valid_until": {"$lte": "2026-05-01T09:00:00.000001-01:00"}}, {"x": 1}]}, ["b"]),
])
def test_langchain_time_filters_compare_instants(flt, want):
    assert _ids(_until_store().similarity_search("x", k=10, filter=flt)) == want


def test_time_filter_text_that_is_no_time_names_the_field():
    with pytest.raises(FilterError, match="valid_until"):
        _until_store().similarity_search("x", k=10, filter={"valid_until": {"$gt": "soon"}})


def test_instants_are_parsed_once_per_filter_not_per_row():
    spec = C.instants({"t": {"$gte": "2026-02-01T01:00+01:00", "$exists": True}, "kind": "a"})
    assert spec == {"t": {"$gte": "2026-02-01T00:00:00+00:00", "$exists": True}, "kind": "a"}
    assert C.instants({"t": "2026-02-01T00:00Z"}, times=()) == {"t": "2026-02-01T00:00Z"}


def test_langchain_filter_on_t():
    s = LCStore(memory=Memory(embedder=HashingEmbedder(dim=32)), include_time=True)
    s.add_texts(["a", "c"], ids=["a", "c"], metadatas=[{"t": "2026-01-01T00:00Z"}, {"t": "2026-04-01T00:00Z"}])
    assert _ids(s.similarity_search("x", k=10, filter={"t": {"$gte": "2026-02-01T00:00Z"}})) == ["c"]
    assert _ids(s.similarity_search("x", k=10, filter={"t": "2026-01-01T01:00+01:00"})) == ["a"]


def test_langgraph_value_fields_named_like_times_stay_values():
    pytest.importorskip("langgraph")
    from hypermem.integrations.langgraph import HypermemStore

    store = HypermemStore(Memory(embedder=HashingEmbedder(dim=32)))
    store.put(("u",), "k", {"t": "2026-05-01T12:00+02:00", "text": "hi"})
    assert [i.key for i in store.search(("u",), filter={"t": "2026-05-01T12:00+02:00"})] == ["k"]
    assert store.search(("u",), filter={"t": "2026-05-01T10:00Z"}) == []


# ---------------------------------------------------------------------------- 3, 4: LlamaIndex
def _llama():
    pytest.importorskip("llama_index.core")
    from hypermem.integrations.llama_index import HypermemVectorStore as LIStore

    return LIStore


def test_llama_index_filters_on_parent_and_window_of_other_adapters_memories():
    from llama_index.core.vector_stores.types import FilterOperator, MetadataFilter, MetadataFilters

    mem = Memory(embedder=HashingEmbedder(dim=32))
    lc = LCStore(memory=mem)
    lc.add_texts(["keys", "the red keys"], ids=["k", "keys"],
                 metadatas=[None, {"parent": "k", "valid_until": "2026-05-01T12:00+02:00"}])
    li = _llama()(mem)
    got = li.get_nodes(filters=MetadataFilters(filters=[MetadataFilter(key="parent", value="k")]))
    assert [n.node_id for n in got] == ["keys"]
    until = MetadataFilters(filters=[MetadataFilter(key="valid_until", value="2026-05-01T10:00Z")])
    assert [n.node_id for n in li.get_nodes(filters=until)] == ["keys"]
    before = MetadataFilters(filters=[MetadataFilter(key="valid_until", value="2026-05-01T10:30+01:00",
                                                     operator=FilterOperator.LT)])
    assert li.get_nodes(filters=before) == []


def test_llama_index_retriever_mmr_threshold_from_vector_store_kwargs():
    from llama_index.core import StorageContext, VectorStoreIndex
    from llama_index.core.schema import TextNode

    from hypermem.integrations.llama_index import HypermemEmbedding

    vs = _llama()(embedder=HashingEmbedder(dim=64))
    nodes = [TextNode(text=t, id_=t) for t in ("red apple", "red apple pie", "green pear", "blue sky")]
    idx = VectorStoreIndex(nodes, storage_context=StorageContext.from_defaults(vector_store=vs),
                           embed_model=HypermemEmbedding(vs.memory.embedder))

    def top(lam):
        r = idx.as_retriever(similarity_top_k=2, vector_store_query_mode="mmr",
                             vector_store_kwargs={"mmr_threshold": lam})
        return [n.node.node_id for n in r.retrieve("red apple")]

    assert top(1.0) == [h.id for h in vs.memory.search("red apple", k=2)]   # lambda 1: the score alone
    hits = vs.memory.search("red apple", k=4)
    assert top(0.0) == [x.id for x in C.mmr(vs.memory, hits, 2, 0.0)]       # lambda 0: diversity alone


# ---------------------------------------------------------------------------- 6: messages
def test_langgraph_put_on_read_only_store_is_refused_as_put(tmp_path):
    pytest.importorskip("langgraph")
    from hypermem.integrations.langgraph import HypermemStore
    from hypermem.store.backends.durable import StorageError

    path = str(tmp_path / "lg.db")
    Memory.open(path, embedder=HashingEmbedder(dim=32)).close()
    ro = Memory.open(path, embedder=HashingEmbedder(dim=32), read_only=True)
    try:
        store = HypermemStore(ro)
        with pytest.raises(StorageError, match=r"^put: .*read_only=True"):
            store.put(("u",), "k", {"text": "hi"})
        with pytest.raises(StorageError, match=r"^delete: .*read_only=True"):
            store.delete(("u",), "k")
        assert store.search(("u",)) == []
    finally:
        ro.close()


def test_from_documents_needs_no_embedding(tmp_path):
    docs = [Document(page_content="dogs are loyal", id="d"), Document(page_content="cats", metadata={"x": 1})]
    mem = Memory.open(str(tmp_path / "a.db"), embedder=HashingEmbedder(dim=32))
    try:
        s = LCStore.from_documents(docs, memory=mem)
        assert "d" in s.memory and len(s.memory) == 2
    finally:
        mem.close()
    s2 = asyncio.run(LCStore.afrom_documents(docs, memory=Memory(embedder=HashingEmbedder(dim=32))))
    assert "d" in s2.memory and len(s2.memory) == 2
