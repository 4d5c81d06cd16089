"""Eventualities: a formula paired with the episode it characterises."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .sexpr import (
    MAX_DEPTH,
    MAX_SIZE,
    SExpr,
    SExprTooDeepError,
    SExprTooLargeError,
    depth_of,
    excerpt,
    format_sexpr,
    is_symbol,
    parse_sexpr,
    size_of,
    to_sexpr,
)

CHARACTERIZES = "**"
"""The operator of the characterisation form ``(wff ** ep)`` (episodic logic: the formula
characterises the episode)."""


@dataclass(frozen=True)
class Eventuality:
    """A formula ``wff`` that characterises the episode ``ep``: ``(wff ** ep)``.

    ``wff`` is an S-expression (a symbol, or nested tuples/lists of symbols; stored as
    tuples) at most ``MAX_DEPTH - 1`` lists deep, so that ``(wff ** ep)`` stays within
    :data:`~hypermem.episodic.sexpr.MAX_DEPTH`, and at most ``MAX_SIZE - 3`` symbols and
    lists (:data:`~hypermem.episodic.sexpr.MAX_SIZE`); ``ep`` is an episode symbol (a constant
    such as ``E3`` or a variable).

    Example::

        >>> e = Eventuality.from_text("((^you reply-to.v E1) ** E3)")
        >>> e.wff, e.ep
        (('^you', 'reply-to.v', 'E1'), 'E3')
        >>> str(e)
        '((^you reply-to.v E1) ** E3)'
    """

    wff: SExpr
    ep: str

    def __post_init__(self) -> None:
        wff = to_sexpr(self.wff, "Eventuality wff")
        if depth_of(wff) >= MAX_DEPTH:
            raise SExprTooDeepError(f"an Eventuality wff may nest at most {MAX_DEPTH - 1} levels, so that "
                                    f"(<wff> ** <episode>) fits hypermem.episodic.sexpr.MAX_DEPTH = {MAX_DEPTH}")
        if size_of(wff) > MAX_SIZE - 3:
            raise SExprTooLargeError(f"an Eventuality wff may hold at most {MAX_SIZE - 3} symbols and lists, so "
                                     f"that (<wff> ** <episode>) fits hypermem.episodic.sexpr.MAX_SIZE = {MAX_SIZE}")
        object.__setattr__(self, "wff", wff)
        if not isinstance(self.ep, str) or not is_symbol(self.ep):
            raise ValueError(f"Eventuality ep must be an episode symbol such as 'E3', got "
                             f"{excerpt(self.ep, 0) if isinstance(self.ep, str) else type(self.ep).__name__}")

    @classmethod
    def from_sexpr(cls, expr: Any) -> Eventuality:
        """From the characterisation form ``(wff ** ep)`` as an S-expression."""
        expr = to_sexpr(expr, "eventuality")
        if not (isinstance(expr, tuple) and len(expr) == 3 and expr[1] == CHARACTERIZES):
            raise ValueError(f"an eventuality is written (<wff> ** <episode>), got "
                             f"{excerpt(format_sexpr(expr), 0)}")
        return cls(expr[0], expr[2])

    @classmethod
    def from_text(cls, text: str) -> Eventuality:
        """Parse the text ``"(<wff> ** <episode>)"``, e.g. ``"((^you reply-to.v E1) ** E3)"``.

        Raises :class:`~hypermem.episodic.sexpr.SExprSyntaxError` for malformed text and
        ``ValueError`` when the text is not a characterisation.
        """
        expr = parse_sexpr(text)
        if not (isinstance(expr, tuple) and len(expr) == 3 and expr[1] == CHARACTERIZES):
            raise ValueError(f"an eventuality is written (<wff> ** <episode>), got {excerpt(text, 0)}")
        return cls(expr[0], expr[2])

    def to_sexpr(self) -> SExpr:
        """``(wff ** ep)`` as nested tuples."""
        return (self.wff, CHARACTERIZES, self.ep)

    def __str__(self) -> str:
        return format_sexpr(self.to_sexpr())
