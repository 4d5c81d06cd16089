r"""Where a text belongs in a filed tree: a vote of its nearest memories and their ancestors.

When the store already holds a tree (memories with declared or auto-chosen parents), the best
evidence for where a new text belongs is where its neighbours were filed.  Each of the text's
``k`` nearest memories ``n`` (cosine of the embedder's vectors, ``cos(t, n)``) casts a weight

    w_n = max(cos(t, n), 0) ** alpha * time_weight(n) ** time_coef

for itself (times ``self_weight``: a sibling of the text is a weaker guess than its parent) and
for each of its ancestors ``a`` up to ``hops`` links above it (times ``decay ** (hop - 1)``)::

    vote(c) = sum_n w_n ( self_weight [c = n] + sum_{h=1..hops} decay^(h-1) [c = anc_h(n)] )

and candidates rank by their share ``vote(c) / sum_n w_n``, plus ``mu`` for each memory the text
names (:mod:`hypermem.store.mentions`: a definition's genus, a note's thing).  This is the nearest-neighbour
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
from collections.abc import Callable, Iterable

from .mentions import MENTION_SHARE

__all__ = ["FILED_MIN", "VOTE_ALPHA", "VOTE_DECAY", "VOTE_HOPS", "VOTE_K", "VOTE_SELF", "filed_share",
           "neighbour_vote", "vote_weight"]

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
                   mention: float = MENTION_SHARE) -> list[tuple[str, float]]:
    """Candidates ``(id, share)``, the best first (ties: the order they were first voted for,
    then the order of ``mentioned``).

    ``neighbours``: ``(id, cosine, time factor)`` of the nearest memories (module docstring;
    the time factor is 1 under ``NoDecay``); ``parent_of(id)``: its parent id or None;
    ``allowed(id)``: whether a candidate may be suggested (filters, ``at_time``); None: all.
    ``mentioned``: the memories the text names (:mod:`hypermem.store.mentions`), each adding
    ``mention`` to its share.  An empty list when no neighbour has a positive weight."""
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
    ranked = sorted(votes.items(), key=lambda kv: -kv[1])  # stable: ties keep first-vote order
    return [(c, v / total) for c, v in ranked]
