r"""Where a text belongs in a filed tree: a vote of its nearest memories and their ancestors.

When the store already holds a tree (memories with declared or auto-chosen parents), the best
evidence for where a new text belongs is where its neighbours were filed.  Each of the text's
``k`` nearest memories ``n`` (cosine of the embedder's vectors, ``cos(t, n)``) casts a weight

    w_n = max(cos(t, n), 0) ** alpha * time_weight(n) ** time_coef

for itself (times ``self_weight``: a sibling of the text is a weaker guess than its parent) and
for each of its ancestors ``a`` up to ``hops`` links above it (times ``decay ** (hop - 1)``)::

    vote(c) = sum_n w_n ( self_weight [c = n] + sum_{h=1..hops} decay^(h-1) [c = anc_h(n)] )

and candidates rank by their share ``vote(c) / sum_n w_n``, plus ``mu`` for each memory the text
names (:mod:`hypermem.store.mentions`: a definition's genus, a note's thing).  A parent's choice
(``suggest_parents``, ``parent="auto"``; not the root-free ancestors search, where an ancestor of
everything is a true answer) ranks by that share less the candidate's *chance share*, what
neighbours drawn at random from the ``N`` stored memories would give it
(:func:`chance_share`)::

    chance(c) = ( self_weight + sum_{h=1..hops} decay^(h-1) |memories h links below c| ) / N

so that a memory above most of the store (one root over a user's whole tree) wins only where
the neighbours point at it more than chance does: under one root the plain share filed 62-73%
of held-out texts at the root, less chance 13-18%, with the true parent +0.10 (Python's class
tree; level on WordNet's nouns; benchmarks/RESULTS.md, "a tree under one root").  This is the nearest-neighbour
parent baseline of taxonomy expansion (Shen et al., "TaxoExpan", WWW 2020; Jiang et al.,
"TaxoEnrich", WWW 2022), here with the ancestors' decay so that a neighbour's grandparent still
counts.  The default settings (``k = 20, alpha = 4, decay = 0.6, self_weight = 0.5, hops = 3``)
were chosen on the validation nouns of WordNet's unseen-entity split (seed 1) for the ball
encoder, its Euclidean twin and MiniLM alike (benchmarks/RESULTS.md, "The store places text").
The time factor is the store's score term ``time_coef * log(time_weight)`` exponentiated: a
stale neighbour votes less, as it ranks lower in ``search``.  The vote is evidence only where
the neighbours were filed: the store lets it decide when at least :data:`FILED_MIN` of the
neighbours' weight sits under a parent (:func:`filed_share`), and otherwise ranks by the
hierarchy encoder's pair score (a store being organised from scratch, whose first memories
are roots).
"""

from __future__ import annotations

import collections
from collections.abc import Callable, Iterable, Sequence

from .mentions import MENTION_SHARE

__all__ = ["FILED_MIN", "VOTE_ALPHA", "VOTE_DECAY", "VOTE_HOPS", "VOTE_K", "VOTE_SELF", "below_counts",
           "chance_share", "filed_share", "neighbour_vote", "vote_weight"]

VOTE_K = 20
"""Nearest memories that vote."""
VOTE_ALPHA = 4.0
"""Exponent of a neighbour's cosine in its weight."""
VOTE_DECAY = 0.6
"""A neighbour's vote for its ancestor ``hop`` links up is ``decay ** (hop - 1)``."""
VOTE_SELF = 0.5
"""A neighbour's vote for itself."""
VOTE_HOPS = 3
"""Ancestors of a neighbour that receive its vote."""
FILED_MIN = 0.5
"""The share of the neighbours' weight that must sit under a parent for the vote to decide
(:func:`filed_share`); below it a hierarchy encoder's pair score ranks instead."""


def vote_weight(cos: float, factor: float, alpha: float = VOTE_ALPHA) -> float:
    """A neighbour's weight ``w_n = max(cos, 0) ** alpha * factor`` (module docstring)."""
    return max(float(cos), 0.0) ** alpha * float(factor)


def below_counts(c: str, children: Callable[[str], Sequence[str]], hops: int = VOTE_HOPS) -> list[int]:
    """``[D_1(c), ..., D_hops(c)]``: the memories 1, 2, ... ``hops`` links below ``c``
    (``children(id)``: the ids directly under ``id``).  Its cost is ``c``'s descendants down to
    ``hops - 1`` levels."""
    counts, level = [], [c]
    for hop in range(1, hops + 1):
        if hop == hops:   # the last level is only counted
            counts.append(sum(len(children(p)) for p in level))
            break
        level = [k for p in level for k in children(p)]
        counts.append(len(level))
    return counts


def chance_share(counts: Sequence[int], n: int, *, self_weight: float = VOTE_SELF,
                 decay: float = VOTE_DECAY) -> float:
    """The share of the vote a memory gets by chance (module docstring): ``(self_weight +
    sum_h decay^(h-1) D_h) / n`` from its :func:`below_counts` ``D_h``; ``n``: the memories
    that could vote."""
    return (self_weight + sum(decay ** h * d for h, d in enumerate(counts))) / max(n, 1)


def filed_share(neighbours: Iterable[tuple[str, float, float]], parent_of: Callable[[str], str | None],
                alpha: float = VOTE_ALPHA) -> float:
    """The share of the neighbours' weight ``w_n`` (module docstring) carried by neighbours
    that have a parent: how much of the text's neighbourhood was filed (0 when none has a
    positive weight).  A neighbourhood of roots votes only for itself, i.e. for the nearest
    memory, a poor guess of a parent (WordNet: within 2 hops for 7% of the unseen nouns)."""
    total = filed = 0.0
    for nid, cos, factor in neighbours:
        w = vote_weight(cos, factor, alpha)
        total += w
        filed += w if parent_of(nid) is not None else 0.0
    return filed / total if total > 0.0 else 0.0


def neighbour_vote(neighbours: Iterable[tuple[str, float, float]], parent_of: Callable[[str], str | None],
                   allowed: Callable[[str], bool] | None = None, *, alpha: float = VOTE_ALPHA,
                   decay: float = VOTE_DECAY, self_weight: float = VOTE_SELF,
                   hops: int = VOTE_HOPS, mentioned: Iterable[str] = (),
                   mention: float = MENTION_SHARE,
                   chance: Callable[[str], float] | None = None) -> list[tuple[str, float]]:
    """Candidates ``(id, share)``, the best first (ties: the order they were first voted for,
    then the order of ``mentioned``).

    ``neighbours``: ``(id, cosine, time factor)`` of the nearest memories (module docstring;
    the time factor is 1 under ``NoDecay``); ``parent_of(id)``: its parent id or None;
    ``allowed(id)``: whether a candidate may be suggested (filters, ``at_time``); None: all.
    ``mentioned``: the memories the text names (:mod:`hypermem.store.mentions`), each adding
    ``mention`` to its share.  ``chance(id)``: a candidate's chance share (:func:`chance_share`),
    subtracted from its share for a parent's choice; None: the plain share.  An empty list
    when no neighbour has a positive weight."""
    votes: dict[str, float] = collections.defaultdict(float)
    total = 0.0
    for nid, cos, factor in neighbours:
        w = vote_weight(cos, factor, alpha)
        if w <= 0.0:
            continue
        total += w
        if allowed is None or allowed(nid):
            votes[nid] += self_weight * w
        a, seen = parent_of(nid), {nid}
        for hop in range(1, hops + 1):
            if a is None or a in seen:  # a root, or a cycle in a hand-made parent_of
                break
            seen.add(a)
            if allowed is None or allowed(a):
                votes[a] += w * decay ** (hop - 1)
            a = parent_of(a)
    if total <= 0.0:
        return []
    for c in mentioned:
        if allowed is None or allowed(c):
            votes[c] += mention * total
    shares = {c: v / total - (0.0 if chance is None else chance(c)) for c, v in votes.items()}
    return sorted(shares.items(), key=lambda kv: -kv[1])  # stable: ties keep first-vote order
