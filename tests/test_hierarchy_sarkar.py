"""Sarkar's construction: exact edge lengths, spread directions, tau choice, reconstruction."""

import math

import pytest
import torch
from tree_helpers import balanced_tree

from hypermem.geometry import PoincareBall
from hypermem.hierarchy import Relations, children_map, reconstruction, transitive_closure
from hypermem.hierarchy.sarkar import (
    decaying_edge_lengths,
    max_safe_depth,
    min_angle,
    sarkar_layout,
    spread_directions,
)


@pytest.mark.parametrize("dim", [2, 3, 5])
def test_edges_have_exact_length(dim):
    ball = PoincareBall(curvature=2.0)
    edges = balanced_tree(3, 3)
    lengths = {e: 1.0 + 0.1 * (e[1] % 3) for e in edges}
    lay = sarkar_layout(edges, ball=ball, dim=dim, tau=1.5, edge_length=lengths)
    assert lay.points.dtype == torch.float64 and lay.points.shape == (len(edges) + 1, dim)
    assert float(lay[0].norm()) == 0.0
    for p, c in edges:
        assert float(ball.distance(lay[p], lay[c])) == pytest.approx(1.5 * lengths[(p, c)], rel=1e-9)


def test_two_dimensional_directions_are_exact():
    d = spread_directions(4, 2)
    ang = torch.atan2(d[:, 1], d[:, 0]) % (2 * math.pi)
    assert torch.allclose(ang.sort().values, torch.tensor([0, 0.5, 1, 1.5], dtype=torch.float64) * math.pi)
    avoid = torch.tensor([0.0, 1.0])
    d = spread_directions(3, 2, avoid=avoid)  # 4 slots, the parent's direction takes one
    cos = d @ avoid.double()
    assert torch.allclose(cos.sort().values, torch.tensor([-1.0, 0.0, 0.0], dtype=torch.float64), atol=1e-12)


def test_higher_dimensional_directions_spread():
    d = spread_directions(12, 5, seed=0)
    assert torch.allclose(d.norm(dim=1), torch.ones(12, dtype=torch.float64))
    assert min_angle(d) > math.radians(55)
    a = torch.tensor([1.0, 0, 0, 0, 0])
    d = spread_directions(6, 5, avoid=a)
    assert float((d @ a.double()).max()) < math.cos(math.radians(60))


def test_max_safe_depth_and_warning():
    ball = PoincareBall()
    assert max_safe_depth(ball, 1.0) == math.floor(ball.max_radius(torch.float64))
    path = [(i, i + 1) for i in range(30)]
    with pytest.warns(RuntimeWarning, match="largest radius"):
        sarkar_layout(path, tau=1.0)
    lay = sarkar_layout(path, tau=None)
    assert lay.info["tau_chosen"] and 30 * lay.tau < ball.max_radius(torch.float64)


def test_tau_none_is_reported_and_layout_reconstructs():
    edges = balanced_tree(4, 4)
    ch, roots = children_map(edges)
    desc = Relations(transitive_closure(ch, roots[0]))
    lay = sarkar_layout(edges, dim=5, tau=None, edge_length=decaying_edge_lengths(edges, 0.5))
    assert {"tau", "eps_bound", "min_angle", "max_degree", "depth"} <= set(lay.info)
    X = lay.points[torch.tensor([lay.nodes.index(n) for n in desc.nodes])]
    r = reconstruction(X, desc, "poincare")
    assert r.map == pytest.approx(1.0) and r.mean_rank == pytest.approx(1.0)


def test_bad_arguments():
    with pytest.raises(ValueError, match="tau"):
        sarkar_layout([(0, 1)], tau=-1.0)
    with pytest.raises(ValueError, match="line"):
        sarkar_layout([(0, 1), (0, 2), (0, 3)], dim=1)
    with pytest.raises(ValueError, match="two parents"):
        sarkar_layout([(0, 1), (2, 1)])


# -- edge_length="isa": nested shadows (hypermem.hierarchy.shadows) ---------------------------
def random_tree(n, seed):
    g = torch.Generator().manual_seed(seed)
    return [(int(torch.randint(0, i, (1,), generator=g)), i) for i in range(1, n)]


def isa_closure(edges):
    ch, roots = children_map(edges)
    return Relations([(d, a) for a, d in transitive_closure(ch, roots[0])])  # (node, ancestor)


@pytest.mark.filterwarnings("ignore:shadow_layout")
@pytest.mark.parametrize("dim", [2, 3, 5])
@pytest.mark.parametrize("edges", [balanced_tree(3, 3), balanced_tree(7, 2), random_tree(60, 0),
                                   [(i, i + 1) for i in range(12)]], ids=["b3x3", "b7x2", "random", "path"])
def test_isa_layout_puts_every_ancestor_first(dim, edges):
    rel = isa_closure(edges)
    lay = sarkar_layout(edges, dim=dim, edge_length="isa")
    assert lay.points.dtype == torch.float64 and lay.points.shape == (len(edges) + 1, dim)
    assert float(lay[edges[0][0]].norm()) < 1e-12  # the root sits at the origin
    # brute force: for every node, its farthest ancestor is nearer than its nearest other node
    X = lay.points
    D = PoincareBall().pairwise_distance(X, X)
    pos = {n: i for i, n in enumerate(lay.nodes)}
    anc = {}
    for u, a in rel.pairs.tolist():
        anc.setdefault(pos[rel.nodes[u]], set()).add(pos[rel.nodes[a]])
    for q, ancestors in anc.items():
        others = [j for j in range(len(X)) if j != q and j not in ancestors]
        if others:
            assert float(D[q, list(ancestors)].max()) < float(D[q, others].min())
    r = reconstruction(lay, rel)
    assert r.map == 1.0 and r.mean_rank == 1.0


def test_isa_layout_on_the_mammal_tree():
    from hypermem.data.wordnet import load_mammals

    tree = load_mammals().tree
    for dim in (5, 10):
        lay = sarkar_layout(tree, dim=dim, edge_length="isa")
        r = reconstruction(lay, isa_closure(tree))
        assert r.map == 1.0 and lay.info["radius"] < lay.info["max_radius"]


def test_shadow_layout_is_the_half_space_construction():
    from hypermem.hierarchy.shadows import cayley_to_ball, shadow_layout

    # the Cayley transform is an isometry from the upper half-space
    g = torch.Generator().manual_seed(1)
    x = torch.randn(6, 3, generator=g, dtype=torch.float64)
    h = torch.rand(6, generator=g, dtype=torch.float64) + 0.05
    p = cayley_to_ball(x, h)
    cosh_half = 1 + ((x[:, None] - x[None]).pow(2).sum(-1) + (h[:, None] - h[None]) ** 2) / (2 * h[:, None] * h[None])
    assert torch.allclose(PoincareBall().pairwise_distance(p, p), torch.acosh(cosh_half.clamp_min(1.0)), atol=1e-6)
    assert torch.allclose(cayley_to_ball(torch.zeros(1, 3, dtype=torch.float64), torch.ones(1, dtype=torch.float64)),
                          torch.zeros(1, 4, dtype=torch.float64))
    # curvature scales the ball, not the ranking
    edges = balanced_tree(3, 2)
    a = shadow_layout(edges, dim=3)
    b = shadow_layout(edges, ball=PoincareBall(curvature=4.0), dim=3)
    assert torch.allclose(b.points * 2.0, a.points)
    assert {"radius", "max_radius", "min_shrink", "depth", "max_degree"} <= set(a.info)


def test_shadow_layout_errors_and_warning():
    from hypermem.hierarchy.shadows import shadow_layout

    with pytest.raises(ValueError, match="dim"):
        shadow_layout([(0, 1)], dim=1)
    with pytest.raises(ValueError, match="max_shrink"):
        shadow_layout([(0, 1)], max_shrink=1.5)
    with pytest.raises(ValueError, match="edge_length"):
        sarkar_layout([(0, 1)], edge_length="desc")
    with pytest.raises(ValueError, match="two parents"):
        shadow_layout([(0, 1), (2, 1)])
    with pytest.warns(RuntimeWarning, match="beyond the radius"):
        shadow_layout(balanced_tree(10, 4), dim=2)


def test_ancestor_tree_keeps_the_parent_with_the_longest_kept_path():
    from hypermem.hierarchy.spanning import ancestor_tree

    # x has the parents b (kept path b-a-root) and c (c-root): b wins; y under x
    edges = [("a", "root"), ("b", "a"), ("b", "root"), ("c", "root"), ("x", "b"), ("x", "c"), ("x", "a"),
             ("x", "root"), ("y", "x"), ("y", "b"), ("y", "c"), ("y", "a"), ("y", "root")]
    tree = ancestor_tree(edges)
    assert sorted(tree) == [("a", "b"), ("b", "x"), ("root", "a"), ("root", "c"), ("x", "y")]
    # a random DAG: a spanning tree, keeping at least as many pairs as first parents do
    g = torch.Generator().manual_seed(3)
    parents = {i: sorted({int(torch.randint(0, i, (1,), generator=g)) for _ in range(2)}) for i in range(1, 40)}
    anc = {0: set()}
    for i in range(1, 40):
        anc[i] = set().union(*[anc[p] | {p} for p in parents[i]])
    closure = [(i, a) for i in anc for a in anc[i]]
    tree = ancestor_tree(closure)
    assert len(tree) == 39 and {c for _, c in tree} == set(range(1, 40))

    def kept(t):
        par = {c: p for p, c in t}
        n = 0
        for i in range(1, 40):
            j = i
            while j in par:
                j = par[j]
                n += 1
        return n

    first = [(parents[i][0], i) for i in range(1, 40)]
    assert kept(tree) >= kept(first)
    with pytest.raises(ValueError, match="cycle"):
        ancestor_tree([("a", "b"), ("b", "c"), ("c", "a")])


def test_shadow_isa_score_separates_descendants_from_other_nodes():
    from hypermem.hierarchy.evaluation import link_prediction
    from hypermem.hierarchy.shadows import NOT_BELOW, shadow_isa_score, shadow_layout
    from hypermem.hierarchy.spanning import ancestor_tree
    from hypermem.hierarchy.splits import link_prediction_split

    edges = random_tree(300, 4)
    rel = isa_closure(edges)
    lay = shadow_layout(edges, dim=4)
    pos = {n: i for i, n in enumerate(lay.nodes)}
    order = torch.tensor([pos[n] for n in rel.nodes])
    C, R = lay.shadow_centres[order], lay.shadow_radii[order]
    assert C.shape == (300, 3) and R.shape == (300,) and C.dtype == torch.float64
    # every (node, ancestor) pair scores below every (node, non-ancestor) pair
    n = rel.n
    u = torch.arange(n).repeat_interleave(n)
    w = torch.arange(n).repeat(n)
    allp = torch.stack([u, w], 1)[u != w]
    related = rel.contains(allp[:, 0], allp[:, 1])
    s = shadow_isa_score(C, R, allp)
    assert float(s[related].max()) < NOT_BELOW
    # one threshold for all pairs separates nearly all of them (F1 on every pair)
    from hypermem.hierarchy.evaluation import best_threshold

    assert best_threshold(s, related)[1] > 0.97
    # transitive-closure prediction from the basic edges: perfect on a tree
    sp = link_prediction_split(rel, non_basic_fraction=0.0, seed=0)
    lay = shadow_layout(ancestor_tree(sp.train), dim=4)
    pos = {n: i for i, n in enumerate(lay.nodes)}
    order = torch.tensor([pos[n] for n in sp.train.nodes])
    C, R = lay.shadow_centres[order], lay.shadow_radii[order]
    lp = link_prediction(shadow_isa_score(C, R, sp.val_pairs), sp.val_labels,
                         shadow_isa_score(C, R, sp.test_pairs), sp.test_labels)
    assert lp.f1 > 0.95
