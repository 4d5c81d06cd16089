"""S-expressions: the formulas of episodic memory.

A formula (a *wff*, well-formed formula) is a symbol or a list of formulas, written in
the bracketed text form ``(Block1 between.p ?x Block2)``.  In Python a symbol is a
``str`` and a list is a ``tuple`` (lists are accepted and turned into tuples, so that a
formula can be hashed and used as a dictionary key).

Symbols are runs of characters other than white space, ``(`` and ``)``; a double-quoted
string with backslash escapes (``"hello there"``) is one symbol, kept with its quotes.
A symbol that starts with ``?`` and has at least one more character is a *variable*
(``?x``); a lone ``?`` is an ordinary symbol (the question mark of ULF).

Example::

    >>> from hypermem.episodic import parse_sexpr, format_sexpr
    >>> parse_sexpr("(Block1 between.p ?x Block2)")
    ('Block1', 'between.p', '?x', 'Block2')
    >>> format_sexpr(["^you", "reply-to.v", ("E1",)])
    '(^you reply-to.v (E1))'
"""

from __future__ import annotations

import re
from typing import Any

SExpr = str | tuple["SExpr", ...]
"""A symbol (``str``) or a tuple of S-expressions."""

_TOKEN_RE = re.compile(r'\s*(?:(\()|(\))|("(?:[^"\\]|\\.)*")|([^\s()"]+)|("))', re.DOTALL)
_SYMBOL_RE = re.compile(r'[^\s()"]+|"(?:[^"\\]|\\.)*"', re.DOTALL)


class SExprSyntaxError(ValueError):
    """A malformed S-expression text (unbalanced brackets, an unterminated string, ...)."""


def is_symbol(x: Any) -> bool:
    """Whether ``x`` is a valid symbol: a plain token or a double-quoted string."""
    return isinstance(x, str) and _SYMBOL_RE.fullmatch(x) is not None


def is_variable(x: Any) -> bool:
    """Whether ``x`` is a variable: a symbol ``?name`` (a lone ``?`` is not a variable)."""
    return isinstance(x, str) and len(x) > 1 and x[0] == "?" and is_symbol(x)


def has_variables(expr: SExpr) -> bool:
    """Whether a variable occurs anywhere in ``expr``."""
    if isinstance(expr, str):
        return is_variable(expr)
    return any(has_variables(e) for e in expr)


def to_sexpr(expr: Any, what: str = "formula") -> SExpr:
    """Check ``expr`` and return it in canonical form (nested tuples of symbols).

    Raises ``TypeError`` for anything but strings, tuples and lists, and ``ValueError``
    for a string that is not a valid symbol (empty, or with white space or brackets
    outside a quoted string).
    """
    if isinstance(expr, str):
        if not is_symbol(expr):
            raise ValueError(f"{what}: {expr!r} is not a symbol (a symbol is a non-empty run of characters "
                             "without white space, '(' or ')', or a double-quoted string)")
        return expr
    if isinstance(expr, (tuple, list)):
        return tuple(to_sexpr(e, what) for e in expr)
    raise TypeError(f"{what} must be a symbol (str) or a list/tuple of S-expressions, "
                    f"got {type(expr).__name__}: {expr!r}")


def parse_sexpr(text: str) -> SExpr:
    """Parse one S-expression from ``text``.

    ``"(a (b c))"`` gives ``('a', ('b', 'c'))``, ``"a"`` gives ``'a'`` and ``"()"`` the
    empty tuple.  Raises :class:`SExprSyntaxError` (a ``ValueError``) for empty text,
    unbalanced brackets, an unterminated string or text after the expression.
    """
    if not isinstance(text, str):
        raise TypeError(f"parse_sexpr takes a string, got {type(text).__name__}")
    stack: list[list[SExpr]] = [[]]
    pos = 0
    end = len(text.rstrip())
    while pos < end:
        m = _TOKEN_RE.match(text, pos)
        if m is None:  # pragma: no cover - the pattern matches any non-space character
            raise SExprSyntaxError(f"cannot read {text[pos:pos + 20]!r} at position {pos}")
        opening, closing, quoted, plain, bad_quote = m.groups()
        at = m.start(m.lastindex)
        if opening:
            stack.append([])
        elif closing:
            if len(stack) == 1:
                raise SExprSyntaxError(f"unbalanced ')' at position {at} in {text!r}")
            done = tuple(stack.pop())
            stack[-1].append(done)
        elif quoted or plain:
            stack[-1].append(quoted or plain)
        elif bad_quote:
            raise SExprSyntaxError(f"unterminated string starting at position {at} in {text!r}")
        pos = m.end()
        if len(stack) == 1 and len(stack[0]) > 1:
            raise SExprSyntaxError(f"text after the expression at position {at} in {text!r}; "
                                   "parse_sexpr reads exactly one expression")
    if len(stack) > 1:
        raise SExprSyntaxError(f"{len(stack) - 1} unclosed '(' in {text!r}")
    if not stack[0]:
        raise SExprSyntaxError("empty text: expected an S-expression")
    return stack[0][0]


def format_sexpr(expr: Any) -> str:
    """The bracketed text of ``expr``; ``parse_sexpr(format_sexpr(e)) == to_sexpr(e)``.

    Raises like :func:`to_sexpr` for an invalid expression.
    """
    expr = to_sexpr(expr)
    return _format(expr)


def _format(expr: SExpr) -> str:
    if isinstance(expr, str):
        return expr
    return "(" + " ".join(_format(e) for e in expr) + ")"
