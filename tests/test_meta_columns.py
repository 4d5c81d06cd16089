"""Metadata filters answered by value groups (hypermem.store.meta_columns) give exactly the
row-by-row answer, through adds, updates, removals and reloads."""

from __future__ import annotations

import random

import pytest
import torch

from hypermem.embed import HashingEmbedder
from hypermem.store import Memory, filters, meta_columns
from hypermem.store.filters import FilterError, compile_filter, json_key, matches, value_test
from hypermem.store.meta_columns import MetaColumns

VALUES = ["a", "b", "", 0, 1, 1.0, 2.5, -3, True, False, None, [], ["a"], ["a", "b"], [1, True], {"x": 1},
          {"x": 1.0}, {"x": "a", "y": [2]}, {}, [[1, 2.0]], [[1.0, 2]], [[True]], {"x": [1, {"y": True}]},
          {"x": [1.0, {"y": 1}]}, {"x": [1.0, {"y": True}]}, 2 ** 53 + 1, float(2 ** 53), -0.0]


def _some(rng: random.Random) -> list:
    return [rng.choice(VALUES) for _ in range(rng.randint(0, 6))]


def _meta(rng: random.Random) -> dict:
    return {k: rng.choice(VALUES) for k in ("k", "j", "tags") if rng.random() < 0.7}


def _leaf(rng: random.Random) -> dict:
    key = rng.choice(["k", "j", "tags", "absent"])
    v = rng.choice(VALUES)
    num = rng.choice([0, 1, 2.0, -5, "a", "b"])
    want = rng.choice([
        v, {"$eq": v}, {"$ne": v}, {"$in": _some(rng)}, {"$nin": _some(rng)}, _some(rng), {"$in": _some(rng), "$ne": v}, {"$gt": num}, {"$lte": num}, {"$exists": rng.random() < 0.5},
        {"$contains": rng.choice(["a", 1, "b"])}, {"$empty": rng.random() < 0.5}, {"$any": ["a", 1]},
        {"$text_match": "a"}, {"x": 1}, {"x": {"$gte": 1}},
    ])
    return {key: want}


def _spec(rng: random.Random, depth: int = 0, leaf=_leaf) -> dict:
    """A random filter: ``$and`` / ``$or`` / ``$not`` of ``leaf(rng)`` conditions."""
    r = rng.random()
    if depth < 2 and r < 0.15:
        return {"$and": [_spec(rng, depth + 1, leaf) for _ in range(rng.randint(1, 3))]}
    if depth < 2 and r < 0.3:
        return {"$or": [_spec(rng, depth + 1, leaf) for _ in range(rng.randint(1, 3))]}
    if depth < 2 and r < 0.4:
        return {"$not": _spec(rng, depth + 1, leaf)}
    spec = leaf(rng)
    if rng.random() < 0.3:
        spec.update(leaf(rng))
    return spec


def _row_by_row(mem: Memory, spec: dict) -> list[str]:
    pred = compile_filter(spec)
    return [r.id for r in mem if pred(r.meta)]


def _grouped(cols: MetaColumns, mem: Memory, spec: dict) -> list[str]:
    mask = cols.mask(mem.state.records, spec)
    assert mask.dtype == torch.bool and mask.shape == (len(mem),)
    ids = mem.ids
    return [ids[r] for r in mask.nonzero().squeeze(1).tolist()]


def _check(cols: MetaColumns, mem: Memory, rng: random.Random, specs: int = 60) -> None:
    for _ in range(specs):
        spec = _spec(rng)
        assert _grouped(cols, mem, spec) == _row_by_row(mem, spec), spec


@pytest.mark.parametrize("cap", [meta_columns.MAX_GROUPS, 3])
def test_grouped_answer_is_the_row_by_row_one_through_writes(monkeypatch, cap):
    monkeypatch.setattr(meta_columns, "MAX_GROUPS", cap)   # 3: most fields tested row by row
    rng = random.Random(cap)
    mem = Memory(embedder=HashingEmbedder(dim=16))
    mem.add_many([{"text": f"m{i}", "id": f"m{i}", "meta": _meta(rng)} for i in range(120)])
    cols = MetaColumns()
    _check(cols, mem, rng)
    mem.add_many([{"text": f"n{i}", "id": f"n{i}", "meta": _meta(rng)} for i in range(30)])   # appended
    _check(cols, mem, rng)
    for i in rng.sample(range(150), 25):   # rewritten in place
        mem.update(mem.ids[i], meta=_meta(rng))
    _check(cols, mem, rng)
    mem.remove_many(rng.sample(mem.ids, 20))   # rows renumbered
    _check(cols, mem, rng)
    mem.add("after", id="after", meta={"k": "a", "j": ["a"]})
    mem.update("m0" if "m0" in mem else mem.ids[0], meta={"k": "new value", "tags": {"x": 1}})
    _check(cols, mem, rng)


def test_updated_value_moves_between_groups():
    mem = Memory(embedder=HashingEmbedder(dim=16))
    mem.add_many([{"text": f"m{i}", "id": f"m{i}", "meta": {"user": f"u{i % 3}"}} for i in range(9)])
    cols = MetaColumns()
    assert _grouped(cols, mem, {"user": "u1"}) == ["m1", "m4", "m7"]
    mem.update("m4", meta={"user": "u2"})
    mem.update("m0", meta={})
    assert _grouped(cols, mem, {"user": "u1"}) == ["m1", "m7"]
    assert _grouped(cols, mem, {"user": {"$exists": False}}) == ["m0"]
    mem.remove("m1")
    assert _grouped(cols, mem, {"user": "u1"}) == ["m7"]
    assert _grouped(cols, mem, {"user": "u2"}) == ["m2", "m4", "m5", "m8"]


def test_numbers_booleans_and_containers_keep_their_own_groups():
    mem = Memory(embedder=HashingEmbedder(dim=16))
    metas = [{"v": 1}, {"v": 1.0}, {"v": True}, {"v": [1]}, {"v": [True]}, {"v": {"a": 1}}, {"v": {"a": True}}]
    mem.add_many([{"text": f"m{i}", "id": f"m{i}", "meta": m} for i, m in enumerate(metas)])
    cols = MetaColumns()
    assert _grouped(cols, mem, {"v": 1}) == ["m0", "m1"]   # numbers by value
    assert _grouped(cols, mem, {"v": True}) == ["m2"]      # a boolean is no number
    assert _grouped(cols, mem, {"v": {"$contains": 1}}) == ["m3"]
    assert _grouped(cols, mem, {"v": {"a": 1}}) == ["m5"]


def test_store_search_and_suggest_use_the_groups():
    mem = Memory(embedder=HashingEmbedder(dim=32))
    mem.add_many([{"text": f"note {i} on topic {i % 5}", "id": f"m{i}", "meta": {"user": f"u{i % 4}", "n": i}}
                  for i in range(200)])
    hits = mem.search("note on topic 3", k=50, filters={"user": "u2", "n": {"$lt": 100}}, touch=False)
    assert hits and all(h.record.meta["user"] == "u2" and h.record.meta["n"] < 100 for h in hits)
    assert len(hits) == 25
    assert {h.id for h in mem.search("topic", k=300, filters={"$not": {"user": "u0"}}, touch=False)} == \
        {f"m{i}" for i in range(200) if i % 4}
    mem.add("child", id="child", parent="m1")   # a tree: suggest_parents votes
    got = mem.suggest_parents("note on topic 1", k=10, filters={"user": "u1"})
    assert got and all(r.record.meta["user"] == "u1" for r in got)
    mem.add("late", id="late", meta={"user": "u9"})   # a search after a write sees it
    assert [h.id for h in mem.search("late", k=5, filters={"user": "u9"}, touch=False)] == ["late"]
    with pytest.raises(FilterError, match=r"\$gtt"):
        mem.search("x", filters={"n": {"$gtt": 1}})


def test_a_loaded_store_starts_its_own_columns(tmp_path):
    mem = Memory(embedder=HashingEmbedder(dim=16))
    mem.add_many([{"text": f"m{i}", "id": f"m{i}", "meta": {"k": i % 2}} for i in range(6)])
    assert [h.id for h in mem.search("m", k=6, filters={"k": 1}, touch=False)]
    path = tmp_path / "m.db"
    mem.save(path)
    back = Memory.load(path, embedder=HashingEmbedder(dim=16))
    back.add("m6", id="m6", meta={"k": 1})
    assert sorted(h.id for h in back.search("m", k=10, filters={"k": 1}, touch=False)) == ["m1", "m3", "m5", "m6"]


def test_order_operators_compare_numbers_in_one_pass_and_big_integers_row_by_row():
    mem = Memory(embedder=HashingEmbedder(dim=16))
    metas = [{"ts": 1.5}, {"ts": 2}, {"ts": "3"}, {"ts": True}, {}, {"ts": None}, {"ts": 2 ** 53}, {"ts": -7}]
    mem.add_many([{"text": f"m{i}", "id": f"m{i}", "meta": m} for i, m in enumerate(metas)])
    cols = MetaColumns()
    for spec in ({"ts": {"$gt": 1.5}}, {"ts": {"$gte": 1.5, "$lt": 2 ** 53}}, {"ts": {"$lte": 2}},
                 {"ts": {"$gt": "2"}}, {"$not": {"ts": {"$lt": 0}}}):
        assert _grouped(cols, mem, spec) == _row_by_row(mem, spec), spec
    assert _grouped(cols, mem, {"ts": {"$gt": 1.5}}) == ["m1", "m6"]
    big = 2 ** 53 + 1   # not exact as a float64: that field is compared row by row from now on
    mem.add("big", id="big", meta={"ts": big})
    assert cols.mask(mem.state.records, {"ts": {"$gt": 2 ** 53}}).nonzero().squeeze(1).tolist() == [8]
    assert cols.columns["ts"].big
    for spec in ({"ts": {"$gte": 2 ** 53}}, {"ts": {"$lt": big}}, {"ts": {"$gt": 2 ** 60}}):
        assert _grouped(cols, mem, spec) == _row_by_row(mem, spec), spec


@pytest.mark.parametrize("metric,hybrid,dtype", [("shell", 0.0, torch.float64), ("shell", 0.3, torch.float64),
                                                 ("hyperbolic", 0.0, torch.float64), ("shell", 0.0, torch.float32)])
def test_a_filter_that_keeps_most_rows_ranks_as_the_whole_ranking_filtered(metric, hybrid, dtype):
    mem = Memory(embedder=HashingEmbedder(dim=32), dtype=dtype)
    mem.searcher.mirror_min_rows = 1   # the float32 mirror's scan too
    mem.add_many([{"text": f"note {i} on topic {i % 7}", "id": f"m{i}", "meta": {"kind": "fact" if i % 3 else "chat"}}
                  for i in range(300)])
    mem.add("child", id="child", parent="m1", meta={"kind": "fact"})
    for spec, keep in (({"$not": {"kind": "chat"}}, lambda m: m.get("kind") != "chat"),
                       ({"kind": "chat"}, lambda m: m.get("kind") == "chat")):
        got = mem.search("topic 3 note", k=12, filters=spec, metric=metric, hybrid=hybrid, touch=False)
        every = mem.search("topic 3 note", k=len(mem), metric=metric, hybrid=hybrid, touch=False)
        want = [h for h in every if keep(h.record.meta)][:12]
        assert [h.id for h in got] == [h.id for h in want]
        assert [h.score for h in got] == pytest.approx([h.score for h in want], rel=1e-9, abs=1e-9)


def test_metadata_is_copied_in_and_out():
    mem = Memory(embedder=HashingEmbedder(dim=16))
    la, lb = ["a"], ["a"]
    mem.add("alpha", id="A", meta={"tags": la, "u": 1})
    mem.add("beta", id="B", meta={"tags": lb, "u": 1})
    assert [h.id for h in mem.search("x", k=5, filters={"tags": {"$contains": "a"}}, touch=False)]
    la.append("q")                                    # the caller's own lists stay the caller's
    mem.search("alpha", k=1)[0].record.meta["u"] = 3  # a record's meta is a copy
    mem.get("B").meta["tags"].append("z")
    assert mem.get("A").meta == {"tags": ["a"], "u": 1} and mem.get("B").meta == {"tags": ["a"], "u": 1}
    assert mem.search("x", k=5, filters={"tags": {"$contains": "q"}}, touch=False) == []
    assert mem.search("x", k=5, filters={"u": 3}, touch=False) == []
    assert sorted(h.id for h in mem.search("x", k=5, filters={"u": 1}, touch=False)) == ["A", "B"]


def test_removals_are_taken_out_of_the_columns_without_reading_them_again(monkeypatch):
    mem = Memory(embedder=HashingEmbedder(dim=16))
    mem.add_many([{"text": f"m{i}", "id": f"m{i}", "meta": {"k": i % 5}} for i in range(50)])
    cols = MetaColumns()
    assert _grouped(cols, mem, {"k": 2}) == _row_by_row(mem, {"k": 2})
    read: list = []
    fill = meta_columns._Column.fill
    monkeypatch.setattr(meta_columns._Column, "fill", lambda self, metas, key, rows, n: (
        read.append(None if rows is None else len(rows)), fill(self, metas, key, rows, n))[1])
    mem.add("new", id="new", meta={"k": 2})
    mem.remove_many(["m2", "m10", "m47"])
    mem.add("newer", id="newer", meta={"k": 2})
    mem.remove("m0")
    assert _grouped(cols, mem, {"k": 2}) == _row_by_row(mem, {"k": 2})
    assert _grouped(cols, mem, {"k": {"$gt": 3}}) == _row_by_row(mem, {"k": {"$gt": 3}})
    assert None not in read and sum(read) <= 2   # only the rows appended since were read


def test_a_field_with_too_many_values_keeps_no_codes_after_a_relayout(monkeypatch):
    monkeypatch.setattr(meta_columns, "MAX_GROUPS", 4)
    mem = Memory(embedder=HashingEmbedder(dim=16))
    mem.add_many([{"text": f"m{i}", "id": f"m{i}", "meta": {"s": f"v{i}"}} for i in range(20)])
    cols = MetaColumns()
    assert _grouped(cols, mem, {"s": "v3"}) == ["m3"]
    col = cols.columns["s"]
    assert col.codes is None and col.wide and len(col.values) == 1
    mem.remove("m3")
    assert _grouped(cols, mem, {"s": {"$in": ["v4", "v9"]}}) == ["m4", "m9"]
    assert cols.columns["s"].codes is None


def test_membership_by_hashed_keys_is_json_equality():
    """$in / $nin / a list value through value_test (hashed json_key) answer as matches (json_equal
    pair by pair): True is not 1, 1 is 1.0, lists and dicts structurally, NaN equals nothing."""
    rng = random.Random(5)
    odd = [float("nan"), [float("nan")], (1, 2.0), ("a",), frozenset({1}), {1, 2}, b"a", {"x": float("nan")}]
    pool = VALUES + odd
    for a in pool:
        for b in pool:
            ka, kb = json_key(a), json_key(b)
            if ka is not None and kb is not None:
                assert (ka == kb) == filters.json_equal(a, b), (a, b)
    for _ in range(3000):
        xs = [rng.choice(pool) for _ in range(rng.randint(0, 5))]
        want = rng.choice([{"$in": xs}, {"$nin": xs}, xs, {"$in": xs, "$ne": rng.choice(pool)},
                           {"x": {"$in": xs}}, {"$nin": xs, "$exists": True}])
        for v in (rng.choice(pool), filters.MISSING, {"x": rng.choice(pool)}):
            assert value_test(want)(v) == matches(v, want), (v, want)


def test_in_costs_one_lookup_per_value_not_one_comparison_per_pair(monkeypatch):
    """A 200-value $in on a field of 2,000 distinct values compares no pair of them (it was
    2,000 x 200 json_equal calls)."""
    mem = Memory(embedder=HashingEmbedder(dim=8))
    mem.add_many([{"text": f"m{i}", "id": f"m{i}", "meta": {"uid": f"u{i}"}} for i in range(2000)])
    calls = []
    real = filters.json_equal
    monkeypatch.setattr(filters, "json_equal", lambda a, b: calls.append(1) or real(a, b))
    cols = MetaColumns()
    want = [f"u{i}" for i in range(0, 4000, 20)]
    assert _grouped(cols, mem, {"uid": {"$in": want}}) == [f"m{i}" for i in range(0, 2000, 20)]
    assert len(_grouped(cols, mem, {"uid": {"$nin": want}})) == 1900
    assert _grouped(cols, mem, {"uid": want[:3]}) == ["m0", "m20", "m40"]
    assert calls == []
