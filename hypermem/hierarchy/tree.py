"""Rooted-tree utilities shared by the Sarkar layout, training and evaluation.

A tree is given as ``(parent, child)`` edges between hashable node labels.  Every
function is iterative (explicit queues, no recursion), so a path 10,000 levels deep
works, and the input is checked: a repeated edge, a self-loop, a node with two parents
and a cycle each raise a ``ValueError`` that names the offending nodes.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Hashable, Iterable, Mapping, Sequence
from typing import TypeVar

N = TypeVar("N", bound=Hashable)


def children_map(edges: Iterable[tuple[N, N]]) -> tuple[dict[N, list[N]], list[N]]:
    """``parent -> [children]`` (in edge order) and the roots (nodes without a parent).

    Raises ``ValueError`` for a malformed edge, a repeated edge, a self-loop, a node
    with two parents, or a cycle (a component without a root).
    """
    children: dict[N, list[N]] = {}
    parent: dict[N, N] = {}
    seen: set[tuple[N, N]] = set()
    for i, edge in enumerate(edges):
        try:
            p, c = edge
        except (TypeError, ValueError) as exc:
            raise ValueError(f"edge {i} must be a (parent, child) pair, got {edge!r}") from exc
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
        raise ValueError(f"the edges contain a cycle: {' -> '.join(map(repr, on_cycle))}")
    return children, roots


def _bfs(children: Mapping[N, Sequence[N]], roots: Iterable[N]):
    queue = deque(roots)
    while queue:
        n = queue.popleft()
        yield n
        queue.extend(children.get(n, ()))


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
    """Nodes below (and including) ``root`` in breadth-first order."""
    return list(_bfs(children, [root]))


def depths(children: Mapping[N, Sequence[N]], root: N) -> dict[N, int]:
    """Depth of every node below ``root`` (the root has depth 0)."""
    out = {root: 0}
    queue = deque([root])
    while queue:
        n = queue.popleft()
        d = out[n] + 1
        for c in children.get(n, ()):
            out[c] = d
            queue.append(c)
    return out


def parents_of(children: Mapping[N, Sequence[N]]) -> dict[N, N]:
    """``child -> parent`` from a children map."""
    return {c: p for p, cs in children.items() for c in cs}


def transitive_closure(children: Mapping[N, Sequence[N]], root: N) -> list[tuple[N, N]]:
    """All ``(ancestor, descendant)`` pairs below ``root``, in breadth-first order of the
    descendant.  Reverse the pairs for the ``(hyponym, hypernym)`` orientation of
    :mod:`hypermem.data.wordnet`."""
    pairs: list[tuple[N, N]] = []
    path: dict[N, tuple[N, ...]] = {root: ()}
    queue = deque([root])
    while queue:
        n = queue.popleft()
        above = path[n] + (n,)
        for c in children.get(n, ()):
            path[c] = above
            pairs.extend((a, c) for a in above)
            queue.append(c)
    return pairs


def tree_from_edges(edges: Iterable[tuple[N, N]], root: N | None = None
                    ) -> tuple[dict[N, list[N]], N]:
    """Check ``edges`` and return ``(children, root)`` (see :func:`children_map`)."""
    children, roots = children_map(edges)
    if not children:
        raise ValueError("the tree has no edges")
    return children, single_root(roots, root)
