"""Labels whose characters matplotlib's font lacks (node names in CJK, say).

matplotlib draws such a character as a box and warns once per glyph and per drawing
(``Glyph 26085 (...) missing from font(s) DejaVu Sans.``): a figure drawn twice (layout, then
the image) with two such characters gives four lines.  :func:`label_fonts` looks for an
installed font that has the characters (nothing is downloaded); :func:`quiet_missing_glyphs`
silences the per-glyph warnings while a figure is drawn, and the caller says it once
(:func:`missing_glyph_note`).  matplotlib is imported on use.
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Iterable

__all__ = ["label_fonts", "missing_glyph_note", "missing_glyphs", "quiet_missing_glyphs"]

GLYPH_WARNING = r"Glyph \d+ .* missing from font"
"""The message of matplotlib's per-glyph warning (a ``UserWarning``)."""

_CHARMAPS: dict[str, frozenset[int]] = {}


def _charmap(path: str) -> frozenset[int]:
    """The code points the font file at ``path`` has glyphs for (cached per process)."""
    if path not in _CHARMAPS:
        from matplotlib.ft2font import FT2Font

        try:
            _CHARMAPS[path] = frozenset(FT2Font(path).get_charmap())
        except (OSError, RuntimeError, ValueError):
            _CHARMAPS[path] = frozenset()
    return _CHARMAPS[path]


def missing_glyphs(texts: Iterable[str], family: str | None = None) -> str:
    """The characters of ``texts`` (sorted, each once; whitespace left out) that the font
    matplotlib picks for ``family`` (its default font when ``None``) has no glyph for."""
    from matplotlib.font_manager import FontProperties, findfont

    have = _charmap(findfont(FontProperties(family=family) if family else FontProperties()))
    return "".join(sorted({ch for text in texts for ch in str(text) if not ch.isspace() and ord(ch) not in have}))


def label_fonts(texts: Iterable[str]) -> tuple[list[str] | None, str]:
    """``(families, missing)`` for drawing ``texts``: ``families`` is ``None`` when the default
    font has every character; else the default family followed by an installed font that has
    the characters the default lacks (matplotlib falls back glyph by glyph along a list of
    families), or ``None`` when no installed font has them all (matplotlib's "Last Resort"
    font, whose glyphs are boxes naming the Unicode block, does not count).  ``missing``: the characters no
    chosen font has (``""`` when every label draws)."""
    import matplotlib
    from matplotlib.font_manager import fontManager

    texts = [str(t) for t in texts]
    lacking = missing_glyphs(texts)
    if not lacking:
        return None, ""
    need = {ord(ch) for ch in lacking}
    default = list(matplotlib.rcParams["font.family"])
    for entry in sorted(fontManager.ttflist, key=lambda f: f.name):
        placeholder = entry.name.startswith("Last Resort")   # matplotlib's: a box for every character
        if not placeholder and entry.fname.lower().endswith((".ttf", ".otf")) and need <= _charmap(entry.fname):
            return default + [entry.name], ""
    return None, lacking


def missing_glyph_note(missing: str, where: str) -> str:
    """One line for labels drawn as boxes: ``note: 2 characters of the node names (日本) have no
    glyph in any installed font: those labels show boxes in WHERE``."""
    shown = missing[:8] + ("..." if len(missing) > 8 else "")
    n = len(missing)
    return (f"note: {n} character{'s' if n != 1 else ''} of the node names ({shown}) "
            f"{'have' if n != 1 else 'has'} no glyph in any installed font: those labels show boxes in {where}")


@contextlib.contextmanager
def quiet_missing_glyphs():
    """Inside: matplotlib's per-glyph "missing from font" warnings are not shown."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=GLYPH_WARNING, category=UserWarning)
        yield
