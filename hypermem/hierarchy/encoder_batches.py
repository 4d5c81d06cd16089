r"""Batches for training a hierarchy encoder fast: every distinct entity encoded once.

HiT's trainer (He et al. 2024) feeds triplets ``(child, parent, negative)``, ten per
positive edge, and encodes all three texts of each: 30 encodings per positive.  Here a
batch is built around parents instead:

1. each epoch, every parent's children (from the training edges) are shuffled and cut into
   groups of at most ``children_per_parent``; the groups are shuffled and packed into
   batches of about ``batch_size`` positives, so an epoch visits every edge once, and the
   children of one parent -- each other's **hard negatives** (siblings) -- share a batch;
2. a child with no sibling in the batch brings one from the training graph (at most
   ``batch_size / 4`` such extras a batch), when it has one;
3. the batch's distinct entities (children, parents, extras) are encoded once, and each
   positive gets ``negatives`` negative parents from among them: its in-batch siblings
   first (up to ``hard_negatives``), then random batch entities, never the child or one of
   its known ancestors (the closure of the training edges);
4. for the in-batch contrastive loss, every batch entity except the child and its known
   ancestors other than the parent is a candidate;
5. for the depth loss, each entity's level: its hops below the nearest root of the
   training edges (:func:`levels`; ``-1`` for an entity no edge names).

About 1.3 encodings a positive instead of 30.  Batches are a pure function of
``(seed, epoch)``, so a resumed run sees the same ones.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

import torch

from ..data.dag import hypernym_closure
from .tree import depths

__all__ = ["EncoderBatch", "EdgeBatches", "closure_sets", "levels"]


def closure_sets(edges: Iterable[tuple[int, int]], n: int) -> list[set[int]]:
    """``ancestors[e]`` for entities ``0..n-1`` from integer ``(child, parent)`` edges."""
    parents: dict[int, list[int]] = {}
    for c, p in edges:
        parents.setdefault(c, []).append(p)
    anc = hypernym_closure(parents)
    return [set(anc.get(i, ())) for i in range(n)]


def levels(edges: Iterable[tuple[int, int]], n: int) -> torch.Tensor:
    """Level of entities ``0..n-1`` under integer ``(child, parent)`` edges: 0 for a root
    (a parent with no parent), else the fewest hops down from a root
    (:func:`hypermem.hierarchy.tree.depths` below a virtual root over all roots; a cycle is a
    ``ValueError``); ``-1`` for an entity that no edge names."""
    kids: dict[int, list[int]] = {}
    has_parent: set[int] = set()
    for c, p in edges:
        kids.setdefault(p, []).append(c)
        has_parent.add(c)
    kids[-1] = sorted(set(kids) - has_parent)
    out = [-1] * n
    for e, d in depths(kids, -1).items():
        if e >= 0:
            out[e] = d - 1
    return torch.tensor(out, dtype=torch.long)


@dataclass
class EncoderBatch:
    """One batch: ``entities`` (ids into the entity list, the order of the encoded points),
    ``child`` / ``parent`` ``(P,)`` and ``negatives`` ``(P, K)`` indices into ``entities``
    (``-1`` pads), ``candidates`` ``(P, U)`` the contrastive mask, ``levels`` ``(U,)`` the
    entities' levels (:func:`levels`)."""

    entities: list[int]
    child: torch.Tensor
    parent: torch.Tensor
    negatives: torch.Tensor
    candidates: torch.Tensor
    levels: torch.Tensor | None = None

    def __len__(self) -> int:
        return int(self.child.numel())


def _cuts(sizes: list[int], n: int) -> list[int]:
    """Where to cut a list of groups of ``sizes`` edges into exactly ``n`` non-empty runs of
    nearly equal edge counts (``n`` <= the groups): run ``k`` starts at the first group whose
    edges before it reach ``k/n`` of all, or where the groups left are just enough."""
    total, cuts, before = sum(sizes), [], 0
    for j, size in enumerate(sizes):
        k = len(cuts) + 1
        if k < n and j > (cuts[-1] if cuts else 0) and (before * n >= k * total or len(sizes) - j <= n - k):
            cuts.append(j)
        before += size
    return cuts


class EdgeBatches:
    """Epochs of :class:`EncoderBatch` over integer ``edges`` ``(child, parent)``.

    ``ancestors[e]`` is the set of known ancestors of entity ``e`` (excluded from its
    negatives)."""

    def __init__(self, edges: Sequence[tuple[int, int]], ancestors: Sequence[set[int]], *, batch_size: int = 128,
                 children_per_parent: int = 4, negatives: int = 10, hard_negatives: int = 5, seed: int = 0) -> None:
        if batch_size < 2:
            raise ValueError(f"batch_size must be at least 2, got {batch_size}")
        if children_per_parent < 1 or negatives < 1 or hard_negatives < 0:
            raise ValueError("children_per_parent and negatives must be >= 1, hard_negatives >= 0")
        if not edges:
            raise ValueError("no training edges")
        self.edges = [(int(c), int(p)) for c, p in edges]
        self.ancestors = ancestors
        self.batch_size = int(batch_size)
        self.m = int(children_per_parent)
        self.k = int(negatives)
        self.hard = min(int(hard_negatives), self.k)
        self.seed = int(seed)
        self.kids: dict[int, list[int]] = {}
        self.parents: dict[int, list[int]] = {}
        for c, p in self.edges:
            self.kids.setdefault(p, []).append(c)
            self.parents.setdefault(c, []).append(p)
        self.levels = levels(self.edges, len(ancestors))
        groups = sum(-(-len(kids) // self.m) for kids in self.kids.values())
        self.batches = max(1, min(round(len(self.edges) / self.batch_size), groups))

    def __len__(self) -> int:
        """Batches per epoch, the same every epoch (:meth:`epoch` packs exactly this many):
        ``round(edges / batch_size)``, at most one per sibling group."""
        return self.batches

    def _siblings(self, c: int) -> set[int]:
        out = set()
        for p in self.parents.get(c, ()):
            out.update(self.kids[p])
        out.discard(c)
        return out - self.ancestors[c]

    def epoch(self, epoch: int) -> Iterator[EncoderBatch]:
        """The batches of epoch ``epoch`` (seeded by ``(seed, epoch)``)."""
        rng = random.Random(self.seed * 1_000_003 + epoch)
        groups: list[list[tuple[int, int]]] = []
        for p in sorted(self.kids):
            kids = list(self.kids[p])
            rng.shuffle(kids)
            groups.extend([(c, p) for c in kids[i:i + self.m]] for i in range(0, len(kids), self.m))
        rng.shuffle(groups)
        cuts = [*_cuts([len(g) for g in groups], len(self)), len(groups)]
        for a, b in zip([0, *cuts], cuts):
            yield self._assemble([e for g in groups[a:b] for e in g], rng)

    def _assemble(self, pos: list[tuple[int, int]], rng: random.Random) -> EncoderBatch:
        ents: dict[int, int] = {}
        for c, p in pos:
            ents.setdefault(c, len(ents))
            ents.setdefault(p, len(ents))
        extras = 0
        for c, _ in pos:
            if extras >= self.batch_size // 4:
                break
            sib = self._siblings(c)
            if sib and not any(s in ents for s in sib):
                ents.setdefault(rng.choice(sorted(sib)), len(ents))
                extras += 1
        order = list(ents)
        P, U = len(pos), len(order)
        neg = torch.full((P, self.k), -1, dtype=torch.long)
        cand = torch.ones(P, U, dtype=torch.bool)
        for i, (c, p) in enumerate(pos):
            anc = self.ancestors[c]
            bad = {ents[a] for a in anc if a in ents}
            cand[i, ents[c]] = False
            for j in bad:
                cand[i, j] = False
            cand[i, ents[p]] = True
            hard = [ents[s] for s in self._siblings(c) if s in ents]
            rng.shuffle(hard)
            chosen = hard[: self.hard]
            taken = set(chosen) | bad | {ents[c], ents[p]}
            pool = [j for j in range(U) if j not in taken]
            rng.shuffle(pool)
            chosen += pool[: self.k - len(chosen)]
            neg[i, : len(chosen)] = torch.tensor(chosen, dtype=torch.long)
        return EncoderBatch(order, torch.tensor([ents[c] for c, _ in pos]), torch.tensor([ents[p] for _, p in pos]),
                            neg, cand, self.levels[torch.tensor(order, dtype=torch.long)])
