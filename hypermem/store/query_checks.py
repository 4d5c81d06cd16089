"""The type check of a search query that is not text, and the error it raises.

:class:`QueryTypeError` is a ``TypeError`` (the query's type is wrong) and a ``ValueError``
(what ``poincare-memory`` 0.1.4 raises for ``search(42)``), so code migrated from it with
``except ValueError`` keeps catching it, as :class:`~hypermem.store.filters.FilterError` does
for filters.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

__all__ = ["Query", "QueryTypeError", "check_point_query"]

Query = str | torch.Tensor | np.ndarray | Sequence[float] | None
"""What ``Memory.search`` takes as a query: text, a point (tensor, array, list or tuple), or None
(structural modes)."""


class QueryTypeError(ValueError, TypeError):
    """A query that is neither text nor a point (a tensor, array, list or tuple)."""


def check_point_query(q: Any) -> None:
    """Raise :class:`QueryTypeError` unless ``q`` can be a point: a tensor, array, list or tuple."""
    if not isinstance(q, (torch.Tensor, np.ndarray, list, tuple)):
        raise QueryTypeError(f"a query must be text or a point (tensor, array, list), got {type(q).__name__}")
