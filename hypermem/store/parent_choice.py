r"""Which voted candidate is a text's parent: the vote's share and the text's own evidence.

In a store that holds a tree, the neighbours' vote (:mod:`hypermem.store.vote`) finds the
candidates: on WordNet's unseen nouns a true ancestor within 2 hops is among them for 95% of
the texts, yet the best-voted one is right for under half.  What the vote does not see is the
text itself and the shape of the tree, so ``parent="auto"`` and the suggestions rank the voted
(and named) candidates ``c`` of text ``t`` by::

    score(c) = share(c) + mu [t names c] + nu [c is the first memory t names]
               + a cos(t, c) + b log(1 + children(c))

* ``share(c)``: the vote share; ``mu``: the mention term (:data:`~hypermem.store.mentions.MENTION_SHARE`);
* the *first* memory a text names after its own title is its genus in a definition and its
  thing in a note (:func:`~hypermem.store.mentions.first_mentioned`), the substring rule of
  taxonomy induction sharpened by position (definitions put the genus first: Hearst-style
  "X: a Y that ...", cf. the genus-differentia reading of dictionary glosses, Chodorow et al.,
  "Extracting semantic hierarchies from a large on-line dictionary", ACL 1985);
* ``cos(t, c)``: the cosine of the embedder's vectors (the vote sees the text only through its
  neighbours; a candidate voted for by neighbours unlike the text is a weaker guess);
* ``children(c)``: the memories filed under ``c``, a prior that a memory others were filed
  under is a parent (taxonomy expansion's "popular anchor" bias, e.g. TaxoExpan, Shen et al.
  WWW 2020).

``nu``, ``a`` and ``b`` (``mu`` beside them, kept at 0.1) were chosen on the validation nouns of
WordNet's unseen-entity split (a grid; the best mean within-2-hops rate of ``parent="auto"``
over MiniLM cosine and the trained ball encoder on nouns written as ``"lemma: definition"`` and
MiniLM on bare lemmas: 0.425 -> 0.453; benchmarks/RESULTS.md, "the text's own evidence").  A
larger cosine weight helped sentences and hurt lemmas.  A text that is all title (a lemma, a
note of up to four words) names no *first* memory.

With a placement reranker (:mod:`hypermem.embed.reranker`, ``Memory.reranker``), the rule runs
with the reranker's own ``nu`` and ``a`` (it reads the text itself, so the rule leans less on the
first name and the cosine), then its best ``n`` candidates are re-scored by
``score(c) + w ce(t, c)``, the cross-encoder's reading of the text and the candidate together
(:func:`reranked`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Sequence

__all__ = ["CHILDREN_SHARE", "COSINE_SHARE", "FIRST_SHARE", "placement_order", "reranked"]

FIRST_SHARE = 0.15
"""``nu``: the share the first memory a text names adds (module docstring)."""
COSINE_SHARE = 0.2
"""``a``: the weight of the cosine of the text and the candidate."""
CHILDREN_SHARE = 0.02
"""``b``: the weight of ``log(1 + children)`` of the candidate."""


def placement_order(ranked: Sequence[tuple[str, float]], first: Collection[str], cos: Sequence[float],
                    children: Callable[[str], int], *, nu: float = FIRST_SHARE, a: float = COSINE_SHARE,
                    b: float = CHILDREN_SHARE) -> list[tuple[str, float]]:
    """The candidates ``ranked`` ``(id, share + mu [named])`` (the vote's output,
    :func:`~hypermem.store.vote.neighbour_vote`) re-scored as the module docstring says and
    sorted, the best first (ties keep the vote's order).  ``first``: the ids of the first memory
    the text names; ``cos``: the cosine of the text and each candidate, in ``ranked``'s order;
    ``children(id)``: how many memories sit directly under it."""
    if len(cos) != len(ranked):
        raise ValueError(f"one cosine per candidate: {len(cos)} for {len(ranked)}")
    scored = [(c, v + nu * (c in first) + a * float(x) + b * math.log1p(children(c)))
              for (c, v), x in zip(ranked, cos)]
    return sorted(scored, key=lambda t: -t[1])


def reranked(order: Sequence[tuple[str, float]], ce: Sequence[float], weight: float) -> list[tuple[str, float]]:
    """``order`` (sorted, the best first) with its first ``len(ce)`` candidates re-scored by
    ``score + weight * ce`` and sorted again; the others keep their order after them, scored
    ``score + weight * min(ce)`` (so the scores still fall along the list)."""
    n = len(ce)
    if n == 0:
        return list(order)
    if n > len(order):
        raise ValueError(f"one reranker score per re-scored candidate: {n} for {len(order)}")
    head = sorted(((c, v + weight * float(x)) for (c, v), x in zip(order, ce)), key=lambda t: -t[1])
    low = weight * min(float(x) for x in ce)
    return head + [(c, v + low) for c, v in order[n:]]
