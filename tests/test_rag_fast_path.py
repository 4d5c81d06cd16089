"""The fast training step of the RAG model: the shell selection by one cosine matmul + topk,
and the key cache refreshed only for the rows a sparse step moved."""

from __future__ import annotations

import pytest
import torch

from experiments.rag.comparison import RAGModule, build_store, train_step
from experiments.rag.data import build_rag_data
from hypermem.embed import HashingEmbedder
from hypermem.geometry import poincare as P
from hypermem.nn import HyperbolicRAG

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def data(mammals):
    return build_rag_data("mammal.n.01", n_test=40, n_val=40, seed=2, embedder=HashingEmbedder(dim=24),
                          cache=False, hierarchy=mammals)


def model_for(data, **kw):
    return HyperbolicRAG(build_store(data), data.slot_parent, data.dim, k=16, **kw)


def test_cosine_selection_is_the_memory_search(data):
    model = model_for(data)
    q = model.encoder(data.val_emb[:20]).detach()
    exclude = data.train_slots[:20]
    ex2 = torch.stack([exclude, torch.full_like(exclude, -1)], 1)
    for ex in (None, exclude, ex2):
        fast = model.select(q, 16, ex)
        ref = model.memory.select(q, 16, exclude=ex)
        assert torch.equal(fast.sort(1).values, ref.sort(1).values)
    assert not bool((model.select(q, 16, exclude) == exclude.view(-1, 1)).any())
    # the selection is the top-k of the shell score, a decreasing function of the cosine
    # (shell_distance_from_cosine): the k-th selected score bounds every other slot's
    scores = model.memory.score_all(q)[0]
    sel = model.select(q, 16)
    kth = scores.gather(1, sel).min(1).values
    outside = torch.ones_like(scores, dtype=torch.bool).scatter_(1, sel, False)
    assert bool((scores.masked_fill(~outside, -1e9) <= kth.unsqueeze(1) + 1e-6).all())
    # more slots asked than exist: refused, as HyperbolicMemory.select refuses it (hypermem.nn.read_checks)
    with pytest.raises(ValueError, match=f"k={data.n_slots + 3} is more than the memory's {data.n_slots} slots"):
        model.select(q[:2], data.n_slots + 3)


def test_only_the_moved_rows_are_refreshed_and_the_cache_stays_exact(data):
    torch.manual_seed(0)
    model = model_for(data, learn_keys=True)
    module = RAGModule(model, lr=0.05)
    opts = module.configure_optimizers()
    x, y, own = data.slot_emb[data.train_slots[:32]], data.train_targets()[:32], data.train_slots[:32]
    before = model.memory.keys.detach().clone()
    for _ in range(3):
        train_step(model, opts, x, y, own)
    K = model.memory.keys.detach()
    moved = (K != before).any(1)
    assert 0 < int(moved.sum()) < len(K)  # a sparse step moves some rows, not all
    dirs, radius = model.memory._key_cache[1].clone(), model.memory._key_cache[2].clone()
    stamp = model.memory._key_cache[0]
    model.memory.key_geometry()
    assert model.memory._key_cache[0] == stamp  # after_step left a current cache: no recompute
    assert torch.allclose(dirs, K / K.norm(dim=1, keepdim=True), atol=1e-6)
    assert torch.allclose(radius, P.distance_to_origin(K), atol=1e-5)


def test_frozen_keys_get_no_optimizer_state(data):
    model = model_for(data, learn_keys=False)
    opts = RAGModule(model).configure_optimizers()
    assert len(opts) == 1
    assert all(p is not model.memory.keys for g in opts[0].param_groups for p in g["params"])


def test_the_euclidean_twin_trains_through_the_same_readout(data):
    from experiments.rag.baselines import EuclideanTwin, store_directions

    dirs = store_directions(build_store(data))
    assert torch.allclose(dirs.norm(dim=1), torch.ones(len(dirs)), atol=1e-5)
    twin = EuclideanTwin(dirs, data.slot_parent, k=data.n_slots)
    x, y, own = data.slot_emb[data.train_slots[:8]], data.train_targets()[:8], data.train_slots[:8]
    # k = all slots and nothing excluded: every child votes, so the top-k scores are the full
    # readout's
    cand, scores = twin.train_scores(x, y, torch.full_like(y, -1))
    full = twin.answer_scores(x)
    ok = cand >= 0
    assert torch.allclose(scores[ok], full.gather(1, cand.clamp_min(0))[ok], atol=1e-4)
    cand, scores = twin.train_scores(x, y, own)
    assert torch.equal(cand[:, 0], y) and not bool((cand[:, 1:] == own.view(-1, 1)).any())
    opts = RAGModule(twin).configure_optimizers()
    w = twin.linear.weight.detach().clone()
    train_step(twin, opts, x, y, own)
    assert not torch.equal(twin.linear.weight, w) and not twin.memory.keys.requires_grad


def test_the_linear_readout_scores_the_raw_embeddings_through_the_same_vote(data):
    from experiments.rag.baselines import LinearCosine, linear_readout

    h = linear_readout(data.slot_emb, data.slot_parent, k=data.n_slots)
    assert torch.allclose(h.memory.keys, torch.nn.functional.normalize(data.slot_emb.float(), dim=1))
    assert not h.memory.keys.requires_grad
    x, y = data.slot_emb[data.train_slots[:8]], data.train_targets()[:8]
    # untrained (identity map, biases 0, the same tau): its own scores are (c)'s
    lin = LinearCosine(data.slot_emb)
    own_scores = h.memory.score_all(h.linear(x))[0]
    assert torch.allclose(own_scores, lin.answer_scores(x), atol=1e-4)
    # and its answer is (c)'s scores through the readout: every slot with children gains the vote
    full = h.answer_scores(x)
    assert torch.allclose(full, h.readout.full(lin.answer_scores(x)), atol=1e-4)
    cand, scores = h.train_scores(x, y, torch.full_like(y, -1))
    ok = cand >= 0
    assert torch.allclose(scores[ok], full.gather(1, cand.clamp_min(0))[ok], atol=1e-4)


def test_the_linear_map_masks_its_own_slot_in_place_without_breaking_backward(data):
    from experiments.rag.baselines import LinearCosine

    lin = LinearCosine(data.slot_emb)
    x, y, own = data.slot_emb[data.train_slots[:8]], data.train_targets()[:8], data.train_slots[:8]
    _, s = lin.train_scores(x, y, own)
    assert bool(torch.isinf(s.gather(1, own.view(-1, 1))).all())
    assert int(torch.isinf(s).sum()) == 8
    torch.nn.functional.cross_entropy(s, y).backward()
    assert lin.linear.weight.grad is not None and bool(torch.isfinite(lin.linear.weight.grad).all())
