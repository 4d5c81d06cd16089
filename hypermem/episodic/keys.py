"""Hash keys of formulas, for the predicate index ``wff_ht`` of :class:`MemoryStorage`.

Formulas are written in the infix order of episodic logic, ``(subj pred arg1 arg2 ...)``,
so the predicate is the second element.  The keys of a formula are, as the design
document lists them:

1. the predicate alone, e.g. ``between.p``;
2. for a two-element formula ``(subj pred)``, the tuple ``(subj, pred)``;
3. for longer formulas, one tuple per other argument: the predicate at its place, that
   argument at its place, ``None`` elsewhere, e.g. ``(Block1, between.p, None, None)``,
   ``(None, between.p, Block2, None)``, ``(None, between.p, None, Block3)``.

(Key 2 is key 3 for a two-element formula.)  A one-element formula ``(pred)`` and a
symbol ``pred`` have only key 1.  Arguments may be whole sub-formulas (nested tuples).
A prefix form such as ``(not W)`` follows the same positional rule: its "predicate" is
``W``, so the index finds the negations of ``W`` under the key ``("not", W)``.

Example::

    >>> wff_keys(("Block1", "between.p", "Block2", "Block3"))
    ['between.p', ('Block1', 'between.p', None, None), (None, 'between.p', 'Block2', None), (None, 'between.p', None, 'Block3')]
    >>> wff_keys(("^you", "smile.v"))
    ['smile.v', ('^you', 'smile.v')]
"""

from __future__ import annotations

from typing import Any

from .sexpr import SExpr, has_variables

Key = Any
"""A key of ``wff_ht``: a predicate (a symbol or a sub-formula) or a tuple as above."""


def predicate_of(wff: SExpr) -> SExpr | None:
    """The predicate of a formula: itself for a symbol, the only element of a
    one-element formula, the second element otherwise (``None`` for ``()``)."""
    if isinstance(wff, str):
        return wff
    if not wff:
        return None
    return wff[0] if len(wff) == 1 else wff[1]


def wff_keys(wff: SExpr) -> list[Key]:
    """All keys of a formula, predicate first (see the module docstring)."""
    pred = predicate_of(wff)
    if pred is None:
        return [()]
    keys: list[Key] = [pred]
    if isinstance(wff, tuple) and len(wff) >= 2:
        keys.extend(_argument_key(wff, i) for i in range(len(wff)) if i != 1)
    return keys


def _argument_key(wff: tuple, i: int) -> tuple:
    key: list[Any] = [None] * len(wff)
    key[1] = wff[1]
    key[i] = wff[i]
    return tuple(key)


def lookup_key(pattern: SExpr) -> Key | None:
    """The most selective key under which every formula matching ``pattern`` is filed,
    or ``None`` when the pattern's predicate is (or contains) a variable and no key
    applies (the caller then scans all memories).

    A ground argument gives a key with that argument; otherwise the predicate alone.
    The empty pattern ``()`` has the key ``()``.
    """
    pred = predicate_of(pattern)
    if pred is None:
        return ()
    if has_variables(pred):
        return None
    if isinstance(pattern, tuple) and len(pattern) >= 2:
        for i in range(len(pattern)):
            if i != 1 and not has_variables(pattern[i]):
                return _argument_key(pattern, i)
    return pred
