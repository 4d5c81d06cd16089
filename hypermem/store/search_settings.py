"""The search settings a store keeps in its saved config: ``hybrid``, ``recency_weight`` and
``lexical`` (the settings of its :class:`~hypermem.store.lexical.Lexical`: tokenizer, BM25's
``k1`` and ``b``, the family and neighbour shares; :mod:`hypermem.store.lexical_settings`).

Unlike the geometry's settings (``curvature``, ``inherit``, ..., which placed the stored points
and so always win over what a caller passes), these only weigh the score's terms
(:mod:`hypermem.store.lexical`, :mod:`hypermem.store.calibration`): a snapshot or a durable
database reopens with the values it was saved with, and an explicit argument of
``Memory.open`` wins over them.  A config without them (written before they were kept) opens
as it ranked then: ``hybrid`` 0 for a config hypermem wrote (it has ``dtype``; a version
before hybrid search ranked without the lexical term: ``mem.hybrid = 0.3`` or
``Memory.open(..., hybrid=0.3)`` opts in), ``hybrid`` from the embedder
(:func:`~hypermem.store.lexical.default_hybrid`) for a file of the NumPy reference
``poincare-memory`` (no ``dtype``: docs/migrating.md), the saved ``time_coef`` as the seed's
explicit coefficient.

``recency_weight`` (when set) stands for the calibrated time term: the ``time_coef`` saved
beside it is only the value it had at saving time, so reopening drops it and recalibrates to
the store's current distance spread; ``Memory.open(..., time_coef=...)`` of such a store is a
``ValueError`` naming the coefficient it ranks with (:mod:`hypermem.store.backends.opening`).

``lexical`` is not a ``Memory`` argument: :func:`restore_lexical` sets it on the new store
(``mem.searcher.lexical``); ``Memory.open(..., lexical=Lexical(...))`` records it in a new
store, and for an existing one follows the geometry's rule: the stored settings win, other
ones are a ``ValueError``.  A config without it opens with the default ``Lexical()``.
"""

from __future__ import annotations

from collections.abc import Mapping, MutableMapping
from typing import Any

from .lexical import Lexical
from .lexical_settings import LEXICAL_KEY, saved_lexical, stored_lexical

__all__ = ["SEARCH_KEYS", "apply_search_settings", "restore_lexical", "search_settings"]

SEARCH_KEYS = ("hybrid", "recency_weight", LEXICAL_KEY)


def search_settings(memory) -> dict[str, Any]:
    """``{"hybrid": ..., "recency_weight": ..., "lexical": ...}`` of ``memory`` (``recency_weight``
    None when its time term is the seed's explicit ``time_coef``; saving a custom tokenizer warns
    that it must be passed again: :func:`~hypermem.store.lexical_settings.saved_lexical`)."""
    rw = memory.recency_weight
    return {"hybrid": float(memory.hybrid), "recency_weight": None if rw is None else float(rw),
            **saved_lexical(memory)}


def apply_search_settings(config: Mapping[str, Any], kwargs: MutableMapping[str, Any]) -> None:
    """Put a stored config's search settings into the ``Memory`` keyword arguments ``kwargs``
    (which already hold the stored ``time_coef``), explicit ones in ``kwargs`` winning."""
    if kwargs.get("hybrid") is None and config.get("hybrid") is not None:
        kwargs["hybrid"] = config["hybrid"]
    elif kwargs.get("hybrid") is None and "hybrid" not in config and "dtype" in config:
        kwargs["hybrid"] = 0.0  # written by hypermem before hybrid search: it ranks as it did (module docstring)
    rw = kwargs.get("recency_weight")
    if rw is None:
        rw = config.get("recency_weight")
    if rw is not None:
        kwargs.pop("time_coef", None)
        kwargs["recency_weight"] = rw


def restore_lexical(memory, config: Mapping[str, Any], where: str, given: Lexical | None = None,
                    warn: bool = True) -> None:
    """Set ``memory.searcher.lexical`` to the :class:`Lexical` that ``config`` records, or to
    ``given`` (which must agree with it; :func:`~hypermem.store.lexical_settings.stored_lexical`);
    the store's default is kept where neither is."""
    lexical = stored_lexical(config, where, given, warn)
    if lexical is not None:
        memory.searcher.lexical = lexical
