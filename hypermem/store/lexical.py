r"""The lexical side of the hybrid search: BM25 over a store's texts, kept in step with it.

With ``hybrid = λ > 0`` a search ranks by

.. math::

    -d(q, m) + \text{depth\_bias}\,\text{depth}(m) + \text{time\_coef}\,\log w(m)
        + λ\,\frac{\operatorname{bm25}(q, m)}{\max_{m'} \operatorname{bm25}(q, m')},

the store's score plus the Okapi BM25 score of the memory's text for the query text
(:mod:`hypermem.retrieval.bm25`, Robertson & Zaragoza 2009), divided by the best BM25 score of
the query over the store so that the term lies in ``[0, λ]`` whatever the query's length: a
convex fusion of a geometric and a lexical score (Bruch, Gai & Ingber, "An Analysis of Fusion
Functions for Hybrid Retrieval", ACM TOIS 2023, found it more accurate than reciprocal-rank
fusion once its weight is tuned).  ``λ`` is in distance units: ``λ = 0.3`` lets a memory that
holds the query's rarest words most often win over one that is 0.3 closer in the ball.

:data:`HYBRID_DEFAULT` is the weight chosen on LoCoMo conversations 0-4
(``benchmarks/bench_locomo.py``); :func:`default_hybrid` turns it on for every embedder but
the hashing one, which is itself lexical (character n-grams) and keeps the seed's ranking.

The index is not written to files: it is a function of the texts, which every store keeps, and
:class:`Lexical` rebuilds it from them on the first hybrid search after loading (and follows
adds, updates and removals incrementally, by the store's ``version``).
"""

from __future__ import annotations

from typing import Any

import torch

from ..embed import HashingEmbedder
from ..retrieval.bm25 import BM25Index

__all__ = ["HYBRID_DEFAULT", "Lexical", "default_hybrid"]

HYBRID_DEFAULT = 0.3
"""The lexical weight λ of the default hybrid search (chosen on LoCoMo conversations 0-4)."""


def default_hybrid(embedder: Any) -> float:
    """The default ``hybrid`` of a store with ``embedder``: 0 for the hashing embedder (the
    seed's ranking), :data:`HYBRID_DEFAULT` otherwise."""
    return 0.0 if isinstance(embedder, HashingEmbedder) else HYBRID_DEFAULT


class Lexical:
    """A :class:`~hypermem.retrieval.bm25.BM25Index` of a store's texts by memory id, synced
    with its :class:`~hypermem.store.state.MemoryState` before each use."""

    def __init__(self) -> None:
        self.index = BM25Index()
        self.texts: dict[str, str] = {}
        self.version = -1

    def sync(self, state) -> None:
        """Index the texts added or changed since the last sync; forget the removed ones."""
        if self.version == state.version:
            return
        ids = state.ids[: state.n]
        for i in ids:
            text = state.records[i].text
            old = self.texts.get(i)
            if old is not text and old != text:
                self.index.add(i, text)
                self.texts[i] = text
        if len(self.texts) > len(ids):
            for i in set(self.texts) - set(ids):
                self.index.remove(i)
                del self.texts[i]
        self.version = state.version

    def term(self, state, query: str, weight: float) -> torch.Tensor:
        """``weight * bm25 / max bm25`` of every row for ``query`` (float64 ``(n,)``, on the
        store's device); zeros when no memory holds a query word."""
        self.sync(state)
        out = torch.zeros(state.n, dtype=torch.float64)
        scores = self.index.scores(query)
        if scores:
            best = max(scores.values())
            if best > 0:
                rows = torch.tensor([state.row[i] for i in scores], dtype=torch.long)
                out[rows] = torch.tensor(list(scores.values()), dtype=torch.float64) * (weight / best)
        return out.to(state.device)
