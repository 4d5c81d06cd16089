"""The hierarchy-aware readout, the RAG data split and cache, and the end-to-end Lightning run."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import pytest
import torch

from hypermem.embed import HashingEmbedder
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


# -- data ------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def mammals_data(mammals):
    from experiments.rag.data import build_rag_data

    return build_rag_data("mammal.n.01", n_test=60, seed=1, embedder=HashingEmbedder(dim=32), cache=False,
                          hierarchy=mammals)


def test_split_by_synset_queries_not_in_memory_answers_are_parents(mammals_data, mammals):
    d = mammals_data
    h = mammals
    parent_of = {c: p for p, c in h.tree}
    assert d.n_slots + d.n_test + d.n_val == len(h.nodes) and d.n_test == d.n_val == 60
    assert not set(d.test_names) & set(d.slot_names)
    assert [d.slot_names[t] for t in d.val_target.tolist()] == [parent_of[n] for n in d.val_names]
    assert [d.slot_names[t] for t in d.test_target.tolist()] == [parent_of[n] for n in d.test_names]
    assert all(p < i for i, p in enumerate(d.slot_parent.tolist()))  # parents first
    kids = d.children()
    assert all(not kids[s] for s in d.train_slots.tolist())  # training queries are leaves
    assert torch.equal(d.train_targets(), d.slot_parent[d.train_slots])
    assert d.test_texts[0].startswith(d.test_names[0].split(".")[0].replace("_", " ") + ": ")


def test_embedding_cache_is_reused_and_serves_subsets(tmp_path):
    from experiments.rag.data import cached_embeddings

    calls = []

    class Counting(HashingEmbedder):
        def embed(self, texts):
            calls.append(len(texts))
            return super().embed(texts)

    texts = [f"text number {i}" for i in range(20)]
    emb = Counting(dim=16)
    a = cached_embeddings(texts, emb, cache=tmp_path)
    b = cached_embeddings(texts, emb, cache=tmp_path)
    sub = cached_embeddings(texts[5:9], emb, cache=tmp_path)
    assert calls == [20] and torch.equal(a, b) and torch.equal(sub, a[5:9])
    assert len(list((tmp_path / "embeddings").glob("*.npy"))) == 1


# -- baselines and the Lightning run --------------------------------------------------------------------
def test_ranks_and_the_store_baseline_score_like_memory_search(mammals_data):
    from experiments.rag.comparison import build_store, ranking_metrics, store_scores, target_ranks

    s = torch.tensor([[0.1, 0.5, 0.3], [0.9, 0.2, 0.1]])
    r = target_ranks(s, torch.tensor([2, 0]))
    assert r.tolist() == [2, 1]
    assert ranking_metrics(r) == {"hits@1": 0.5, "hits@10": 1.0, "mrr": 0.75}
    store = build_store(mammals_data)
    x = mammals_data.test_emb[:2].double()
    scores = store_scores(store)(x)
    hits = store.search(store.ball.point_at(x[0], store.base_depth), k=3, touch=False)
    top = scores[0].topk(3)
    assert [store.ids[i] for i in top.indices.tolist()] == [h.record.id for h in hits]
    assert torch.allclose(top.values.double(), torch.tensor([h.score for h in hits], dtype=torch.float64), atol=1e-5)


def test_end_to_end_lightning_run_writes_tensorboard_events(mammals_data, tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from experiments.rag.comparison import SYSTEMS, run_comparison

    cfg = {"out": str(tmp_path), "train": {"max_steps": 3, "batch_size": 64},
           "model": {"k": 8}, "eval": {"batch_size": 30}}
    summary = run_comparison(cfg, data=mammals_data, log=None)
    assert set(SYSTEMS) <= set(summary["results"])
    for r in summary["results"].values():
        for m in (r["val"], r["test"]):
            assert 0.0 <= m["hits@1"] <= m["hits@10"] <= 1.0 and 0.0 < m["mrr"] <= 1.0
    for name in (SYSTEMS[2], SYSTEMS[4]):
        r = summary["results"][name]
        assert r["steps_run"] == 3 and r["best_step"] in (0, 3) and r["train_cpu_seconds"] > 0
    d = mammals_data.dim
    assert summary["results"][SYSTEMS[2]]["trainable_params"] == d * d + d + 1  # W, b, temperature
    assert summary["results"][SYSTEMS[6]]["trainable_params"] == d * d + d + 1 + 2  # + the vote's biases
    assert (tmp_path / "results.json").is_file() and "(e) hyperbolic" in (tmp_path / "results.md").read_text()
    for name in ("linear", "hyperbolic"):
        acc = EventAccumulator(str(tmp_path / "tb" / name))
        acc.Reload()
        tags = acc.Tags()["scalars"]
        assert "train/loss" in tags and "val/hits@10" in tags
        losses = [e.value for e in acc.Scalars("train/loss")]
        assert len(losses) == 3 and all(math.isfinite(v) for v in losses)


@pytest.mark.slow
def test_the_experiment_notebook_runs_from_the_checkout(tmp_path, monkeypatch):
    """experiments/rag/rag_end_to_end.ipynb (the small comparison) runs top to bottom; the
    experiment is not installed, so the kernel finds it through PYTHONPATH (the checkout)."""
    from test_notebooks import kernel_for, run_notebook

    root = Path(__file__).resolve().parents[1]
    monkeypatch.setenv("PYTHONPATH", str(root))
    with kernel_for(sys.executable, tmp_path / "jupyter"):
        outputs = run_notebook(root / "experiments" / "rag" / "rag_end_to_end.ipynb", tmp_path)
    assert not [o for o in outputs if o.get("output_type") == "error"]
    assert "(e) hyperbolic" in "".join(o.get("text", "") for o in outputs if o.get("output_type") == "stream")
