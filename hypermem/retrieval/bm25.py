r"""Okapi BM25 over a growing, changing set of texts, kept incrementally.

The score of document :math:`D` for a query :math:`Q` (Robertson & Zaragoza, "The
Probabilistic Relevance Framework: BM25 and Beyond", 2009) is

.. math::

    \operatorname{bm25}(D, Q) = \sum_{t \in Q} \operatorname{idf}(t)\,
        \frac{f(t, D)\,(k_1 + 1)}{f(t, D) + k_1 (1 - b + b\,|D| / \overline{|D|})},
    \qquad \operatorname{idf}(t) = \ln\Bigl(1 + \frac{N - n(t) + 0.5}{n(t) + 0.5}\Bigr),

with :math:`f(t, D)` the count of term :math:`t` in :math:`D`, :math:`n(t)` the number of
documents holding it, :math:`N` the number of documents and :math:`\overline{|D|}` their mean
length; the idf is Lucene's, never negative.  A query term repeated counts once per repeat.
Defaults :math:`k_1 = 1.2`, :math:`b = 0.75`.

:class:`BM25Index` keeps the postings (term -> {row: count}) and the document lengths, so that
adding, replacing or removing a text costs its own length, and scores the documents that hold a
query term (the others score 0).  Documents are named by any hashable key (the store uses memory
ids).  Texts are tokenised by :func:`tokenize`: lower-cased Unicode word characters, split at
everything else.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Hashable, Iterable, Sequence

import torch

__all__ = ["BM25Index", "tokenize"]

_WORD = re.compile(r"\w+", re.UNICODE)


def tokenize(text: str) -> list[str]:
    """The terms of ``text``: maximal runs of Unicode word characters, lower-cased."""
    return _WORD.findall(text.lower())


class BM25Index:
    """Okapi BM25 postings over documents named by keys (module docstring), kept incrementally."""

    def __init__(self, k1: float = 1.2, b: float = 0.75):
        if not (k1 >= 0 and 0 <= b <= 1):
            raise ValueError(f"BM25 needs k1 >= 0 and 0 <= b <= 1, got k1={k1!r}, b={b!r}")
        self.k1, self.b = float(k1), float(b)
        self.postings: dict[str, dict[Hashable, int]] = {}
        self.lengths: dict[Hashable, int] = {}
        self.terms: dict[Hashable, tuple[str, ...]] = {}  # the distinct terms of each document
        self.total = 0

    def __len__(self) -> int:
        return len(self.lengths)

    def __contains__(self, key: object) -> bool:
        return key in self.lengths

    def add(self, key: Hashable, text: str) -> None:
        """Index ``text`` as document ``key`` (replacing what it held)."""
        if key in self.lengths:
            self.remove(key)
        terms = Counter(tokenize(text))
        for t, f in terms.items():
            self.postings.setdefault(t, {})[key] = f
        n = sum(terms.values())
        self.lengths[key] = n
        self.terms[key] = tuple(terms)
        self.total += n

    def add_many(self, keys: Iterable[Hashable], texts: Iterable[str]) -> None:
        for k, t in zip(keys, texts):
            self.add(k, t)

    def remove(self, key: Hashable) -> None:
        """Forget document ``key`` (nothing if it is not indexed)."""
        n = self.lengths.pop(key, None)
        if n is None:
            return
        self.total -= n
        for t in self.terms.pop(key):
            p = self.postings[t]
            del p[key]
            if not p:
                del self.postings[t]

    def idf(self, term: str) -> float:
        """Lucene's ``ln(1 + (N - n + 0.5) / (n + 0.5))`` of ``term``."""
        n, N = len(self.postings.get(term, ())), len(self.lengths)
        return math.log(1.0 + (N - n + 0.5) / (n + 0.5))

    def scores(self, query: str) -> dict[Hashable, float]:
        """BM25 of every document holding a query term (the others score 0)."""
        out: dict[Hashable, float] = {}
        if not self.lengths:
            return out
        avg = self.total / len(self.lengths) or 1.0
        k1, b = self.k1, self.b
        for term, times in Counter(tokenize(query)).items():
            p = self.postings.get(term)
            if not p:
                continue
            w = times * self.idf(term)
            lengths = self.lengths
            for key, f in p.items():
                out[key] = out.get(key, 0.0) + w * f * (k1 + 1.0) / (f + k1 * (1.0 - b + b * lengths[key] / avg))
        return out

    def dense(self, query: str, keys: Sequence[Hashable]) -> torch.Tensor:
        """:meth:`scores` of ``keys``, in their order (float64; 0 for a key without a term)."""
        s = self.scores(query)
        return torch.tensor([s.get(k, 0.0) for k in keys], dtype=torch.float64)

    @classmethod
    def build(cls, texts: Sequence[str], k1: float = 1.2, b: float = 0.75) -> BM25Index:
        """An index of ``texts`` as documents ``0..len(texts)-1``."""
        index = cls(k1, b)
        index.add_many(range(len(texts)), texts)
        return index
