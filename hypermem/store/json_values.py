r"""JSON values as the store's filters compare them (:mod:`hypermem.store.filters`) and as PostgreSQL's
``jsonb`` keeps them.

Equality is :func:`json_equal` (``True`` is not ``1``, ``1`` is ``1.0``), hashed by :func:`json_key`.

**Numbers in jsonb.**  ``jsonb`` stores a number as the exact ``numeric`` its text spells and prints
it back without an exponent, keeping the digits after the point: ``5.0`` stays ``5.0`` (a float
again for ``json.loads``), ``1e-07`` prints as ``0.0000001`` (a float, the same one).  But a float of
``1e16`` or more, which ``json.dumps`` writes with an exponent, came back as an int:
``2.0**60`` is written ``1.152921504606847e+18``, stored as the numeric ``1152921504606847000``
and read as that int, 24 more than the float.  :func:`exact_numbers` writes such a float as its
exact integer value with ``.0`` (``1152921504606846976.0``), which jsonb keeps, so it reads back
as the same float.  Every float below ``1e16`` is written by ``repr`` (the shortest decimal that
rounds to it) and keeps its value and type.

Filters send their numbers the same way, so the SQL comparison of a stored value with an operand
orders as Python does: both sides are written by one map ``D`` that sends different floats to
different decimals in order, is exact for ints and for floats of ``1e16`` or more, and below
``1e16`` leaves no int between a float and its decimal (an int there would be a float nearer to
it), so ``v < x``, ``v == x`` and ``D(v) < D(x)``, ``D(v) = D(x)`` agree.
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["MISSING", "Singleton", "exact_numbers", "is_number", "json_equal", "json_key", "member", "membership"]


class Singleton:
    """The type of a module's one marker object (checked with ``is``), named ``global_name`` in
    the module that defines the subclass and shown as ``shown``: pickle, copy and deepcopy give
    back that name (``__reduce__``: the module's own object); ``__new__`` (an older pickle) makes
    no twin once the module has set it."""

    global_name = ""
    shown = ""

    def __new__(cls) -> Any:
        return getattr(sys.modules[cls.__module__], cls.global_name, None) or super().__new__(cls)

    def __reduce__(self) -> str:
        return self.global_name

    def __repr__(self) -> str:
        return self.shown


class _Missing(Singleton):
    """:data:`MISSING`'s type (held by a copied store's value columns)."""

    global_name, shown = "MISSING", "<missing>"


MISSING: Any = _Missing()
"""What a lookup returns for a field a record does not have."""


def is_number(v: Any) -> bool:
    """Whether ``v`` is a JSON number (an int or a float, not a bool)."""
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def json_equal(a: Any, b: Any) -> bool:
    """Equality of two JSON values as PostgreSQL's ``jsonb =`` sees it: booleans equal only
    booleans, numbers compare by value, lists element by element, dicts key by key."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if is_number(a) or is_number(b):
        return is_number(a) and is_number(b) and a == b
    if isinstance(a, (list, tuple)) or isinstance(b, (list, tuple)):
        return (isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)) and len(a) == len(b)
                and all(json_equal(x, y) for x, y in zip(a, b)))
    if isinstance(a, Mapping) or isinstance(b, Mapping):
        return (isinstance(a, Mapping) and isinstance(b, Mapping) and a.keys() == b.keys()
                and all(json_equal(a[k], b[k]) for k in a))
    return a == b


def member(v: Any, xs: Any) -> bool:
    """Whether some item of ``xs`` is :func:`json_equal` to ``v``."""
    return any(json_equal(v, x) for x in xs)


def json_key(v: Any) -> Any:
    """A hashable key of a JSON value with ``json_key(a) == json_key(b)`` exactly when
    :func:`json_equal` ``(a, b)``: a type tag and the value (``("n", 1)`` and ``("n", 1.0)`` are one
    key, ``("b", True)`` another), lists and tuples as the tuple of their items' keys, dicts as
    the set of ``(key, value's key)``.  None for a value no key stands for (a float NaN, equal to
    nothing, or a type that is no plain JSON): compare those with :func:`json_equal`."""
    if type(v) is str:
        return v
    if isinstance(v, bool):
        return ("b", v)
    if isinstance(v, (int, float)):   # equal numbers have equal hashes (1, 1.0, -0.0)
        return None if v != v else ("n", v)
    if v is None:
        return ("z",)
    if isinstance(v, (list, tuple)):
        items = tuple(json_key(x) for x in v)
        return None if None in items else ("l", items)
    if isinstance(v, Mapping):
        try:
            pairs = frozenset((k, json_key(x)) for k, x in v.items())
        except TypeError:
            return None
        return None if len(pairs) != len(v) or any(x is None for _, x in pairs) else ("d", pairs)
    return None


def membership(xs: Any) -> Callable[[Any], bool]:
    """``lambda v: member(v, xs)`` by a set of :func:`json_key` keys: O(1) a value, not O(len(xs))."""
    keys, rest = set(), []
    for x in xs:
        k = json_key(x)
        if k is None:
            rest.append(x)
        else:
            keys.add(k)

    def test(v: Any) -> bool:
        k = json_key(v)
        if k is None:
            return member(v, xs)
        return k in keys or bool(rest) and member(v, rest)
    return test



def exact_numbers(text: str) -> str:
    """JSON ``text`` (as ``json.dumps`` writes it) with every float of magnitude ``1e16`` or more
    written as its exact integer value and ``.0``, so that PostgreSQL's jsonb keeps it a float of
    that value (module docstring); the same text when it holds none (no ``e+``)."""
    return text if "e+" not in text else _exact(json.loads(text))


def _exact(v: Any) -> str:
    if isinstance(v, float) and math.isfinite(v) and abs(v) >= 1e16:
        return f"{int(v)}.0"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{json.dumps(k)}: {_exact(x)}" for k, x in v.items()) + "}"
    if isinstance(v, list):
        return "[" + ", ".join(_exact(x) for x in v) + "]"
    return json.dumps(v)
