"""The :class:`~hypermem.store.Memory` methods that its collaborators answer (the searcher, the
suggester, the views), one assignment each through :func:`~hypermem.store.delegation.calls`, so a
type checker reads the collaborator's parameter and return types (``mem.search(...)`` is a
``list[SearchResult]``) and ``help(Memory.search)`` shows the collaborator's signature and docs."""

from __future__ import annotations

import torch

from ..embed.reranker import PlacementReranker
from .delegation import calls
from .search import Searcher
from .suggest import Suggester
from .views import MemoryViews

__all__ = ["MemoryDelegates"]


class MemoryDelegates:
    """Searching (:class:`~hypermem.store.search.Searcher`, :class:`~hypermem.store.suggest.Suggester`)
    and the read-only views (:class:`~hypermem.store.views.MemoryViews`) of a ``Memory``."""

    searcher: Searcher
    suggester: Suggester
    views: MemoryViews

    # ------------------------------------------------------------------ searching
    search = calls("searcher", Searcher.search)
    search_batch = calls("searcher", Searcher.search_batch)
    time_weights = calls("searcher", Searcher.time_weights)
    embed_query = calls("searcher", Searcher.embed_query)
    build_index = calls("searcher", Searcher.build_index)
    index_recall = calls("searcher", Searcher.index_recall)
    suggest_parents = calls("suggester", Suggester.suggest_parents)

    @property
    def reranker(self) -> PlacementReranker | None:
        """A :class:`~hypermem.embed.PlacementReranker` that re-scores the best candidate parents of
        ``parent="auto"`` and ``suggest_parents`` in a store that holds a tree, or None (store.suggest)."""
        return self.suggester.reranker

    @reranker.setter
    def reranker(self, value: PlacementReranker | None) -> None:
        self.suggester.set_reranker(value)

    # ------------------------------------------------------------------ columns (read-only properties)
    @property
    def ids(self) -> list[str]:
        return self.views.ids

    @property
    def points(self) -> torch.Tensor:
        return self.views.points

    @property
    def directions(self) -> torch.Tensor:
        return self.views.directions

    @property
    def depths(self) -> torch.Tensor:
        return self.views.depths

    @property
    def embeddings(self) -> torch.Tensor:
        return self.views.embeddings

    # ------------------------------------------------------------------ navigation and summaries
    parent = calls("views", MemoryViews.parent)
    children = calls("views", MemoryViews.children)
    ancestors = calls("views", MemoryViews.ancestors)
    descendants = calls("views", MemoryViews.descendants)
    siblings = calls("views", MemoryViews.siblings)
    roots = calls("views", MemoryViews.roots)
    level = calls("views", MemoryViews.level)
    depth = calls("views", MemoryViews.depth)
    point = calls("views", MemoryViews.point)
    embedding = calls("views", MemoryViews.embedding)
    stats = calls("views", MemoryViews.stats)
    table = calls("views", MemoryViews.table)
    to_dataframe = calls("views", MemoryViews.to_dataframe)
    tree = calls("views", MemoryViews.tree)


for _name in ("ids", "points", "directions", "depths", "embeddings"):  # the views' docstrings
    getattr(MemoryDelegates, _name).__doc__ = getattr(MemoryViews, _name).__doc__
del _name
