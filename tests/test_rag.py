"""The WordNet RAG experiment (experiments/rag): the data split and cache, the store baseline,
the end-to-end Lightning run and its notebook."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import pytest
import torch
from test_notebooks import kernel_for, run_notebook

from experiments.rag.comparison import (
    SYSTEMS,
    build_store,
    evaluate,
    ranking_metrics,
    run_comparison,
    store_scores,
    target_ranks,
)
from experiments.rag.data import build_rag_data, cached_embeddings
from hypermem.data import wordnet
from hypermem.embed import HashingEmbedder

pytestmark = pytest.mark.usefixtures("one_thread")


# -- data ------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def mammals_data(mammals):
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

    n_train = len(mammals_data.train_slots)
    cfg = {"out": str(tmp_path), "train": {"epochs": 3.5 * 64 / n_train, "batch_size": 64},  # 3 batches
           "linear": {"epochs": 5.5 * 64 / n_train}, "model": {"k": 8}, "eval": {"batch_size": 30}}
    summary = run_comparison(cfg, data=mammals_data, log=None)
    assert set(SYSTEMS) <= set(summary["results"])
    for r in summary["results"].values():
        for m in (r["val"], r["test"]):
            assert 0.0 <= m["hits@1"] <= m["hits@10"] <= 1.0 and 0.0 < m["mrr"] <= 1.0
    # (c) has its own budget (linear.epochs), the readout models share train.epochs
    assert summary["steps"] == 3 and summary["linear_steps"] == 5
    for name, n in ((SYSTEMS[2], 5), (SYSTEMS[4], 3), (SYSTEMS[6], 3), (SYSTEMS[7], 3)):
        r = summary["results"][name]
        assert r["steps_run"] == n and r["best_step"] in (0, n) and r["train_cpu_seconds"] > 0
    # a trained system's validation metrics are its restored best weights' (scored once, by _fit)
    Xv, yv = mammals_data.val_emb.float(), mammals_data.val_targets
    for key, name in (("linear", SYSTEMS[2]), ("hyperbolic", SYSTEMS[4]), ("linear_readout", SYSTEMS[7])):
        fresh = evaluate(summary["models"][key].answer_scores, Xv, yv, 30)
        assert fresh == pytest.approx(summary["results"][name]["val"], abs=1e-9)
    d = mammals_data.dim
    assert summary["results"][SYSTEMS[2]]["trainable_params"] == d * d + d + 1  # W, b, temperature
    for name in (SYSTEMS[6], SYSTEMS[7]):  # + the vote's biases
        assert summary["results"][name]["trainable_params"] == d * d + d + 1 + 2
    assert (tmp_path / "results.json").is_file() and "(e) hyperbolic" in (tmp_path / "results.md").read_text()
    for name, n in (("linear", 5), ("hyperbolic", 3)):
        acc = EventAccumulator(str(tmp_path / "tb" / name))
        acc.Reload()
        tags = acc.Tags()["scalars"]
        assert "train/loss" in tags and "val/hits@10" in tags
        losses = [e.value for e in acc.Scalars("train/loss")]
        assert len(losses) == n and all(math.isfinite(v) for v in losses)


@pytest.mark.slow
def test_the_experiment_notebook_runs_from_the_checkout(tmp_path, monkeypatch):
    """experiments/rag/rag_end_to_end.ipynb (the small comparison) runs top to bottom; the
    experiment is not installed, so the kernel finds it through PYTHONPATH (the checkout)."""
    root = Path(__file__).resolve().parents[1]
    monkeypatch.setenv("PYTHONPATH", str(root))
    with kernel_for(sys.executable, tmp_path / "jupyter"):
        outputs = run_notebook(root / "experiments" / "rag" / "rag_end_to_end.ipynb", tmp_path)
    assert not [o for o in outputs if o.get("output_type") == "error"]
    text = "".join(o.get("text", "") for o in outputs if o.get("output_type") == "stream")
    assert "(e) hyperbolic" in text
    if wordnet.available():  # the reader task's section (it needs WordNet's data.noun)
        assert "| reader alone |" in text and "| hyperbolic memory |" in text
