"""The one check of node ids that every entry point taking pairs or edges runs.

Training (:class:`~hypermem.hierarchy.relations.Relations`), reconstruction, the layouts,
:func:`~hypermem.hierarchy.tree.children_map` / :func:`~hypermem.hierarchy.tree.transitive_closure`
and :func:`~hypermem.train.export.embedding_to_memory` call :func:`check_node_ids`, which refuses
the two ids a pandas table gives silently:

* a **missing** id: ``None``, a float NaN (``float("nan")``, ``numpy.nan``) or, when pandas is
  already imported, ``pd.NA`` / ``pd.NaT``: ``read_csv`` gives a root row a NaN parent, and
  every NaN is a node of its own (``nan != nan``) or, worse, one shared root;
* the **same number in two types**: ``1`` and ``1.0`` are one dict key, so they merge silently
  under whichever came first (memory ids ``'1.0'`` next to ``'2'``); a column that held a NaN
  is float64 in pandas and stays float after ``dropna``.  So do ``True`` (a Python or a numpy
  bool), ``Decimal('1')`` and ``1+0j`` with ``1``: every such pair is refused, in either order.

The check looks at the distinct ids and, apart, at the set of their types (the set of ids keeps
only the first of ``1`` and ``1.0``, so it cannot tell which types met): both linear, no sort.
It scans the pairs only to name the first offending one.
"""

from __future__ import annotations

import math
import numbers
import sys
from collections.abc import Hashable, Iterable, Sequence
from decimal import Decimal

import numpy as np

__all__ = ["MISSING_HINT", "check_node_ids", "is_missing"]

MISSING_HINT = "a missing parent (NaN/None): drop root rows, e.g. df.dropna(subset=['parent'])"
CAST_HINT = "cast the columns, e.g. df.astype({'parent': 'Int64'}) or to str"


def is_missing(x) -> bool:
    """``x`` is ``None``, a NaN (``x != x``: float, numpy, Decimal) or, only when pandas is
    already imported (it is never imported here), a value ``pandas.isna`` calls missing."""
    if x is None:
        return True
    t = type(x)
    if t is str or t is int:
        return False
    if isinstance(x, float):
        return x != x
    try:
        if x != x:
            return True
    except (TypeError, ValueError):  # pd.NA: the truth value of NA is ambiguous
        pass
    pd = sys.modules.get("pandas")
    if pd is None:
        return False
    try:
        return bool(pd.isna(x))
    except (TypeError, ValueError):  # a tuple id: isna answers per element
        return False


_RANK = {"int": 0, "float": 1, "Decimal": 2, "complex": 3, "bool": 4}
"""Number kinds in the order an error names them (``1 (int) and 1.0 (float)``)."""


def _kind_of_type(t: type) -> str | None:
    """The number kind of ids of type ``t`` (numpy's included): ``"bool"`` (Python's and numpy's),
    ``"int"``, ``"float"`` (any other real), ``"Decimal"``, ``"complex"``; ``None`` for no number."""
    if issubclass(t, (bool, np.bool_)):
        return "bool"
    if issubclass(t, numbers.Integral):
        return "int"
    if issubclass(t, numbers.Real):
        return "float"
    if issubclass(t, Decimal):
        return "Decimal"
    return "complex" if issubclass(t, numbers.Complex) else None


def _kind(x) -> str | None:
    return _kind_of_type(type(x))


def check_node_ids(pairs: Sequence[tuple[Hashable, Hashable]], what: str = "pair",
                   extra: Iterable[Hashable] = ()) -> None:
    """Refuse a missing id (:func:`is_missing`) or ids that are one number in two types (``1``
    and ``1.0``, ``True`` and ``1``, ``Decimal('1')`` and ``1``, ... in any order, or a whole float
    such as ``3.0`` next to int ids), naming the first ``what`` (``"pair"``, ``"edge"``) by its
    index.  ``extra``: more ids to check (a ``nodes`` list)."""
    extra = list(extra)
    labels = {x for p in pairs for x in p}
    labels.update(extra)
    types = {type(x) for p in pairs for x in p}  # apart: the set of ids keeps one of 1 and 1.0
    types.update(type(x) for x in extra)
    missing = False
    for x in labels:
        k = _kind(x)
        if k is not None:
            missing = missing or (k not in ("int", "bool") and x != x)
        elif not missing and is_missing(x):
            missing = True
    if missing:
        for i, p in enumerate(pairs):
            if any(is_missing(x) for x in p):
                raise ValueError(f"{what} {i} is {p!r}: {MISSING_HINT} (pandas reads an empty cell as NaN)")
        raise ValueError(f"nodes hold {MISSING_HINT}")
    kinds = {_kind_of_type(t) for t in types} - {None}
    if len(kinds) > 1:
        _refuse_mixed_numbers(pairs, what, extra, int_and_float={"int", "float"} <= kinds)


def _refuse_mixed_numbers(pairs, what: str, extra, int_and_float: bool) -> None:
    """Name the first number id whose value was met in another type, else (``int_and_float``)
    the first whole float among int ids."""
    first: dict = {}  # value -> the first id of that value (1, 1.0 and True are one key)
    whole_float = some_int = None
    items = [(i, x) for i, p in enumerate(pairs) for x in p] + [(None, x) for x in extra]
    for i, x in items:
        k = _kind(x)
        if k is None:
            continue
        y = first.setdefault(x, x)
        ky = _kind(y)
        if ky != k:
            (a, ka), (b, kb) = sorted([(y, ky), (x, k)], key=lambda e: _RANK[e[1]])
            where = f"{what} {i}: " if i is not None else ""
            hint = CAST_HINT if (ka, kb) == ("int", "float") else (
                "one dict key, so the two nodes would merge into one; give every id one type (e.g. str)")
            raise ValueError(f"{where}ids {a!r} ({ka}) and {b!r} ({kb}) are the same number in different types: "
                             f"{hint}")
        if k == "float" and whole_float is None and math.isfinite(x) and float(x).is_integer():
            whole_float = (i, x)
        if k == "int" and some_int is None:
            some_int = x
    if int_and_float and whole_float is not None:
        i, x = whole_float
        where = f"{what} {i}: " if i is not None else ""
        raise ValueError(f"{where}id {x!r} (float) is a whole number among int ids (e.g. {some_int!r}): pandas makes a "
                         f"column float when it holds a NaN; {CAST_HINT}")
