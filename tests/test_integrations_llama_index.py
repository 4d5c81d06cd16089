"""The LlamaIndex adapter: a real VectorStoreIndex over a hypermem Memory with the hashing
embedder (no LLM), filters, parent relationships, deletion and persistence."""

from __future__ import annotations

import math
import warnings
from datetime import datetime, timedelta, timezone

import pytest

pytest.importorskip("llama_index.core", reason="the llama-index extra is not installed (pip install '.[llama-index]')")

from llama_index.core import StorageContext, VectorStoreIndex  # noqa: E402
from llama_index.core.schema import NodeRelationship, RelatedNodeInfo, TextNode  # noqa: E402
from llama_index.core.vector_stores.types import (  # noqa: E402
    FilterCondition,
    FilterOperator,
    MetadataFilter,
    MetadataFilters,
    VectorStoreQuery,
    VectorStoreQueryMode,
)

from hypermem import HalfLife, HashingEmbedder, Memory  # noqa: E402
from hypermem.integrations._common import query_point as store_point  # noqa: E402
from hypermem.integrations.llama_index import HypermemEmbedding, HypermemVectorStore  # noqa: E402
from hypermem.store.filters import RecordFilter  # noqa: E402

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)


def _node(id_, text, doc=None, parent=None, **meta):
    n = TextNode(id_=id_, text=text, metadata=meta)
    if doc is not None:
        n.relationships[NodeRelationship.SOURCE] = RelatedNodeInfo(node_id=doc)
    if parent is not None:
        n.relationships[NodeRelationship.PARENT] = RelatedNodeInfo(node_id=parent)
    return n


@pytest.fixture()
def index():
    mem = Memory(embedder=HashingEmbedder(dim=128), clock=lambda: T0, decay=HalfLife(hours=24))
    store = HypermemVectorStore(mem)
    nodes = [
        _node("animals", "animals", doc="zoo", topic="bio"),
        _node("dog", "dogs are loyal animals that fetch", doc="zoo", parent="animals", topic="bio", legs=4),
        _node("bird", "birds fly and sing", doc="zoo", parent="animals", topic="bio", legs=2),
        _node("cars", "cars have engines and wheels", doc="garage", topic="tech", legs=0,
              t=(T0 - timedelta(hours=24)).isoformat()),
    ]
    idx = VectorStoreIndex(nodes, storage_context=StorageContext.from_defaults(vector_store=store),
                           embed_model=HypermemEmbedding(mem.embedder))
    return idx, store, mem


def test_vector_store_index_retrieves_through_hypermem(index):
    idx, store, mem = index
    assert len(mem) == 4 and mem.parent("dog") == "animals" and mem.children("animals") == ["dog", "bird"]
    assert mem.get("cars").t == T0 - timedelta(hours=24)
    hits = idx.as_retriever(similarity_top_k=2).retrieve("loyal dogs fetch")
    assert hits[0].node.node_id == "dog" and hits[0].node.text == "dogs are loyal animals that fetch"
    assert hits[0].node.metadata == {"topic": "bio", "legs": 4}
    assert hits[0].node.ref_doc_id == "zoo"
    q = HypermemEmbedding(mem.embedder).get_query_embedding("loyal dogs fetch")
    direct = mem.search(store_point(mem, q), k=2, query_depth=mem.base_depth)
    assert [h.node.node_id for h in hits] == [r.id for r in direct]
    assert [h.score for h in hits] == pytest.approx([min(1.0, math.exp(r.score)) for r in direct], abs=1e-9)
    assert all(0.0 <= h.score <= 1.0 for h in hits)
    # structure through vector_store_kwargs
    sub = idx.as_retriever(similarity_top_k=5, vector_store_kwargs={"mode": "children", "root": "animals"})
    assert {h.node.node_id for h in sub.retrieve("engines")} == {"dog", "bird"}


def test_metadata_filters_map_to_hypermem_filters(index):
    idx, store, mem = index
    e = HypermemEmbedding(mem.embedder).get_query_embedding("animals")

    def ids(filters, k=10):
        res = store.query(VectorStoreQuery(query_embedding=e, similarity_top_k=k, filters=filters))
        return set(res.ids)

    F, Op = MetadataFilter, FilterOperator
    assert ids(MetadataFilters(filters=[F(key="topic", value="tech")])) == {"cars"}
    assert ids(MetadataFilters(filters=[F(key="legs", value=2, operator=Op.GT)])) == {"dog"}
    assert ids(MetadataFilters(filters=[F(key="legs", value=[0, 2], operator=Op.IN)])) == {"cars", "bird"}
    assert ids(MetadataFilters(filters=[F(key="legs", value=4, operator=Op.NE)])) == {"animals", "bird", "cars"}
    assert ids(MetadataFilters(filters=[F(key="legs", value=None, operator=Op.IS_EMPTY)])) == {"animals"}
    assert ids(MetadataFilters(filters=[F(key="topic", value="te", operator=Op.TEXT_MATCH)])) == {"cars"}
    either = MetadataFilters(filters=[F(key="legs", value=4), F(key="topic", value="tech")],
                             condition=FilterCondition.OR)
    assert ids(either) == {"dog", "cars"}
    assert ids(MetadataFilters(filters=[F(key="legs", value=4), F(key="topic", value="tech")],
                               condition=FilterCondition.NOT)) == {"animals", "bird"}
    nested = MetadataFilters(filters=[F(key="topic", value="bio"), either])
    assert ids(nested) == {"dog"}
    # filters apply before the top-k cut
    assert ids(MetadataFilters(filters=[F(key="topic", value="tech")]), k=1) == {"cars"}
    res = store.query(VectorStoreQuery(query_embedding=e, similarity_top_k=10, doc_ids=["garage"]))
    assert res.ids == ["cars"]
    res = store.query(VectorStoreQuery(query_embedding=e, similarity_top_k=10, node_ids=["bird", "cars"]))
    assert set(res.ids) == {"bird", "cars"}


def test_query_by_text_at_time_and_mmr(index):
    idx, store, mem = index
    # query_str without an embedding: the memory's embedder embeds it
    now = store.query(VectorStoreQuery(query_str="engines wheels", similarity_top_k=4))
    assert now.ids == [r.id for r in mem.search("engines wheels", k=4)]
    later = store.query(VectorStoreQuery(query_str="engines wheels", similarity_top_k=4),
                        at_time=T0 + timedelta(hours=24))
    before, after = dict(zip(now.ids, now.similarities)), dict(zip(later.ids, later.similarities))
    assert after == pytest.approx({i: v / 2 for i, v in before.items()})  # one more half-life each
    mmr = store.query(VectorStoreQuery(query_str="animals", similarity_top_k=3, mode=VectorStoreQueryMode.MMR,
                                       mmr_threshold=0.5))
    assert len(mmr.ids) == 3 and len(set(mmr.ids)) == 3
    with pytest.raises(ValueError, match="mode"):
        store.query(VectorStoreQuery(query_str="x", mode=VectorStoreQueryMode.HYBRID))
    with pytest.raises(TypeError, match="colour"):
        store.query(VectorStoreQuery(query_str="x"), colour="red")


def test_get_delete_and_clear(index):
    idx, store, mem = index
    assert [n.node_id for n in store.get_nodes(["bird", "nope", "dog"])] == ["bird", "dog"]
    assert {n.node_id for n in store.get_nodes(filters=MetadataFilters(filters=[MetadataFilter(key="topic",
                                                                                             value="bio")]))} \
        == {"animals", "dog", "bird"}
    store.delete_nodes(["animals"])
    assert "animals" not in mem and mem.parent("dog") is None  # children kept, moved up
    idx.delete_ref_doc("garage")
    assert "cars" not in mem and set(mem.ids) == {"dog", "bird"}
    store.clear()
    assert len(mem) == 0


def test_readding_a_node_replaces_it_and_keeps_children(index):
    idx, store, mem = index
    emb = HypermemEmbedding(mem.embedder)
    n = _node("animals", "living creatures", doc="zoo", topic="bio")
    n.embedding = emb.get_text_embedding(n.text)
    store.add([n])
    assert mem.get("animals").text == "living creatures" and mem.children("animals") == ["dog", "bird"]
    assert mem.embedding("animals").tolist() == pytest.approx(n.embedding)


def test_parent_unknown_to_the_store_stays_in_the_node(tmp_path):
    store = HypermemVectorStore(Memory(embedder=HashingEmbedder(dim=32)))
    store.add([_node("c", "child text", parent="elsewhere")])
    assert store.memory.parent("c") is None
    assert store.get_nodes(["c"])[0].parent_node.node_id == "elsewhere"
    with pytest.raises(ValueError, match="shape"):
        bad = _node("x", "wrong size")
        bad.embedding = [1.0, 2.0]
        store.add([bad])


def test_persist_and_reopen(tmp_path):
    path = str(tmp_path / "li.db")
    store = HypermemVectorStore(path, embedder=HashingEmbedder(dim=32))
    store.add([_node("a", "alpha text", doc="d", k=1)])
    store.persist()
    again = HypermemVectorStore(path)
    [node] = again.get_nodes(["a"])
    assert node.text == "alpha text" and node.metadata == {"k": 1} and node.ref_doc_id == "d"


def test_memories_stored_without_llama_index_come_back_as_text_nodes():
    mem = Memory(embedder=HashingEmbedder(dim=32))
    mem.add("animals", id="a")
    mem.add("dogs bark", id="d", parent="a", meta={"kind": "fact"})
    store = HypermemVectorStore(mem)
    res = store.query(VectorStoreQuery(query_str="dogs bark", similarity_top_k=1))
    [node] = res.nodes
    assert node.node_id == "d" and node.text == "dogs bark" and node.metadata == {"kind": "fact", "parent": "a"}
    assert node.parent_node.node_id == "a"


def _hybrid_store(**kw):
    mem = Memory(embedder=HashingEmbedder(dim=128), clock=lambda: T0, hybrid=0.3)
    store = HypermemVectorStore(mem, **kw)
    nodes = [_node("S1", "session one"),
             _node("a", "Caroline went to an LGBTQ support group yesterday", parent="S1"),
             _node("b", "Melanie: wow, what happened?", parent="S1"),
             _node("c", "the transgender stories were inspiring", parent="S1")]
    idx = VectorStoreIndex(nodes, storage_context=StorageContext.from_defaults(vector_store=store),
                           embed_model=HypermemEmbedding(mem.embedder))
    return idx, store, mem


Q = "When did Caroline go to the LGBTQ support group?"


def _ranked(hits):
    return [(h.id, pytest.approx(min(1.0, math.exp(h.score)), abs=1e-9)) for h in hits]


def test_a_query_with_the_stores_embedder_ranks_as_memory_search_lexical_term_included():
    idx, store, mem = _hybrid_store()
    direct = _ranked(mem.search(Q, k=4, touch=False))
    assert direct != _ranked(mem.search(Q, k=4, touch=False, hybrid=0))
    got = idx.as_retriever(similarity_top_k=4, vector_store_kwargs={"touch": False}).retrieve(Q)
    assert [(n.node.node_id, n.score) for n in got] == direct
    emb = HypermemEmbedding(mem.embedder).get_query_embedding(Q)    # query_str and query_embedding both set
    res = store.query(VectorStoreQuery(query_embedding=emb, query_str=Q, similarity_top_k=4), touch=False)
    assert list(zip(res.ids, res.similarities)) == direct
    res = store.query(VectorStoreQuery(query_embedding=emb, query_str=Q, similarity_top_k=4), touch=False,
                      hybrid=0.9)
    assert list(zip(res.ids, res.similarities)) == _ranked(mem.search(Q, k=4, touch=False, hybrid=0.9))


def test_a_query_embedded_by_another_model_is_searched_by_its_vector():
    idx, store, mem = _hybrid_store()
    other = HashingEmbedder(dim=128, seed=7)              # same dim, another space than the store's embedder
    emb = other.embed([Q])[0].tolist()
    res = store.query(VectorStoreQuery(query_embedding=emb, query_str=Q, similarity_top_k=4), touch=False)
    want = mem.search(store_point(mem, emb), k=4, touch=False, query_depth=mem.base_depth)
    assert list(zip(res.ids, res.similarities)) == _ranked(want)
    with pytest.raises(ValueError, match="needs a text query"):
        store.query(VectorStoreQuery(query_embedding=emb, query_str=Q, similarity_top_k=4), hybrid=0.3)
    # text_query=False: always the vector; text_query=True: always the text (LlamaIndex skips the embedding)
    never = HypermemVectorStore(mem, text_query=False)
    mine = HypermemEmbedding(mem.embedder).get_query_embedding(Q)
    res = never.query(VectorStoreQuery(query_embedding=mine, query_str=Q, similarity_top_k=4), touch=False)
    assert list(zip(res.ids, res.similarities)) == _ranked(mem.search(Q, k=4, touch=False, hybrid=0))
    always = HypermemVectorStore(mem, text_query=True)
    assert always.is_embedding_query is False and store.is_embedding_query is True
    res = always.query(VectorStoreQuery(query_embedding=emb, query_str=Q, similarity_top_k=4), touch=False)
    assert list(zip(res.ids, res.similarities)) == _ranked(mem.search(Q, k=4, touch=False))
    idx2 = VectorStoreIndex.from_vector_store(always, embed_model=HypermemEmbedding(other))
    got = idx2.as_retriever(similarity_top_k=4, vector_store_kwargs={"touch": False}).retrieve(Q)
    assert [n.node.node_id for n in got] == [r.id for r in mem.search(Q, k=4, touch=False)]
    with pytest.raises(TypeError, match="text_query"):
        HypermemVectorStore(mem, text_query="yes")


def test_readding_a_node_keeps_its_time_unless_its_metadata_gives_one():
    mem = Memory(embedder=HashingEmbedder(dim=32), clock=lambda: T0)
    store = HypermemVectorStore(mem)
    was = T0 - timedelta(days=300)
    store.add([_node("d", "a support group", t=was.isoformat())])
    store.add([_node("d", "an LGBTQ support group", speaker="C")])
    assert mem.get("d").t == was and mem.get("d").text == "an LGBTQ support group"
    n = _node("d", "an LGBTQ support group")
    n.embedding = HypermemEmbedding(mem.embedder).get_text_embedding(n.text)     # a new vector: stored again
    store.add([n])
    assert mem.get("d").t == was
    store.add([_node("d", "an LGBTQ support group", t=T0.isoformat())])
    assert mem.get("d").t == T0


def test_a_query_is_embedded_twice_not_three_times(monkeypatch):
    """Each query embedded its text three times (LlamaIndex, the agreement check, the store): a
    HypermemEmbedding of the store's embedder says what it embedded, so the check costs no call."""
    from hypermem.integrations import _common

    idx, store, mem = _hybrid_store()
    checks, embedded = [], []
    real, embed = _common.embeds_as, mem.embedder.embed
    monkeypatch.setattr(_common, "embeds_as", lambda *a, **kw: checks.append(1) or real(*a, **kw))
    monkeypatch.setattr(mem.embedder, "embed", lambda texts: embedded.extend(texts) or embed(texts))
    retriever = idx.as_retriever(similarity_top_k=4, vector_store_kwargs={"touch": False})
    first, second = retriever.retrieve(Q), retriever.retrieve("a question about the garden")
    assert checks == [] and embedded == [Q, Q, "a question about the garden", "a question about the garden"]
    assert [(n.node.node_id, n.score) for n in first] == _ranked(mem.search(Q, k=4, touch=False))
    assert [n.node.node_id for n in second] == [r.id for r in mem.search("a question about the garden", k=4,
                                                                           touch=False)]


def test_an_embedding_of_other_text_than_query_str_is_searched_by_itself():
    """After one ordinary query the answer "the embedders agree" was kept, and every later query
    sent query_str: an embedding of other text (HyDE, custom_embedding_strs) was ignored."""
    from llama_index.core.schema import QueryBundle

    idx, store, mem = _hybrid_store()
    embed = HypermemEmbedding(mem.embedder)
    retriever = idx.as_retriever(similarity_top_k=4, vector_store_kwargs={"touch": False})
    assert [n.node.node_id for n in retriever.retrieve(Q)] == [r.id for r in mem.search(Q, k=4, touch=False)]
    other = "Melanie: wow, what happened?"
    emb = embed.get_query_embedding(other)
    by_vector = _ranked(mem.search(store_point(mem, emb), k=4, touch=False, query_depth=mem.base_depth))
    assert by_vector != _ranked(mem.search(Q, k=4, touch=False))
    res = store.query(VectorStoreQuery(query_embedding=emb, query_str=Q, similarity_top_k=4), touch=False)
    assert list(zip(res.ids, res.similarities)) == by_vector
    got = retriever.retrieve(QueryBundle(Q, custom_embedding_strs=[other]))
    assert [(n.node.node_id, n.score) for n in got] == by_vector
    # a vector made without HypermemEmbedding: compared with the store embedder's vector of query_str
    plain = HypermemVectorStore(mem)
    for text in ("Did Caroline go to a support group?", Q):      # not embedded yet / embedded by `embed`
        res = plain.query(VectorStoreQuery(query_embedding=mem.embedder.embed([other])[0].tolist(), query_str=text,
                                           similarity_top_k=4), touch=False)
        assert list(zip(res.ids, res.similarities)) == by_vector
    assert [n.node.node_id for n in retriever.retrieve(Q)] == [r.id for r in mem.search(Q, k=4, touch=False)]


def test_a_metadata_filter_reaches_the_store_as_a_dict(index, monkeypatch):
    """Filters on metadata go to the store's filter columns, not a Python predicate per memory."""
    _, store, mem = index
    seen = []
    search = mem.search
    monkeypatch.setattr(mem, "search", lambda *a, **kw: (seen.append(kw.get("filters")), search(*a, **kw))[1])
    flt = MetadataFilters(filters=[MetadataFilter(key="topic", value="bio")])
    got = store.query(VectorStoreQuery(query_str="animals", similarity_top_k=5, filters=flt, doc_ids=["zoo", "x"]))
    assert isinstance(seen[-1], dict)
    assert sorted(got.ids) == ["animals", "bird", "dog"]
    got = store.query(VectorStoreQuery(query_str="animals", similarity_top_k=5, doc_ids=["garage"]))
    assert isinstance(seen[-1], dict) and got.ids == ["cars"]
    got = store.query(VectorStoreQuery(query_str="animals", similarity_top_k=5, node_ids=["dog"], filters=flt))
    assert isinstance(seen[-1], RecordFilter) and seen[-1].ids == {"dog"} and got.ids == ["dog"]  # ids: rows too


def test_delete_of_a_document_no_node_names_does_not_warn_of_a_misspelled_key():
    """``delete(ref_doc_id)`` filters on the adapter's own key: a store whose nodes carry no
    ``ref_doc_id`` gets no "misspelled key" warning from it (the user named no key)."""
    m = Memory(embedder=HashingEmbedder(dim=16))
    m.add("a plain note")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        HypermemVectorStore(m).delete("doc-1")
    assert len(m) == 1


def test_a_hybrid_query_mode_says_the_default_mode_has_the_lexical_term():
    m = Memory(embedder=HashingEmbedder(dim=16))
    m.add("a plain note")
    for mode in (VectorStoreQueryMode.HYBRID, VectorStoreQueryMode.SPARSE):
        with pytest.raises(ValueError, match=r"already adds the store's lexical \(BM25\) term.*'hybrid': w"):
            HypermemVectorStore(m).query(VectorStoreQuery(query_str="note", similarity_top_k=1, mode=mode))
    with pytest.raises(ValueError, match="default and mmr") as err:
        HypermemVectorStore(m).query(VectorStoreQuery(query_str="note", similarity_top_k=1,
                                                      mode=VectorStoreQueryMode.SVM))
    assert "BM25" not in str(err.value)
