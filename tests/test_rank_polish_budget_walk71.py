"""polish_ranks keeps its time budget while it ranks the pairs (walk 71: the ranking of all
743k noun pairs ran before the first budget check, so a 20 s polish ran for minutes)."""

import math

import pytest
import torch
from test_hierarchy_rank_polish import random_dag_closure, random_points

from hypermem.geometry import PoincareBall
from hypermem.hierarchy import Relations, polish_ranks, reconstruction
from hypermem.hierarchy.rank_polish import _pair_ranks


def _tree(n: int = 60, seed: int = 4) -> tuple[torch.Tensor, Relations]:
    rel = Relations(sorted(set(random_dag_closure(n, seed=seed))), nodes=list(range(n)))
    return random_points(n, 3, seed=seed), rel


def test_a_spent_budget_stops_before_ranking_and_returns_the_points_unchanged():
    x, rel = _tree()
    y, rep = polish_ranks(x, rel, max_seconds=0.0, min_rank=1)
    assert rep.ranked_pairs == 0 and rep.lists == 0
    assert rep.visited == 0 and rep.moved == 0 and rep.excess_change == 0.0
    assert rep.pairs == rel.pairs.shape[0]
    assert math.isnan(rep.excess_before) and math.isnan(rep.mean_rank_before)
    assert torch.equal(y, x) and y is not x


def test_ranking_in_runs_gives_the_ranks_of_one_call():
    x, rel = _tree(80, seed=7)
    ball = PoincareBall(1.0)
    want = reconstruction(x, rel, ball, per_pair=True, chunk_size=5).pair_ranks
    got, done = _pair_ranks(x, rel, ball, deadline=math.inf, chunk_size=5, group=2)
    assert done == rel.pairs.shape[0]
    assert torch.equal(got, want)
    assert torch.equal(_pair_ranks(x, rel, ball, deadline=None)[0], reconstruction(x, rel, per_pair=True).pair_ranks)


def test_a_passed_deadline_ranks_nothing():
    x, rel = _tree()
    ranks, done = _pair_ranks(x, rel, PoincareBall(1.0), deadline=-math.inf, chunk_size=5, group=1)
    assert ranks is None and done == 0


@pytest.mark.parametrize("passes", [1, 2])
def test_a_budget_that_does_not_bind_changes_nothing(passes):
    x, rel = _tree(70, seed=2)
    y0, r0 = polish_ranks(x, rel, min_rank=1, passes=passes, seed=3)
    y1, r1 = polish_ranks(x, rel, min_rank=1, passes=passes, seed=3, max_seconds=1e9)
    assert torch.equal(y0, y1)
    assert (r0.visited, r0.moved, r0.excess_before, r0.excess_change, r0.lists) == \
        (r1.visited, r1.moved, r1.excess_before, r1.excess_change, r1.lists)
    assert r1.lists == passes and r1.ranked_pairs == passes * rel.pairs.shape[0] == r0.ranked_pairs
    assert r1.moved > 0


def test_given_ranks_are_not_recomputed():
    x, rel = _tree()
    ranks = reconstruction(x, rel, per_pair=True).pair_ranks
    _, rep = polish_ranks(x, rel, min_rank=1, pair_ranks=ranks, max_nodes=3)
    assert rep.ranked_pairs == 0 and rep.lists == 1 and rep.visited == 3
