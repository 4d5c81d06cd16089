"""Eventualities: a formula paired with the episode it characterises."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .sexpr import SExpr, format_sexpr, is_symbol, parse_sexpr, to_sexpr

CHARACTERIZES = "**"
"""The operator of the characterisation form ``(wff ** ep)`` (episodic logic: the formula
characterises the episode)."""


@dataclass(frozen=True)
class Eventuality:
    """A formula ``wff`` that characterises the episode ``ep``: ``(wff ** ep)``.

    ``wff`` is an S-expression (a symbol, or nested tuples/lists of symbols; stored as
    tuples); ``ep`` is an episode symbol (a constant such as ``E3`` or a variable).

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
        object.__setattr__(self, "wff", to_sexpr(self.wff, "Eventuality wff"))
        if not isinstance(self.ep, str) or not is_symbol(self.ep):
            raise ValueError(f"Eventuality ep must be an episode symbol such as 'E3', got {self.ep!r}")

    @classmethod
    def from_sexpr(cls, expr: Any) -> Eventuality:
        """From the characterisation form ``(wff ** ep)`` as an S-expression."""
        expr = to_sexpr(expr, "eventuality")
        if not (isinstance(expr, tuple) and len(expr) == 3 and expr[1] == CHARACTERIZES):
            raise ValueError(f"an eventuality is written (<wff> ** <episode>), got {format_sexpr(expr)!r}")
        return cls(expr[0], expr[2])

    @classmethod
    def from_text(cls, text: str) -> Eventuality:
        """Parse the text ``"(<wff> ** <episode>)"``, e.g. ``"((^you reply-to.v E1) ** E3)"``.

        Raises :class:`~hypermem.episodic.sexpr.SExprSyntaxError` for malformed text and
        ``ValueError`` when the text is not a characterisation.
        """
        expr = parse_sexpr(text)
        if not (isinstance(expr, tuple) and len(expr) == 3 and expr[1] == CHARACTERIZES):
            raise ValueError(f"an eventuality is written (<wff> ** <episode>), got {text!r}")
        return cls(expr[0], expr[2])

    def to_sexpr(self) -> SExpr:
        """``(wff ** ep)`` as nested tuples."""
        return (self.wff, CHARACTERIZES, self.ep)

    def __str__(self) -> str:
        return format_sexpr(self.to_sexpr())
