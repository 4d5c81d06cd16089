"""Tree utilities and relation tensors."""

from collections import deque

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from hypermem.hierarchy import Relations, children_map, depths, transitive_closure
from hypermem.hierarchy.tree import bfs_order, parents_of, tree_from_edges


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
    n = 100_000
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


# -- hostile children mappings (issue 19): cycles, self-loops, DAGs, repeated children ------

WALKS = (transitive_closure, depths, bfs_order)


def reachable(children, start):
    """Nodes reachable from ``start`` by one or more edges (a plain BFS, for the checks)."""
    out, queue = set(), deque(children.get(start, ()))
    while queue:
        n = queue.popleft()
        if n not in out:
            out.add(n)
            queue.extend(children.get(n, ()))
    return out


@pytest.mark.parametrize("children, root, names", [
    ({"a": ["a"]}, "a", "self-loop on 'a'"),
    ({"r": ["a"], "a": ["b", "a"]}, "r", "self-loop on 'a'"),
    ({"a": ["b"], "b": ["a"]}, "a", "'a' -> 'b' -> 'a'|'b' -> 'a' -> 'b'"),
    ({"r": ["x", "a"], "a": ["b"], "b": ["c"], "c": ["a"]}, "r", "cycle: .*'a'.*'b'.*'c'"),
    ({"r": ["a", "b"], "a": ["b"], "b": ["r"]}, "r", "cycle: .*'r'"),
])
def test_walks_refuse_cycles_and_self_loops(children, root, names):
    for walk in WALKS:
        with pytest.raises(ValueError, match=names):
            walk(children, root)


def test_a_cycle_under_a_deep_chain_is_found_fast_and_named_briefly():
    n = 100_000
    children = {i: [i + 1] for i in range(n)}
    children[n] = [n // 2]  # a cycle of 50,001 nodes at the bottom
    for walk in WALKS:
        with pytest.raises(ValueError, match=r"cycle: .* -> \.\.\. -> .*\(50,001 nodes\)") as err:
            walk(children, 0)
        assert len(str(err.value)) < 200


def test_two_parents_and_repeated_children_give_each_pair_once():
    dag = {"a": ["b", "c", "c"], "b": ["d", "d"], "c": ["d", "e"], "e": ["d"]}
    pairs = transitive_closure(dag, "a")
    assert len(pairs) == len(set(pairs))
    assert set(pairs) == {("a", "b"), ("a", "c"), ("a", "d"), ("a", "e"), ("b", "d"), ("c", "d"), ("c", "e"),
                          ("e", "d")}
    assert depths(dag, "a") == {"a": 0, "b": 1, "c": 1, "d": 2, "e": 2}  # the nearest parent
    assert bfs_order(dag, "a") == ["a", "b", "c", "d", "e"]
    with pytest.raises(ValueError, match="'d' has two parents"):
        parents_of(dag)


@pytest.mark.parametrize("children, message", [
    ({"a": "bc"}, "children of 'a' must be a list"),
    ({"a": 3}, "children of 'a' must be a list"),
    ({"a": [["b"]]}, "children of 'a' must be hashable"),
    ([("a", "b")], "children must be a mapping"),
])
def test_malformed_children_raise_clear_errors(children, message):
    for walk in WALKS:
        with pytest.raises(ValueError, match=message):
            walk(children, "a")


graphs = st.dictionaries(st.integers(0, 9), st.lists(st.integers(0, 9), max_size=4), max_size=10)


@settings(max_examples=300, deadline=None)
@given(graphs, st.integers(0, 9))
def test_any_children_mapping_ends_with_the_closure_or_a_cycle_error(children, root):
    below = reachable(children, root)
    cyclic = any(n in reachable(children, n) for n in below | {root})
    if cyclic:
        for walk in WALKS:
            with pytest.raises(ValueError, match="cycle|self-loop"):
                walk(children, root)
        return
    pairs = transitive_closure(children, root)
    assert len(pairs) == len(set(pairs))
    nodes = below | {root}
    assert set(pairs) == {(a, d) for a in nodes for d in reachable(children, a)}
    position = {n: i for i, n in enumerate(dict.fromkeys([root] + [d for _, d in pairs]))}
    assert all(position[a] < position[d] for a, d in pairs)  # ancestors come first
    assert set(bfs_order(children, root)) == nodes and len(bfs_order(children, root)) == len(nodes)
    dep = depths(children, root)
    assert set(dep) == nodes and dep[root] == 0
    for p in nodes:
        for c in children.get(p, ()):
            assert dep[c] <= dep[p] + 1 and (dep[c] == 0 or any(dep[q] == dep[c] - 1 for q in nodes
                                                                 if c in children.get(q, ())))


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(0, 30), min_size=1, max_size=40))
def test_trees_keep_breadth_first_order_with_ancestors_root_first(parent_picks):
    """Random trees (node i + 1 hangs below an earlier node): the closure lists the
    descendants breadth-first, each with its ancestors from the root down."""
    edges = [(p % (i + 1), i + 1) for i, p in enumerate(parent_picks)]
    ch, roots = children_map(edges)
    parent = parents_of(ch)
    pairs = transitive_closure(ch, roots[0])
    order = bfs_order(ch, roots[0])
    expected = []
    for n in order[1:]:
        line, a = [], n
        while a in parent:
            a = parent[a]
            line.append(a)
        expected.extend((a, n) for a in reversed(line))
    assert pairs == expected
