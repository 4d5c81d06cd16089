"""Directed acyclic graphs given as ``node -> direct parents``: their transitive closure."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

__all__ = ["hypernym_closure"]


def hypernym_closure(parents: Mapping[str, Sequence[str]]) -> dict[str, set[str]]:
    """All ancestors of every node of a DAG given as ``node -> direct parents``.

    Iterative (Kahn's topological order), so depth is unlimited; raises ``ValueError``
    naming a node on a cycle.
    """
    nodes = set(parents)
    for ps in parents.values():
        nodes.update(ps)
    children: dict[str, list[str]] = {n: [] for n in nodes}
    pending = {n: 0 for n in nodes}
    for n, ps in parents.items():
        for p in set(ps):
            children[p].append(n)
            pending[n] += 1
    ancestors: dict[str, set[str]] = {n: set() for n in nodes}
    queue = [n for n in nodes if pending[n] == 0]
    done = 0
    while queue:
        p = queue.pop()
        done += 1
        for c in children[p]:
            anc = ancestors[c]
            anc.add(p)
            anc |= ancestors[p]
            pending[c] -= 1
            if pending[c] == 0:
                queue.append(c)
    if done != len(nodes):
        stuck = sorted(n for n in nodes if pending[n] > 0)[0]
        raise ValueError(f"the hierarchy has a cycle through {stuck!r}")
    return ancestors
