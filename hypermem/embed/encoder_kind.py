"""Which embedders are hierarchy encoders, and which of them place a store's points.

A hierarchy encoder (:class:`~hypermem.embed.HierarchyEncoder`, or anything alike) has a
``geometry`` (``"poincare"`` or ``"euclidean"``) and ``subsumption_scores(child, parent)``; a
ball one (``geometry="poincare"`` with a ``curvature``) gives each text a point of its ball,
which a store keeps as the memory's point (:mod:`hypermem.store.encoder_points`).  The store,
its adapters and the inspector ask here, so the test lives in one place.
"""

from __future__ import annotations

from typing import Any

__all__ = ["AUTO_PARENT_KEY", "is_hierarchy_encoder", "places_points"]

AUTO_PARENT_KEY = "auto_parent"
"""The meta key where a memory placed by ``add(text, parent="auto")`` keeps why (:mod:`hypermem.store.suggest`)."""


def is_hierarchy_encoder(embedder: Any) -> bool:
    """Whether ``embedder`` is a hierarchy encoder (a ``geometry`` and ``subsumption_scores``)."""
    return getattr(embedder, "geometry", None) in ("poincare", "euclidean") and \
        callable(getattr(embedder, "subsumption_scores", None))


def places_points(embedder: Any) -> bool:
    """Whether ``embedder`` is a ball hierarchy encoder, whose points a store keeps as they are."""
    return is_hierarchy_encoder(embedder) and embedder.geometry == "poincare" and \
        getattr(embedder, "curvature", None) is not None
