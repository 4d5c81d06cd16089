"""Stored text and ids as shown to a person (``Memory.tree()`` and the command line): the
characters that steer a terminal or disguise text are written as escapes.

A memory's text and id are whatever an agent stored: ``"\\x1b[2J"`` clears the screen, ``\\r``
and ``\\b`` overwrite what a line showed, BEL rings, NUL and the C1 controls (``\\x9b`` is CSI on
some terminals) act too, and the bidirectional overrides and isolates (U+202A-U+202E,
U+2066-U+2069, U+200E/U+200F, U+061C) reorder what follows so that it reads as other text.
The human-readable output of ``tree``, ``search``, ``stats``, warnings and errors shows each
such character as Python's ``repr`` writes it (``\\x1b``, ``\\r``, ``\\u202e``), and a text's or
an id's newline as ``\\n``; other characters (accents, emoji and their joiners) are shown as
they are.  ``--json`` output stays exact JSON: :func:`json_safe` writes those characters as
``\\uXXXX`` escapes, which a JSON reader reads back as the same string.
"""

from __future__ import annotations

import re

__all__ = ["CONTROLS", "json_safe", "shown"]

CONTROLS = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069\ud800-\udfff]")
"""C0 and C1 controls and DEL, the bidirectional marks, embeddings, overrides and isolates, the
line and paragraph separators U+2028/U+2029, and lone surrogates (which stdout cannot encode)."""


def _escape(match: re.Match) -> str:
    return repr(match.group())[1:-1]


def shown(text: str) -> str:
    """``text`` with every character of :data:`CONTROLS` written as its ``repr`` escape
    (``"a\\x1b[2J"`` -> ``a\\\\x1b[2J``); a text without one is returned as it is."""
    return CONTROLS.sub(_escape, text)


_JSON_UNSAFE = re.compile("[\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069\ud800-\udfff]")


def json_safe(text: str) -> str:
    """JSON text (``json.dumps(..., ensure_ascii=False)``, which escapes C0 controls already) with
    DEL, the C1 controls, the bidirectional controls, U+2028/U+2029 and lone surrogates as
    ``\\uXXXX`` escapes: the same JSON value, safe on a terminal.  These characters occur only
    inside JSON strings, where ``\\uXXXX`` means the character itself."""
    return _JSON_UNSAFE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)
