"""Export a trained hierarchy embedding: :func:`embedding_to_memory` loads it into a
:class:`~hypermem.store.Memory` with one call (each node at exactly its trained point, its
parent from the tree, its text and metadata), so searches, the inspector and persistence
work on what was learned.  No Lightning import here: the function takes plain points, e.g.
:meth:`hypermem.train.hierarchy_module.HierarchyModule.points_dict` or the points of
:func:`hypermem.hierarchy.fit_poincare_embeddings`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

import torch

from ..embed import HashingEmbedder
from ..hierarchy.tree import bfs_order, children_map, parents_of
from ..store import Memory
from ..temporal import utcnow


def embedding_to_memory(points: Mapping[Any, Any], tree: Iterable[tuple[Any, Any]] = (),
                        texts: Mapping[Any, str] | None = None, curvature: float = 1.0, t: datetime | None = None,
                        meta: Mapping[Any, Mapping[str, Any]] | None = None, embedder=None, **memory_kwargs):
    """A :class:`~hypermem.store.Memory` holding a trained hierarchy embedding: one memory
    per node, id ``str(node)``, at exactly its trained point, its parent from ``tree``.

    Parameters
    ----------
    points:
        ``node -> point`` (``(dim,)`` tensors inside the ball of ``curvature``), e.g.
        :meth:`hypermem.train.hierarchy_module.HierarchyModule.points_dict` or the first
        result of :func:`hypermem.hierarchy.fit_poincare_embeddings`.
    tree:
        ``(parent, child)`` edges, one parent per node (nodes without one are roots).
    texts:
        ``node -> text`` (default: the node's name).
    t:
        Every memory's time (default: now); the memory's clock is frozen there (no decay by
        default).
    meta, embedder, memory_kwargs:
        Per-node metadata; the embedder for text queries (default
        :class:`~hypermem.embed.HashingEmbedder` of the points' dimension, which needs
        ``dim >= 8``: pass one for smaller points); more
        :class:`~hypermem.store.Memory` arguments (the default metric is
        ``"hyperbolic"``: searches rank by the trained distances).

    Memory points are stored as a direction and a hyperbolic radius, so
    ``mem.point(id)`` equals the trained point up to rounding (about 1e-15 in float64).
    A node at the origin (the root of :func:`~hypermem.hierarchy.sarkar_layout` and
    :func:`~hypermem.hierarchy.shadows.shadow_layout`) keeps the origin as its point; its
    embedding, which a point at radius 0 does not give, is the mean unit direction of its
    children (:func:`origin_direction`).

    >>> import torch
    >>> from hypermem.embed import CallableEmbedder
    >>> pts = {"mammal": torch.tensor([0.0, 0.1]), "dog": torch.tensor([0.5, 0.6]), "cat": torch.tensor([-0.5, 0.6])}
    >>> text_queries = CallableEmbedder(lambda texts: [[1.0, float(len(t))] for t in texts], dim=2)
    >>> mem = embedding_to_memory(pts, [("mammal", "dog"), ("mammal", "cat")], {"dog": "a domestic canine"},
    ...                           embedder=text_queries)
    >>> mem.ancestors("dog"), mem.get("dog").text, round(float(mem.point("cat")[0]), 6)
    (['mammal'], 'a domestic canine', -0.5)
    """
    t = utcnow() if t is None else t

    if not points:
        raise ValueError("points is empty: nothing to load")
    ids = {node: str(node) for node in points}
    if len(set(ids.values())) != len(ids):
        raise ValueError("two nodes have the same name as text (str(node)); memory ids must be unique")
    children, roots = children_map(tree)  # two parents, cycles, malformed edges: clear errors
    missing = next((node for node in children if node not in points), None)
    if missing is not None:
        raise ValueError(f"tree node {missing!r} has no point")
    parent = parents_of(children)
    # every point is a node; those outside the tree are roots of their own
    order = [n for n in points if n not in children] + [n for r in roots for n in bfs_order(children, r)]
    vectors = {n: torch.as_tensor(points[n]).detach().to("cpu", torch.float64) for n in order}
    dim = vectors[order[0]].shape[-1]
    if embedder is None and dim < 8:
        raise ValueError(f"{dim}-dimensional points: the default HashingEmbedder needs dim >= 8; pass embedder= "
                         f"(anything with dim={dim} and embed(texts), e.g. a CallableEmbedder) for text queries")
    if embedder is not None and getattr(embedder, "dim", None) != dim:
        raise ValueError(f"the embedder's dim ({getattr(embedder, 'dim', None)!r}) must equal the trained points' "
                         f"dimension {dim}: their embeddings are the points' directions, and a query is embedded "
                         f"to compare with them; pass an embedder of dim={dim}")
    texts, meta = texts or {}, meta or {}
    memory_kwargs.setdefault("metric", "hyperbolic")
    mem = Memory(embedder=HashingEmbedder(dim=dim) if embedder is None else embedder, curvature=curvature,
                 clock=lambda: t, **memory_kwargs)
    embeddings = {n: origin_direction(vectors, children.get(n, ())) if not bool(v.any()) else v
                  for n, v in vectors.items()}
    mem.add_many([{"id": ids[n], "text": texts.get(n) or ids[n], "parent": ids[parent[n]] if n in parent else None,
                   "t": t, "point": vectors[n], "embedding": embeddings[n], "meta": dict(meta.get(n, {}))}
                  for n in order])
    return mem


def origin_direction(vectors: Mapping[Any, torch.Tensor], kids: Iterable[Any]) -> torch.Tensor:
    """The embedding of a node whose point is the origin (a layout's root), which has no
    direction of its own: ``s / ||s||`` with ``s = sum_k x_k / ||x_k||`` over its children's
    non-zero points ``x_k`` (the direction its subtree leans to), or the first axis ``e_1``
    where no child has one or the children spread evenly (``||s||`` below ``1e-9`` per
    child, e.g. Sarkar's root, whose children are spread over the sphere).  The store keeps
    the origin as the point and this as the memory's direction
    (:func:`hypermem.store.placement.point_placement`)."""
    dim = next(iter(vectors.values())).shape[-1]
    units = [v / v.norm() for v in (vectors[k] for k in kids) if bool(v.any())]
    total = torch.stack(units).sum(0) if units else torch.zeros(dim, dtype=torch.float64)
    norm = float(total.norm())
    if units and norm > 1e-9 * len(units):
        return total / norm
    axis = torch.zeros(dim, dtype=torch.float64)
    axis[0] = 1.0
    return axis
