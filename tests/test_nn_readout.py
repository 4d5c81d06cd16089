"""The hierarchy-aware readout (hypermem.nn.readout.ParentVote): the vote over all slots, the
top-k reads used for training, and the trees it refuses."""

from __future__ import annotations

import math

import pytest
import torch

from hypermem.geometry import PoincareBall
from hypermem.nn import HyperbolicMemory, ParentVote

pytestmark = pytest.mark.usefixtures("one_thread")
BALL = PoincareBall()


def tree_memory(n=60, d=5, seed=0):
    """A random tree (parent of i drawn among 0..i-1) and a memory over it."""
    g = torch.Generator().manual_seed(seed)
    parent = torch.tensor([-1] + [int(torch.randint(0, i, (1,), generator=g)) for i in range(1, n)])
    keys = BALL.random_points(n, d, 2.5, seed=seed, dtype=torch.float64)
    return parent, HyperbolicMemory(keys, None, metric="shell", temperature=0.3)


# -- ParentVote ---------------------------------------------------------------------------------------
def test_parent_vote_is_own_or_best_child():
    parent = torch.tensor([-1, 0, 0, 1])
    s = torch.tensor([[0.0, -1.0, 3.0, 5.0]])
    vote = ParentVote(parent, learn=False)
    assert vote.children_vote(s).tolist() == [[3.0, 5.0, -math.inf, -math.inf]]
    expected = torch.logaddexp(s, torch.tensor([[3.0, 5.0, -1e300, -1e300]]))
    assert torch.allclose(vote.full(s), expected)
    lse = ParentVote(parent, learn=False, children="logsumexp")
    assert torch.allclose(lse.children_vote(s)[0, 0], torch.logsumexp(torch.tensor([-1.0, 3.0]), 0))


@pytest.mark.parametrize("combine", ["logaddexp", "sum"])
def test_topk_readout_matches_the_full_readout_on_its_candidates(combine):
    parent, mem = tree_memory()
    vote = ParentVote(parent, own_bias=0.3, vote_bias=-0.2, combine=combine)
    q = BALL.random_points(6, 5, 1.5, seed=4, dtype=torch.float64)
    full = vote.full(mem.score_all(q)[0])
    cand, scores = vote.topk(mem, q, None, k=60)  # k = all slots: every child votes
    ok = cand >= 0
    assert torch.allclose(scores[ok], torch.gather(full, 1, cand.clamp_min(0))[ok], atol=1e-10)
    cand2, scores2 = vote.topk(mem, q, q.clone(), k=60)  # a separate vote query: same answer
    assert torch.equal(cand, cand2) and torch.allclose(scores, scores2)
    # with a small k: the candidates' scores are lower bounds of their full scores (the
    # vote only counts the k best voters), equal for the own-score part, and no other slot
    # scores above the bound made of the k-th best scores
    k = 8
    cand, scores = vote.topk(mem, q, None, k=k)
    ok = cand >= 0
    exact = torch.gather(full, 1, cand.clamp_min(0))[ok]
    assert bool((scores[ok] <= exact + 1e-10).all())
    assert float((scores[ok] - exact).abs().le(1e-10).double().mean()) > 0.5
    kth = mem.score_all(q)[0].topk(k, dim=1).values[:, -1]
    a, b = vote.bias.detach()
    bound = torch.logaddexp(kth + a, kth + b) if combine == "logaddexp" else a.exp() * kth + b.exp() * kth
    outside = torch.ones_like(full, dtype=torch.bool)
    outside[torch.arange(6).unsqueeze(1).expand_as(cand)[ok], cand[ok]] = False
    assert bool(((full.detach() <= bound.unsqueeze(1) + 1e-9) | ~outside).all())


def test_topk_readout_training_signal_is_finite_and_reaches_everything():
    parent, mem = tree_memory()
    vote = ParentVote(parent)
    q = BALL.random_points(4, 5, 1.5, seed=5, dtype=torch.float64).requires_grad_()
    targets = torch.tensor([0, 3, 7, 11])
    cand, scores = vote.topk(mem, q, q * 0.9, k=5, targets=targets, exclude=torch.tensor([1, 2, 3, 4]))
    assert torch.equal(cand[:, 0], targets)
    assert not bool((cand[:, 1:] == torch.tensor([1, 2, 3, 4]).view(-1, 1)).any())
    loss = torch.nn.functional.cross_entropy(scores, torch.zeros(4, dtype=torch.long))
    loss.backward()
    for g in (q.grad, mem.keys.grad, mem.log_temperature.grad, vote.bias.grad):
        assert g is not None and bool(torch.isfinite(g).all())
    assert float(vote.bias.grad.abs().sum()) > 0


def test_parent_vote_refuses_bad_trees():
    with pytest.raises(ValueError, match="own parent"):
        ParentVote(torch.tensor([-1, 1]))
    with pytest.raises(ValueError, match="in \\[0, 1\\]"):
        ParentVote(torch.tensor([-1, 5]))
    with pytest.raises(ValueError, match="combine"):
        ParentVote(torch.tensor([-1, 0]), combine="mean")
