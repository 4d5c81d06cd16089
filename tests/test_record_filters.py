"""The adapters' filters on the store's fast paths (a RecordFilter: metadata by value groups, parent
by codes, times from the time columns, ids by row) give exactly the answers of the Python predicates
they replace: the store alone, LangChain, LlamaIndex (node_ids) and LangGraph (TTL, namespaces,
unindexed items), on random stores and random filters."""

from __future__ import annotations

import random
import types
from datetime import datetime, timedelta, timezone

import pytest
from test_meta_columns import _spec as random_filter

from hypermem import HashingEmbedder, Memory
from hypermem.integrations import _common as C
from hypermem.integrations import _record_filters as RF
from hypermem.store.filters import FilterError, RecordFilter, compile_filter, filter_keys, to_postgres

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)
FAR = datetime(2400, 3, 1, 12, 0, 0, 123457, tzinfo=timezone.utc)   # its float does not give it back
LAST = datetime.max.replace(tzinfo=timezone.utc)   # 9999-12-31T23:59:59.999999: its float is in year 10000
EDGES = [FAR, LAST, datetime(1, 1, 1, 0, 0, 0, 3, tzinfo=timezone.utc), datetime(1, 1, 1, tzinfo=timezone.utc),
         datetime(2400, 1, 1, 0, 0, 0, 1, tzinfo=timezone.utc)]


def _time(rng: random.Random) -> datetime:
    if rng.random() < 0.08:
        return rng.choice(EDGES)
    return T0 + timedelta(seconds=rng.choice([0, 1, 30, 3600]) * rng.randint(0, 5), microseconds=rng.choice([0, 5]))


def _plus(t: datetime, seconds: float) -> datetime:
    """``t + seconds``, held inside years 1..9999."""
    try:
        return t + timedelta(seconds=seconds)
    except OverflowError:
        return t


def _store(rng: random.Random, n: int = 60) -> Memory:
    mem = Memory(embedder=HashingEmbedder(dim=32))
    items = []
    for i in range(n):
        it = {"id": f"m{i}", "text": f"note {i} topic {i % 5}", "t": _time(rng),
              "meta": {k: rng.choice(["a", "b", 1, None, ["a"]]) for k in ("kind", "parent", "t") if rng.random() < 0.4}}
        if i and rng.random() < 0.6:
            it["parent"] = f"m{rng.randrange(i)}"
        if rng.random() < 0.4:
            it["valid_from"] = _time(rng)
        if rng.random() < 0.4:
            it["valid_until"] = _plus(max(_time(rng), it.get("valid_from", T0)), 3600)
        items.append(it)
    mem.add_many(items)
    return mem


def _operand(rng: random.Random, key: str) -> object:
    if key == "parent" or key == "kind":
        return rng.choice(["m1", "m2", "m7", "a", "b", None, 1])
    t = _plus(_time(rng), rng.choice([0, 0, 1, -1]))
    shifted = t.astimezone(timezone(timedelta(hours=2))) if t < LAST - timedelta(hours=2) else t
    seconds = t.timestamp() if t < LAST - timedelta(seconds=1) else t   # LAST's float is no time
    return rng.choice([t, t.isoformat(), shifted.isoformat(), t.isoformat().replace("+00:00", "Z"), seconds, None])


def _leaf(rng: random.Random) -> dict:
    key = rng.choice(["parent", "t", "valid_from", "valid_until", "kind"])
    x = _operand(rng, key)
    if x is None:
        want = rng.choice([None, {"$exists": rng.random() < 0.5}, {"$empty": rng.random() < 0.5}, {"$eq": None}])
    elif key in ("parent", "kind"):
        want = rng.choice([x, {"$ne": x}, {"$in": [x, _operand(rng, key)]}, {"$nin": [x]}, {"$contains": "m"},
                           {"$text_match": "1"}, {"$gt": "m3"}])
    else:
        y = x if isinstance(x, (int, float)) else x
        want = rng.choice([y, {"$eq": y}, {"$ne": y}, {"$gt": y}, {"$gte": y}, {"$lt": y}, {"$lte": y},
                           {"$in": [y, _operand(rng, key) or y]}, {"$nin": [y]},
                           {rng.choice(["$text_match", "$contains"]): rng.choice(["2026", "9999", "0001", ".000001"])}])
    return {key: want}


def _spec(rng: random.Random) -> dict:
    return random_filter(rng, leaf=_leaf)


def _ids(mem: Memory, filters) -> list[str]:
    return [h.id for h in mem.search("topic 3 note", k=len(mem), filters=filters, touch=False, hybrid=0)]


@pytest.mark.parametrize("seed", range(4))
def test_record_fields_answer_as_the_record_predicate(seed):
    rng = random.Random(seed)
    mem = _store(rng)
    for _ in range(60):
        spec = _spec(rng)
        ids = None if rng.random() < 0.7 else {f"m{rng.randrange(70)}" for _ in range(8)}
        old = C.all_of(C.compile_filter(spec), None if ids is None else (lambda r, ids=ids: r.id in ids))
        fast = RecordFilter(C.instants(spec), {k: k for k in C.STORE_KEYS}, ids)
        assert _ids(mem, fast) == _ids(mem, old), spec
    mem.update("m3", valid_from=None, valid_until=T0 + timedelta(seconds=5))   # the columns follow updates, links, removals
    mem.link("m4", "m1")
    mem.remove("m2", cascade=True)
    for _ in range(20):
        spec = _spec(rng)
        assert _ids(mem, RecordFilter(C.instants(spec), {k: k for k in C.STORE_KEYS})) == _ids(mem, C.compile_filter(spec))


def test_a_record_filter_stays_in_process_and_names_no_metadata_key():
    f = RecordFilter({"parent": "x"}, {"parent": "parent"})
    assert filter_keys(f) == set()
    with pytest.raises(FilterError, match="in-process"):
        compile_filter(f)
    with pytest.raises(FilterError, match="in-process"):
        to_postgres(f)
    with pytest.raises(FilterError, match="record's"):
        RecordFilter({}, {"x": "text"})


def test_a_metadata_key_named_parent_is_still_metadata_for_memory_search():
    mem = Memory(embedder=HashingEmbedder(dim=16))
    mem.add("root", id="r")
    mem.add("kid", id="k", parent="r", meta={"parent": "p"})
    assert _ids(mem, {"parent": "r"}) == [] and _ids(mem, {"parent": "p"}) == ["k"]
    assert _ids(mem, RecordFilter({"parent": "r"}, {"parent": "parent"})) == ["k"]


@pytest.mark.parametrize("seed", range(3))
def test_langchain_filters_on_store_fields(seed):
    pytest.importorskip("langchain_core")
    from hypermem.integrations.langchain import HypermemVectorStore

    rng = random.Random(seed)
    store = HypermemVectorStore(memory=_store(rng))
    for _ in range(40):
        spec = _spec(rng)
        got = store.similarity_search_with_score("topic 3 note", k=10, filter=spec, touch=False)
        old = C.search(store.memory, "topic 3 note", 10, C.store_filter(spec), touch=False)
        assert [(d.id, s) for d, s in got] == [(h.id, h.score) for h in old], spec


@pytest.mark.parametrize("seed", range(3))
def test_llama_index_filters_and_node_ids(seed):
    pytest.importorskip("llama_index.core")
    from llama_index.core.vector_stores.types import (
        FilterCondition,
        FilterOperator,
        MetadataFilter,
        MetadataFilters,
        VectorStoreQuery,
    )

    from hypermem.integrations.llama_index import HypermemVectorStore, _field, filter_spec

    rng = random.Random(seed)
    store = HypermemVectorStore(_store(rng))
    mem = store.memory
    for _ in range(40):   # a node's own metadata "parent" first, else the memory's parent
        spec = _spec(rng)
        node_ids = [f"m{rng.randrange(70)}" for _ in range(10)] if rng.random() < 0.4 else None
        old = C.all_of(C.compile_filter(spec, _field), None if node_ids is None else (lambda r, w=set(node_ids): r.id in w))
        assert _ids(mem, RF.node_filter(spec, node_ids)) == _ids(mem, old), spec
    ops = [FilterOperator.EQ, FilterOperator.NE, FilterOperator.GT, FilterOperator.LTE, FilterOperator.IN]
    for _ in range(30):   # through query()
        parts = []
        for _ in range(rng.randint(1, 3)):
            key, op = rng.choice(["parent", "t", "valid_until", "kind"]), rng.choice(ops)
            x = _operand(rng, key)
            x = x.isoformat() if isinstance(x, datetime) else x
            x = "a" if x is None else x
            parts.append(MetadataFilter(key=key, value=[x] if op == FilterOperator.IN else x, operator=op))
        flt = MetadataFilters(filters=parts, condition=rng.choice([FilterCondition.AND, FilterCondition.OR]))
        node_ids = [f"m{rng.randrange(70)}" for _ in range(20)] if rng.random() < 0.5 else None
        try:
            old = C.all_of(C.compile_filter(filter_spec(flt), _field),
                           None if node_ids is None else (lambda r, w=set(node_ids): r.id in w))
        except FilterError:
            continue
        got = store.query(VectorStoreQuery(query_str="topic 3 note", similarity_top_k=8, filters=flt,
                                           node_ids=node_ids), touch=False, hybrid=0)
        want = mem.search("topic 3 note", k=8, filters=old, touch=False, hybrid=0)
        assert got.ids == [h.id for h in want] and got.similarities == [C.relevance(h.score) for h in want]


# ---------------------------------------------------------------------------- LangGraph
class _Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> datetime:
        return self.now


def _old_search(self, op, now):
    """HypermemStore._search before the store's fast filters (the reference)."""
    from hypermem.integrations.langgraph import LangChainEmbedder, _is_item, _value_field, namespace_id

    mem, prefix = self.memory, tuple(op.namespace_prefix)
    root = namespace_id(prefix) if prefix else None
    if root is not None and root not in mem:
        return []
    vf = C.compile_filter(C.lists_as_values(op.filter), _value_field, times=())

    def keep(r):
        return _is_item(r) and self._live(r, now) and (vf is None or vf(r))

    def pool():
        recs = mem if root is None else (mem.get(i) for i in mem.descendants(root))
        return [r for r in recs if keep(r)]

    want = op.offset + op.limit
    if op.query:
        q, vector = op.query, False
        if isinstance(mem.embedder, LangChainEmbedder):
            q, vector = mem.embedder.embeddings.embed_query(op.query), True
        if self.search_mode == "ancestors":
            inside = None if root is None else set(mem.descendants(root))
            hits = C.search(mem, q, want, lambda r: keep(r) and r.meta["indexed"] and
                            (inside is None or r.id in inside), vector=vector, mode="ancestors")
        else:
            hits = C.search(mem, q, want, lambda r: keep(r) and r.meta["indexed"], vector=vector,
                            mode="nearest" if root is None else "subtree", root=root)
        scored = [(h.record, C.relevance(h.score)) for h in hits]
        if len(scored) < want:
            scored += [(r, None) for r in pool() if not r.meta["indexed"]][: want - len(scored)]
    else:
        scored = [(r, None) for r in sorted(pool(), key=lambda r: r.t, reverse=True)]
    page = scored[op.offset: want]
    self._refresh([r for r, _ in page], op.refresh_ttl, now)
    return [self._item(mem.get(r.id), s, search=True) for r, s in page]


SPACES = [("a",), ("a", "b"), ("a", "b", "c"), ("d",), ("d", "e")]


def _value(rng: random.Random) -> dict:
    v = {"text": f"note {rng.randrange(9)} topic {rng.randrange(4)}", "n": rng.choice([1, 2, 2.0, 3, "3"]),
         "kind": rng.choice(["x", "y", True, None]), "tags": rng.choice([["a"], ["a", "b"], []]),
         "place": rng.choice([{"room": "k"}, {"room": "b", "floor": 1}, "k"])}
    return {k: x for k, x in v.items() if k == "text" or rng.random() < 0.8}


def _value_filter(rng: random.Random, depth: int = 0) -> dict | None:
    r = rng.random()
    if depth == 0 and r < 0.15:
        return None
    if depth < 2 and r < 0.3:
        return {rng.choice(["$and", "$or"]): [_value_filter(rng, depth + 1) or {} for _ in range(rng.randint(1, 3))]}
    if depth < 2 and r < 0.4:
        return {"$not": _value_filter(rng, depth + 1) or {"n": 1}}
    key = rng.choice(["n", "kind", "tags", "place", "absent"])
    x = rng.choice([1, 2, "3", "x", True, None, ["a"], ["a", "b"], {"room": "k"}])
    return {key: rng.choice([x, {"$eq": x}, {"$ne": x}, {"$gt": 1}, {"$lte": 2}, {"$in": [1, "x"]},
                             {"$exists": rng.random() < 0.5}, {"$contains": "a"}, {"room": "k"},
                             {"room": {"$ne": "b"}}])}


def _langgraph_pair(rng: random.Random, mode: str):
    from langgraph.store.base import PutOp

    from hypermem.integrations.langgraph import HypermemStore

    clock = _Clock()
    stores = [HypermemStore(embedder=HashingEmbedder(dim=32), clock=clock, search_mode=mode) for _ in range(2)]
    for step in range(4):
        ops = [PutOp(rng.choice(SPACES), f"k{rng.randrange(25)}", _value(rng),
                     index=False if rng.random() < 0.25 else None,
                     ttl=rng.choice([None, None, 30, 90])) for _ in range(20)]
        if step == 3:
            ops += [PutOp(rng.choice(SPACES), f"k{rng.randrange(25)}", None) for _ in range(3)]
        for s in stores:
            s.batch(ops)
        clock.now += timedelta(minutes=rng.choice([0, 20, 40]))
    stores[1]._search = types.MethodType(_old_search, stores[1])
    return clock, stores


@pytest.mark.parametrize("seed,mode", [(0, "nearest"), (1, "nearest"), (2, "nearest"), (3, "ancestors")])
def test_langgraph_search_as_the_item_predicate(seed, mode):
    pytest.importorskip("langgraph.store.base")
    from langgraph.store.base import SearchOp

    rng = random.Random(seed)
    clock, (new, old) = _langgraph_pair(rng, mode)
    for _ in range(40):
        op = SearchOp(rng.choice([(), ("a",), ("a", "b"), ("d",), ("z",)]), _value_filter(rng),
                      rng.randint(1, 12), rng.randint(0, 4), rng.choice([None, "topic 2 note", "note 5"]),
                      refresh_ttl=rng.random() < 0.5)
        a, b = new.batch([op])[0], old.batch([op])[0]
        assert [(i.namespace, i.key, i.score, i.updated_at) for i in a] == \
            [(i.namespace, i.key, i.score, i.updated_at) for i in b], op
        clock.now += timedelta(minutes=rng.choice([0, 0, 15]))
    assert [(r.id, r.valid_until, r.access_count) for r in new.memory] == \
        [(r.id, r.valid_until, r.access_count) for r in old.memory]   # the same TTL refreshes and touches


def test_langgraph_callable_filter_is_still_a_record_predicate():
    pytest.importorskip("langgraph.store.base")
    from langgraph.store.base import SearchOp

    rng = random.Random(7)
    _, (new, old) = _langgraph_pair(rng, "nearest")
    pred = lambda r: r.meta["value"].get("n") == 2  # noqa: E731
    for q in (None, "topic 1 note"):
        op = SearchOp(("a",), pred, 10, 0, q, refresh_ttl=False)
        assert [i.key for i in new.batch([op])[0]] == [i.key for i in old.batch([op])[0]]


@pytest.mark.parametrize("want", [{"$text_match": "9999"}, {"$contains": "9999-12"},
                                  {"$gt": "2400-01-01T00:00:00.000001+00:00"}, {"$gte": LAST.isoformat()}])
def test_a_time_at_datetime_max_is_read_as_its_own_text(want):
    """9999-12-31T23:59:59.999999 rounds to a float in year 10000: a filter the columns cannot
    answer reads that row's stored time, never its float."""
    mem = Memory(embedder=HashingEmbedder(dim=16))
    mem.add_many([{"id": "a", "text": "a", "valid_until": LAST, "t": LAST}, {"id": "b", "text": "b"}])
    for key in ("valid_until", "t"):
        spec = {key: want}
        assert _ids(mem, RecordFilter(C.instants(spec), {k: k for k in C.STORE_KEYS})) == ["a"]
        assert _ids(mem, C.compile_filter(spec)) == ["a"]


def test_langchain_searches_a_store_holding_datetime_max():
    pytest.importorskip("langchain_core")
    from hypermem.integrations.langchain import HypermemVectorStore

    vs = HypermemVectorStore()
    vs.add_texts(["a", "b"], [{"valid_until": LAST}, {}], ids=["a", "b"])
    for want in ({"$text_match": "9999"}, {"$gt": "2400-01-01T00:00:00.000001+00:00"}):
        assert [d.id for d in vs.similarity_search("a", filter={"valid_until": want})] == ["a"]


@pytest.mark.parametrize("spec,field", [({"t": {"$gt": 1e20}}, "'t'"), ({"t": 253402300800}, "'t'"),
                                        ({"$or": [{"valid_from": {"$in": [1, -1e15]}}]}, "'valid_from'"),
                                        ({"$not": {"valid_until": {"$lte": -62135596801}}}, "'valid_until'")])
def test_seconds_outside_the_datetime_range_are_a_filter_error_naming_the_field(spec, field):
    mem = Memory(embedder=HashingEmbedder(dim=16))
    mem.add("a", id="a")
    for make in (lambda: RF.store_filter(mem, spec), lambda: RF.node_filter(spec)):
        with pytest.raises(FilterError, match=f"filter value for {field}.*years 1..9999"):
            make()
    assert _ids(mem, RF.store_filter(mem, {"t": {"$gt": -62135596800}})) == ["a"]   # the range's ends are times


def test_langchain_names_parent_as_the_reserved_key_of_an_unknown_parent():
    pytest.importorskip("langchain_core")
    from hypermem.integrations.langchain import HypermemVectorStore

    vs = HypermemVectorStore(embedding=HashingEmbedder(dim=16))
    vs.add_texts(["a"], ids=["a"])
    with pytest.raises(KeyError, match=r"unknown parent id 'my dad'.*metadatas\[1\]\['parent'\] is this store's "
                                       r"reserved key for the memory's parent.*'parent_name'"):
        vs.add_texts(["b", "c"], metadatas=[{"parent": "a"}, {"parent": "my dad"}])
    assert vs.memory.ids == ["a"]
