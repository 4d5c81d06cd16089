"""The LangChain adapter: the langchain-tests conformance suite for vector stores, and
hypermem's own behaviour through LangChain (hierarchy, times, filters, retriever, MMR)."""

from __future__ import annotations

import math
from datetime import datetime, timedelta, timezone

import pytest

pytest.importorskip("langchain_core", reason="the langchain extra is not installed (pip install '.[langchain]')")
lt_vs = pytest.importorskip("langchain_tests.integration_tests.vectorstores",
                            reason="langchain-tests is not installed (the dev extra)")

from langchain_core.documents import Document  # noqa: E402
from langchain_core.embeddings import DeterministicFakeEmbedding  # noqa: E402

from hypermem import HalfLife, HashingEmbedder, Memory  # noqa: E402
from hypermem.integrations.langchain import (  # noqa: E402
    HypermemEmbeddings,
    HypermemVectorStore,
    LangChainEmbedder,
)

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)


# The suite's async tests carry no asyncio mark (its own projects run pytest-asyncio in auto
# mode) and it refuses overridden tests, so the class is marked and the warning that the
# mark is useless on its sync tests is silenced.
@pytest.mark.asyncio
@pytest.mark.filterwarnings("ignore:.*is marked with '@pytest.mark.asyncio' but it is not an async function")
class TestConformance(lt_vs.VectorStoreIntegrationTests):
    """The standard suite of langchain-tests, sync and async, on a fresh store per test."""

    @pytest.fixture()
    def vectorstore(self):
        yield HypermemVectorStore(embedding=self.get_embeddings())


def _store(**kw):
    return HypermemVectorStore(memory=Memory(embedder=HashingEmbedder(dim=64), clock=lambda: T0, **kw))


def test_metadata_parent_and_times_go_to_the_store():
    store = _store()
    [animals] = store.add_texts(["animals"], ids=["animals"])
    ids = store.add_texts(["dogs are loyal animals", "cats sleep a lot"],
                          metadatas=[{"parent": animals, "t": "2025-12-31T12:00:00Z", "kind": "fact"},
                                     {"parent": animals, "valid_until": T0 + timedelta(days=1)}],
                          ids=["dog", "cat"])
    assert ids == ["dog", "cat"]
    mem = store.memory
    assert mem.parent("dog") == "animals" and mem.children("animals") == ["dog", "cat"]
    assert mem.get("dog").t == datetime(2025, 12, 31, 12, tzinfo=timezone.utc)
    assert mem.get("dog").meta == {"kind": "fact"}
    assert mem.get("cat").valid_until == T0 + timedelta(days=1)
    [dog, cat] = store.get_by_ids(["dog", "cat"])
    assert dog.metadata == {"kind": "fact", "parent": "animals"}
    assert cat.metadata == {"parent": "animals", "valid_until": (T0 + timedelta(days=1)).isoformat()}
    timed = HypermemVectorStore(memory=mem, include_time=True).get_by_ids(["dog"])[0]
    assert timed.metadata["t"] == "2025-12-31T12:00:00+00:00"
    # every Memory.search argument passes through, valid_only too
    later = T0 + timedelta(days=2)
    assert "cat" in {d.id for d in store.similarity_search("cats", k=5, at_time=later)}
    assert "cat" not in {d.id for d in store.similarity_search("cats", k=5, at_time=later, valid_only=True)}


def test_parent_in_the_same_batch_may_come_after_its_child():
    store = _store()
    ids = store.add_texts(["poodles", "dogs"], metadatas=[{"parent": "dogs"}, None], ids=["poodle", "dogs"])
    assert ids == ["poodle", "dogs"] and store.memory.parent("poodle") == "dogs"


def test_bad_metadata_is_refused_with_the_key_named():
    store = _store()
    with pytest.raises(ValueError, match="'t'"):
        store.add_texts(["x"], metadatas=[{"t": "yesterday"}])
    with pytest.raises(TypeError, match="parent"):
        store.add_texts(["x"], metadatas=[{"parent": 3}])
    with pytest.raises(KeyError, match="nope"):
        store.add_texts(["x"], metadatas=[{"parent": "nope"}])
    with pytest.raises(ValueError, match="as many"):
        store.add_texts(["x", "y"], metadatas=[{}])
    assert len(store.memory) == 0


def test_search_kwargs_mode_root_filter_and_at_time_reach_memory_search():
    store = _store(decay=HalfLife(hours=24))
    store.add_texts(["pets", "wild animals"], ids=["pets", "wild"])
    store.add_texts(["a dog that fetches balls", "a cat that chases mice", "a wolf in the forest"],
                    metadatas=[{"parent": "pets", "lang": "en", "n": 1}, {"parent": "pets", "lang": "fr", "n": 2},
                               {"parent": "wild", "lang": "en", "n": 3}], ids=["dog", "cat", "wolf"])
    mem = store.memory
    for kw in ({"mode": "subtree", "root": "pets"}, {"mode": "children", "root": "wild"}, {}):
        got = [d.id for d in store.similarity_search("animal", k=5, **kw)]
        want = [r.id for r in mem.search(store.embeddings.embed_query("animal") and "animal", k=5, **kw)]
        assert got == want
    assert {d.id for d in store.similarity_search("animal", k=5, mode="subtree", root="pets")} == {"pets", "dog", "cat"}
    assert [d.id for d in store.similarity_search("animal", k=5, filter={"lang": "en"})] in (["dog", "wolf"],
                                                                                         ["wolf", "dog"])
    assert {d.id for d in store.similarity_search("x", k=5, filter={"n": {"$gte": 2}})} == {"cat", "wolf"}
    assert {d.id for d in store.similarity_search("x", k=5, filter={"$or": [{"n": 1}, {"lang": "fr"}]})} == {"dog", "cat"}
    assert {d.id for d in store.similarity_search("x", k=5, filter={"parent": "wild"})} == {"wolf"}
    assert [d.id for d in store.similarity_search("x", k=5, filter=lambda r: r.id == "cat")] == ["cat"]
    with pytest.raises(ValueError, match=r"\$near"):
        store.similarity_search("x", filter={"n": {"$near": 2}})
    with pytest.raises(TypeError, match="colour"):
        store.similarity_search("x", colour="red")
    # at_time: a day later every weight halves, so every score drops by log 2 (time_coef 1)
    now = store.similarity_search_with_score("a dog that fetches balls", k=1)[0]
    later = store.similarity_search_with_score("a dog that fetches balls", k=1, at_time="2026-01-02T00:00:00Z")[0]
    assert now[0].id == later[0].id == "dog"
    assert later[1] == pytest.approx(now[1] - math.log(2), abs=1e-9)


def test_scores_equal_memory_search_and_relevance_is_in_unit_interval():
    store = _store(decay=HalfLife(hours=1))
    store.add_texts(["red apples", "green pears", "ripe bananas"],
                    metadatas=[{"t": T0 - timedelta(hours=h)} for h in (0, 1, 5)])
    pairs = store.similarity_search_with_score("apples and pears", k=3)
    direct = store.memory.search("apples and pears", k=3)
    assert [d.id for d, _ in pairs] == [r.id for r in direct]
    assert [s for _, s in pairs] == pytest.approx([r.score for r in direct], abs=1e-12)
    rel = store.similarity_search_with_relevance_scores("apples and pears", k=3)
    assert [r for _, r in rel] == pytest.approx([min(1.0, math.exp(s)) for _, s in pairs])
    assert all(0.0 <= r <= 1.0 for _, r in rel)
    exact = store.similarity_search_with_relevance_scores("red apples", k=1)[0]
    assert exact[1] == pytest.approx(1.0, abs=1e-6)
    by_vec = store.similarity_search_by_vector(store.embeddings.embed_query("apples and pears"), k=3)
    assert [d.id for d in by_vec] == [r.id for r in direct]


def test_retriever_passes_search_kwargs():
    store = _store()
    store.add_texts(["kitchen", "garden"], ids=["kitchen", "garden"])
    store.add_texts(["a knife on the table", "a spade by the shed", "a pan on the stove"],
                    metadatas=[{"parent": "kitchen"}, {"parent": "garden"}, {"parent": "kitchen"}])
    r = store.as_retriever(search_kwargs={"k": 2, "mode": "children", "root": "kitchen"})
    docs = r.invoke("where is the spade")
    assert len(docs) == 2 and all(d.metadata["parent"] == "kitchen" for d in docs)
    rel = store.similarity_search_with_relevance_scores("a spade by the shed", k=2)
    assert rel[0][0].page_content == "a spade by the shed" and rel[0][1] > rel[1][1]
    thr = store.as_retriever(search_type="similarity_score_threshold",
                             search_kwargs={"k": 5, "score_threshold": (rel[0][1] + rel[1][1]) / 2})
    assert [d.page_content for d in thr.invoke("a spade by the shed")] == ["a spade by the shed"]
    mmr = store.as_retriever(search_type="mmr", search_kwargs={"k": 2, "fetch_k": 5, "mode": "subtree",
                                                                "root": "kitchen"})
    assert len(mmr.invoke("knife")) == 2


def test_mmr_prefers_diverse_results():
    store = _store()
    store.add_texts(["the quick brown fox", "the quick brown foxes", "quantum chromodynamics lecture"],
                    ids=["a", "b", "c"])
    q = "the quick brown fox"
    top = [d.id for d in store.similarity_search(q, k=2)]
    assert top == ["a", "b"]
    assert [d.id for d in store.max_marginal_relevance_search(q, k=2, fetch_k=3, lambda_mult=1.0)] == ["a", "b"]
    assert [d.id for d in store.max_marginal_relevance_search(q, k=2, fetch_k=3, lambda_mult=0.3)] == ["a", "c"]
    with pytest.raises(ValueError, match="lambda_mult"):
        store.max_marginal_relevance_search(q, lambda_mult=2.0)


def test_delete_keeps_children_unless_cascade():
    store = _store()
    store.add_texts(["root", "mid", "leaf", "other"], metadatas=[None, {"parent": "r"}, {"parent": "m"}, None],
                    ids=["r", "m", "l", "o"])
    store.delete(["m"])
    assert store.memory.parent("l") == "r" and "m" not in store.memory
    store.delete(["r"], cascade=True)
    assert store.memory.ids == ["o"]
    store.delete()
    assert len(store.memory) == 0


def test_replacing_an_id_keeps_its_children():
    store = _store()
    store.add_texts(["animals", "dogs"], metadatas=[None, {"parent": "a"}], ids=["a", "d"])
    store.add_texts(["living things"], metadatas=[{"kind": "topic"}], ids=["a"])
    assert store.memory.get("a").text == "living things" and store.memory.children("a") == ["d"]
    assert store.get_by_ids(["a"])[0].metadata == {"kind": "topic"}


def test_embeddings_bridges():
    fake = DeterministicFakeEmbedding(size=8)
    store = HypermemVectorStore(embedding=fake)
    assert isinstance(store.memory.embedder, LangChainEmbedder) and store.memory.dim == 8
    assert store.embeddings is fake
    h = HashingEmbedder(dim=32)
    lc = HypermemEmbeddings(h)
    assert lc.embed_query("dogs") == pytest.approx(h.embed(["dogs"])[0].tolist())
    assert len(lc.embed_documents(["a", "b"])) == 2 and lc.embed_documents([]) == []
    s2 = HypermemVectorStore(embedding=lc)  # unwrapped: the memory gets the hypermem embedder itself
    assert s2.memory.embedder is h
    with pytest.raises(ValueError, match="not both"):
        HypermemVectorStore(embedding=fake, memory=Memory())
    with pytest.raises(TypeError, match="Embeddings"):
        LangChainEmbedder(h)


def test_from_texts_and_a_file_survive_a_restart(tmp_path):
    path = str(tmp_path / "mem.db")
    store = HypermemVectorStore.from_texts(["alpha", "beta"], None, [{"x": 1}, {"parent": "a"}], ids=["a", "b"],
                                           memory=path)
    store.save()
    again = HypermemVectorStore(memory=path)
    assert again.get_by_ids(["a", "b"]) == [Document(id="a", page_content="alpha", metadata={"x": 1}),
                                            Document(id="b", page_content="beta", metadata={"parent": "a"})]
    assert [d.id for d in again.similarity_search("alpha", k=1)] == ["a"]
    with pytest.raises(ValueError, match="path"):
        HypermemVectorStore().save()


def _hybrid_store():
    store = _store(hybrid=0.3)                       # the lexical term on, as with a real embedder
    store.add_texts(["session one"], ids=["S1"])
    store.add_texts(["Caroline went to an LGBTQ support group yesterday", "Melanie: wow, what happened?",
                     "the transgender stories were inspiring", "Melanie painted a sunrise by the lake"],
                    metadatas=[{"parent": "S1"}] * 4, ids=["a", "b", "c", "d"])
    return store


def test_text_queries_rank_as_memory_search_does_lexical_term_included():
    store, q = _hybrid_store(), "When did Caroline go to the LGBTQ support group?"
    mem = store.memory

    def ranked(hits):
        return [(r.id, pytest.approx(r.score, abs=1e-9)) for r in hits]

    direct = ranked(mem.search(q, k=4, touch=False))
    assert direct != ranked(mem.search(q, k=4, touch=False, hybrid=0))          # the term changes the ranking
    assert [(d.id, s) for d, s in store.similarity_search_with_score(q, k=4, touch=False)] == direct
    assert [d.id for d in store.as_retriever(search_kwargs={"k": 4, "touch": False}).invoke(q)] == \
        [i for i, _ in direct]
    for h in (0, 0.8):                               # hybrid= passes through, as every Memory.search argument
        assert [(d.id, s) for d, s in store.similarity_search_with_score(q, k=4, touch=False, hybrid=h)] == \
            ranked(mem.search(q, k=4, touch=False, hybrid=h))
    rel = store.similarity_search_with_relevance_scores(q, k=1, touch=False)[0][1]
    assert rel == pytest.approx(math.exp(mem.search(q, k=1, touch=False)[0].score))
    mmr = store.max_marginal_relevance_search(q, k=4, fetch_k=4, lambda_mult=1.0, touch=False)
    assert [d.id for d in mmr] == [i for i, _ in direct]
    # a vector query is a vector search: no words to match, and hybrid= is refused, not ignored
    vec = store.embeddings.embed_query(q)
    assert [(d.id, s) for d, s in store.similarity_search_by_vector_with_score(vec, k=4, touch=False)] == \
        ranked(mem.search(q, k=4, touch=False, hybrid=0))
    with pytest.raises(ValueError, match="hybrid=0.3 needs a text query"):
        store.similarity_search_by_vector(vec, k=2, hybrid=0.3)


def test_langchain_embeddings_keep_embed_query_without_the_lexical_term():
    class Asymmetric(DeterministicFakeEmbedding):
        def embed_query(self, text):
            return super().embed_query("query: " + text)

    store = HypermemVectorStore(embedding=Asymmetric(size=16), hybrid=0.0)
    store.add_texts(["alpha beta", "gamma delta", "query: alpha"], ids=["a", "g", "q"])
    mem = store.memory
    # no lexical term: the vector of embed_query, as before
    assert [d.id for d in store.similarity_search("alpha", k=1)] == ["q"] != \
        [r.id for r in mem.search("alpha", k=1)]
    # with it (the default of a store with a real embedder): the text, ranked by the store
    on = [(d.id, s) for d, s in store.similarity_search_with_score("alpha", k=3, hybrid=0.3)]
    assert on == [(r.id, pytest.approx(r.score, abs=1e-9)) for r in mem.search("alpha", k=3, hybrid=0.3)]


def test_readding_an_id_keeps_its_time_unless_given():
    store = _store()
    store.add_texts(["Caroline went to a support group"], [{"t": "2023-05-08T13:57:00Z", "speaker": "C"}],
                    ids=["D1:3"])
    was = datetime(2023, 5, 8, 13, 57, tzinfo=timezone.utc)
    store.add_texts(["Caroline went to an LGBTQ support group"], [{"speaker": "C"}], ids=["D1:3"])
    rec = store.memory.get("D1:3")
    assert rec.t == was and rec.text == "Caroline went to an LGBTQ support group"   # corrected, not fresher
    store.add_texts(["Caroline went to an LGBTQ support group"], [{"speaker": "C", "t": T0}], ids=["D1:3"])
    assert store.memory.get("D1:3").t == T0
    assert HypermemVectorStore(memory=store.memory, include_time=True).get_by_ids(["D1:3"])[0].metadata == \
        {"speaker": "C", "t": T0.isoformat()}
