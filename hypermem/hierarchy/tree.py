"""Rooted-tree utilities shared by the Sarkar layout, training and evaluation.

A tree is given as ``(parent, child)`` edges between hashable node labels.  Every
function is iterative (explicit queues, no recursion), so a path 100,000 levels deep
works, and the input is checked: a repeated edge, a self-loop, a node with two parents
and a cycle each raise a ``ValueError`` that names the offending nodes.  The functions
that take a ``parent -> children`` mapping (:func:`bfs_order`, :func:`depths`,
:func:`transitive_closure`) check it too (a self-loop or a cycle below the root is a
``ValueError`` naming it, never an endless loop) and visit every node once, so a node
with two parents (a DAG) or a repeated child yields no duplicates.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Hashable, Iterable, Mapping, Sequence
from typing import TypeVar

from .node_ids import check_node_ids

N = TypeVar("N", bound=Hashable)


def children_map(edges: Iterable[tuple[N, N]]) -> tuple[dict[N, list[N]], list[N]]:
    """``parent -> [children]`` (in edge order) and the roots (nodes without a parent).

    Raises ``ValueError`` for a malformed edge, a missing id (NaN/None: a pandas root row)
    or one number in two types (``1`` and ``1.0``: :func:`~hypermem.hierarchy.node_ids.check_node_ids`),
    a repeated edge, a self-loop, a node with two parents, or a cycle (a component without a root).
    """
    pairs: list[tuple[N, N]] = []
    for i, edge in enumerate(edges):
        try:
            p, c = edge
        except (TypeError, ValueError) as exc:
            raise ValueError(f"edge {i} must be a (parent, child) pair, got {edge!r}") from exc
        pairs.append((p, c))
    check_node_ids(pairs, "edge")
    children: dict[N, list[N]] = {}
    parent: dict[N, N] = {}
    seen: set[tuple[N, N]] = set()
    for i, (p, c) in enumerate(pairs):
        if p == c:
            raise ValueError(f"edge {i} is a self-loop on {p!r}")
        if (p, c) in seen:
            raise ValueError(f"repeated edge ({p!r}, {c!r})")
        seen.add((p, c))
        if c in parent:
            raise ValueError(f"node {c!r} has two parents: {parent[c]!r} and {p!r} (a tree needs one)")
        parent[c] = p
        children.setdefault(p, []).append(c)
        children.setdefault(c, [])
    roots = [n for n in children if n not in parent]
    reached = sum(1 for _ in _bfs(children, roots))
    if reached != len(children):
        on_cycle = _find_cycle(parent, children, roots)
        raise ValueError(f"the edges contain a cycle: {_describe_cycle(on_cycle)}")
    return children, roots


def _bfs(children: Mapping[N, Sequence[N]], roots: Iterable[N]):
    """Breadth-first walk from ``roots``, every node once (a cycle cannot trap it)."""
    queue = deque(roots)
    seen = set(queue)
    while queue:
        n = queue.popleft()
        yield n
        for c in children.get(n, ()):
            if c not in seen:
                seen.add(c)
                queue.append(c)


def _find_cycle(parent: Mapping[N, N], children: Mapping[N, Sequence[N]], roots: Sequence[N]) -> list[N]:
    reached = set(_bfs(children, roots))
    start = next(n for n in children if n not in reached)
    path, pos = [start], {start: 0}
    node = start
    while True:  # following parents from an unreachable node must loop
        node = parent[node]
        if node in pos:
            cyc = path[pos[node]:]
            return list(reversed(cyc)) + [cyc[-1]]
        pos[node] = len(path)
        path.append(node)


def _describe_cycle(cycle: Sequence[N], show: int = 8) -> str:
    """``a -> b -> a`` for a cycle ``[a, b, a]``; a long one is cut after ``show`` nodes."""
    if len(cycle) <= show + 1:
        return " -> ".join(map(repr, cycle))
    return " -> ".join(map(repr, cycle[:show])) + f" -> ... -> {cycle[-1]!r} ({len(cycle) - 1:,} nodes)"


def _distinct_children(children: Mapping[N, Sequence[N]], n: N) -> list[N]:
    """The children of ``n`` in their order, a repeated child once; ``ValueError`` when
    they are not a collection of hashable nodes."""
    cs = children.get(n, ())
    if isinstance(cs, (str, bytes)) or not isinstance(cs, Iterable):
        raise ValueError(f"the children of {n!r} must be a list of nodes, got {cs!r}")
    try:
        return list(dict.fromkeys(cs))
    except TypeError as exc:
        raise ValueError(f"the children of {n!r} must be hashable nodes: {exc}") from None


def _topological(children: Mapping[N, Sequence[N]], root: N) -> tuple[list[N], dict[N, list[N]], dict[N, int]]:
    """The nodes reachable from ``root`` in topological order (Kahn's algorithm with a
    FIFO queue: breadth-first order for a tree), every node's distinct children and its
    number of parents among them.  Raises ``ValueError`` naming a self-loop or a cycle.

    Works on any ``parent -> children`` mapping (a tree, or a DAG whose nodes have
    several parents); iterative, linear in the edges below ``root``.
    """
    if not isinstance(children, Mapping):
        raise ValueError(f"children must be a mapping parent -> [children], got {type(children).__name__}")
    kids: dict[N, list[N]] = {}
    stack = [root]
    while stack:
        n = stack.pop()
        if n in kids:
            continue
        cs = kids[n] = _distinct_children(children, n)
        if n in cs:
            raise ValueError(f"self-loop on {n!r}: it is listed among its own children")
        stack.extend(c for c in cs if c not in kids)
    n_parents = dict.fromkeys(kids, 0)
    for cs in kids.values():
        for c in cs:
            n_parents[c] += 1
    left = dict(n_parents)
    order: list[N] = []
    queue = deque([root] if left[root] == 0 else [])
    while queue:
        n = queue.popleft()
        order.append(n)
        for c in kids[n]:
            left[c] -= 1
            if left[c] == 0:
                queue.append(c)
    check_node_ids([(p, c) for p, cs in kids.items() for c in cs], "edge")
    if len(order) != len(kids):
        cycle = _cycle_among([n for n in kids if left[n] > 0], kids)
        raise ValueError(f"the children contain a cycle: {_describe_cycle(cycle)}")
    return order, kids, n_parents


def _cycle_among(stuck: list, kids: Mapping[N, Sequence[N]]) -> list[N]:
    """A cycle through the nodes Kahn's algorithm could not order (each has a parent
    among them), as ``[a, b, ..., a]`` in the parent -> child direction, starting at its
    node that comes first in ``stuck`` (the same message on every run)."""
    stuck_set = set(stuck)
    parent = {c: p for p in stuck for c in kids[p] if c in stuck_set}
    node = stuck[0]
    pos: dict = {}
    path: list = []
    while node not in pos:
        pos[node] = len(path)
        path.append(node)
        node = parent[node]
    cyc = list(reversed(path[pos[node]:]))  # parent -> child steps
    rank = {n: i for i, n in enumerate(stuck)}
    start = min(range(len(cyc)), key=lambda i: rank[cyc[i]])
    cyc = cyc[start:] + cyc[:start]
    return cyc + [cyc[0]]


def single_root(roots: Sequence[N], root: N | None = None) -> N:
    """The root to use: ``root`` if given (it must be one of ``roots``), else the only one."""
    if root is not None:
        if root not in roots:
            raise ValueError(f"{root!r} is not a root of the tree (roots: {list(roots)[:5]})")
        return root
    if len(roots) != 1:
        raise ValueError(f"the edges form a forest with {len(roots)} roots ({list(roots)[:5]}...); "
                         "pass root= or add a virtual root above them")
    return roots[0]


def bfs_order(children: Mapping[N, Sequence[N]], root: N) -> list[N]:
    """Nodes below (and including) ``root`` in breadth-first order, each once.

    Raises ``ValueError`` naming a self-loop or a cycle below ``root``."""
    _topological(children, root)
    return list(_bfs(children, [root]))


def depths(children: Mapping[N, Sequence[N]], root: N) -> dict[N, int]:
    """Depth of every node below ``root`` (the root has depth 0): the number of edges on
    the shortest path from ``root`` (a node with several parents takes the nearest).

    Raises ``ValueError`` naming a self-loop or a cycle below ``root``."""
    _topological(children, root)
    out = {root: 0}
    queue = deque([root])
    while queue:
        n = queue.popleft()
        d = out[n] + 1
        for c in children.get(n, ()):
            if c not in out:
                out[c] = d
                queue.append(c)
    return out


def parents_of(children: Mapping[N, Sequence[N]]) -> dict[N, N]:
    """``child -> parent`` from a children map; ``ValueError`` for a node with two parents."""
    out: dict[N, N] = {}
    for p in children:
        for c in _distinct_children(children, p):
            if out.setdefault(c, p) != p:
                raise ValueError(f"node {c!r} has two parents: {out[c]!r} and {p!r} (a tree needs one)")
    return out


def transitive_closure(children: Mapping[N, Sequence[N]], root: N) -> list[tuple[N, N]]:
    """All ``(ancestor, descendant)`` pairs below ``root``, each once, in topological
    (for a tree: breadth-first) order of the descendant, its ancestors from the root down.

    ``children`` maps a node to its children; a node may have several parents (a DAG,
    e.g. WordNet's second hypernyms): its ancestors are those of all its parents.  A
    repeated child counts once.  Raises ``ValueError`` naming a self-loop or a cycle
    below ``root`` (before any pair is built).  Reverse the pairs for the ``(hyponym,
    hypernym)`` orientation of :mod:`hypermem.data.wordnet`.
    """
    order, kids, n_parents = _topological(children, root)
    above: dict[N, tuple[N, ...]] = {root: ()}  # ancestors of a node, root first
    merged: dict[N, dict[N, None]] = {}  # ancestors collected so far for nodes with several parents
    pairs: list[tuple[N, N]] = []
    for n in order:
        if n in merged:
            above[n] = tuple(merged.pop(n))
        pairs.extend((a, n) for a in above[n])
        line = above[n] + (n,)
        for c in kids[n]:
            if n_parents[c] == 1:
                above[c] = line
            else:
                merged.setdefault(c, {}).update(dict.fromkeys(line))
    return pairs


def tree_from_edges(edges: Iterable[tuple[N, N]], root: N | None = None
                    ) -> tuple[dict[N, list[N]], N]:
    """Check ``edges`` and return ``(children, root)`` (see :func:`children_map`)."""
    children, roots = children_map(edges)
    if not children:
        raise ValueError("the tree has no edges")
    return children, single_root(roots, root)
