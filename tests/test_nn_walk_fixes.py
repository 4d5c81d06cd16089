"""Fixes from a PyTorch user's walk through ``hypermem.nn``: a metric assigned after
construction, ``HyperbolicRAG``'s forward, optimizers and argument checks, losses on empty
batches and bad inputs, and ``BallEncoder``'s repr."""

from __future__ import annotations

import geoopt
import pytest
import torch
import torch.nn.functional as F

from hypermem import Memory
from hypermem.nn import (
    BallEncoder,
    HyperbolicMemory,
    HyperbolicRAG,
    entailment_cone_loss,
    hyperbolic_info_nce,
    poincare_ranking_loss,
)


def _memory(metric="hyperbolic"):
    g = torch.Generator().manual_seed(0)
    K = torch.randn(8, 4, generator=g, dtype=torch.float64)
    K = 0.6 * K / K.norm(dim=1, keepdim=True)
    return HyperbolicMemory(K, torch.randn(8, 3, generator=g, dtype=torch.float64), metric=metric)


@pytest.fixture(scope="module")
def store():
    mem = Memory()
    animals = mem.add("animals")
    for t in ["dogs are loyal", "cats purr", "parrots talk"]:
        mem.add(t, parent=animals)
    return mem


PARENT = torch.tensor([-1, 0, 0, 0])


def _feats(store):
    return store.embedder.embed(["a loyal dog", "a purring cat"]).float()


# -- 1. metric assignment --------------------------------------------------------------------
@pytest.mark.parametrize("bad", ["Shell", "hyperbolc", None, 1])
def test_assigning_an_unknown_metric_is_refused_like_the_constructor(bad):
    m = _memory()
    with pytest.raises(ValueError, match="unknown metric"):
        m.metric = bad
    assert m.metric == "hyperbolic"


def test_full_and_topk_reads_use_the_assigned_metric():
    m, q = _memory("hyperbolic"), 0.3 * torch.eye(4, dtype=torch.float64)[:2]
    m.metric = "shell"
    ref = _memory("shell")
    full, top = m(q), m(q, k=len(m))
    torch.testing.assert_close(full.distances, ref(q).distances)
    torch.testing.assert_close(top.distances, full.distances.gather(1, top.indices))


def test_rag_refuses_a_metric_typo(store):
    with pytest.raises(ValueError, match="hyperbolc"):
        HyperbolicRAG(store, PARENT, store.embedder.dim, metric="hyperbolc")


# -- 2. forward ------------------------------------------------------------------------------
def test_rag_forward_is_the_answer_scores(store):
    rag, x = HyperbolicRAG(store, PARENT, store.embedder.dim), _feats(store)
    out = rag(x)
    assert out.shape == (2, 4)
    torch.testing.assert_close(out, rag.answer_scores(x))


# -- 3. optimizers ---------------------------------------------------------------------------
def _step(rag, opts, store):
    x, targets = _feats(store), torch.tensor([1, 2])
    _, scores = rag.train_scores(x, targets, None)
    loss = F.cross_entropy(scores, torch.zeros_like(targets))
    for o in opts:
        o.zero_grad()
    loss.backward()
    before = rag.memory.keys.detach().clone()
    for o in opts:
        o.step()
    rag.after_step()
    return before


def test_rag_optimizers_train_sparse_keys(store):
    rag = HyperbolicRAG(store, PARENT, store.embedder.dim)
    assert rag.sparse_parameters() == [rag.memory.keys]
    assert all(p is not rag.memory.keys for p in rag.dense_parameters())
    opts = rag.optimizers(lr=1e-2)
    assert [type(o) for o in opts] == [geoopt.optim.RiemannianAdam, geoopt.optim.SparseRiemannianAdam]
    before = _step(rag, opts, store)
    assert not torch.equal(before, rag.memory.keys.detach())


def test_rag_with_dense_grads_takes_one_riemannian_adam(store):
    rag = HyperbolicRAG(store, PARENT, store.embedder.dim, sparse_grad=False)
    assert rag.sparse_parameters() == []
    before = _step(rag, [geoopt.optim.RiemannianAdam(rag.parameters(), lr=1e-2)], store)
    assert not torch.equal(before, rag.memory.keys.detach())


# -- 4. argument checks at construction ------------------------------------------------------
def test_rag_refuses_a_parent_of_the_wrong_length(store):
    with pytest.raises(ValueError, match="parent must have one entry per slot of the store \\(4\\), got 2"):
        HyperbolicRAG(store, torch.tensor([-1, 0]), store.embedder.dim)


@pytest.mark.parametrize("k, msg", [(0, "positive integer"), (5, "k=5 is more than the store's 4 slots")])
def test_rag_refuses_a_bad_k_at_construction(store, k, msg):
    with pytest.raises(ValueError, match=msg):
        HyperbolicRAG(store, PARENT, store.embedder.dim, k=k)


def test_rag_default_k_is_clamped_to_the_slots(store):
    rag = HyperbolicRAG(store, PARENT, store.embedder.dim)
    assert rag.k == 4
    cand, scores = rag.train_scores(_feats(store), torch.tensor([1, 2]), None)
    assert torch.isfinite(scores[:, 0]).all()


# -- 5. empty batches ------------------------------------------------------------------------
def test_ranking_and_cone_losses_refuse_an_empty_mean():
    q = 0.3 * torch.eye(4, dtype=torch.float64)
    with pytest.raises(ValueError, match="poincare_ranking_loss got an empty batch"):
        poincare_ranking_loss(q[:0], q[:0], q[:0].view(0, 2, 2).repeat(1, 1, 2))
    with pytest.raises(ValueError, match="entailment_cone_loss got an empty batch"):
        entailment_cone_loss(q[:0], q[:0])
    assert float(poincare_ranking_loss(q[:0], q[:0], torch.zeros(0, 2, 4, dtype=torch.float64),
                                       reduction="sum")) == 0.0


# -- 6. bad temperatures and points outside the ball -----------------------------------------
@pytest.mark.parametrize("t", [0.0, -1.0, float("nan"), float("inf"), torch.tensor(0.0, dtype=torch.float64)])
def test_info_nce_refuses_a_bad_temperature(t):
    q, K = 0.3 * torch.eye(4, dtype=torch.float64)[:2], 0.3 * torch.eye(4, dtype=torch.float64)
    with pytest.raises(ValueError, match="temperature must be a finite number > 0"):
        hyperbolic_info_nce(q, K, torch.tensor([0, 1]), temperature=t)


def test_losses_refuse_points_outside_the_ball_by_name():
    q, K = 0.3 * torch.eye(4, dtype=torch.float64)[:2], 0.3 * torch.eye(4, dtype=torch.float64)
    with pytest.raises(ValueError, match="queries row #0 is not inside the Poincaré ball"):
        hyperbolic_info_nce(q * 10, K, torch.tensor([0, 1]))
    with pytest.raises(ValueError, match="u row #0 is not inside"):
        poincare_ranking_loss(q * 10, q, K[:4].view(2, 2, 4))
    neg = K.view(2, 2, 4).clone()
    neg[0, 1, 0] = float("nan")
    with pytest.raises(ValueError, match="negatives row #1 has NaN"):
        poincare_ranking_loss(q, q, neg)
    loss = hyperbolic_info_nce(q, K, torch.tensor([0, 1]), temperature=torch.tensor(0.5, dtype=torch.float64))
    assert torch.isfinite(loss)


# -- 7. repr ---------------------------------------------------------------------------------
@pytest.mark.parametrize("depth, shown", [(None, "depth=None"), (2.0, "depth=2"),
                                          ("learned", "depth='learned', min_depth=0.05")])
def test_ballencoder_repr_shows_what_the_constructor_takes(depth, shown):
    assert shown in repr(BallEncoder(16, 8, depth=depth))
