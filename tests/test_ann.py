"""search(use_index=True) on faiss HNSW over the directions: candidates re-scored exactly,
grown until the bias bound holds; the index grows on appends; its recall is measured."""

import copy

import pytest
import torch
from mirror_helpers import NOW, random_store

from hypermem.index.ann import DirectionIndex

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
    assert isinstance(index, DirectionIndex) and len(index) == 2000
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
