"""Negation in episodic formulas: ``(not W)``, and ``(not (not W))`` read as ``W``."""

from __future__ import annotations

from .sexpr import SExpr

NOT = "not"
"""The negation operator: ``(not <wff>)``."""


def negated(wff: SExpr) -> SExpr | None:
    """``W`` when ``wff`` is ``(not W)``, else ``None``."""
    if isinstance(wff, tuple) and len(wff) == 2 and wff[0] == NOT:
        return wff[1]
    return None


def polarity(wff: SExpr) -> tuple[SExpr, bool]:
    """``(core, positive)``: ``wff`` without its leading negations, and whether their number
    is even (``(not (not W))`` is ``W``: ``(W, True)``; ``(not W)`` is ``(W, False)``)."""
    positive = True
    inner = negated(wff)
    while inner is not None:
        wff, positive, inner = inner, not positive, negated(inner)
    return wff, positive


def canonical(wff: SExpr) -> SExpr:
    """``wff`` with its leading double negations cancelled: ``W`` for ``(not (not W))``,
    ``(not W)`` for ``(not (not (not W)))``.  The indexes and lookups of a
    :class:`~hypermem.episodic.MemoryStorage` read a formula (and a pattern) this way."""
    core, positive = polarity(wff)
    return core if positive else (NOT, core)
