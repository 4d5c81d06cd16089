"""The LangGraph adapter: a BaseStore whose namespaces are the memory's hierarchy and whose
TTLs are validity windows; checked against LangGraph's own InMemoryStore where they agree."""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta, timezone

import pytest

pytest.importorskip("langgraph.store.base", reason="the langgraph extra is not installed (pip install '.[langgraph]')")

from langchain_core.embeddings import DeterministicFakeEmbedding  # noqa: E402
from langgraph.store.base import GetOp, InvalidNamespaceError, PutOp, SearchOp  # noqa: E402
from langgraph.store.memory import InMemoryStore  # noqa: E402

from hypermem import HashingEmbedder, Memory  # noqa: E402
from hypermem.integrations.langgraph import HypermemStore, item_id, namespace_id  # noqa: E402

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)

DATA = [
    (("users", "alice", "prefs"), "food", {"text": "likes spicy ramen", "stars": 5, "tags": ["food"]}),
    (("users", "alice", "prefs"), "music", {"text": "listens to jazz at night", "stars": 3}),
    (("users", "alice", "facts"), "city", {"text": "lives in Lisbon", "stars": 4, "geo": {"country": "PT"}}),
    (("users", "bob", "prefs"), "food", {"text": "vegetarian, loves curry", "stars": 2}),
    (("docs", "v1"), "readme", {"text": "install with pip", "stars": 1}),
]


@pytest.fixture()
def store(clock):
    s = HypermemStore(embedder=HashingEmbedder(dim=128), clock=clock)
    for ns, key, value in DATA:
        s.put(ns, key, value)
    return s


def test_namespaces_are_parent_chains_and_items_their_children(store):
    mem = store.memory
    i = item_id(("users", "alice", "prefs"), "food")
    assert mem.parent(i) == namespace_id(("users", "alice", "prefs")) == "ns:users.alice.prefs"
    assert mem.ancestors(i) == ["ns:users.alice.prefs", "ns:users.alice", "ns:users"]
    assert mem.get("ns:users.alice").text == "users/alice"
    assert sorted(mem.roots()) == ["ns:docs", "ns:users"]
    assert mem.get(i).text == '{"stars": 5, "tags": ["food"], "text": "likes spicy ramen"}'  # fields ["$"]


def test_get_put_update_and_delete(store, clock):
    item = store.get(("users", "alice", "prefs"), "food")
    assert item.value == DATA[0][2] and item.key == "food" and item.namespace == ("users", "alice", "prefs")
    assert item.created_at == item.updated_at == T0
    assert store.get(("users", "alice", "prefs"), "nope") is None and store.get(("nobody",), "food") is None
    clock.now = T0 + timedelta(hours=1)
    store.put(("users", "alice", "prefs"), "food", {"text": "now prefers sushi"})
    item = store.get(("users", "alice", "prefs"), "food")
    assert item.value == {"text": "now prefers sushi"} and item.created_at == T0 and item.updated_at == clock.now
    assert store.memory.get(item_id(("users", "alice", "prefs"), "food")).text == '{"text": "now prefers sushi"}'
    store.delete(("users", "bob", "prefs"), "food")
    assert store.get(("users", "bob", "prefs"), "food") is None
    assert "ns:users.bob.prefs" not in store.memory and "ns:users.bob" not in store.memory  # pruned
    assert "ns:users" in store.memory
    store.delete(("users", "bob", "prefs"), "food")  # deleting twice is fine


def test_agrees_with_in_memory_store_without_a_query(store):
    ref = InMemoryStore()
    for ns, key, value in DATA:
        ref.put(ns, key, value)
    for prefix, flt in [((), None), (("users",), None), (("users", "alice"), {"stars": {"$gte": 4}}),
                        (("users",), {"stars": {"$ne": 5}}), ((), {"geo": {"country": "PT"}}),
                        ((), {"tags": ["food"]}), (("docs",), {"stars": {"$lt": 3}}), (("zzz",), None)]:
        got = {(i.namespace, i.key) for i in store.search(prefix, filter=flt, limit=50)}
        want = {(i.namespace, i.key) for i in ref.search(prefix, filter=flt, limit=50)}
        assert got == want, (prefix, flt)
    for kw in [{}, {"prefix": ("users",)}, {"suffix": ("prefs",)}, {"prefix": ("users", "*", "prefs")},
               {"max_depth": 2}, {"max_depth": 1}, {"limit": 2, "offset": 1}, {"prefix": ("users",), "max_depth": 2}]:
        assert store.list_namespaces(**kw) == ref.list_namespaces(**kw), kw


def test_search_with_a_query_ranks_by_hypermem_within_the_prefix(store, clock):
    hits = store.search(("users", "alice"), query="spicy ramen", limit=2)
    assert [h.key for h in hits][0] == "food" and all(h.namespace[:2] == ("users", "alice") for h in hits)
    mem = store.memory
    ok = {r.id for r in mem if r.meta.get("langgraph") == "item" and r.meta["namespace"][:2] == ["users", "alice"]}
    direct = mem.search("spicy ramen", k=2, mode="subtree", root="ns:users.alice", filters=lambda r: r.id in ok)
    assert [item_id(h.namespace, h.key) for h in hits] == [r.id for r in direct]
    assert all(0.0 < h.score <= 1.0 for h in hits) and hits[0].score >= hits[1].score
    every = store.search((), query="music jazz", limit=10)
    assert len(every) == 5 and every[0].key == "music"
    page = store.search((), query="music jazz", limit=2, offset=1)
    assert [(h.namespace, h.key) for h in page] == [(h.namespace, h.key) for h in every[1:3]]
    assert {h.key for h in store.search(("users",), query="food", filter={"stars": {"$lte": 2}})} == {"food"}
    # without a query: most recently updated first
    clock.now = T0 + timedelta(minutes=5)
    store.put(("users", "alice", "facts"), "job", {"text": "works as a chemist"})
    assert store.search(("users", "alice"))[0].key == "job"
    with pytest.raises(ValueError, match=r"\$near"):
        store.search((), filter={"stars": {"$near": 1}})


def test_index_fields_and_unindexed_items(clock):
    s = HypermemStore(embedder=HashingEmbedder(dim=64), clock=clock, index={"fields": ["text"]})
    s.put(("a",), "1", {"text": "red apples", "junk": "zzz"})
    s.put(("a",), "2", {"text": "green pears"}, index=["text"])
    s.put(("a",), "3", {"text": "hidden bananas"}, index=False)
    assert s.memory.get(item_id(("a",), "1")).text == "red apples"
    hits = s.search(("a",), query="red apples", limit=3)
    assert [h.key for h in hits] == ["1", "2", "3"] and hits[2].score is None and hits[0].score is not None
    assert [h.key for h in s.search(("a",), query="red apples", limit=1)] == ["1"]


def test_ttl_is_a_validity_window_refreshed_on_read(store, clock):
    ns = ("session",)
    store.put(ns, "short", {"text": "a passing thought"}, ttl=10)
    store.put(ns, "long", {"text": "a lasting thought"}, ttl=60)
    rec = store.memory.get(item_id(ns, "short"))
    assert rec.valid_until == T0 + timedelta(minutes=10)
    clock.now = T0 + timedelta(minutes=8)
    assert store.get(ns, "short") is not None  # refresh: now valid until minute 18
    assert store.memory.get(item_id(ns, "short")).valid_until == T0 + timedelta(minutes=18)
    assert store.get(ns, "long", refresh_ttl=False) is not None
    clock.now = T0 + timedelta(minutes=19)
    assert store.get(ns, "short") is None
    assert [i.key for i in store.search(ns)] == ["long"]
    assert [i.key for i in store.search(ns, query="thought")] == ["long"]
    assert store.memory.get(item_id(ns, "long")).valid_until == T0 + timedelta(minutes=79)  # searches refresh
    clock.now = T0 + timedelta(minutes=80)
    assert store.search(ns) == [] and ("session",) not in store.list_namespaces()
    assert store.sweep_ttl() == 2 and "ns:session" not in store.memory
    with pytest.raises(ValueError, match="ttl"):
        store.put(ns, "bad", {"text": "x"}, ttl=-1)
    d = HypermemStore(embedder=HashingEmbedder(dim=16), clock=clock, ttl={"default_ttl": 5, "refresh_on_read": False})
    d.put(("x",), "k", {"v": 1})
    clock.now += timedelta(minutes=4)
    assert d.get(("x",), "k") is not None
    clock.now += timedelta(minutes=2)
    assert d.get(("x",), "k") is None  # not refreshed by the read


def test_batch_reads_see_the_state_before_its_writes(store):
    ns = ("users", "carol")
    out = store.batch([GetOp(ns, "k"), PutOp(ns, "k", {"text": "one"}), PutOp(ns, "k", {"text": "two"}),
                       SearchOp(ns)])
    assert out[0] is None and out[1] is None and out[3] == []
    assert store.get(ns, "k").value == {"text": "two"}
    got = asyncio.run(store.abatch([GetOp(ns, "k")]))
    assert got[0].value == {"text": "two"}
    assert asyncio.run(store.aget(ns, "k")).value == {"text": "two"}


def test_bad_namespaces_and_values_are_refused(store):
    with pytest.raises(InvalidNamespaceError):
        store.put(("a.b",), "k", {"x": 1})
    with pytest.raises(InvalidNamespaceError):
        store.batch([PutOp((), "k", {"x": 1})])
    with pytest.raises(InvalidNamespaceError):
        store.batch([GetOp(("a.b",), "k")])
    with pytest.raises(TypeError, match="dict"):
        store.batch([PutOp(("a",), "k", ["not", "a", "dict"])])
    with pytest.raises(ValueError, match="limit"):
        store.search((), limit=-1)


def test_langchain_embeddings_from_the_index_config(clock):
    s = HypermemStore(index={"embed": DeterministicFakeEmbedding(size=12), "dims": 12}, clock=clock)
    assert s.memory.dim == 12
    s.put(("k",), "a", {"text": "alpha"})
    s.put(("k",), "b", {"text": "beta"})
    assert s.search(("k",), query='{"text": "beta"}', limit=1)[0].key == "b"
    with pytest.raises(ValueError, match="not both|either"):
        HypermemStore(Memory(), index={"embed": DeterministicFakeEmbedding(size=12)})


def test_survives_a_restart(tmp_path, clock):
    path = str(tmp_path / "lg.db")
    s = HypermemStore(path, embedder=HashingEmbedder(dim=32), clock=clock)
    s.put(("users", "alice"), "food", {"text": "ramen"}, ttl=30)
    s.save()
    again = HypermemStore(path, clock=clock)
    item = again.get(("users", "alice"), "food", refresh_ttl=False)
    assert item.value == {"text": "ramen"} and item.created_at == T0
    assert again.memory.get(item_id(("users", "alice"), "food")).valid_until == T0 + timedelta(minutes=30)
    assert again.list_namespaces() == [("users", "alice")]
