"""Pattern matching of formulas: one-way unification with consistent variable bindings.

A pattern is an S-expression that may contain variables (``?x``) at any depth.  It
matches a formula when some substitution of the pattern's variables by sub-expressions
of the formula makes the two equal; a variable that occurs twice must be bound to the
same value both times.  The formula's own symbols are taken literally (a ``?y`` in a
stored formula is just a symbol), so matching is one-way.

Example::

    >>> match(("?x", "between.p", "?y", "?x"), ("A", "between.p", "B", "A"))
    {'?x': 'A', '?y': 'B'}
    >>> match(("?x", "between.p", "?y", "?x"), ("A", "between.p", "B", "C")) is None
    True
    >>> match(("?s", "say-to.v", "?h", ("?q", "?w")), ("^me", "say-to.v", "^you", ("hi", "there")))
    {'?s': '^me', '?h': '^you', '?q': 'hi', '?w': 'there'}
"""

from __future__ import annotations

from collections.abc import Mapping

from .sexpr import SExpr, is_variable


def match(pattern: SExpr, expr: SExpr, bindings: Mapping[str, SExpr] | None = None) -> dict[str, SExpr] | None:
    """The bindings that make ``pattern`` equal to ``expr`` (extending ``bindings``), or
    ``None`` when they do not match.  Both are canonical S-expressions (see
    :func:`~hypermem.episodic.sexpr.to_sexpr`)."""
    out = dict(bindings or {})
    # Iterative depth-first walk: deep formulas do not hit the recursion limit.
    stack = [(pattern, expr)]
    while stack:
        p, e = stack.pop()
        if isinstance(p, str):
            if is_variable(p):
                bound = out.get(p)
                if bound is None:
                    out[p] = e
                elif bound != e:
                    return None
            elif p != e:
                return None
            continue
        if isinstance(e, str) or len(p) != len(e):
            return None
        stack.extend(zip(reversed(p), reversed(e)))
    return out


def matches(pattern: SExpr, expr: SExpr) -> bool:
    """Whether ``pattern`` matches ``expr`` (see :func:`match`)."""
    return match(pattern, expr) is not None


def substitute(expr: SExpr, bindings: Mapping[str, SExpr]) -> SExpr:
    """``expr`` with every bound variable replaced by its value (walked iteratively)."""
    if isinstance(expr, str):
        return bindings.get(expr, expr) if is_variable(expr) else expr
    frames: list[tuple[tuple, list[int], list[SExpr]]] = [(expr, [0], [])]
    while True:
        seq, pos, built = frames[-1]
        if pos[0] == len(seq):
            frames.pop()
            if not frames:
                return tuple(built)
            frames[-1][2].append(tuple(built))
            continue
        e = seq[pos[0]]
        pos[0] += 1
        if isinstance(e, str):
            built.append(bindings.get(e, e) if is_variable(e) else e)
        else:
            frames.append((e, [0], []))
