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
ids).  Texts are tokenised by :func:`tokenize`: the text folded (:func:`~hypermem.retrieval.text_fold.fold`:
NFKC and full case folding, so that an NFD ``Tiếng`` meets the NFC one, ``STRASSE`` meets
``Straße`` and ``istanbul`` meets ``İstanbul``), split into words (runs of Unicode word
characters and the combining marks inside them, so that an Indic or a decomposed Vietnamese
word stays whole), English function words (:data:`STOPWORDS`) left out and the rest reduced to
their Porter stems (:mod:`hypermem.retrieval.stem`), so that ``painted`` meets ``painting``
and a question's ``what did ... the`` adds nothing (on LoCoMo conversations 0-4 this took the
hybrid search's R@10 from 0.628 to 0.666, ``benchmarks/RESULTS.md``).  Chinese, Japanese and
Korean are written without spaces between words, so a run of Han, Hiragana, Katakana or Hangul
characters gives its characters and its overlapping character bigrams (``東京都`` -> ``東``,
``京``, ``都``, ``東京``, ``京都``): Lucene's ``CJKBigramFilter`` with ``outputUnigrams``, the
usual word-segmenter-free CJK analysis (Kwok, "Comparing representations in Chinese
information retrieval", SIGIR 1997), so that a one-character query (``猫``) and a two-character
word (``東京``) both match inside a clause.  ASCII text takes a fast path with the same terms.
:func:`words` is the same split without stop list or stems; ``BM25Index(tokenizer=words)``
indexes by it (for text that is not English).  :data:`TOKENIZERS` names the built-in ones (a
saved store records its tokenizer by that name).
:meth:`BM25Index.extend` and :meth:`BM25Index.retract` grow and shrink one
document by a text, for documents made of many texts (:mod:`hypermem.store.lexical`).
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections import Counter
from collections.abc import Callable, Hashable, Iterable, Sequence
from functools import lru_cache

import torch

from .stem import porter_stem
from .text_fold import fold

__all__ = ["STOPWORDS", "TOKENIZERS", "BM25Index", "tokenize", "words"]

_WORD = re.compile(r"\w+", re.UNICODE)  # the ASCII fast path

_CJK = ("\u1100-\u11ff\u3005-\u3007\u3021-\u3029\u3031-\u3035\u303b\u303c\u3041-\u309f\u30a1-\u30fa"
        "\u30fc-\u30ff\u3131-\u318e\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff\ua960-\ua97f\uac00-\ud7a3"
        "\ud7b0-\ud7ff\uf900-\ufaff\uff66-\uffdc\U0001b000-\U0001b16f\U00020000-\U000323af")
"""Han (with its iteration and numeral marks), Hiragana, Katakana and Hangul (syllables and
jamo), as a regular-expression character range: the scripts split into character bigrams."""

STOPWORDS = frozenset("""
a an the and or but if then so than too very such no not nor only own same just
i me my myself we us our ours ourselves you your yours yourself yourselves he him his himself she her hers
herself it its itself they them their theirs themselves this that these those
what which who whom whose when where why how all any both each few more most other some
am is are was were be been being have has had having do does did doing done would could should can may
might must shall will
at by for from in into of off on onto out over under up down to with about above after again against
before below between during further once here there through until while as s t
""".split())
"""English function words (articles, pronouns, auxiliaries, wh-words, prepositions, conjunctions)
that :func:`tokenize` leaves out: they carry no topic, and a question is full of them."""


@lru_cache(maxsize=1)
def _pieces() -> re.Pattern:
    """A word (a word character that is not CJK, then such characters and combining marks) or
    a run of CJK characters (:data:`_CJK`).  Built once, on the first text that is not
    ASCII (it scans the code points for marks).  The marks outside the Basic Multilingual Plane are tried only at such a character:
    a long character class is read range by range, and the end of every word tests it."""
    bmp, astral = (_ranges([c for c in map(chr, r) if unicodedata.category(c)[0] == "M"])
                   for r in (range(0x10000), (*range(0x10000, 0x20000), *range(0xE0000, 0xE0200))))
    letter = f"[^\\W{_CJK}]"
    return re.compile(f"({letter}(?:{letter}+|[{bmp}]+|(?=[\\U00010000-\\U000e01ff])[{astral}]+)*)|([{_CJK}]+)")


def _ranges(chars: list[str]) -> str:
    """``chars`` (sorted) as the inside of a regular-expression character class."""
    out, start, prev = [], None, -2
    for c in [*map(ord, chars), -1]:
        if c != prev + 1:
            if start is not None:
                out.append(re.escape(chr(start)) + ("" if prev == start else "-" + re.escape(chr(prev))))
            start = c
        prev = c
    return "".join(out)


def _fold_split(text: str, english: bool) -> list[str]:
    """:func:`words` (``english=False``) or :func:`tokenize` (``english=True``) of a text that is
    not ASCII: folded, then split into words and CJK runs (module docstring)."""
    out: list[str] = []
    for word, run in _pieces().findall(fold(text)):
        if word:
            if not english:
                out.append(word)
            elif word not in STOPWORDS:
                out.append(porter_stem(word))
        else:
            out.extend(run)  # each character, then each overlapping bigram
            if len(run) > 1:
                out.extend(map(str.__add__, run, run[1:]))
    return out


def words(text: str) -> list[str]:
    """The words of ``text``, folded (NFKC, case-folded), with CJK runs as characters and
    character bigrams (module docstring); no stop list, no stems."""
    if text.isascii():  # the fast path: the same words as the folded split
        return _WORD.findall(text.lower())
    return _fold_split(text, False)


def tokenize(text: str) -> list[str]:
    """The BM25 terms of ``text``: its :func:`words` less :data:`STOPWORDS`, Porter-stemmed."""
    if text.isascii():  # the fast path: the same terms as the folded split
        return [porter_stem(w) for w in _WORD.findall(text.lower()) if w not in STOPWORDS]
    return _fold_split(text, True)


TOKENIZERS: dict[str, Callable[[str], list[str]]] = {"tokenize": tokenize, "words": words}
"""The built-in tokenizers by the name a saved store records (:mod:`hypermem.store.lexical_settings`)."""


class BM25Index:
    """Okapi BM25 postings over documents named by keys (module docstring), kept incrementally."""

    def __init__(self, k1: float = 1.2, b: float = 0.75, tokenizer: Callable[[str], list[str]] = tokenize):
        if not (k1 >= 0 and 0 <= b <= 1):
            raise ValueError(f"BM25 needs k1 >= 0 and 0 <= b <= 1, got k1={k1!r}, b={b!r}")
        self.k1, self.b, self.tokenizer = float(k1), float(b), tokenizer
        self.postings: dict[str, dict[Hashable, int]] = {}
        self.lengths: dict[Hashable, int] = {}
        self.terms: dict[Hashable, Counter] = {}  # each document's term counts
        self.total = 0

    def __len__(self) -> int:
        return len(self.lengths)

    def __contains__(self, key: object) -> bool:
        return key in self.lengths

    def add(self, key: Hashable, text: str) -> None:
        """Index ``text`` as document ``key`` (replacing what it held)."""
        if key in self.lengths:
            self.remove(key)
        self.extend(key, text)

    def add_many(self, keys: Iterable[Hashable], texts: Iterable[str]) -> None:
        for k, t in zip(keys, texts):
            self.add(k, t)

    def extend(self, key: Hashable, text: str) -> None:
        """Append ``text``'s terms to document ``key`` (a new, empty one if it is not indexed)."""
        counts = self.terms.setdefault(key, Counter())
        added = Counter(self.tokenizer(text))
        for t, f in added.items():
            counts[t] += f
            self.postings.setdefault(t, {})[key] = counts[t]
        n = sum(added.values())
        self.lengths[key] = self.lengths.get(key, 0) + n
        self.total += n

    def retract(self, key: Hashable, text: str) -> None:
        """Take ``text``'s terms out of document ``key`` again (the inverse of :meth:`extend`);
        the document stays indexed, possibly empty, until :meth:`remove`."""
        counts = self.terms.get(key)
        gone = Counter(self.tokenizer(text))
        if counts is None or any(counts[t] < f for t, f in gone.items()):
            raise ValueError(f"document {key!r} does not hold the text to retract")
        for t, f in gone.items():
            counts[t] -= f
            if counts[t]:
                self.postings[t][key] = counts[t]
            else:
                del counts[t]
                self._unpost(t, key)
        n = sum(gone.values())
        self.lengths[key] -= n
        self.total -= n

    def remove(self, key: Hashable) -> None:
        """Forget document ``key`` (nothing if it is not indexed)."""
        n = self.lengths.pop(key, None)
        if n is None:
            return
        self.total -= n
        for t in self.terms.pop(key):
            self._unpost(t, key)

    def _unpost(self, term: str, key: Hashable) -> None:
        p = self.postings[term]
        del p[key]
        if not p:
            del self.postings[term]

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
        for term, times in Counter(self.tokenizer(query)).items():
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
    def build(cls, texts: Sequence[str], k1: float = 1.2, b: float = 0.75,
              tokenizer: Callable[[str], list[str]] = tokenize) -> BM25Index:
        """An index of ``texts`` as documents ``0..len(texts)-1``."""
        index = cls(k1, b, tokenizer)
        index.add_many(range(len(texts)), texts)
        return index
