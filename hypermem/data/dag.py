"""Directed acyclic graphs given as ``node -> direct parents``: their transitive closure."""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from typing import TypeVar

__all__ = ["MAX_CLOSURE", "ClosureTooLargeError", "CycleError", "check_acyclic", "hypernym_closure"]

MAX_CLOSURE = 10_000_000
"""The most ``(node, ancestor)`` pairs :func:`hypernym_closure` builds (about 0.6 GB of sets; the
WordNet noun hierarchy holds about 0.75 million).  A chain of ``n`` nodes holds ``n (n - 1) / 2``
pairs, so a file of a few hundred kilobytes could otherwise exhaust the memory."""

N = TypeVar("N", bound=Hashable)
"""A node: any hashable value (``str`` names, ``int`` indices), one type per graph."""


class ClosureTooLargeError(ValueError):
    """A hierarchy whose transitive closure holds more than :data:`MAX_CLOSURE` pairs."""


class CycleError(ValueError):
    """A cycle in a hierarchy; :attr:`cycle` holds its nodes, each a child of the next (the last
    a child of the first), so a reader can name the line of one of its edges."""

    def __init__(self, message: str, cycle: list[Hashable]):
        super().__init__(message)
        self.cycle = cycle


def hypernym_closure(parents: Mapping[N, Sequence[N]], limit: int | None = None) -> dict[N, set[N]]:
    """All ancestors of every node of a DAG given as ``node -> direct parents``.

    Iterative (Kahn's topological order), so depth is unlimited; raises :class:`CycleError`
    (a ``ValueError``) naming a cycle, each node a child of the next: ``'chair' -> 'furniture' -> 'chair'``
    (:func:`_a_cycle`).  The closure ``anc(v) = P(v) ∪ ⋃_{p ∈ P(v)} anc(p)`` (``P(v)``: the
    direct parents) is counted as it is built: past ``limit`` pairs (default :data:`MAX_CLOSURE`)
    it raises :class:`ClosureTooLargeError` before holding much more than that.
    """
    limit = MAX_CLOSURE if limit is None else limit
    nodes, children, pending = _graph(parents)
    ancestors: dict[N, set[N]] = {n: set() for n in nodes}
    queue = [n for n in nodes if pending[n] == 0]
    done = pairs = 0   # pairs: the entries of every set so far (sets only grow)
    while queue:
        p = queue.pop()
        done += 1
        for c in children[p]:
            anc = ancestors[c]
            before = len(anc)
            anc.add(p)
            anc |= ancestors[p]
            pairs += len(anc) - before
            if pairs > limit:
                raise ClosureTooLargeError(
                    f"the hierarchy's transitive closure holds more than {limit:,} (node, ancestor) pairs (a chain "
                    f"of n nodes holds n(n-1)/2; {len(nodes):,} nodes here): too large to build "
                    "(limit hypermem.data.dag.MAX_CLOSURE); lay out a deep tree with hypermem.hierarchy.sarkar_layout "
                    "or shadow_layout, which need no closure, or train on a shallower subset of the edges")
            pending[c] -= 1
            if pending[c] == 0:
                queue.append(c)
    if done != len(nodes):
        _refuse_cycle(parents, pending)
    return ancestors


def _graph(parents: Mapping[N, Sequence[N]]) -> tuple[set[N], dict[N, list[N]], dict[N, int]]:
    """The nodes, ``node -> children`` and every node's number of distinct parents."""
    nodes = set(parents)
    for ps in parents.values():
        nodes.update(ps)
    children: dict[N, list[N]] = {n: [] for n in nodes}
    pending = dict.fromkeys(nodes, 0)
    for n, ps in parents.items():
        for p in set(ps):
            children[p].append(n)
            pending[n] += 1
    return nodes, children, pending


def _refuse_cycle(parents: Mapping[N, Sequence[N]], pending: Mapping[N, int], labels=None) -> None:
    cycle = _a_cycle(parents, pending)
    if labels is not None:
        cycle = [labels[n] for n in cycle]
    raise CycleError(f"the hierarchy has a cycle (each node a child of the next): {_shown(cycle)}", cycle)


def check_acyclic(parents: Mapping[N, Sequence[N]], labels: Sequence | None = None) -> None:
    """Raise :class:`CycleError` naming a cycle of the graph ``node -> direct parents`` (nodes of
    one orderable type: ``str``, or ``int`` indices named by ``labels[i]`` in the message and
    :attr:`CycleError.cycle`), as :func:`hypernym_closure` does, without building the closure:
    Kahn's algorithm alone, linear in nodes and edges, ``O(n + e)``."""
    nodes, children, pending = _graph(parents)
    queue = [n for n in nodes if pending[n] == 0]
    done = 0
    while queue:
        p = queue.pop()
        done += 1
        for c in children[p]:
            pending[c] -= 1
            if pending[c] == 0:
                queue.append(c)
    if done != len(nodes):
        _refuse_cycle(parents, pending, labels)


def _a_cycle(parents: Mapping[N, Sequence[N]], pending: Mapping[N, int]) -> list[N]:
    """A cycle among the nodes Kahn's algorithm left (``pending > 0``), each node a child of the
    next, from the cycle's first node in sorted order.

    A left node has a parent that is left too (the one that never came off the queue), so
    following left parents from any left node must come back to a node already met: the nodes
    from that one on are a cycle.  Each node is met at most once: linear in nodes and edges.
    The walk starts at the smallest left node and takes the smallest left parent, so the
    message is the same on every run.
    """
    node = min(n for n, k in pending.items() if k > 0)
    at: dict[N, int] = {}
    path: list[N] = []
    while node not in at:
        at[node] = len(path)
        path.append(node)
        node = min(p for p in parents[node] if pending[p] > 0)
    cycle = path[at[node]:]
    first = cycle.index(min(cycle))
    return cycle[first:] + cycle[:first]


def _shown(cycle: Sequence[Hashable], show: int = 8) -> str:
    """``'a' -> 'b' -> 'a'``; a cycle of more than ``show`` nodes is cut in the middle."""
    if len(cycle) <= show:
        return " -> ".join(map(repr, [*cycle, cycle[0]]))
    shown = " -> ".join(map(repr, cycle[:show - 1]))
    return f"{shown} -> ... -> {cycle[-1]!r} -> {cycle[0]!r} ({len(cycle):,} nodes)"
