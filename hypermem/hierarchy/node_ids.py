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
  is float64 in pandas and stays float after ``dropna``.

The check looks at the distinct ids (a set: linear, no sort), and scans the pairs only to name
the first offending one.
"""

from __future__ import annotations

import math
import numbers
import sys
from collections.abc import Hashable, Iterable, Sequence

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


def _kind(x) -> str | None:
    """``"int"`` or ``"float"`` for a number id (numpy's included, ``bool`` not), else ``None``."""
    if isinstance(x, bool):
        return None
    if isinstance(x, numbers.Integral):
        return "int"
    if isinstance(x, numbers.Real):
        return "float"
    return None


def check_node_ids(pairs: Sequence[tuple[Hashable, Hashable]], what: str = "pair",
                   extra: Iterable[Hashable] = ()) -> None:
    """Refuse a missing id (:func:`is_missing`) or ids that are one number in two types (``1``
    and ``1.0``, or a whole float such as ``3.0`` next to int ids), naming the first ``what``
    (``"pair"``, ``"edge"``) by its index.  ``extra``: more ids to check (a ``nodes`` list)."""
    labels = {x for p in pairs for x in p}
    labels.update(extra)
    kinds = set()
    missing = False
    for x in labels:
        k = _kind(x)
        if k is not None:
            kinds.add(k)
            missing = missing or (k == "float" and x != x)
        elif not missing and is_missing(x):
            missing = True
    if missing:
        for i, p in enumerate(pairs):
            if any(is_missing(x) for x in p):
                raise ValueError(f"{what} {i} is {p!r}: {MISSING_HINT} (pandas reads an empty cell as NaN)")
        raise ValueError(f"nodes hold {MISSING_HINT}")
    if kinds == {"int", "float"}:
        _refuse_mixed_numbers(pairs, what, extra)


def _refuse_mixed_numbers(pairs, what: str, extra) -> None:
    """Name the first number id whose value was met in the other type, else the first whole
    float among int ids."""
    first: dict = {}  # value -> the first id of that value (1 and 1.0 are one key)
    whole_float = some_int = None
    items = [(i, x) for i, p in enumerate(pairs) for x in p] + [(None, x) for x in extra]
    for i, x in items:
        k = _kind(x)
        if k is None:
            continue
        y = first.setdefault(x, x)
        if _kind(y) != k:
            a, b = (y, x) if k == "float" else (x, y)
            where = f"{what} {i}: " if i is not None else ""
            raise ValueError(f"{where}ids {a!r} (int) and {b!r} (float) are the same number in different types: "
                             f"{CAST_HINT}")
        if k == "float" and whole_float is None and math.isfinite(x) and float(x).is_integer():
            whole_float = (i, x)
        if k == "int" and some_int is None:
            some_int = x
    if whole_float is not None:
        i, x = whole_float
        where = f"{what} {i}: " if i is not None else ""
        raise ValueError(f"{where}id {x!r} (float) is a whole number among int ids (e.g. {some_int!r}): pandas makes a "
                         f"column float when it holds a NaN; {CAST_HINT}")
