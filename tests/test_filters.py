"""The store's one filter language (hypermem.store.filters): Memory.search, search_batch, the
PostgreSQL server search (JSONB pushed down, checked against the Python predicate) and the
adapters' compile_filter are the same language."""

from __future__ import annotations

import itertools
import random
import warnings

import pytest

from hypermem import HashingEmbedder, Memory
from hypermem.store.filters import FilterError, compile_filter, filter_keys, json_equal, to_postgres

METAS = [{"kind": "pet", "n": 1, "tags": ["a", "b"]}, {"kind": "wild", "n": 5, "place": {"room": "kitchen"}},
         {"kind": "pet", "n": 2.5, "flag": True}, {"kind": None, "n": "7"}, {}, {"n": 1.0, "flag": 1}]

SPECS = [
    ({"kind": "pet"}, ["m0", "m2"]),
    ({"kind": ["pet", "wild"]}, ["m0", "m1", "m2"]),                 # a list value means $in
    ({"kind": {"$in": ["pet", "wild"]}}, ["m0", "m1", "m2"]),
    ({"kind": {"$nin": ["pet"]}}, ["m1", "m3", "m4", "m5"]),
    ({"kind": {"$ne": "pet"}}, ["m1", "m3", "m4", "m5"]),
    ({"kind": {"$eq": None}}, ["m3"]),
    ({"kind": {"$exists": False}}, ["m4", "m5"]),
    ({"n": {"$gt": 1}}, ["m1", "m2"]),                                # "7" is a string: not > 1
    ({"n": {"$gte": 1, "$lt": 5}}, ["m0", "m2", "m5"]),
    ({"n": {"$lte": "8"}}, ["m3"]),                                    # strings compare with strings
    ({"n": 1}, ["m0", "m5"]),                                          # 1 == 1.0 (JSON numbers)
    ({"flag": True}, ["m2"]),                                          # True is not 1
    ({"flag": 1}, ["m5"]),
    ({"place": {"room": "kitchen"}}, ["m1"]),
    ({"tags": {"$contains": "a"}}, ["m0"]),
    ({"$or": [{"kind": "wild"}, {"n": {"$lt": 2}}]}, ["m0", "m1", "m5"]),
    ({"$not": {"kind": "pet"}}, ["m1", "m3", "m4", "m5"]),
    ({"$not": {"tags": {"$contains": "a"}}}, ["m1", "m2", "m3", "m4", "m5"]),
    ({"$and": [{"kind": "pet"}, {"$not": {"n": 1}}]}, ["m2"]),
    ({"$or": []}, []),
    ({}, ["m0", "m1", "m2", "m3", "m4", "m5"]),
]


def _store(mem=None):
    mem = mem if mem is not None else Memory(embedder=HashingEmbedder(dim=16))
    mem.add_many([{"text": f"note {i}", "id": f"m{i}", "meta": m} for i, m in enumerate(METAS)])
    return mem


@pytest.mark.parametrize("spec, want", SPECS)
def test_search_and_search_batch_speak_the_language(spec, want):
    mem = _store()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = sorted(r.id for r in mem.search("note", k=10, filters=spec))
        batch = mem.search_batch(["note", "note 1"], k=10, filters=spec)
    assert got == want
    assert [sorted(r.id for r in b) for b in batch] == [want, want]
    assert sorted(r.id for r in mem.search(None, k=10, mode="subtree", root="m0", filters=spec)) == \
        [i for i in want if i == "m0"]


@pytest.mark.parametrize("bad, name", [({"kind": {"$near": 1}}, r"\$near"), ({"$xor": []}, r"\$xor"),
                                       ({"kind": {"$in": "pet"}}, r"\$in"), ({"$and": {"a": 1}}, r"\$and"),
                                       ({"$or": [3]}, r"\$or\[0\]"), ({"a": {"b": {"$bad": 1}}}, r"\$bad")])
def test_a_malformed_filter_is_a_value_error_naming_it(bad, name):
    mem = _store()
    with pytest.raises(ValueError, match=name):
        mem.search("note", filters=bad)
    with pytest.raises(ValueError, match=name):
        mem.search_batch(["note"], filters=bad)
    with pytest.raises(FilterError):
        compile_filter(bad)


def test_a_key_no_memory_has_returns_nothing_and_warns_once():
    mem = _store()
    with pytest.warns(UserWarning, match="'knd'"):
        assert mem.search("note", filters={"knd": "pet"}) == []
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert mem.search("note", filters={"knd": "pet"}) == []          # once per store
        assert mem.search("note", filters={"kind": "cat"}) == []          # a known key: no warning
        assert mem.search("note", filters={"kind": {"$exists": False}})   # matches: no warning
    with pytest.warns(UserWarning, match="'colour'"):
        Memory.search(_store(), "note", filters={"$or": [{"colour": 1}]})  # another store warns again


def test_json_equality_and_keys():
    assert json_equal(1, 1.0) and not json_equal(True, 1) and not json_equal(0, False)
    assert json_equal([1, {"a": 2}], [1.0, {"a": 2}]) and not json_equal([1], [1, 2])
    assert filter_keys({"a": 1, "$or": [{"b": 1}, {"$not": {"c": 2}}]}) == {"a", "b", "c"}
    assert to_postgres({"tags": {"$contains": "a"}}) == (None, [])    # not pushed down: no clause


def _random_specs(seed=0, n=150):
    rng = random.Random(seed)
    values = ["pet", "wild", None, 1, 2.5, 5, "7", True, 1.0, "kitchen"]
    keys = ["kind", "n", "flag", "tags", "place"]
    ops = ["$eq", "$ne", "$in", "$nin", "$gt", "$gte", "$lt", "$lte", "$exists", "$contains"]

    def field():
        key, op = rng.choice(keys), rng.choice(ops)
        if op in ("$in", "$nin"):
            return {key: {op: rng.sample(values, 3)}}
        if op == "$exists":
            return {key: {op: rng.random() < 0.5}}
        if op in ("$gt", "$gte", "$lt", "$lte"):   # None and bools have no order: refused
            return {key: {op: rng.choice([v for v in values if v is not None and not isinstance(v, bool)])}}
        return {key: {op: rng.choice(values)}} if rng.random() < 0.8 else {key: rng.choice(values)}

    def spec(depth):
        r = rng.random()
        if depth > 1 or r < 0.4:
            return field()
        if r < 0.6:
            return {"$not": spec(depth + 1)}
        return {rng.choice(["$and", "$or"]): [spec(depth + 1) for _ in range(rng.randint(1, 3))]}

    return [spec(0) for _ in range(n)]


@pytest.mark.usefixtures("one_thread")
def test_postgres_pushdown_equals_the_python_predicate(pg_url):
    import psycopg
    from psycopg.types.json import Jsonb

    specs = [s for s, _ in SPECS] + _random_specs()
    with psycopg.connect(pg_url, autocommit=True) as con:
        con.execute("CREATE TABLE hypermem_memories (id text, meta jsonb)")
        for i, m in enumerate(METAS):
            con.execute("INSERT INTO hypermem_memories VALUES (%s, %s)", (f"m{i}", Jsonb(m)))
        for spec in specs:
            pred = compile_filter(spec)
            want = sorted(f"m{i}" for i, m in enumerate(METAS) if pred(m))
            clause, params = to_postgres(spec)
            sql = "SELECT id FROM hypermem_memories" + ("" if clause is None else f" WHERE {clause}")
            got = sorted(r[0] for r in con.execute(sql, params))
            assert set(want) <= set(got), spec                          # never stricter than Python
            exact = all(op not in repr(spec) for op in ("$contains",))
            if exact:
                assert got == want, spec                                # and exact where pushed down


@pytest.mark.usefixtures("one_thread")
def test_server_search_speaks_the_language(pg_url):
    emb = HashingEmbedder(dim=16)
    db = _store(Memory.open(pg_url, embedder=emb))
    lean = Memory.open(pg_url, embedder=emb, mirror=False)
    try:
        ref = _store()
        for spec, want in itertools.islice(SPECS, None):
            assert sorted(r.id for r in db.search_server("note", k=10, filters=spec)) == want, spec
            assert sorted(r.id for r in lean.search("note", k=10, filters=spec, touch=False)) == want, spec
            assert [r.id for r in lean.search("note", k=3, filters=spec, touch=False)] == \
                [r.id for r in ref.search("note", k=3, filters=spec, touch=False)], spec
        with pytest.warns(UserWarning, match="'knd'"):
            assert lean.search("note", filters={"knd": 1}) == []
        with pytest.raises(ValueError, match=r"\$near"):
            lean.search("note", filters={"kind": {"$near": 1}})
        with pytest.raises(ValueError, match="hybrid"):
            lean.search("note", hybrid=-0.3)
    finally:
        lean.close()
        db.close()
