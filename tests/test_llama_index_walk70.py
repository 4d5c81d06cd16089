"""LlamaIndex walk 70: one HyDE query (``custom_embedding_strs``) no longer turns the lexical
(``hybrid``) term off for every later query; an embedder of the same model as the store's (another
object, or the one a reload rebuilds) costs no store-embedder call per query; ``alpha`` and
``mode="hybrid"`` name ``vector_store_kwargs={'hybrid': w}``."""

from __future__ import annotations

import gc

import pytest

pytest.importorskip("llama_index.core", reason="the llama-index extra is not installed (pip install '.[llama-index]')")

from llama_index.core import StorageContext, VectorStoreIndex, load_index_from_storage  # noqa: E402
from llama_index.core.base.embeddings.base import BaseEmbedding  # noqa: E402
from llama_index.core.schema import QueryBundle, TextNode  # noqa: E402
from llama_index.core.vector_stores.types import VectorStoreQuery, VectorStoreQueryMode  # noqa: E402

from hypermem import HashingEmbedder, Memory  # noqa: E402
from hypermem.integrations import _common  # noqa: E402
from hypermem.integrations._common import query_point, relevance  # noqa: E402
from hypermem.integrations.llama_index import DIFFER_AFTER, HypermemEmbedding, HypermemVectorStore  # noqa: E402

TEXTS = {"a": "Caroline went to an LGBTQ support group yesterday", "b": "Melanie: wow, what happened?",
         "c": "the transgender stories were inspiring", "d": "Melanie painted a sunset over a lake",
         "e": "Caroline is researching adoption agencies", "f": "the support of friends and family matters"}
QUERIES = ["When did Caroline go to the LGBTQ support group?", "What did Melanie paint?",
           "What is Caroline researching?", "Who gave support to Caroline?"]
HYDE = QueryBundle("What did Melanie paint?", custom_embedding_strs=["Melanie: wow, what happened?"])


class Twin:
    """A hypermem embedder of the hashing model that, like a SentenceTransformerEmbedder, equals
    only itself: two Twins are two objects of one model.  Counts its calls."""

    def __init__(self, calls: list | None = None):
        self.inner, self.calls = HashingEmbedder(dim=128), calls if calls is not None else []

    @property
    def dim(self) -> int:
        return self.inner.dim

    def embed(self, texts):
        self.calls.extend(texts)
        return self.inner.embed(texts)


class Foreign(BaseEmbedding):
    """A LlamaIndex embed_model that is no HypermemEmbedding, over a hypermem embedder."""

    def __init__(self, embedder):
        super().__init__(model_name="foreign")
        object.__setattr__(self, "_e", embedder)

    def _get_text_embedding(self, text):
        return self._e.embed([text])[0].tolist()

    _get_query_embedding = _get_text_embedding

    async def _aget_query_embedding(self, query):
        return self._get_text_embedding(query)


def _index(mem, embed_model):
    nodes = [TextNode(text=t, id_=i) for i, t in TEXTS.items()]
    storage = StorageContext.from_defaults(vector_store=HypermemVectorStore(mem))
    return VectorStoreIndex(nodes, embed_model=embed_model, storage_context=storage), storage


def _ids(retriever, q):
    return [(n.node.node_id, n.score) for n in retriever.retrieve(q)]


def _ranked(hits):
    return [(h.id, pytest.approx(relevance(h.score), abs=1e-9)) for h in hits]


def _search(mem, q, **kw):
    return _ranked(mem.search(q, k=4, touch=False, **kw))


def _check_lexical_term_kept(retriever, mem):
    """Every plain query ranks and scores as Memory.search (the lexical term in), which differs
    from the search without it, so a lost term shows."""
    assert all(_search(mem, q) != _search(mem, q, hybrid=0) for q in QUERIES)
    for q in QUERIES:
        assert _ids(retriever, q) == _search(mem, q), q


def _check_hyde_is_a_vector_search(retriever, mem, embed_model):
    vector = embed_model.get_query_embedding(HYDE.custom_embedding_strs[0])
    want = _ranked(mem.search(query_point(mem, vector), k=4, touch=False, query_depth=mem.base_depth))
    assert _ids(retriever, HYDE) == want


def test_one_hyde_query_keeps_the_lexical_term_for_an_embedder_of_the_same_model():
    """Memory(embedder=SentenceTransformerEmbedder()) with HypermemEmbedding(SentenceTransformerEmbedder()):
    one custom_embedding_strs query made every later query rank with hybrid=0."""
    calls: list = []
    mem = Memory(embedder=Twin(calls), hybrid=0.3)
    embed = HypermemEmbedding(Twin())
    idx, _ = _index(mem, embed)
    retriever = idx.as_retriever(similarity_top_k=4, vector_store_kwargs={"touch": False})
    _check_lexical_term_kept(retriever, mem)
    _check_hyde_is_a_vector_search(retriever, mem, embed)
    _check_lexical_term_kept(retriever, mem)
    calls.clear()
    retriever.retrieve("a question about the garden")
    assert calls == ["a question about the garden"]        # the store's search embeds it: no check call


def test_after_the_documented_reload_a_hyde_query_changes_nothing_and_queries_cost_no_check(tmp_path):
    # embedders of earlier tests that embedded these same queries and still wait for the cyclic
    # collector would each cost one comparison call (asked once per embedder object): collect them
    gc.collect()
    mem = Memory(embedder=Twin(), hybrid=0.3)
    embed = HypermemEmbedding(mem.embedder)
    _, storage = _index(mem, embed)
    storage.persist(persist_dir=str(tmp_path / "li"))
    calls: list = []
    store = HypermemVectorStore.from_persist_dir(str(tmp_path / "li"), embedder=Twin(calls))   # another object
    assert store.memory.hybrid == pytest.approx(0.3)
    index = load_index_from_storage(StorageContext.from_defaults(persist_dir=str(tmp_path / "li"),
                                                                 vector_store=store), embed_model=embed)
    retriever = index.as_retriever(similarity_top_k=4, vector_store_kwargs={"touch": False})
    retriever.retrieve(QUERIES[0])                         # the store compares the embedders once
    calls.clear()
    for q in QUERIES[1:]:
        retriever.retrieve(q)
    assert calls == QUERIES[1:]                            # one call a query: the store's own search
    reloaded = store.memory
    _check_lexical_term_kept(retriever, reloaded)
    _check_hyde_is_a_vector_search(retriever, reloaded, embed)
    _check_lexical_term_kept(retriever, reloaded)


def test_a_hyde_query_first_through_another_embed_model_of_the_same_vectors_concludes_nothing():
    mem = Memory(embedder=HashingEmbedder(dim=128), hybrid=0.3)
    foreign = Foreign(HashingEmbedder(dim=128))
    idx, _ = _index(mem, foreign)
    retriever = idx.as_retriever(similarity_top_k=4, vector_store_kwargs={"touch": False})
    _check_hyde_is_a_vector_search(retriever, mem, foreign)
    _check_lexical_term_kept(retriever, mem)
    _check_hyde_is_a_vector_search(retriever, mem, foreign)
    _check_lexical_term_kept(retriever, mem)


def test_an_embed_model_that_differs_is_checked_a_few_times_then_no_more(monkeypatch):
    mem = Memory(embedder=HashingEmbedder(dim=128), hybrid=0.3)
    other = Foreign(HashingEmbedder(dim=128, seed=7))
    idx, _ = _index(mem, other)
    checks: list = []
    real = _common.embeds_as
    monkeypatch.setattr(_common, "embeds_as", lambda *a, **kw: checks.append(1) or real(*a, **kw))
    retriever = idx.as_retriever(similarity_top_k=4, vector_store_kwargs={"touch": False})
    for q in [f"{q} (asked through another model)" for q in QUERIES] * 2:   # texts no HypermemEmbedding embedded
        vector = other.get_query_embedding(q)
        want = _ranked(mem.search(query_point(mem, vector), k=4, touch=False, query_depth=mem.base_depth))
        assert _ids(retriever, q) == want
    assert len(checks) == DIFFER_AFTER > 1


def test_alpha_and_the_hybrid_mode_name_the_hybrid_weight():
    mem = Memory(embedder=HashingEmbedder(dim=64), hybrid=0.3)
    idx, store = _index(mem, HypermemEmbedding(mem.embedder))
    for kw in ({"vector_store_kwargs": {"alpha": 0.5}}, {"alpha": 0.5},
               {"vector_store_query_mode": "hybrid", "alpha": 0.5}):
        with pytest.raises(TypeError, match=r"alpha.*vector_store_kwargs=\{'hybrid': w\} \(this store's default 0.3"):
            idx.as_retriever(**kw).retrieve("dogs")
    plain = HypermemVectorStore(Memory(embedder=HashingEmbedder(dim=16)))
    with pytest.raises(ValueError, match=r"lexical \(BM25\) term.*'hybrid': w\} \(this store's default 0;"):
        plain.query(VectorStoreQuery(query_str="note", similarity_top_k=1, mode=VectorStoreQueryMode.HYBRID))
