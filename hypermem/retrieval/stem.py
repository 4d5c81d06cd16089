r"""The Porter stemmer (M. F. Porter, "An algorithm for suffix stripping", *Program* 14(3), 1980).

A word is read as :math:`[C](VC)^m[V]` (runs of consonants ``C`` and vowels ``V``; ``y`` is a
vowel after a consonant); :math:`m`, its *measure*, gates each rule ``(condition) S1 -> S2``:
the suffix ``S1`` is replaced by ``S2`` only if the stem left before ``S1`` satisfies the
condition (``m > 0``, ``*v*`` the stem holds a vowel, ``*d`` it ends in a double consonant,
``*o`` it ends consonant-vowel-consonant with the last not ``w``, ``x`` or ``y``).  Steps 1a,
1b, 1c, 2, 3, 4, 5a and 5b run in order, each applying at most its longest matching suffix.
This is the 1980 paper's algorithm as published (no later "Porter2" changes), so
``connection``, ``connections``, ``connected`` and ``connecting`` all become ``connect``,
``relational`` becomes ``relat`` and ``generalization`` ``gener``.  Words of one or two letters
are left alone.  Pure Python, no data files: the lexical search's tokeniser
(:func:`hypermem.retrieval.bm25.tokenize`) uses it to match ``painted`` with ``painting``.
"""

from __future__ import annotations

from functools import lru_cache

__all__ = ["porter_stem"]


def _consonants(w: str) -> list[bool]:
    """Whether each letter of ``w`` is a consonant: not ``a e i o u``, and ``y`` only at the start
    or after a vowel; one pass, so a run of thousands of ``y`` costs no recursion."""
    out: list[bool] = []
    for i, c in enumerate(w):
        out.append(False if c in "aeiou" else (i == 0 or not out[i - 1]) if c == "y" else True)
    return out


def _cons(w: str, i: int) -> bool:
    return _consonants(w)[i]


def _measure(stem: str) -> int:
    """``m`` of ``stem`` read as ``[C](VC)^m[V]``."""
    m, prev_vowel = 0, False
    for cons in _consonants(stem):
        if prev_vowel and cons:
            m += 1
        prev_vowel = not cons
    return m


def _has_vowel(stem: str) -> bool:
    return not all(_consonants(stem))


def _double_cons(w: str) -> bool:
    return len(w) >= 2 and w[-1] == w[-2] and _cons(w, len(w) - 1)


def _cvc(w: str) -> bool:
    return (len(w) >= 3 and _cons(w, len(w) - 3) and not _cons(w, len(w) - 2) and _cons(w, len(w) - 1)
            and w[-1] not in "wxy")


def _replace(w: str, rules, min_m: int) -> str:
    """The first rule whose suffix ends ``w``: applied if its stem's measure exceeds ``min_m``."""
    for s1, s2 in rules:
        if w.endswith(s1):
            stem = w[: len(w) - len(s1)]
            return stem + s2 if _measure(stem) > min_m else w
    return w


_STEP2 = (("ational", "ate"), ("tional", "tion"), ("enci", "ence"), ("anci", "ance"), ("izer", "ize"),
          ("abli", "able"), ("alli", "al"), ("entli", "ent"), ("eli", "e"), ("ousli", "ous"),
          ("ization", "ize"), ("ation", "ate"), ("ator", "ate"), ("alism", "al"), ("iveness", "ive"),
          ("fulness", "ful"), ("ousness", "ous"), ("aliti", "al"), ("iviti", "ive"), ("biliti", "ble"))
_STEP2 = tuple(sorted(_STEP2, key=lambda r: -len(r[0])))
_STEP3 = (("icate", "ic"), ("ative", ""), ("alize", "al"), ("iciti", "ic"), ("ical", "ic"), ("ful", ""),
          ("ness", ""))
_STEP3 = tuple(sorted(_STEP3, key=lambda r: -len(r[0])))
_STEP4 = tuple(sorted(("al", "ance", "ence", "er", "ic", "able", "ible", "ant", "ement", "ment", "ent", "ion",
                       "ou", "ism", "ate", "iti", "ous", "ive", "ize"), key=lambda s: -len(s)))


def _step1ab(w: str) -> str:
    if w.endswith("sses"):
        w = w[:-2]
    elif w.endswith("ies"):
        w = w[:-2]
    elif w.endswith("ss"):
        pass
    elif w.endswith("s"):
        w = w[:-1]
    if w.endswith("eed"):
        return w[:-1] if _measure(w[:-3]) > 0 else w
    for suffix in ("ed", "ing"):
        if w.endswith(suffix) and _has_vowel(w[: -len(suffix)]):
            w = w[: -len(suffix)]
            if w.endswith(("at", "bl", "iz")):
                return w + "e"
            if _double_cons(w) and w[-1] not in "lsz":
                return w[:-1]
            if _measure(w) == 1 and _cvc(w):
                return w + "e"
            return w
    return w


def _step4(w: str) -> str:
    for s in _STEP4:
        if w.endswith(s):
            stem = w[: len(w) - len(s)]
            if _measure(stem) > 1 and (s != "ion" or stem.endswith(("s", "t"))):
                return stem
            return w
    return w


def _step5(w: str) -> str:
    if w.endswith("e"):
        stem = w[:-1]
        m = _measure(stem)
        if m > 1 or (m == 1 and not _cvc(stem)):
            w = stem
    if _measure(w) > 1 and _double_cons(w) and w.endswith("l"):
        w = w[:-1]
    return w


@lru_cache(maxsize=65536)
def porter_stem(word: str) -> str:
    """The Porter (1980) stem of a lower-case ``word`` (module docstring)."""
    if len(word) <= 2:
        return word
    w = _step1ab(word)
    if w.endswith("y") and _has_vowel(w[:-1]):  # step 1c
        w = w[:-1] + "i"
    w = _replace(w, _STEP2, 0)
    w = _replace(w, _STEP3, 0)
    w = _step4(w)
    return _step5(w)
