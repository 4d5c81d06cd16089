"""Caseless, normalised text for matching: one home for the lexical search and the filters.

:func:`fold` maps ``text`` to the form in which two spellings of the same words compare equal:

    fold(s) = NFKC(casefold(NFKC(s)) with "i" + U+0307 -> "i" and default ignorables removed)

an approximation of Unicode's ``toNFKC_Casefold`` (Unicode Standard Annex #15 and Chapter 3.13,
"Default Case Algorithms").  NFKC composes a decomposed (NFD) ``Tiếng`` (``e`` + U+0302 +
U+0301) into the composed (NFC) one and folds compatibility forms (``ﬁ`` -> ``fi``, full-width
``Ａ`` -> ``A``, half-width katakana to full-width); full case folding takes ``ß`` to ``ss``
(``STRASSE`` meets ``Straße``), and the Turkish ``İ`` folds to ``i`` + U+0307 COMBINING DOT
ABOVE, whose dot is dropped so that ``İstanbul`` meets ``istanbul``; soft hyphens, zero-width
spaces and joiners, directional marks, word joiners and byte-order marks are
removed.  ASCII text takes the fast path ``str.lower`` (the same result).

The BM25 tokeniser (:mod:`hypermem.retrieval.bm25`) and the store's ``$text_match_insensitive``
filter (:mod:`hypermem.store.filters`) use it (``$text_match`` compares :func:`canonical` text:
NFC, the same characters whichever way they were composed, case kept); the inspector page's
search and filter boxes do the same in JavaScript (``hypermem/viz/assets/core.js``).
"""

from __future__ import annotations

import re
import unicodedata

__all__ = ["canonical", "fold"]

_IGNORABLE = re.compile("[\u00ad\u200b-\u200f\u2060\ufeff]")
"""Default-ignorable code points removed by :func:`fold`: soft hyphen, zero-width space,
non-joiner and joiner, the left-to-right and right-to-left marks, word joiner, byte-order mark."""


def fold(text: str) -> str:
    """``text`` normalised (NFKC) and case-folded for caseless matching (module docstring)."""
    if text.isascii():
        return text.lower()
    s = unicodedata.normalize("NFKC", text).casefold()
    s = _IGNORABLE.sub("", s.replace("i\u0307", "i"))
    return unicodedata.normalize("NFKC", s)


def canonical(text: str) -> str:
    """``text`` in Unicode's canonical composition, NFC (ASCII as it is): canonically equivalent
    spellings (an NFD ``Tiếng`` and the NFC one) become the same string, nothing else changes."""
    return text if text.isascii() else unicodedata.normalize("NFC", text)
