"""Per-pair ranks and rank polishing: every predicted change of the mean rank is the real one."""

import doctest
import math
import random

import pytest
import torch

import hypermem.hierarchy.rank_polish as rank_polish
from hypermem.geometry import PoincareBall
from hypermem.hierarchy import Relations, polish_ranks, reconstruction
from hypermem.hierarchy.rank_polish import _RankState


def random_dag_closure(n: int, seed: int, second_parent: float = 0.25) -> list:
    """``(node, ancestor)`` pairs of a random DAG: each node has a parent among the earlier
    ones and, with probability ``second_parent``, a second one."""
    rng = random.Random(seed)
    parents = {i: {rng.randrange(i)} | ({rng.randrange(i)} if i > 3 and rng.random() < second_parent else set())
               for i in range(1, n)}
    ancestors: dict[int, set] = {0: set()}
    for i in range(1, n):
        ancestors[i] = set().union(*({p} | ancestors[p] for p in parents[i]))
    return [(i, a) for i in range(1, n) for a in sorted(ancestors[i])]


def random_points(n: int, dim: int, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, dim, generator=g, dtype=torch.float64)
    return x / x.norm(dim=1, keepdim=True) * torch.rand(n, 1, generator=g, dtype=torch.float64) * 0.95


def slow_pair_ranks(X, pairs, ball):
    related: dict[int, set] = {}
    for u, v in pairs:
        related.setdefault(u, set()).add(v)
    out = []
    for u, v in pairs:
        d = [float(ball.distance(X[u], X[w])) for w in range(X.shape[0])]
        out.append(1 + sum(1 for w in range(X.shape[0]) if w != u and w not in related[u] and d[w] < d[v]))
    return out


def test_pair_ranks_match_slow_reference(device):
    pairs = sorted(set(random_dag_closure(40, seed=3)))
    rel = Relations(pairs, nodes=list(range(40)))
    X = random_points(40, 3, seed=3)
    got = reconstruction(X.to(device), rel, per_pair=True, chunk_size=6)
    assert got.pair_ranks.shape == (len(pairs),)
    assert got.pair_ranks.cpu().tolist() == slow_pair_ranks(X, rel.pairs.tolist(), PoincareBall())
    assert got.pair_ranks.mean().item() == pytest.approx(got.mean_rank, abs=1e-12)
    assert reconstruction(X, rel).pair_ranks is None


def total_excess(X, rel) -> float:
    return float((reconstruction(X, rel, per_pair=True).pair_ranks - 1).sum())


@pytest.mark.parametrize("seed", [0, 1])
def test_cost_differences_are_exact(seed):
    """S_row + S_intruder + S_desc of a candidate minus that of the current point equals the
    change of the total rank excess, for nodes with and without descendants."""
    rel = Relations(random_dag_closure(60, seed=seed))
    X = random_points(rel.n, 3, seed=seed)
    state = _RankState(X.clone(), rel, 1.0)
    base = total_excess(X, rel)
    rng = torch.Generator().manual_seed(seed)
    ball = PoincareBall()
    has_desc = [u for u in range(rel.n) if state.reverse_pairs(u).numel() > 0]
    for u in [has_desc[0], has_desc[len(has_desc) // 2], rel.n - 1]:
        cand = torch.cat([X[u][None], ball.random_points(5, 3, 1.5, seed=int(torch.randint(99, (1,), generator=rng)))])
        cost = state.cost(u, cand)
        for i in range(1, cand.shape[0]):
            moved = X.clone()
            moved[u] = cand[i]
            assert float(cost[i] - cost[0]) == pytest.approx(total_excess(moved, rel) - base, abs=1e-9)
        # with a bound, the candidates that cannot beat it are cut short (inf), the others stay exact
        bound = float(cost.median())
        pruned = state.cost(u, cand, bound=bound)
        assert torch.equal(pruned, torch.where(cost < bound, cost, torch.full_like(cost, math.inf)))
        assert bool((pruned == math.inf).any()) and bool(torch.isfinite(pruned).any())


def test_polish_lowers_the_exact_mean_rank(device):
    rel = Relations(random_dag_closure(150, seed=5))
    X = random_points(rel.n, 3, seed=5).to(device)
    before = reconstruction(X, rel)
    Y, report = polish_ranks(X, rel, min_rank=1.0, seed=1)
    after = reconstruction(Y, rel)
    assert report.mean_rank_before == pytest.approx(before.mean_rank, abs=1e-12)
    assert report.mean_rank_after == pytest.approx(after.mean_rank, abs=1e-12)
    assert after.mean_rank < 0.5 * before.mean_rank
    assert report.moved > 0 and report.visited >= report.moved and report.pairs == before.n_pairs
    assert Y.device == X.device and Y.dtype == X.dtype
    assert bool(PoincareBall().is_inside(Y).all()) and bool(torch.isfinite(Y).all())
    assert torch.equal(X, random_points(rel.n, 3, seed=5).to(device))  # the input is left alone


def test_limits_and_labels():
    closure = random_dag_closure(50, seed=2)
    rel = Relations(closure)
    X = random_points(rel.n, 2, seed=2)
    Y, report = polish_ranks(X, rel, max_nodes=0)
    assert report.visited == 0 and report.moved == 0 and torch.equal(X, Y)
    # labelled points in a mapping, with ranks given, and the time limit
    ranks = reconstruction(X, rel, per_pair=True).pair_ranks
    pts = {node: X[i] for i, node in enumerate(rel.nodes)}
    Y2, report2 = polish_ranks(pts, closure, pair_ranks=ranks, min_rank=1.0, max_nodes=5)
    assert report2.visited == 5
    assert reconstruction(Y2, rel).mean_rank == pytest.approx(report2.mean_rank_after, abs=1e-12)
    _, report3 = polish_ranks(X, rel, max_seconds=0.0, min_rank=1.0)
    assert report3.visited == 0


def test_bad_inputs():
    rel = Relations(random_dag_closure(20, seed=4))
    X = random_points(rel.n, 2, seed=4)
    out = X.clone()
    out[3] = torch.tensor([1.5, 0.0], dtype=torch.float64)
    with pytest.raises(ValueError, match="outside the Poincaré ball"):
        polish_ranks(out, rel)
    nan = X.clone()
    nan[0, 0] = math.nan
    with pytest.raises(ValueError, match="NaN"):
        polish_ranks(nan, rel)
    with pytest.raises(ValueError, match="pair_ranks must have shape"):
        polish_ranks(X, rel, pair_ranks=torch.ones(3))
    with pytest.raises(ValueError, match="min_rank"):
        polish_ranks(X, rel, min_rank=0.5)
    with pytest.raises(ValueError, match="points"):
        polish_ranks(X[:-1], rel)


def test_docstring_example():
    result = doctest.testmod(rank_polish, verbose=False)
    assert result.attempted > 0 and result.failed == 0


def test_other_curvature_and_float32():
    """Keys, candidates and the report follow the ball's curvature; float32 points stay float32."""
    rel = Relations(random_dag_closure(80, seed=6))
    ball = PoincareBall(2.0)
    X = random_points(rel.n, 3, seed=6) / 2.0**0.5
    Y, report = polish_ranks(X, rel, ball=ball, min_rank=1.0, max_nodes=40)
    assert report.moved > 0
    assert reconstruction(Y, rel, ball).mean_rank == pytest.approx(report.mean_rank_after, abs=1e-12)
    assert report.mean_rank_after < reconstruction(X, rel, ball).mean_rank
    assert bool(ball.is_inside(Y).all())
    Y32, report32 = polish_ranks(X.float(), rel, ball=ball, min_rank=1.0, max_nodes=10)
    assert Y32.dtype == torch.float32 and report32.mean_rank_after <= report32.mean_rank_before


def test_a_second_pass_relists_and_lowers_further():
    """With ``passes=2`` the nodes are listed again from fresh ranks once the first list is
    done: more nodes are visited and the mean rank only drops further (same seed)."""
    rel = Relations(random_dag_closure(120, seed=7))
    X = random_points(rel.n, 2, seed=7)
    Y1, one = polish_ranks(X, rel, min_rank=1.0, seed=3)
    Y2, two = polish_ranks(X, rel, min_rank=1.0, seed=3, passes=2)
    assert two.visited > one.visited
    assert two.mean_rank_after <= one.mean_rank_after
    assert two.mean_rank_after == pytest.approx(reconstruction(Y2, rel).mean_rank, abs=1e-12)
    assert one.mean_rank_after == pytest.approx(reconstruction(Y1, rel).mean_rank, abs=1e-12)
    with pytest.raises(ValueError, match="passes"):
        polish_ranks(X, rel, passes=0)
