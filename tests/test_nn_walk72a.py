"""Walk 72 (advanced PyTorch) findings on the torch layers: ParentVote's second derivatives,
HyperbolicRAG under torch.compile, CosineKeys called as a layer, gradient clipping with sparse
gradients."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from hypermem import Memory
from hypermem.nn import (
    CosineKeys,
    HyperbolicMemory,
    HyperbolicRAG,
    ParentVote,
    clip_grad_norm_,
    memory_info_nce,
)

pytestmark = pytest.mark.usefixtures("one_thread")

TREE = torch.tensor([-1, 0, 0, 1, 1, 2, 2, 0])  # slots 3..7 have no children


def _hvp(f, x):
    g, = torch.autograd.grad(f(x), x, create_graph=True)
    h, = torch.autograd.grad((g * torch.randn_like(g)).sum(), x)
    return g, h


@pytest.mark.parametrize("children", ["max", "logsumexp"])
def test_parent_vote_has_finite_second_derivatives_for_slots_without_children(children):
    torch.manual_seed(0)
    for combine in ("logaddexp", "sum"):
        pv = ParentVote(TREE, combine=combine, children=children, own_bias=0.3, vote_bias=-0.2).double()
        a = torch.randn(2, 8, dtype=torch.float64, requires_grad=True)
        g, h = _hvp(lambda x, pv=pv: pv.full(x).logsumexp(1).sum(), a)
        assert torch.isfinite(g).all() and torch.isfinite(h).all(), combine
        assert torch.autograd.gradgradcheck(lambda x, pv=pv: pv.full(x, x.flip(1)), (a,)), combine


def test_parent_vote_second_derivatives_stay_finite_when_own_and_vote_scores_are_far_apart():
    # torch.logaddexp's double backward multiplies by exp(|x - y|): NaN once the gap passes ~88 in float32
    pv = ParentVote(torch.tensor([-1, 0, 0, 1]))
    a = torch.tensor([[0.0, 0.0, 200.0, 0.0]], requires_grad=True)
    g, h = _hvp(lambda x: pv.full(x).logsumexp(1).sum(), a)
    assert torch.isfinite(h).all()


def test_parent_vote_values_gradients_and_hessian_are_the_readout_formulas():
    torch.manual_seed(1)
    pv = ParentVote(TREE, own_bias=0.3, vote_bias=-0.2).double()
    own = torch.randn(3, 8, dtype=torch.float64, requires_grad=True)
    vote = torch.randn(3, 8, dtype=torch.float64, requires_grad=True)
    a, b = pv.bias.detach().tolist()
    expect = own + a  # no children: the own score alone
    cols = []
    for p in range(8):
        ch = (TREE == p).nonzero().squeeze(1)
        cols.append(torch.logaddexp(own[:, p] + a, vote[:, ch].amax(1) + b) if len(ch) else expect[:, p])
    expect = torch.stack(cols, 1)
    got = pv.full(own, vote)
    assert torch.allclose(got, expect, atol=1e-12)
    cv = pv.children_vote(vote)
    assert torch.isneginf(cv[:, 3:]).all() and torch.equal(cv[:, 1], vote[:, 3:5].amax(1))
    w = torch.randn(3, 8, dtype=torch.float64)
    g1 = torch.autograd.grad((got * w).sum(), (own, vote), create_graph=True)
    g2 = torch.autograd.grad((expect * w).sum(), (own, vote), create_graph=True)
    assert all(torch.allclose(x, y, atol=1e-12) for x, y in zip(g1, g2))
    v = torch.randn(3, 8, dtype=torch.float64)
    h1 = torch.autograd.grad((g1[0] * v).sum() + (g1[1] * v).sum(), (own, vote))
    h2 = torch.autograd.grad((g2[0] * v).sum() + (g2[1] * v).sum(), (own, vote))
    assert all(torch.allclose(x, y, atol=1e-10) for x, y in zip(h1, h2))  # was NaN in the childless columns
    assert set(pv.state_dict()) == {"parent", "bias"}  # checkpoints unchanged


def _rag(**kw):
    store = Memory()
    a = store.add("animals")
    for t in ["dogs are loyal", "cats purr", "parrots talk", "cows moo"]:
        store.add(t, parent=a)
    rag = HyperbolicRAG(store, torch.tensor([-1, 0, 0, 0, 0]), store.embedder.dim, k=3, **kw)
    x = store.embedder.embed(["a loyal dog", "a purring cat"]).float()
    return rag, x, torch.tensor([1, 2])


@pytest.mark.slow
def test_hyperbolic_rag_traces_as_one_graph_after_an_eager_call():
    rag, x, tg = _rag()

    class TrainScores(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.rag = rag

        def forward(self, x, t):
            return self.rag.train_scores(x, t, None)[1]

    ts = TrainScores()
    ts(x, tg)  # builds the memory's key cache (its stamp compares data_ptr)
    torch._dynamo.reset()
    ex = torch._dynamo.explain(ts)(x, tg)
    assert ex.graph_break_count == 0, [str(r.reason)[:100] for r in ex.break_reasons]
    torch._dynamo.reset()
    ex = torch._dynamo.explain(rag)(x)  # ParentVote.children_vote: no nonzero
    assert ex.graph_break_count == 0, [str(r.reason)[:100] for r in ex.break_reasons]
    torch._dynamo.reset()


def test_cosine_keys_called_as_a_layer_names_its_methods_and_still_scripts():
    ck = CosineKeys(torch.eye(4))
    with pytest.raises(NotImplementedError, match=r"CosineKeys.*select.*score_all.*score_slots"):
        ck(torch.randn(2, 4))
    torch.jit.script(ck)


def _dense_grads(params):
    return [p.grad.to_dense() if p.grad.is_sparse else p.grad.clone() for p in params if p.grad is not None]


def test_clip_grad_norm_takes_the_sparse_gradients_of_hyperbolic_rag():
    rag, x, tg = _rag()
    cand, scores = rag.train_scores(torch.cat([x, x]), torch.cat([tg, tg]), None)  # rows read twice
    F.cross_entropy(scores, torch.zeros(4, dtype=torch.long)).mul(50).backward()
    assert rag.memory.keys.grad.is_sparse
    before = _dense_grads(rag.parameters())
    norm = torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g) for g in before]))
    got = clip_grad_norm_(rag.parameters(), 0.1)
    assert torch.allclose(got, norm)
    after = _dense_grads(rag.parameters())
    coef = 0.1 / (norm + 1e-6)
    assert norm > 0.1 and all(torch.allclose(a, b * coef, atol=1e-7) for a, b in zip(after, before))
    assert rag.memory.keys.grad.is_sparse  # SparseRiemannianAdam still takes it
    for o in rag.optimizers():
        o.step()


def test_clip_grad_norm_matches_torch_on_a_sparse_grad_memory():
    def grads(sparse, clip):
        torch.manual_seed(0)
        keys = 0.9 * F.normalize(torch.randn(30, 4), dim=1) * torch.rand(30, 1)
        mem = HyperbolicMemory(keys, torch.randn(30, 3), learn_values=True, sparse_grad=sparse)
        q = 0.3 * torch.randn(16, 4)
        (mem(q, k=5).read.sum() + memory_info_nce(mem, q, torch.randint(0, 30, (16,)), k=5)).backward()
        return clip(mem.parameters(), 0.5), _dense_grads(mem.parameters())

    n1, g1 = grads(False, torch.nn.utils.clip_grad_norm_)
    n2, g2 = grads(True, clip_grad_norm_)
    assert torch.allclose(n1, n2)
    assert all(torch.allclose(a, b, atol=1e-6) for a, b in zip(g1, g2))
