"""How deep a JSON value read from a file may nest: the one rule every hypermem loader uses.

It lives in this low layer so that both the model-folder loaders here (:mod:`hypermem.embed`)
and the store (:mod:`hypermem.store.validation`, which re-exports it) apply the same bound.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["MAX_JSON_DEPTH", "json_depth_over"]

MAX_JSON_DEPTH = 100
"""Deepest nesting of arrays/objects in a JSON value a loader accepts (and ``save`` writes)."""


def json_depth_over(value: Any, limit: int) -> bool:
    """Whether ``value`` nests more than ``limit`` lists/dicts deep (iterative, so a
    self-containing value is simply too deep)."""
    stack = [(value, 1)]
    while stack:
        v, d = stack.pop()
        if isinstance(v, (list, tuple, set, frozenset, Mapping)):
            if d > limit:
                return True
            stack.extend((x, d + 1) for x in (v.values() if isinstance(v, Mapping) else v))
    return False
