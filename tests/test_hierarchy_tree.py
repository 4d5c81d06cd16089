"""Tree utilities and relation tensors."""

import pytest
import torch

from hypermem.hierarchy import Relations, children_map, depths, transitive_closure
from hypermem.hierarchy.tree import bfs_order, tree_from_edges


def test_children_map_and_roots():
    ch, roots = children_map([("a", "b"), ("a", "c"), ("b", "d")])
    assert roots == ["a"]
    assert ch["a"] == ["b", "c"] and ch["b"] == ["d"] and ch["d"] == []
    assert depths(ch, "a") == {"a": 0, "b": 1, "c": 1, "d": 2}
    assert sorted(transitive_closure(ch, "a")) == [("a", "b"), ("a", "c"), ("a", "d"), ("b", "d")]


@pytest.mark.parametrize("edges, message", [
    ([("a", "b"), ("a", "b")], "repeated edge"),
    ([("a", "b"), ("c", "b")], "two parents"),
    ([("a", "a")], "self-loop"),
    ([("r", "x"), ("a", "b"), ("b", "c"), ("c", "a")], "cycle"),
    ([("a",)], "pair"),
])
def test_bad_trees_raise_clear_errors(edges, message):
    with pytest.raises(ValueError, match=message):
        children_map(edges)


def test_forest_needs_a_root():
    with pytest.raises(ValueError, match="forest"):
        tree_from_edges([("a", "b"), ("c", "d")])
    ch, root = tree_from_edges([("a", "b"), ("c", "d")], root="c")
    assert root == "c" and bfs_order(ch, root) == ["c", "d"]


def test_deep_path_is_iterative():
    n = 10_000
    edges = [(i, i + 1) for i in range(n)]
    ch, roots = children_map(edges)
    d = depths(ch, 0)
    assert d[n] == n
    short = [(i, i + 1) for i in range(600)]
    ch2, _ = children_map(short)
    assert len(transitive_closure(ch2, 0)) == 600 * 601 // 2


def test_relations_membership_and_csr():
    rel = Relations([("b", "a"), ("c", "a"), ("c", "b"), ("c", "a")])  # duplicate dropped
    assert len(rel) == 3 and rel.nodes == ["a", "b", "c"]
    i = rel.index
    u = torch.tensor([i["b"], i["a"], i["c"]])
    v = torch.tensor([i["a"], i["b"], i["b"]])
    assert rel.contains(u, v).tolist() == [True, False, True]
    assert rel.symmetric().contains(v, u).tolist() == [True, True, True]
    offsets, targets = rel.csr()
    assert targets[offsets[i["c"]]:offsets[i["c"] + 1]].tolist() == [i["a"], i["b"]]
    with pytest.raises(ValueError, match="self-pair"):
        Relations([("a", "a")])
    with pytest.raises(ValueError, match="not in nodes"):
        Relations([("a", "z")], nodes=["a"])
