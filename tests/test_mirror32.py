"""The float32 search mirror: a float64 store's search scans float32 directions and
re-scores its certified candidates in float64, with the float64 scan's answer."""

import math
from datetime import timedelta

import pytest
import torch
from mirror_helpers import NOW, T0, random_store

from hypermem import HashingEmbedder, Memory
from hypermem.geometry import poincare as P
from hypermem.index import ShellDistance, exact_topk
from hypermem.index.rescore import mirrored_topk, product_error
from hypermem.retrieval.scoring import score_bias

DIM = 32


def store(n=3000, seed=0, **kw):
    return random_store(n, DIM, seed, depth_bias=0.2, **kw)


def search_both(mem, queries, k=10, **kw):
    """(mirrored answers, float64-scan answers) of the same queries."""
    mem.searcher.mirror_min_rows = 0
    fast = mem.search_batch(queries, k=k, touch=False, **kw)
    mem.searcher.mirror_min_rows = 1 << 62
    slow = mem.search_batch(queries, k=k, touch=False, **kw)
    mem.searcher.mirror_min_rows = 0
    return fast, slow


def assert_same(fast, slow, tol=1e-9):
    """Same scores to ``tol`` and the same memories, up to the order of memories whose
    float64 scores differ by less than rounding (two summation orders may swap them)."""
    assert len(fast) == len(slow)
    for f, s in zip(fast, slow):
        assert len(f) == len(s)
        slow_ids = {r.record.id for r in s}
        for a, b in zip(f, s):
            assert abs(a.score - b.score) <= tol and abs(a.distance - b.distance) <= tol
            if a.record.id != b.record.id:
                assert abs(a.score - b.score) <= 1e-12, (a, b)
                assert a.record.id in slow_ids or a.score >= s[-1].score - 1e-12


def random_queries(n, seed=1):
    g = torch.Generator().manual_seed(seed)
    return [P.point_at(v, 1.0) for v in torch.randn(n, DIM, generator=g, dtype=torch.float64)]


def reference(mem, q, k):
    """A float64 evaluation of the score's formula over every memory (ties by insertion order)."""
    st = mem.state
    n = st.n
    w = mem.time_weights()
    bias = score_bias(w, st.depth[:n], mem.time_coef, mem.depth_bias)
    cos = st.direction[:n] @ (q / q.norm())
    score = bias - P.shell_distance_from_cosine(cos, mem.base_depth, mem.curvature)
    order = sorted(range(n), key=lambda j: (-float(score[j]), j))[:k]
    return [st.ids[j] for j in order], [float(score[j]) for j in order]


def test_mirror_equals_float64_scan_and_the_formula():
    mem = store()
    qs = random_queries(40)
    fast, slow = search_both(mem, qs)
    assert_same(fast, slow)
    assert mem.state.mirror is not None and mem.state.mirror.dtype == torch.float32
    for q, res in zip(qs[:10], fast):
        ids, scores = reference(mem, q, 10)
        assert [r.record.id for r in res] == ids
        assert max(abs(r.score - s) for r, s in zip(res, scores)) <= 1e-9


def test_self_matches_and_stored_points():
    mem = store(n=2000)
    pts = mem.points[:30]
    fast, slow = search_both(mem, list(pts), k=5)
    # a stored point finds itself first; the distance there is float64's sqrt(eps) noise
    assert_same(fast, slow, tol=1e-7)
    selves = [hit for res, i in zip(fast, mem.ids[:30]) for hit in res if hit.record.id == i]
    assert selves and all(hit.distance <= 1e-6 for hit in selves)


def test_float32_ties_are_ordered_by_float64():
    """Keys that float32 cannot tell apart: the float64 order (and index order on exact ties) decides."""
    mem = Memory(embedder=HashingEmbedder(dim=DIM), clock=lambda: NOW)
    g = torch.Generator().manual_seed(3)
    base = torch.randn(DIM, generator=g, dtype=torch.float64)
    items = []
    for i in range(300):
        e = base + 1e-10 * torch.randn(DIM, generator=g, dtype=torch.float64) if i % 3 else base.clone()
        items.append({"text": f"near {i}", "id": f"n{i}", "embedding": e, "t": T0})
    far = torch.randn(700, DIM, generator=g, dtype=torch.float64)
    items += [{"text": f"far {i}", "id": f"f{i}", "embedding": far[i], "t": T0} for i in range(700)]
    mem.add_many(items)
    assert torch.equal(mem.state.search_keys()[1], mem.state.search_keys()[2])  # float32 ties
    q = P.point_at(base + 1e-3 * torch.randn(DIM, generator=g, dtype=torch.float64), 1.0)
    fast, slow = search_both(mem, [q], k=20)
    assert_same(fast, slow, tol=1e-12)


def test_mirror_follows_every_change():
    mem = store(n=1500)
    qs = random_queries(8, seed=5)
    search_both(mem, qs)  # builds the mirror
    mem.add_many([{"text": f"late {i}", "id": f"late{i}", "embedding": qs[i] * 3.0 + 1e-3,
                   "t": NOW} for i in range(4)])
    fast, slow = search_both(mem, qs)
    assert_same(fast, slow)
    assert fast[0][0].record.id == "late0"
    mem.update("late1", text="changed words entirely")  # re-embedded and re-placed
    mem.link("m5", "late2")                               # a subtree re-placed
    mem.remove("m7", cascade=True)                        # rows compacted
    fast, slow = search_both(mem, qs)
    assert_same(fast, slow)
    assert mem.state.mirror_rows == mem.state.n


def test_an_update_rewrites_only_the_rows_it_moves():
    """Metadata, time and validity change no point: the mirror and the HNSW graph stay as
    they are; new text moves only its subtree's rows, which the mirror converts alone."""
    pytest.importorskip("faiss")
    mem = store(n=1500)
    qs = random_queries(6, seed=3)
    mem.build_index("faiss")
    search_both(mem, qs, use_index=True)
    graph, rewrites = mem.searcher.ensure_index(), mem.state.rewrites
    builds, build = [], graph.build
    graph.build = lambda d, *rest: builds.append(len(d)) or build(d, *rest)
    mem.update("m3", meta={"tag": "x"}, t=NOW - timedelta(days=1), valid_until=NOW + timedelta(days=3))
    assert mem.state.rewrites == rewrites and mem.state.mirror_rows == mem.state.n
    assert mem.searcher.ensure_index() is graph and builds == [] and len(graph) == mem.state.n  # not rebuilt
    fast, slow = search_both(mem, qs, use_index=True)
    assert_same(fast, slow)
    mem.state.mirror[0] = 0.0  # a row the next update does not move: left as it is
    kid = mem.add("a child of m4", parent="m4")
    mem.update("m4", text="new words for m4")
    assert mem.state.rewrites == rewrites + 1 and float(mem.state.mirror[0].abs().sum()) == 0.0
    keys = mem.state.search_keys()  # converts the appended row too
    moved = [mem.state.row[i] for i in ("m4", kid)]
    torch.testing.assert_close(keys[moved], mem.state.direction[moved].float(), rtol=0, atol=0)
    assert float(keys[0].abs().sum()) == 0.0
    mem.state.mirror[0] = mem.state.direction[0].float()
    fast, slow = search_both(mem, qs, use_index=True)
    assert_same(fast, slow)
    assert builds == [] and len(graph) == mem.state.n  # moved rows: tombstones and new entries, no rebuild
    assert 0.0 < graph.tombstone_share < 0.01


def test_a_removal_compacts_the_mirror_instead_of_rebuilding_it():
    """Rows before the first removed one are not touched (a sentinel there survives), the
    rows after it move down in step with the float64 column, and the answers stay exact."""
    mem = store(n=1500)
    qs = random_queries(6, seed=4)
    search_both(mem, qs)
    st = mem.state
    mem.state.mirror[0] = 0.0
    gone = mem.remove("m700", cascade=True) + mem.remove("m1499")
    assert st.mirror_rows == st.n == 1500 - len(gone) and float(st.mirror[0].abs().sum()) == 0.0
    torch.testing.assert_close(st.mirror[1: st.n], st.direction[1: st.n].float(), rtol=0, atol=0)
    st.mirror[0] = st.direction[0].float()
    fast, slow = search_both(mem, qs)
    assert_same(fast, slow)
    assert not {r.record.id for row in fast for r in row} & set(gone)


def test_modes_filters_and_time():
    mem = store(n=2500)
    qs = random_queries(6, seed=7)
    for kw in ({"mode": "subtree", "root": "m1"}, {"filters": lambda r: r.id.endswith("3")},
               {"at_time": T0 + timedelta(days=10)}, {"valid_only": True}):
        fast, slow = search_both(mem, qs, **kw)
        assert_same(fast, slow)
        assert any(fast)


def test_single_search_and_copies():
    mem = store(n=1200)
    mem.searcher.mirror_min_rows = 0
    q = random_queries(1, seed=9)[0]
    a = mem.search(q, k=7, touch=False)
    import copy

    twin = copy.deepcopy(mem)
    assert twin.state.mirror is None or twin.state.mirror_rows == 0 or twin.state.mirror_rows == twin.state.n
    twin.searcher.mirror_min_rows = 0
    b = twin.search(q, k=7, touch=False)
    assert [r.record.id for r in a] == [r.record.id for r in b]


def test_float32_store_and_hyperbolic_metric_do_not_use_the_mirror():
    mem = store(n=300, dtype=torch.float32)
    assert mem.state.search_keys().data_ptr() == mem.state.direction.data_ptr()
    mem64 = store(n=300)
    mem64.searcher.mirror_min_rows = 0
    assert not mem64.searcher.mirrored("hyperbolic", None)
    assert mem64.searcher.mirrored("shell", None)


@pytest.mark.parametrize("max_candidates", [16, 4096])
def test_kernel_certificate_and_its_fallback(max_candidates):
    """Many keys equal at float32 and distinct at float64: the certificate fails at small K,
    the candidate count grows, and past ``max_candidates`` the float64 scan answers."""
    g = torch.Generator().manual_seed(11)
    base = torch.nn.functional.normalize(torch.randn(16, generator=g, dtype=torch.float64), dim=0)
    keys = torch.nn.functional.normalize(base + 1e-11 * torch.randn(500, 16, generator=g, dtype=torch.float64), dim=1)
    keys = torch.cat([keys, torch.nn.functional.normalize(torch.randn(3000, 16, generator=g, dtype=torch.float64), dim=1)])
    q = torch.nn.functional.normalize(base + 1e-4 * torch.randn(16, generator=g, dtype=torch.float64), dim=0)[None]
    bias = torch.zeros(keys.shape[0], dtype=torch.float64)
    bias[::7] = -math.inf
    dist = ShellDistance(1.0, 1.0)
    want = exact_topk(q, keys, 12, dist, bias, dist.inverse, max_product=1.0)
    got = mirrored_topk(q, keys.float(), keys, 12, dist, bias, max_candidates=max_candidates)
    assert torch.allclose(got[0], want[0], rtol=0, atol=1e-12)
    # the same keys, up to swaps of keys whose float64 scores differ by less than rounding
    ref = bias - dist(keys @ q[0], None)
    assert (ref[got[1][0]] >= want[0][0, -1] - 1e-12).all()
    assert len(set(got[1][0].tolist())) == 12 and not set(got[1][0].tolist()) & set(range(0, keys.shape[0], 7))


def test_product_error_bounds_float32_products():
    g = torch.Generator().manual_seed(12)
    for d in (8, 256):
        a = torch.nn.functional.normalize(torch.randn(2000, d, generator=g, dtype=torch.float64), dim=1)
        b = torch.nn.functional.normalize(torch.randn(d, generator=g, dtype=torch.float64), dim=0)
        err = ((a.float() @ b.float()).double() - a @ b).abs().max()
        assert 0 < err <= product_error(d)
