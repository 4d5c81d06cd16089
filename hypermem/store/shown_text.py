"""Stored text and ids as shown to a person (``Memory.tree()`` and the command line): the
characters that steer a terminal or disguise text are written as escapes.

A memory's text and id are whatever an agent stored: ``"\\x1b[2J"`` clears the screen, ``\\r``
and ``\\b`` overwrite what a line showed, BEL rings, NUL and the C1 controls (``\\x9b`` is CSI on
some terminals) act too, and the bidirectional overrides and isolates (U+202A-U+202E,
U+2066-U+2069, U+200E/U+200F, U+061C) reorder what follows so that it reads as other text, and
the invisible format characters (the zero-width space U+200B, U+2060, U+FEFF, ...: :data:`CONTROLS`)
make two different ids (``admin`` and ``admin\\u200b``) look the same.
The human-readable output of ``tree``, ``search``, ``stats``, warnings and errors shows each
such character as Python's ``repr`` writes it (``\\x1b``, ``\\r``, ``\\u202e``), and a text's or
an id's newline as ``\\n``; other characters (accents, emoji and their joiners) are shown as
they are.  ``--json`` output stays exact JSON: :func:`json_safe` writes those characters as
``\\uXXXX`` escapes, which a JSON reader reads back as the same string.
"""

from __future__ import annotations

import re

__all__ = ["CONTROLS", "json_safe", "shown"]

_HIDDEN = ("\xad\u061c\u180e\u200b\u200e\u200f\u2028-\u202e\u2060-\u206f\ufeff\ufff9-\ufffb\ud800-\udfff"
           "\U0001bca0-\U0001bca3\U0001d173-\U0001d17a\U000e0001\U000e0020-\U000e007f")
_FLAG = "\U0001f3f4[\U000e0020-\U000e007e]+\U000e007f"   # a subdivision flag (England's): its tags are kept
_JOINER = "(?<![^\x00-\x7f])[\u200c\u200d]|[\u200c\u200d](?![^\x00-\x7f])"   # ZWNJ/ZWJ beside ASCII or an end

CONTROLS = re.compile(f"{_FLAG}|{_JOINER}|[\x00-\x1f\x7f-\x9f{_HIDDEN}]")
"""C0 and C1 controls and DEL, the bidirectional marks, embeddings, overrides and isolates, the
line and paragraph separators U+2028/U+2029, lone surrogates (which stdout cannot encode), and
the invisible format characters (Unicode category Cf) that make two texts look alike: the
zero-width space U+200B, word joiner U+2060 and its kin U+2061-U+2064, the byte order mark /
zero-width no-break space U+FEFF, the soft hyphen U+00AD, U+180E, the interlinear annotation
marks, the shorthand and musical format controls, and the tag characters U+E0001 and
U+E0020-U+E007F (invisible text).  The zero-width non-joiner and joiner U+200C/U+200D are
escaped beside an ASCII character or at an end of the text (``"admin\\u200d"``); between two
other characters they shape a Persian or Indic word or join an emoji (``"🐕\\u200d🦺"``) and are
kept, as are the tags of a subdivision flag (🏴 and tags ending in U+E007F), and the visible
Arabic, Syriac and Kaithi format signs (U+0600-U+0605, ...)."""


def _escape(match: re.Match) -> str:
    found = match.group()
    return found if len(found) > 1 else repr(found)[1:-1]   # a flag's sequence stays as it is


def shown(text: str) -> str:
    """``text`` with every character of :data:`CONTROLS` written as its ``repr`` escape
    (``"a\\x1b[2J"`` -> ``a\\\\x1b[2J``, ``"admin\\u200b"`` -> ``admin\\\\u200b``); a text without
    one is returned as it is."""
    return CONTROLS.sub(_escape, text)


_JSON_UNSAFE = re.compile(f"{_FLAG}|{_JOINER}|[\x7f-\x9f{_HIDDEN}]")


def json_safe(text: str) -> str:
    """JSON text (``json.dumps(..., ensure_ascii=False)``, which escapes C0 controls already) with
    DEL, the C1 controls, the bidirectional controls, U+2028/U+2029, lone surrogates and the
    invisible format characters of :data:`CONTROLS` as ``\\uXXXX`` escapes (a pair for one
    beyond U+FFFF): the same JSON value, safe on a terminal.  These characters occur only
    inside JSON strings, where ``\\uXXXX`` means the character itself."""
    return _JSON_UNSAFE.sub(_json_escape, text)


def _json_escape(match: re.Match) -> str:
    found = match.group()
    if len(found) > 1:   # a flag's sequence
        return found
    code = ord(found)
    if code > 0xFFFF:   # a tag character: JSON writes it as its UTF-16 surrogate pair
        code -= 0x10000
        return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"
    return f"\\u{code:04x}"
