"""The honest protocol of the WordNet RAG benchmark: ties against the answer, every accepted
answer, a validation split carved from the training leaves, early stopping on validation."""

from __future__ import annotations

import pytest
import torch

from experiments.rag.comparison import LinearCosine, RAGModule, ranking_metrics, target_ranks
from experiments.rag.data import RAGDataModule, accepted_answers, build_rag_data
from hypermem.data.wordnet import Hierarchy, load_mammals
from hypermem.embed import HashingEmbedder
from hypermem.nn import ParentVote

pytestmark = pytest.mark.usefixtures("one_thread")


def mammals(n_test=50, n_val=50, seed=0):
    return build_rag_data("mammal.n.01", n_test=n_test, n_val=n_val, seed=seed, embedder=HashingEmbedder(dim=16),
                          cache=False, hierarchy=load_mammals())


# -- ranks ----------------------------------------------------------------------------------------
def test_a_tie_counts_against_the_target():
    s = torch.tensor([[1.0, 1.0, 0.2], [0.3, 0.3, 0.3]])
    assert target_ranks(s, torch.tensor([0, 2])).tolist() == [2, 3]
    assert target_ranks(s, torch.tensor([1, 0])).tolist() == [2, 3]
    # the max-rule sibling vote: a parent always ties with its best child, and loses the tie
    vote = ParentVote(torch.tensor([-1, 0, 0]), learn=False)
    cos = torch.tensor([[0.1, 0.9, 0.3]])
    sib = torch.maximum(cos, vote.children_vote(cos))
    assert sib[0, 0] == sib[0, 1] == cos[0, 1]
    assert target_ranks(sib, torch.tensor([0])).tolist() == [2]
    assert ranking_metrics(target_ranks(sib, torch.tensor([0])))["hits@1"] == 0.0


def test_every_accepted_answer_counts_and_the_others_do_not_outrank_it():
    s = torch.tensor([[0.5, 0.9, 0.7, 0.1], [0.5, 0.9, 0.7, 0.1]])
    # row 0 accepts slots 2 and 1: the best (1) ranks first; row 1 accepts 2 and 0 (padded
    # with -1): 2 is best and only slot 1 is above it
    t = torch.tensor([[2, 1], [0, 2]])
    assert target_ranks(s, t).tolist() == [1, 2]
    assert target_ranks(s, torch.tensor([[2, -1], [3, -1]])).tolist() == [2, 4]
    # the other accepted answer never counts against the best one, even in a tie
    tie = torch.tensor([[0.4, 0.4, 0.4]])
    assert target_ranks(tie, torch.tensor([[0, 1]])).tolist() == [2]
    assert target_ranks(tie, torch.tensor([[0, 1, 2]])).tolist() == [1]


def test_ranks_equal_the_definition_on_random_ties_and_repeated_answers():
    g = torch.Generator().manual_seed(0)
    scores = torch.randint(0, 4, (64, 30), generator=g).float()  # many ties
    targets = torch.randint(-1, 30, (64, 3), generator=g)
    targets[:, 1] = torch.where(torch.rand(64, generator=g) < 0.3, targets[:, 0], targets[:, 1])  # repeats
    targets[targets[:, 0] < 0, 0] = 5  # at least one answer per row
    ranks = target_ranks(scores, targets)
    for b in range(64):
        ans = {int(a) for a in targets[b] if a >= 0}
        best = max(float(scores[b, a]) for a in ans)
        assert int(ranks[b]) == 1 + sum(1 for j in range(30) if j not in ans and float(scores[b, j]) >= best)


def dag_hierarchy():
    """r -> a, b, c; a -> a1..a6, x; b -> b1..b6; x is also a b (a second direct hypernym)."""
    def n(s):
        return f"{s}.n.01"

    tree = [(n("r"), n(p)) for p in "abc"] + [(n("a"), n(f"a{i}")) for i in range(6)]
    tree += [(n("b"), n(f"b{i}")) for i in range(6)] + [(n("a"), n("x"))]
    closure = [(c, p) for p, c in tree] + [(c, n("r")) for p, c in tree if p != n("r")] + [(n("x"), n("b"))]
    nodes = sorted({u for e in tree for u in e})
    return Hierarchy("dag", n("r"), nodes, sorted(set(closure)), tree)


def test_a_query_with_two_direct_hypernyms_accepts_both():
    h = dag_hierarchy()
    parent_of = {c: p for p, c in h.tree}
    ans = accepted_answers(h, parent_of)
    assert ans["x.n.01"] == ["a.n.01", "b.n.01"]  # the tree parent first; r is above both
    assert ans["a1.n.01"] == ["a.n.01"]
    held = 0
    for seed in range(40):
        d = build_rag_data(n_test=3, n_val=3, seed=seed, embedder=HashingEmbedder(dim=8), cache=False, hierarchy=h)
        for names, targets in ((d.test_names, d.test_targets), (d.val_names, d.val_targets)):
            if "x.n.01" in names:
                row = targets[names.index("x.n.01")].tolist()
                assert sorted(d.slot_names[t] for t in row if t >= 0) == ["a.n.01", "b.n.01"]
                assert d.slot_names[row[0]] == "a.n.01"
                held += 1
    assert held > 0


# -- the validation split -------------------------------------------------------------------------
def test_validation_is_carved_from_the_training_leaves_disjoint_and_deterministic():
    d = mammals()
    no_val = mammals(n_val=0)
    assert d.n_val == 50 and no_val.n_val == 0
    val, test = set(d.val_names), set(d.test_names)
    train = {d.slot_names[s] for s in d.train_slots.tolist()}
    assert not val & test and not val & train and not val & set(d.slot_names)
    # the same test set with or without validation; validation leaves would otherwise train
    assert no_val.test_names == d.test_names
    assert val <= {no_val.slot_names[s] for s in no_val.train_slots.tolist()}
    again, other = mammals(), mammals(seed=1)
    assert again.val_names == d.val_names and torch.equal(again.val_emb, d.val_emb)
    assert other.val_names != d.val_names
    # the validation loader serves the validation queries, never the test queries
    x, y = next(iter(RAGDataModule(d, eval_batch=1000).val_dataloader()))
    assert torch.equal(x, d.val_emb) and torch.equal(y, d.val_targets)
    with pytest.raises(ValueError, match="too large"):
        mammals(n_test=300, n_val=300)


def test_early_stopping_keeps_and_restores_the_best_validation_weights():
    d = mammals()
    model = LinearCosine(d.slot_emb, 0.05)
    module = RAGModule(model, patience=0)
    first = model.linear.weight.detach().clone()
    module.consider({"mrr": 0.5})
    with torch.no_grad():
        model.linear.weight.add_(1.0)
    module.consider({"mrr": 0.4})  # worse: not kept
    assert module.best["mrr"] == 0.5 and module._bad == 1
    module.restore_best()
    assert torch.equal(model.linear.weight, first)
