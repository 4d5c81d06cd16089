"""S-expressions: the formulas of episodic memory.

A formula (a *wff*, well-formed formula) is a symbol or a list of formulas, written in
the bracketed text form ``(Block1 between.p ?x Block2)``.  In Python a symbol is a
``str`` and a list is a ``tuple`` (lists are accepted and turned into tuples, so that a
formula can be hashed and used as a dictionary key).

Symbols are runs of characters other than white space, ``(`` and ``)``; a double-quoted
string with backslash escapes (``"hello there"``) is one symbol, kept with its quotes.
A symbol that starts with ``?`` and has at least one more character is a *variable*
(``?x``); a lone ``?`` is an ordinary symbol (the question mark of ULF).

**Limits.**  A formula may nest at most :data:`MAX_DEPTH` (256) lists deep: deeper text
or nested lists are refused with :class:`SExprTooDeepError` (a :class:`SExprSyntaxError`)
before anything is built, so no later step (hashing, comparison, printing, storing) can
hit Python's recursion limit.  A formula may hold at most :data:`MAX_SIZE` (10,000)
symbols and lists in all: a larger one (e.g. a hostile megabyte of text) is refused with
:class:`SExprTooLargeError` as soon as the parser reaches the limit.  Every function here walks formulas iteratively.  Error
messages quote a short excerpt of the text around the problem, never the whole input.

Example::

    >>> from hypermem.episodic import parse_sexpr, format_sexpr
    >>> parse_sexpr("(Block1 between.p ?x Block2)")
    ('Block1', 'between.p', '?x', 'Block2')
    >>> format_sexpr(["^you", "reply-to.v", ("E1",)])
    '(^you reply-to.v (E1))'
"""

from __future__ import annotations

import re
import reprlib
from typing import Any

SExpr = str | tuple["SExpr", ...]
"""A symbol (``str``) or a tuple of S-expressions."""

_TOKEN_RE = re.compile(r'\s*(?:(\()|(\))|("(?:[^"\\]|\\.)*")|([^\s()"]+)|("))', re.DOTALL)
_SYMBOL_RE = re.compile(r'[^\s()"]+|"(?:[^"\\]|\\.)*"', re.DOTALL)
_ESCAPE_RE = re.compile(r"\\(.)", re.DOTALL)


MAX_DEPTH = 256
"""Deepest nesting of lists a formula may have (``"((a))"`` has depth 2, a symbol 0)."""

MAX_SIZE = 10_000
"""Most symbols and lists one formula may hold in all (``"(a (b c))"`` holds 5: two lists,
three symbols); bounds the work of indexing, matching and embedding one formula."""

EXCERPT = 40
"""Characters of the input quoted on each side of the position in an error message."""

_short = reprlib.Repr()
_short.maxstring = _short.maxother = 2 * EXCERPT
_short.maxlevel = 4


class SExprSyntaxError(ValueError):
    """A malformed S-expression text (unbalanced brackets, an unterminated string, ...)."""


class SExprTooDeepError(SExprSyntaxError):
    """A formula nested deeper than :data:`MAX_DEPTH` lists (text or Python lists)."""


class SExprTooLargeError(SExprSyntaxError):
    """A formula holding more than :data:`MAX_SIZE` symbols and lists."""


def excerpt(text: str, at: int) -> str:
    """The quoted text around position ``at`` (``EXCERPT`` characters each side, ``...``
    where cut), for error messages."""
    lo, hi = max(0, at - EXCERPT), min(len(text), at + EXCERPT)
    return ("..." if lo else "") + repr(text[lo:hi]) + ("..." if hi < len(text) else "")


def _too_deep(what: str) -> SExprTooDeepError:
    return SExprTooDeepError(f"{what} is nested deeper than {MAX_DEPTH} levels (hypermem.episodic.sexpr.MAX_DEPTH)")


def _too_large(what: str) -> SExprTooLargeError:
    return SExprTooLargeError(f"{what} holds more than {MAX_SIZE} symbols and lists "
                              "(hypermem.episodic.sexpr.MAX_SIZE)")


def _lone_surrogate(text: str) -> int | None:
    """The position of the first lone surrogate (a ``str`` that UTF-8 cannot encode), or ``None``."""
    if text.isascii():
        return None
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        return exc.start
    return None


def _check_text(text: Any, who: str, what: str) -> None:
    """``TypeError`` unless ``text`` is a ``str``; :class:`SExprSyntaxError` at a lone surrogate."""
    if not isinstance(text, str):
        raise TypeError(f"{who} takes a string, got {type(text).__name__}")
    bad = _lone_surrogate(text)
    if bad is not None:
        raise SExprSyntaxError(f"a lone surrogate {text[bad]!r} at position {bad} in {excerpt(text, bad)}: "
                               f"{what} are text that UTF-8 can encode")


def is_symbol(x: Any) -> bool:
    """Whether ``x`` is a valid symbol: a plain token or a double-quoted string, of text
    that UTF-8 can encode (no lone surrogate such as ``"\\ud800"``: it could not be saved)."""
    return isinstance(x, str) and _SYMBOL_RE.fullmatch(x) is not None and _lone_surrogate(x) is None


def is_variable(x: Any) -> bool:
    """Whether ``x`` is a variable: a symbol ``?name`` (a lone ``?`` is not a variable)."""
    return isinstance(x, str) and len(x) > 1 and x[0] == "?" and is_symbol(x)


def has_variables(expr: SExpr) -> bool:
    """Whether a variable occurs anywhere in ``expr``."""
    stack = [expr]
    while stack:
        e = stack.pop()
        if isinstance(e, str):
            if is_variable(e):
                return True
        else:
            stack.extend(e)
    return False


def to_sexpr(expr: Any, what: str = "formula") -> SExpr:
    """Check ``expr`` and return it in canonical form (nested tuples of symbols).

    Raises ``TypeError`` for anything but strings, tuples and lists, ``ValueError``
    for a string that is not a valid symbol (empty, or with white space or brackets
    outside a quoted string) and :class:`SExprTooDeepError` for lists nested deeper than
    :data:`MAX_DEPTH` (a list that contains itself is one).
    """
    if isinstance(expr, str):
        return _check_symbol(expr, what)
    if not isinstance(expr, (tuple, list)):
        raise _not_sexpr(expr, what)
    # Iterative post-order walk: each frame is (source sequence, next index, built items).
    frames: list[tuple[Any, list[int], list[SExpr]]] = [(expr, [0], [])]
    size = 1
    while True:
        seq, pos, built = frames[-1]
        if pos[0] == len(seq):
            frames.pop()
            done = tuple(built)
            if not frames:
                return done
            frames[-1][2].append(done)
            continue
        e = seq[pos[0]]
        pos[0] += 1
        size += 1
        if size > MAX_SIZE:
            raise _too_large(what)
        if isinstance(e, str):
            built.append(_check_symbol(e, what))
        elif isinstance(e, (tuple, list)):
            if len(frames) >= MAX_DEPTH:
                raise _too_deep(what)
            frames.append((e, [0], []))
        else:
            raise _not_sexpr(e, what)


def _check_symbol(x: str, what: str) -> str:
    if not is_symbol(x):
        raise ValueError(f"{what}: {_short.repr(x)} is not a symbol (a symbol is a non-empty run of characters "
                         "without white space, '(' or ')', or a double-quoted string, in text that UTF-8 can "
                         "encode: no lone surrogate)")
    return x


def _not_sexpr(x: Any, what: str) -> TypeError:
    return TypeError(f"{what} must be a symbol (str) or a list/tuple of S-expressions, "
                     f"got {type(x).__name__}: {_short.repr(x)}")


def size_of(expr: SExpr) -> int:
    """How many symbols and lists ``expr`` holds (a symbol: 1, ``(a (b c))``: 5)."""
    size, stack = 0, [expr]
    while stack:
        e = stack.pop()
        size += 1
        if not isinstance(e, str):
            stack.extend(e)
    return size


def depth_of(expr: SExpr) -> int:
    """How many lists deep ``expr`` nests (a symbol: 0, ``()``: 1, ``(a (b))``: 2)."""
    deepest, stack = 0, [(expr, 0)]
    while stack:
        e, d = stack.pop()
        if not isinstance(e, str):
            deepest = max(deepest, d + 1)
            stack.extend((x, d + 1) for x in e)
    return deepest


def parse_sexpr(text: str) -> SExpr:
    """Parse one S-expression from ``text``.

    ``"(a (b c))"`` gives ``('a', ('b', 'c'))``, ``"a"`` gives ``'a'`` and ``"()"`` the
    empty tuple.  Raises :class:`SExprSyntaxError` (a ``ValueError``) for empty text,
    unbalanced brackets, an unterminated string or text after the expression, and
    :class:`SExprTooDeepError` for nesting deeper than :data:`MAX_DEPTH` and
    :class:`SExprTooLargeError` for more than :data:`MAX_SIZE` symbols and lists (refused
    when the parser reaches the limit, so a huge text costs no more than the limit); the
    message quotes a short excerpt around the position.
    """
    _check_text(text, "parse_sexpr", "formulas")
    stack: list[list[SExpr]] = [[]]
    pos = size = 0
    end = len(text.rstrip())
    while pos < end:
        m = _TOKEN_RE.match(text, pos)
        if m is None:  # pragma: no cover - the pattern matches any non-space character
            raise SExprSyntaxError(f"cannot read {text[pos:pos + 20]!r} at position {pos}")
        opening, closing, quoted, plain, bad_quote = m.groups()
        at = m.start(m.lastindex)
        if opening or quoted or plain:
            size += 1
            if size > MAX_SIZE:
                raise SExprTooLargeError(f"formula holds more than {MAX_SIZE} symbols and lists at position {at}: "
                                         f"{excerpt(text, at)} (hypermem.episodic.sexpr.MAX_SIZE)")
        if opening:
            if len(stack) > MAX_DEPTH:
                raise SExprTooDeepError(f"formula nested deeper than {MAX_DEPTH} levels at position {at}: "
                                        f"{excerpt(text, at)} (hypermem.episodic.sexpr.MAX_DEPTH)")
            stack.append([])
        elif closing:
            if len(stack) == 1:
                raise SExprSyntaxError(f"unbalanced ')' at position {at} in {excerpt(text, at)}")
            done = tuple(stack.pop())
            stack[-1].append(done)
        elif quoted or plain:
            stack[-1].append(quoted or plain)
        elif bad_quote:
            raise SExprSyntaxError(f"unterminated string starting at position {at} in {excerpt(text, at)}")
        pos = m.end()
        if len(stack) == 1 and len(stack[0]) > 1:
            raise SExprSyntaxError(f"text after the expression at position {at} in {excerpt(text, at)}; "
                                   "parse_sexpr reads exactly one expression")
    if len(stack) > 1:
        raise SExprSyntaxError(f"{len(stack) - 1} unclosed '(' in {excerpt(text, len(text))}")
    if not stack[0]:
        raise SExprSyntaxError("empty text: expected an S-expression")
    return stack[0][0]


def quote_symbol(text: str) -> str:
    r"""The double-quoted symbol holding raw ``text`` (any characters, spaces and brackets
    too): ``"`` and ``\`` are escaped with a backslash, so ``parse_sexpr`` reads it as one
    symbol and :func:`unquote_symbol` gives ``text`` back.  ``TypeError`` for a non-string,
    :class:`SExprSyntaxError` for text UTF-8 cannot encode (a lone surrogate).

    Example::

        >>> quote_symbol('she said "hi" (twice)')
        '"she said \\"hi\\" (twice)"'
        >>> parse_sexpr(f"(Alice say-to.v Bob {quote_symbol('a (b) c')})")[3]
        '"a (b) c"'
    """
    _check_text(text, "quote_symbol", "symbols")
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def unquote_symbol(symbol: str) -> str:
    """The raw text of a double-quoted symbol (the inverse of :func:`quote_symbol`:
    ``\\x`` becomes ``x``).  ``ValueError`` when ``symbol`` is not one quoted symbol."""
    if not isinstance(symbol, str) or not symbol.startswith('"') or _SYMBOL_RE.fullmatch(symbol) is None:
        raise ValueError(f"unquote_symbol takes a double-quoted symbol such as '\"hi\"', got {reprlib.repr(symbol)}")
    return _ESCAPE_RE.sub(r"\1", symbol[1:-1])


def format_sexpr(expr: Any) -> str:
    """The bracketed text of ``expr``; ``parse_sexpr(format_sexpr(e)) == to_sexpr(e)``.

    Raises like :func:`to_sexpr` for an invalid expression.
    """
    expr = to_sexpr(expr)
    return _format(expr)


def _format(expr: SExpr) -> str:
    # Iterative: tokens are pushed in reverse, a tuple opens "(" and schedules its ")".
    out: list[str] = []
    stack: list[Any] = [expr]
    while stack:
        e = stack.pop()
        if isinstance(e, str):
            if out and out[-1] != "(":
                out.append(" ")
            out.append(e)
        elif e is _CLOSE:
            out.append(")")
        else:
            if out and out[-1] != "(":
                out.append(" ")
            out.append("(")
            stack.append(_CLOSE)
            stack.extend(reversed(e))
    return "".join(out)


_CLOSE = object()
