"""The Memory store: every method and mode, exact ranking (bad input: test_store_errors.py)."""

import math
import threading
from datetime import timedelta

import numpy as np
import pytest
import torch
from store_helpers import T0, Clock, make_tree

from hypermem import (
    Ebbinghaus,
    HalfLife,
    HashingEmbedder,
    Memory,
    NoDecay,
    Product,
    ValidityWindow,
)
from hypermem.retrieval.cones import cone_energy


# ------------------------------------------------------------------ brute force, written independently
def brute_scores(m, query_text, metric="shell", at=None, query_depth=None):
    """Float64 NumPy score of every memory, from first principles."""
    c = m.curvature
    e = np.asarray(m.embedder.embed([query_text])[0], dtype=np.float64)
    u = e / np.linalg.norm(e)
    now = (at or m.clock()).timestamp()
    out = {}
    for rec in m:
        p = m.point(rec.id).double().numpy()
        depth = 2 / math.sqrt(c) * math.atanh(math.sqrt(c) * np.linalg.norm(p))
        if metric == "shell":
            rho = m.base_depth
            v = p / np.linalg.norm(p)
            a = u * math.tanh(math.sqrt(c) * rho / 2) / math.sqrt(c)
            b = v * math.tanh(math.sqrt(c) * rho / 2) / math.sqrt(c)
        else:
            rho = m.base_depth if query_depth is None else query_depth
            a = u * math.tanh(math.sqrt(c) * rho / 2) / math.sqrt(c)
            b = p
        num = 2 * c * np.sum((a - b) ** 2)
        den = (1 - c * np.sum(a * a)) * (1 - c * np.sum(b * b))
        dist = math.acosh(1 + num / den) / math.sqrt(c)
        age_h = max(0.0, (now - rec.t.timestamp()) / 3600)
        if isinstance(m.decay, HalfLife):
            w = max(0.5 ** (age_h / m.decay.hours), 1e-6)
        elif isinstance(m.decay, NoDecay):
            w = 1.0
        else:
            raise AssertionError("unsupported policy in brute force")
        out[rec.id] = -dist + m.depth_bias * depth + m.time_coef * math.log(w)
    return out


def ranked(scores, k):
    return [i for i, _ in sorted(scores.items(), key=lambda kv: -kv[1])[:k]]


# ------------------------------------------------------------------ structure
def test_structure_queries():
    m = make_tree()
    assert len(m) == 7 and "dog" in m and "nope" not in m
    assert m.ids == ["animal", "dog", "cat", "wolf", "puppy", "vehicle", "car"]
    assert [r.id for r in m] == m.ids
    assert m.parent("puppy") == "dog" and m.parent("animal") is None
    assert m.children("animal") == ["dog", "cat", "wolf"]
    assert m.ancestors("puppy") == ["dog", "animal"]
    assert sorted(m.descendants("animal")) == ["cat", "dog", "puppy", "wolf"]
    assert m.siblings("dog") == ["cat", "wolf"]
    assert m.siblings("animal") == ["vehicle"]
    assert m.roots() == ["animal", "vehicle"]
    assert [m.level(i) for i in ("animal", "dog", "puppy")] == [0, 1, 2]
    assert m.depth("animal") == pytest.approx(1.0) and m.depth("puppy") == pytest.approx(2.0)
    assert m.points.shape == (7, 256)
    torch.testing.assert_close(m.points[4], m.point("puppy"))
    assert float(m.ball.distance_to_origin(m.point("dog"))) == pytest.approx(1.5)
    assert m.get("dog").meta == {"kind": "pet"}
    tree = m.tree()
    assert "└── puppies are young dogs  [puppy d=" in tree and tree.splitlines()[0].startswith("animals")
    assert "puppy" in m.tree(root="dog") and "car" not in m.tree(root="dog")


def test_inherit_pulls_children_toward_parent():
    e = HashingEmbedder()
    base = Memory(embedder=e, inherit=0.0)
    pulled = Memory(embedder=e, inherit=0.8)
    for m in (base, pulled):
        m.add("animals", id="a")
        m.add("racing cars engines", parent="a", id="b")
    cos = [float(torch.nn.functional.cosine_similarity(m.point("a"), m.point("b"), dim=0)) for m in (base, pulled)]
    assert cos[1] > cos[0] + 0.3
    full = Memory(embedder=e, inherit=1.0)
    full.add("animals", id="a")
    full.add("racing cars engines", parent="a", id="b")
    assert float(torch.nn.functional.cosine_similarity(full.point("a"), full.point("b"), dim=0)) == pytest.approx(1.0)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_cone_constrained_children_inside_parent_cone(dtype):
    m = Memory(cone_constrained=True, inherit=0.0, dtype=dtype)
    root = m.add("science")
    kids = m.add_many([{"text": f"topic number {i} of many words", "parent": root} for i in range(20)])
    grand = m.add_many([{"text": f"detail {i}", "parent": kids[i]} for i in range(20)])
    P = m.points.double()
    assert torch.all(cone_energy(P[0], P[1:21], m.ball, m.cone_k) == 0)
    for g, k in zip(grand, kids):
        assert float(cone_energy(m.point(k).double(), m.point(g).double(), m.ball, m.cone_k)) == 0
    # the cone mode finds exactly the descendants here
    found = {r.record.id for r in m.search(None, mode="cone", root=root, k=100)}
    assert found == set(kids) | set(grand)


# ------------------------------------------------------------------ search
@pytest.mark.parametrize("metric", ["shell", "hyperbolic"])
@pytest.mark.parametrize("decay,depth_bias,time_coef", [(NoDecay(), 0.0, 1.0), (HalfLife(48), 0.3, 1.0),
                                                        (HalfLife(24 * 5), -0.5, 2.0)])
def test_ranking_equals_brute_force(metric, decay, depth_bias, time_coef):
    m = Memory(decay=decay, depth_bias=depth_bias, time_coef=time_coef, clock=Clock(), metric=metric)
    rng = np.random.default_rng(0)
    ids = []
    words = ["alpha", "beta", "gamma", "delta", "eps", "zeta", "eta", "theta", "iota", "kappa"]
    for i in range(300):
        parent = ids[int(rng.integers(0, len(ids)))] if ids and rng.random() < 0.6 else None
        text = " ".join(rng.choice(words, size=4)) + f" item{i}"
        ids.append(m.add(text, parent=parent, t=T0 + timedelta(hours=float(rng.uniform(0, 700)))))
    for q in ["alpha beta", "theta kappa item7", "zeta"]:
        expected = brute_scores(m, q, metric=metric)
        got = m.search(q, k=10, touch=False)
        assert [r.record.id for r in got] == ranked(expected, 10)
        for r in got:
            assert r.score == pytest.approx(expected[r.record.id], abs=1e-9)
            assert r.score == pytest.approx(-r.distance + depth_bias * r.depth + time_coef * math.log(r.time_weight),
                                            abs=1e-12)


def test_query_depth_for_hyperbolic_metric():
    m = make_tree(metric="hyperbolic")
    exp = brute_scores(m, "young dogs", metric="hyperbolic", query_depth=2.0)
    got = m.search("young dogs", k=7, query_depth=2.0, touch=False)
    assert [r.record.id for r in got] == ranked(exp, 7)
    # hyperbolic favours shallow memories; shell is angular only
    shallow = m.search("young dogs", k=1, touch=False)[0].record.id
    assert m.level(shallow) == 0


def test_modes():
    m = make_tree()
    ids = lambda res: [r.record.id for r in res]  # noqa: E731
    assert set(ids(m.search("dog", mode="subtree", root="dog", k=10))) == {"dog", "puppy"}
    assert set(ids(m.search("dog", mode="children", root="animal", k=10))) == {"dog", "cat", "wolf"}
    assert set(ids(m.search("dog", mode="ancestors", root="puppy", k=10))) == {"dog", "animal"}
    assert set(ids(m.search("dog", mode="siblings", root="cat", k=10))) == {"dog", "wolf"}
    assert m.search("dog", mode="children", root="puppy", k=3) == []
    with pytest.warns(UserWarning, match="cone_constrained=True"):  # default placement: empty cones
        assert m.search(None, mode="cone", root="animal", k=10) == []
    m = make_tree(cone_constrained=True)
    cone = m.search(None, mode="cone", root="animal", k=10)
    assert {r.record.id for r in cone} == {"dog", "cat", "wolf", "puppy"}
    assert all(r.cone_energy == 0.0 for r in cone)
    for r in cone:
        assert float(cone_energy(m.point("animal"), m.point(r.record.id), m.ball, m.cone_k)) == 0.0
    # structural mode without a query: ranked by time weight and depth only (ties: insertion order)
    assert ids(m.search(None, mode="children", root="animal", k=2)) == ["dog", "cat"]
    m2 = make_tree(decay=HalfLife(24 * 10))
    assert ids(m2.search(None, mode="children", root="animal", k=3)) == ["wolf", "cat", "dog"]  # newest first


def test_filters_before_the_cut():
    m = make_tree()
    all_pets = m.search("wolves hunt", k=2, filters={"kind": "pet"}, touch=False)
    assert len(all_pets) == 2 and all(r.record.meta["kind"] == "pet" for r in all_pets)
    wild = m.search("dogs", k=1, filters=lambda rec: rec.meta.get("kind") == "wild", touch=False)
    assert [r.record.id for r in wild] == ["wolf"]
    assert m.search("dogs", k=3, filters={"kind": "none"}) == []
    with pytest.raises(TypeError, match="filters"):
        m.search("dogs", filters=3)


def test_touch_counts_accesses_after_scoring():
    clock = Clock()
    m = Memory(clock=clock, decay=Ebbinghaus(stability_hours=1, boost_per_access=10))
    m.add("dogs bark", id="a", t=T0)
    m.add("dogs bark loudly", id="b", t=T0)
    first = m.search("dogs bark", k=1)
    assert first[0].record.access_count == 1 and first[0].record.last_accessed == clock.t
    assert m.get("b").access_count == 0
    m.search("dogs bark", k=2, touch=False)
    assert m.get("a").access_count == 1
    assert m.stats()["accesses"] == 1


def test_time_weights_validity_and_at_time():
    clock = Clock()
    m = Memory(clock=clock, decay=Product(HalfLife(24), ValidityWindow()))
    m.add("old fact", id="old", t=T0)
    m.add("current fact", id="cur", t=clock.t, valid_from=clock.t - timedelta(hours=1))
    m.add("expired fact", id="exp", t=clock.t, valid_until=clock.t - timedelta(hours=1))
    w = m.time_weights()
    assert w.shape == (3,)
    assert float(m.time_weights(["cur"])[0]) == 1.0
    assert float(m.time_weights(["exp"])[0]) == pytest.approx(1e-6)
    assert float(m.time_weights(["exp"], at_time=clock.t - timedelta(hours=2))[0]) == 1.0
    assert float(m.time_weights(["old"])[0]) == pytest.approx(0.5 ** 30 if 0.5 ** 30 > 1e-6 else 1e-6)
    assert m.search("fact", k=1, touch=False)[0].record.id == "cur"


def test_search_batch_equals_single():
    m = make_tree(decay=HalfLife(100), depth_bias=0.2)
    qs = ["loyal dogs", "four wheels", "packs", "earth animals"]
    for kw in [{}, {"mode": "subtree", "root": "animal"}, {"filters": {"kind": "pet"}},
               {"metric": "hyperbolic", "query_depth": 1.5}]:
        batch = m.search_batch(qs, k=3, touch=False, **kw)
        single = [m.search(q, k=3, touch=False, **kw) for q in qs]
        assert [[r.record.id for r in b] for b in batch] == [[r.record.id for r in s] for s in single]
        for b, s in zip(batch, single):
            for rb, rs in zip(b, s):
                assert rb.score == pytest.approx(rs.score, abs=1e-12)
    # with touch and an access-dependent policy, the batch equals sequential calls
    m1, m2 = make_tree(decay=Ebbinghaus(24, 5.0)), make_tree(decay=Ebbinghaus(24, 5.0))
    b = m1.search_batch(qs * 2, k=2)
    s = [m2.search(q, k=2) for q in qs * 2]
    assert [[r.record.id for r in x] for x in b] == [[r.record.id for r in x] for x in s]


def test_point_queries_and_embed_query():
    m = make_tree()
    q = m.embed_query("loyal dogs")
    assert float(m.ball.distance_to_origin(q)) == pytest.approx(m.base_depth)
    assert [r.record.id for r in m.search(q, k=3, touch=False)] == \
        [r.record.id for r in m.search("loyal dogs", k=3, touch=False)]
    with pytest.raises(ValueError, match="inside"):
        m.search(torch.ones(256), k=1)
    with pytest.raises(ValueError, match="shape"):
        m.search(torch.zeros(5), k=1)


@pytest.mark.parametrize("backend", ["auto", "numpy", "torch"])
def test_index_equals_exact(backend):
    m = Memory(decay=HalfLife(10), depth_bias=0.7, clock=Clock())
    rng = np.random.default_rng(1)
    ids = []
    for i in range(400):
        parent = ids[int(rng.integers(0, len(ids)))] if ids and rng.random() < 0.5 else None
        ids.append(m.add(f"note {i} about {rng.choice(['red', 'green', 'blue', 'cyan'])} things",
                         parent=parent, t=T0 + timedelta(hours=float(rng.uniform(0, 720)))))
    exact = [[r.record.id for r in res] for res in m.search_batch(["red things", "blue note 7"], k=10, touch=False)]
    m.build_index(backend)
    idx = [[r.record.id for r in res] for res in m.search_batch(["red things", "blue note 7"], k=10, touch=False)]
    assert idx == exact
    m.add("red things exactly", id="new")
    after = [r.record.id for r in m.search("red things", k=10, touch=False, use_index=True)]
    assert len(m.searcher.index) == 401  # rebuilt after the change
    assert after == [r.record.id for r in m.search("red things", k=10, touch=False, use_index=False)]
    assert "new" in after


def test_faiss_index_reranks_candidates_exactly():
    pytest.importorskip("faiss")
    m = make_tree(decay=HalfLife(24))
    m.build_index("faiss")
    res = m.search("loyal dogs", k=3, touch=False, oversample=4)
    exact = m.search("loyal dogs", k=3, touch=False, use_index=False)
    assert [r.record.id for r in res] == [r.record.id for r in exact]  # tiny store: HNSW finds everything


# ------------------------------------------------------------------ changes
def test_update_re_embeds_and_replaces_subtree():
    m = make_tree()
    before_puppy = m.point("puppy").clone()
    before_cat = m.point("cat").clone()
    m.update("dog", text="robots are metal machines", meta={"kind": "machine"})
    assert m.get("dog").text == "robots are metal machines" and m.get("dog").meta == {"kind": "machine"}
    assert not torch.allclose(m.point("puppy"), before_puppy)  # the subtree moved with its parent
    torch.testing.assert_close(m.point("cat"), before_cat)
    assert m.search("metal machines robots", k=1, touch=False)[0].record.id == "dog"
    m.update("dog", valid_until=T0)
    assert m.get("dog").valid_until == T0
    m.update("dog", valid_until=None)
    assert m.get("dog").valid_until is None
    new_t = T0 + timedelta(days=9)
    m.update("cat", t=new_t)
    assert m.get("cat").t == new_t


def test_remove_and_cascade():
    m = make_tree()
    with pytest.raises(ValueError, match="cascade"):
        m.remove("dog")
    assert m.remove("puppy") == ["puppy"]
    assert "puppy" not in m and m.children("dog") == []
    gone = m.remove("animal", cascade=True)
    assert set(gone) == {"animal", "dog", "cat", "wolf"}
    assert m.ids == ["vehicle", "car"] and len(m) == 2
    assert [r.record.id for r in m.search("cars", k=5, touch=False)] == ["car", "vehicle"]
    torch.testing.assert_close(m.points, torch.stack([m.point("vehicle"), m.point("car")]))


def test_link_reparents_and_refuses_cycles():
    m = make_tree()
    m.link("dog", "vehicle")
    assert m.parent("dog") == "vehicle" and "dog" in m.children("vehicle") and "dog" not in m.children("animal")
    assert m.level("puppy") == 2 and m.depth("puppy") == pytest.approx(2.0)
    m.link("dog", None)
    assert m.level("dog") == 0 and m.level("puppy") == 1 and m.depth("puppy") == pytest.approx(1.5)
    with pytest.raises(ValueError, match="cycle"):
        m.link("dog", "puppy")
    with pytest.raises(ValueError, match="itself"):
        m.link("dog", "dog")
    with pytest.raises(KeyError):
        m.link("dog", "nope")


def test_empty_store_search():
    m = Memory()
    assert m.search("anything") == []
    assert m.stats()["count"] == 0 and m.table() == [] and m.tree() == ""


def test_stats_table_dataframe():
    m = make_tree(decay=HalfLife(24))
    s = m.stats()
    assert s["count"] == 7 and s["roots"] == 2 and s["max_level"] == 2 and s["levels"] == {0: 2, 1: 4, 2: 1}
    assert s["depth_min"] == pytest.approx(1.0) and s["depth_max"] == pytest.approx(2.0)
    assert s["oldest"] == T0.isoformat() and s["decay"] == {"type": "half_life", "hours": 24.0}
    rows = m.table()
    assert rows[4]["id"] == "puppy" and rows[4]["level"] == 2 and rows[4]["parent"] == "dog"
    assert 0 < rows[0]["weight"] < rows[4]["weight"] <= 1
    pd = pytest.importorskip("pandas")
    df = m.to_dataframe()
    assert isinstance(df, pd.DataFrame) and list(df["id"]) == m.ids


def test_result_to_dict():
    m = make_tree()
    d = m.search("dogs", k=1)[0].to_dict()
    assert set(d) >= {"id", "text", "score", "distance", "time_weight", "depth", "cone_energy", "meta", "t"}


def test_thread_safety():
    m = Memory()
    errors = []

    def writer(w):
        try:
            for i in range(60):
                m.add(f"writer {w} note {i}", id=f"w{w}-{i}")
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    def reader():
        try:
            for _ in range(60):
                for r in m.search("writer note", k=5):
                    assert r.record.id in m or True
                m.stats()
        except Exception as exc:  # pragma: no cover
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(w,)) for w in range(3)] + \
        [threading.Thread(target=reader) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert len(m) == 180 and len(set(m.ids)) == 180
    assert m.points.shape == (180, 256)
    assert sum(r.access_count for r in m) == m.stats()["accesses"]


def test_device_and_float32(device):
    m = make_tree(device=device, dtype=torch.float32)
    ref = make_tree()
    assert m.points.device.type == device.type and m.points.dtype == torch.float32
    got = [r.record.id for r in m.search("loyal dogs", k=4, touch=False)]
    assert got == [r.record.id for r in ref.search("loyal dogs", k=4, touch=False)]
