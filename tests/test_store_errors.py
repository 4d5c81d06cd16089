"""The Memory store refuses bad input all or nothing, and names its mistakes."""

from datetime import timedelta

import numpy as np
import pytest
import torch
from store_helpers import T0, make_tree

from hypermem import CallableEmbedder, HashingEmbedder, Memory


# ------------------------------------------------------------------ bad input, all or nothing
def snapshot(m):
    return (m.ids, [r.to_dict() for r in m], m.points.clone(), m.embeddings.clone())


def same(a, b):
    return a[0] == b[0] and a[1] == b[1] and torch.equal(a[2], b[2]) and torch.equal(a[3], b[3])


@pytest.mark.parametrize("items,exc,match", [
    ([{"text": "ok"}, {"text": "  "}], ValueError, "blank"),
    ([{"text": "ok"}, {"text": 3}], TypeError, "string"),
    ([{"text": "ok", "colour": "red"}], ValueError, "unknown keys"),
    ([{"text": "ok", "meta": {"x": object()}}], ValueError, "JSON"),
    ([{"text": "ok", "meta": {"x": float("nan")}}], ValueError, "JSON"),
    ([{"text": "ok", "meta": {"x": (1, 2)}}], ValueError, "round trip"),
    ([{"text": "ok", "meta": {1: "int key"}}], ValueError, "round trip"),
    ([{"text": "ok", "parent": "missing"}], KeyError, "unknown parent"),
    ([{"text": "ok", "id": "dog"}], ValueError, "duplicate id"),
    ([{"text": "a", "id": "x"}, {"text": "b", "id": "x"}], ValueError, "duplicate id"),
    ([{"text": "child", "parent": "later"}, {"text": "p", "id": "later"}], KeyError, "precede"),
    ([{"text": "ok", "embedding": [1.0, 2.0]}], ValueError, "shape"),
    ([{"text": "ok", "embedding": [float("nan")] * 256}], ValueError, "non-finite"),
    ([{"text": "ok", "point": [0.9] * 256}], ValueError, "not inside"),
    ([{"text": "ok", "t": "yesterday"}], TypeError, "datetime"),
    ([{"text": "ok", "valid_from": T0, "valid_until": T0 - timedelta(days=1)}], ValueError, "before"),
    ([{}], ValueError, "no 'text'"),
    (["just text"], TypeError, "dict"),
])
def test_add_many_bad_input_is_all_or_nothing(items, exc, match):
    m = make_tree()
    before = snapshot(m)
    with pytest.raises(exc, match=match):
        m.add_many(items)
    assert same(before, snapshot(m))


def test_bad_embedder_output_changes_nothing():
    calls = {"n": 0}

    def fn(texts):
        calls["n"] += 1
        out = np.ones((len(texts), 4))
        if any("bad" in t for t in texts):
            out[0, 0] = np.nan
        return out

    m = Memory(embedder=CallableEmbedder(fn, dim=4))
    m.add("good", id="g")
    before = snapshot(m)
    with pytest.raises(ValueError, match="non-finite"):
        m.add_many([{"text": "bad one"}, {"text": "fine"}])
    with pytest.raises(ValueError, match="non-finite"):
        m.update("g", text="bad text")
    assert same(before, snapshot(m))
    wrong = Memory(embedder=CallableEmbedder(lambda ts: np.ones((len(ts) + 1, 4)), dim=4))
    with pytest.raises(ValueError, match="shape"):
        wrong.add("x")
    assert len(wrong) == 0


def test_update_bad_input_changes_nothing():
    m = make_tree()
    before = snapshot(m)
    for kwargs, exc in [({"text": ""}, ValueError), ({"meta": {"a": {1, 2}}}, ValueError),
                        ({"valid_from": T0 + timedelta(days=400), "valid_until": T0}, ValueError),
                        ({"t": 5}, TypeError)]:
        with pytest.raises(exc):
            m.update("dog", **kwargs)
        assert same(before, snapshot(m))
    with pytest.raises(KeyError, match="unknown memory id"):
        m.update("nope", text="x")


def test_bad_search_arguments():
    m = make_tree()
    for kwargs, exc, match in [({"k": 0}, ValueError, "k must"), ({"k": 2.5}, ValueError, "k must"),
                               ({"mode": "everything"}, ValueError, "unknown mode"),
                               ({"metric": "euclid"}, ValueError, "unknown metric"),
                               ({"mode": "subtree"}, ValueError, "needs root"),
                               ({"mode": "subtree", "root": "zzz"}, KeyError, "unknown memory id")]:
        with pytest.raises(exc, match=match):
            m.search("dogs", **kwargs)
    with pytest.raises(ValueError, match="needs a query"):
        m.search(None)
    with pytest.raises(ValueError, match="blank"):
        m.search("   ")
    with pytest.raises(TypeError):
        m.search(3.5)
    with pytest.raises(KeyError):
        m.get("zzz")
    with pytest.raises(TypeError, match="single string"):
        m.search_batch("dogs")
    with pytest.raises(TypeError, match="unexpected"):
        m.search_batch(["dogs"], colour=1)


@pytest.mark.parametrize("kwargs", [{"curvature": 0}, {"curvature": float("nan")}, {"base_depth": 0},
                                    {"depth_step": -1}, {"inherit": 1.5}, {"inherit": float("nan")},
                                    {"cone_k": 0}, {"metric": "cosine"}, {"time_coef": float("inf")},
                                    {"depth_bias": float("nan")}, {"dtype": torch.int64}])
def test_bad_constructor(kwargs):
    with pytest.raises(ValueError):
        Memory(**kwargs)


@pytest.mark.parametrize("shape", ["list", "dict"])
def test_deep_meta_is_a_value_error_and_stores_nothing(shape):
    deep: object = "leaf"
    for _ in range(5000):
        deep = [deep] if shape == "list" else {"k": deep}
    mem = Memory()
    mem.add("kept")
    for call in (lambda: mem.add("deep", meta={"x": deep}),
                 lambda: mem.add_many([{"text": "a"}, {"text": "deep", "meta": {"x": deep}}])):
        with pytest.raises(ValueError, match="meta nests deeper than"):
            call()
    assert [r.text for r in mem] == ["kept"]


def test_touch_counts_and_names_its_mistakes():
    m = Memory()
    m.add("animals", id="a")
    m.add("dogs", parent="a", id="d")
    m.touch(["d", "d", "a"])
    assert m.get("d").access_count == 2 and m.get("a").access_count == 1
    assert m.stats()["accesses"] == 3
    with pytest.raises(TypeError, match=r"touch\(\) takes a list of ids, got str 'd'"):
        m.touch("d")
    with pytest.raises(KeyError, match="unknown memory id 'zz'"):
        m.touch(["zz"])
    assert m.get("d").access_count == 2  # nothing counted by a refused call


def test_a_wrong_argument_is_named_as_memorys():
    m = Memory()
    m.add("animals", id="a")
    with pytest.raises(TypeError, match=r"^Memory\.search\(\): got an unexpected keyword argument 'modee'"):
        m.search("x", modee="subtree")
    with pytest.raises(TypeError, match=r"^Memory\.children\(\): missing a required argument: 'id'"):
        m.children()
    with pytest.raises(TypeError, match="a query must be text or a point"):  # errors from inside stay as they are
        m.search(5)


def test_a_batch_names_the_query_point_outside_the_ball():
    m = Memory(embedder=HashingEmbedder(dim=8))
    m.add("one")
    good = torch.full((8,), 0.1, dtype=torch.float64)
    with pytest.raises(ValueError, match=r"query #2 is not inside the Poincaré ball"):
        m.search_batch([good, "text", torch.ones(8, dtype=torch.float64), good], k=1)
    with pytest.raises(ValueError, match=r"query point is not inside"):
        m.search(torch.ones(8, dtype=torch.float64), k=1)
    res = m.search_batch([good, "one", good * 2], k=1, touch=False)
    assert [r[0].id for r in res] == [m.search(good, k=1)[0].id] * 3
    assert res[2][0].score == pytest.approx(m.search(good * 2, k=1, touch=False)[0].score, abs=1e-12)


def test_a_lone_surrogate_is_refused_on_the_way_in_not_at_save(tmp_path):
    mem = Memory()
    i = mem.add("fine 😀 émoji")
    for call in (lambda: mem.add("half an emoji \ud83d"), lambda: mem.add_many([{"text": "ok"}, {"text": "x\udc80"}]),
                 lambda: mem.update(i, text="x\ud83d"), lambda: mem.search("q\ud83d")):
        with pytest.raises(ValueError, match=r"not valid Unicode: surrogates not allowed at position \d+"):
            call()
    assert len(mem) == 1
    mem.save(tmp_path / "m.db")   # nothing stored that the file cannot hold
    assert Memory.load(tmp_path / "m.db").get(i).text == "fine 😀 émoji"


def test_meta_that_is_not_json_names_where_and_a_deep_value_is_no_recursion():
    from hypermem.store.checks import json_problem

    with pytest.raises(ValueError, match=r"meta must be JSON-serialisable \('a'\['b'\]\[1\] is nan"):
        Memory().add("x", meta={"a": {"b": [1, float("nan")]}})
    deep = cur = []
    for _ in range(100_000):
        cur.append([])
        cur = cur[0]
    assert json_problem(deep) is None and "is a tuple" in json_problem({"k": (1, 2)})
