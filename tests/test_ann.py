"""search(use_index=True) on faiss HNSW over the directions: candidates re-scored exactly,
grown until the bias bound holds; the index grows on appends; its recall is measured."""

import copy
from datetime import timedelta

import pytest
import torch
from mirror_helpers import NOW, random_store

from hypermem.index.ann import DirectionIndex
from hypermem.index.bands import BandedDirectionIndex

pytest.importorskip("faiss")

DIM = 24


def store(n=2000, seed=0, **kw):
    return random_store(n, DIM, seed, hours=700.0, **kw)


def ids(results):
    return [[r.record.id for r in res] for res in results]


def test_exact_graph_gives_the_exact_answer_under_a_strong_time_term():
    """With a beam as wide as the store the graph is exact; the bias bound then makes the
    re-scored answer the exact one even where recent memories outrank close ones."""
    mem = store(time_coef=3.0, depth_bias=0.3)
    mem.build_index("faiss", ef_search=4096)
    qs = list(mem.points[:12] * 0.9)
    exact = mem.search_batch(qs, k=10, touch=False, use_index=False)
    approx = mem.search_batch(qs, k=10, touch=False, use_index=True, oversample=1)
    assert ids(approx) == ids(exact)
    for a, e in zip(approx, exact):  # the candidates' own weights and bias: the same scores
        got = [x for r in a for x in (r.score, r.time_weight, r.depth)]
        assert got == pytest.approx([x for r in e for x in (r.score, r.time_weight, r.depth)], abs=1e-12)
    # the answer is not the cosine order: the time and depth terms moved memories in
    mem.time_coef, mem.depth_bias = 0.0, 0.0
    assert ids(mem.search_batch(qs, k=10, touch=False, use_index=False)) != ids(exact)


def test_recall_estimate_is_reported_and_stored():
    mem = store()
    index = mem.build_index("faiss", ef_search=16, hnsw_m=8)
    assert isinstance(index, BandedDirectionIndex) and len(index) == 2000
    r = mem.index_recall(sample=50, k=10)
    assert 0.0 < r <= 1.0
    assert index.recall_estimate["recall"] == r and index.recall_estimate["queries"] == 50
    wide = mem.build_index("faiss", ef_search=1024)
    assert mem.index_recall(sample=50, k=10) >= r
    assert wide.recall_estimate["ef_search"] == 1024
    mem.build_index("torch")
    assert mem.index_recall(sample=20) == 1.0


def test_index_grows_on_appends_and_rebuilds_after_other_changes():
    mem = store(n=1000)
    index = mem.build_index("faiss", ef_search=256)
    new = torch.randn(5, DIM, generator=torch.Generator().manual_seed(9), dtype=torch.float64)
    mem.add_many({"text": f"new {i}", "id": f"new{i}", "embedding": new[i], "t": NOW} for i in range(5))
    q = mem.point("new3") * 0.99
    assert mem.search(q, k=1, touch=False, use_index=True)[0].record.id == "new3"
    assert len(index) == 1005 and mem.searcher.index is index
    mem.remove("new3")
    assert mem.search(q, k=1, touch=False, use_index=True)[0].record.id != "new3"
    assert len(index) == 1004


def test_bad_settings_and_copies():
    with pytest.raises(ValueError, match="ef_search"):
        DirectionIndex(ef_search=0)
    mem = store(n=500)
    mem.build_index("faiss")
    with pytest.raises(ValueError, match="sample"):
        mem.index_recall(sample=0)
    q = mem.points[:3]
    twin = copy.deepcopy(mem)
    assert ids(twin.search_batch(list(q), k=5, touch=False, use_index=True)) == \
        ids(mem.search_batch(list(q), k=5, touch=False, use_index=True))


def exact_and_banded(mem, qs, k=10, **kw):
    exact = mem.search_batch(qs, k=k, touch=False, use_index=False, **kw)
    approx = mem.search_batch(qs, k=k, touch=False, use_index=True, oversample=1, **kw)
    return exact, approx


@pytest.mark.parametrize("decay", ["half_life", "ebbinghaus", "validity", "custom", "negative"])
def test_bands_with_exact_graphs_give_the_exact_answer(decay):
    """Bands of time, each graph exact (a beam as wide as the band): the per-band bias bounds
    keep the answer exact for every built-in policy, a product, a custom policy (bound 1) and a
    negative time coefficient, where recent memories outrank close ones."""
    from hypermem.temporal import Ebbinghaus, HalfLife, Product, ValidityWindow

    mem = store(time_coef=3.0, depth_bias=0.3)
    if decay == "ebbinghaus":
        mem.decay = Ebbinghaus(stability_hours=48.0, boost_per_access=1.0)
        mem.touch([f"m{i}" for i in range(0, 2000, 7)])
    elif decay == "validity":
        mem.decay = Product(HalfLife(72), ValidityWindow(outside_weight=0.01))
        for i in range(0, 2000, 5):
            mem.update(f"m{i}", valid_until=NOW - timedelta(hours=1))
    elif decay == "custom":
        mid = float(mem.state.time[:2000].median())

        class Recent:  # a step in time: weight 1 for the newer half, 0.05 for the older
            def weight(self, now, times, access, vf, vu):
                return torch.where(times > mid, 1.0, 0.05).double()
        mem.decay = Recent()
    elif decay == "negative":
        mem.time_coef = -0.5
    index = mem.build_index("faiss", ef_search=4096, bands=5)
    assert index.n_bands == 5 and sum(index.band_size(b) for b in range(5)) == 2000
    qs = list(mem.points[:12] * 0.9)
    exact, approx = exact_and_banded(mem, qs)
    assert ids(approx) == ids(exact)
    for a, e in zip(approx, exact):  # a query on a memory's own direction: a cosine one ulp
        # below 1 in one product order gives a distance of 2.5e-8 (d grows as sqrt(1 - s))
        assert [r.score for r in a] == pytest.approx([r.score for r in e], abs=1e-7)


def test_bands_follow_appends_and_edits_of_time():
    """Appended rows join the band of their time (a new band opens once the newest holds twice
    its share of the rows); an update that makes an old memory recent moves its band's bound with it."""
    mem = store(n=1200, time_coef=4.0)
    index = mem.build_index("faiss", ef_search=4096, bands=3)
    index.min_band_rows = 100
    assert [index.band_size(b) for b in range(3)] == [400, 400, 400]
    newest_before = index.extremes("time")[0][-1].item()
    g = torch.Generator().manual_seed(5)
    mem.add_many({"text": f"late {i}", "id": f"late{i}", "t": NOW,
                  "embedding": torch.randn(DIM, generator=g, dtype=torch.float64)} for i in range(1200))
    q = mem.point("late7") * 0.95
    assert mem.search(q, k=1, touch=False, use_index=True)[0].record.id == "late7"
    assert mem.searcher.index is index and index.n_bands == 3 and index.band_size(2) == 1600
    mem.add_many({"text": f"later {i}", "id": f"later{i}", "t": NOW,
                  "embedding": torch.randn(DIM, generator=g, dtype=torch.float64)} for i in range(10))
    mem.search(q, k=1, touch=False, use_index=True)
    assert index.n_bands == 4 and index.band_size(3) == 10 and index.extremes("time")[0][-1].item() > newest_before
    # the oldest memory, made recent: its band (0) now bounds a recent time, the answer stays exact
    oldest = min(mem.state.records.values(), key=lambda r: r.t).id
    mem.update(oldest, t=NOW)
    qs = [mem.point(oldest) * 0.9, *list(mem.points[:5] * 0.9)]
    exact, approx = exact_and_banded(mem, qs)
    assert ids(approx) == ids(exact) and exact[0][0].record.id == oldest
    assert mem.searcher.index is index  # no point moved: the graphs were kept
    band = int(index.band_of[mem.state.row[oldest]])
    assert band == 0 and index.extremes("time")[0][0].item() == NOW.timestamp()


def test_band_settings_and_auto():
    from hypermem.index.bands import BAND_MIN_ROWS

    with pytest.raises(ValueError, match="bands"):
        BandedDirectionIndex(bands=0)
    mem = store(n=300)
    assert mem.build_index("faiss").n_bands == 1  # "auto": below BAND_MIN_ROWS, one graph
    assert BAND_MIN_ROWS >= 1000
    with pytest.raises(KeyError, match="keeps no column"):
        mem.searcher.index.extremes("nothing")
    one = mem.build_index("faiss", bands=1, ef_search=512)
    qs = list(mem.points[:4] * 0.9)
    exact, approx = exact_and_banded(mem, qs, k=5)
    assert ids(exact) == ids(approx) and one.n_bands == 1


def test_bands_under_a_lexical_term_take_each_band_bound_from_the_whole_bias():
    """A hybrid text query adds a lexical term to the bias: the bands' bounds then come from
    the whole bias vector, and exact graphs give the exact hybrid answer."""
    mem = store(n=1500, time_coef=2.0)
    mem.build_index("faiss", ef_search=4096, bands=4)
    qs = ["memory 17", "memory 1203", "memory 5 and memory 900"]
    exact = mem.search_batch(qs, k=8, touch=False, use_index=False, hybrid=2.0)
    approx = mem.search_batch(qs, k=8, touch=False, use_index=True, hybrid=2.0, oversample=1)
    assert ids(approx) == ids(exact)
    plain = mem.search_batch(qs, k=8, touch=False, use_index=False, hybrid=0.0)
    assert ids(plain) != ids(exact)  # the lexical term moved memories in


def test_a_search_for_k_candidates_keeps_a_beam_of_twice_k():
    """The growth rule trusts a graph's answer down to its last candidate: the beam is at least
    2k (``BEAM_PER_CANDIDATE``), so ``ef_search`` below it changes nothing, and a beam of only k
    (hard, near-uniform data) answers differently."""
    from hypermem.index.ann import BEAM_PER_CANDIDATE

    g = torch.Generator().manual_seed(3)
    x = torch.nn.functional.normalize(torch.randn(6000, 64, generator=g), dim=1)
    q = torch.nn.functional.normalize(torch.randn(40, 64, generator=g), dim=1)
    index = DirectionIndex(hnsw_m=8, ef_construction=16, ef_search=1).build(x)
    k = 20
    low = index.search(q, k)[1]
    index.ef_search = BEAM_PER_CANDIDATE * k
    assert torch.equal(index.search(q, k)[1], low)
    index.ef_search = 4 * k
    better = index.search(q, k)[1]
    exact = (q @ x.T).topk(k).indices

    def hits(found):
        return sum(len(set(a) & set(e)) for a, e in zip(found.tolist(), exact.tolist()))

    assert hits(low) <= hits(better)
