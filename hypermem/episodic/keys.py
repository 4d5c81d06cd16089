"""Hash keys of formulas, for the predicate index ``wff_ht`` of :class:`MemoryStorage`.

Formulas are written in the infix order of episodic logic, ``(subj pred arg1 arg2 ...)``,
so the predicate is the second element.  The keys of a formula are, as the design
document lists them:

1. the predicate alone, e.g. ``between.p``;
2. for a two-element formula ``(subj pred)``, the tuple ``(subj, pred)``;
3. for longer formulas, one key per other argument: the predicate at its place, that
   argument at its place, ``None`` elsewhere.  The design writes these as tuples as long
   as the formula, e.g. ``(Block1, between.p, None, None)``, ``(None, between.p, Block2,
   None)``; here each is an :class:`ArgKey` holding the same information without the
   ``None`` padding (the formula's length, the predicate, the place and the argument),
   so a formula of ``n`` elements has ``n`` keys of constant size, not ``n`` tuples of
   ``n`` slots (quadratic time and memory for a wide formula).  ``ArgKey.as_tuple()``
   gives the design's tuple.

(Key 2 is key 3 for a two-element formula.)  A one-element formula ``(pred)`` and a
symbol ``pred`` have only key 1.  Arguments may be whole sub-formulas (nested tuples).
A prefix form such as ``(not W)`` follows the same positional rule: its "predicate" is
``W``, so the index finds the negations of ``W`` under the key ``("not", W)``.

Example::

    >>> wff_keys(("Block1", "between.p", "Block2", "Block3"))
    ['between.p', ArgKey(4, 'between.p', 0, 'Block1'), ArgKey(4, 'between.p', 2, 'Block2'), ArgKey(4, 'between.p', 3, 'Block3')]
    >>> wff_keys(("^you", "smile.v"))
    ['smile.v', ('^you', 'smile.v')]
    >>> ArgKey(4, "between.p", 2, "Block2").as_tuple()
    (None, 'between.p', 'Block2', None)
"""

from __future__ import annotations

from typing import Any

from .sexpr import SExpr, has_variables

Key = Any
"""A key of ``wff_ht``: a predicate (a symbol or a sub-formula), a pair or an :class:`ArgKey`."""


class ArgKey:
    """Key 3 of a formula of ``length >= 3`` elements: its predicate (place 1) and its
    argument ``arg`` at ``place``; the design's tuple ``(None, pred, None, arg, ...)``
    without the padding.  Immutable, hashable (the hash is computed once), equal to an
    ``ArgKey`` with the same four fields."""

    __slots__ = ("length", "pred", "place", "arg", "_hash")

    def __init__(self, length: int, pred: SExpr, place: int, arg: SExpr, pred_hash: int | None = None):
        object.__setattr__(self, "length", length)
        object.__setattr__(self, "pred", pred)
        object.__setattr__(self, "place", place)
        object.__setattr__(self, "arg", arg)
        object.__setattr__(self, "_hash", hash((length, place, hash(pred) if pred_hash is None else pred_hash,
                                                arg)))

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("an ArgKey is immutable")

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ArgKey):
            return NotImplemented
        return (self._hash == other._hash and self.length == other.length and self.place == other.place
                and self.arg == other.arg and self.pred == other.pred)

    def __repr__(self) -> str:
        return f"ArgKey({self.length}, {self.pred!r}, {self.place}, {self.arg!r})"

    def as_tuple(self) -> tuple:
        """The design document's key: ``None`` everywhere but the predicate and the argument."""
        key: list[Any] = [None] * self.length
        key[1] = self.pred
        key[self.place] = self.arg
        return tuple(key)


def predicate_of(wff: SExpr) -> SExpr | None:
    """The predicate of a formula: itself for a symbol, the only element of a
    one-element formula, the second element otherwise (``None`` for ``()``)."""
    if isinstance(wff, str):
        return wff
    if not wff:
        return None
    return wff[0] if len(wff) == 1 else wff[1]


def wff_keys(wff: SExpr) -> list[Key]:
    """All keys of a formula, predicate first (see the module docstring); their number
    and total size are linear in the formula's."""
    pred = predicate_of(wff)
    if pred is None:
        return [()]
    keys: list[Key] = [pred]
    if isinstance(wff, tuple) and len(wff) == 2:
        keys.append(wff)
    elif isinstance(wff, tuple) and len(wff) > 2:
        n, h = len(wff), hash(pred)
        keys.extend(ArgKey(n, pred, i, wff[i], h) for i in range(n) if i != 1)
    return keys


def _argument_key(wff: tuple, i: int) -> Key:
    return wff if len(wff) == 2 else ArgKey(len(wff), wff[1], i, wff[i])


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
