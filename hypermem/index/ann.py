r"""Approximate nearest directions: faiss HNSW over float32 unit directions.

The shell distance ``g(s) = (2 / sqrt(c)) arsinh(sinh(sqrt(c) rho) sqrt((1 - s) / 2))``
decreases with the cosine ``s`` between directions, so the shell-nearest memories are the
maximum-inner-product directions; for unit vectors that is also the L2-nearest order
(``||x - y||^2 = 2 - 2 s``), a metric HNSW navigates (Malkov & Yashunin, "Efficient and
robust approximate nearest neighbor search using Hierarchical Navigable Small World
graphs", TPAMI 2018).  The Lorentz MIPS vectors of :class:`~hypermem.index.MIPSIndex`
give the same order for points on one shell, at 257 float64 columns instead of 256
float32 ones; this index keeps only the float32 directions and its graph, and grows by
``add`` when memories are appended (no rebuild).

The score's other terms (``depth_bias * depth + time_coef * log w``) are not in the
graph: the store re-scores the candidates exactly and, the bias being bounded by its
largest value ``b_max``, asks for more candidates until the last one's cosine is below
``g^{-1}(b_max - t_k)`` (``t_k`` the k-th re-scored score), under which no memory can
enter (:meth:`hypermem.store.search.Searcher.search`).  That stopping rule trusts the
graph's answer down to its last candidate, where a beam of exactly ``k`` is least
accurate (HNSW's recall@k falls towards the k-th neighbour), so a search for ``k``
candidates keeps a beam of at least :data:`BEAM_PER_CANDIDATE` ``* k``.
"""

from __future__ import annotations

import numpy as np
import torch

from .mips import MIPSIndex, faiss_available

BEAM_PER_CANDIDATE = 2
"""The least search beam per candidate asked for: ``efSearch = max(ef_search, 2 k)``."""


class DirectionIndex:
    """faiss ``IndexHNSWFlat`` (inner product) over unit directions ``(N, d)``.

    ``hnsw_m``: graph degree (32); ``ef_construction``: build beam (faiss's 40 by
    default; larger builds slower and finds better neighbours); ``ef_search``: search beam,
    at least :data:`BEAM_PER_CANDIDATE` times the number of candidates asked for.

    >>> import torch
    >>> x = torch.nn.functional.normalize(torch.randn(500, 8, generator=torch.Generator().manual_seed(0)), dim=1)
    >>> index = DirectionIndex().build(x)
    >>> cos, idx = index.search(x[:2], 3)
    >>> idx[:, 0].tolist(), len(index)
    ([0, 1], 500)
    """

    backend = "faiss"
    exact = False

    def __init__(self, hnsw_m: int = 32, ef_search: int = 64, ef_construction: int = 40):
        if not faiss_available():
            raise ImportError('the faiss backend needs the "ann" extra: pip install "hypermem-torch[ann]"')
        for name, v in (("hnsw_m", hnsw_m), ("ef_search", ef_search), ("ef_construction", ef_construction)):
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"{name} must be an integer >= 1, got {v!r}")
        self.hnsw_m, self.ef_search, self.ef_construction = hnsw_m, ef_search, ef_construction
        self._faiss = None
        self.recall_estimate: dict | None = None
        """The last :meth:`hypermem.Memory.index_recall` measurement (None until asked)."""

    # a faiss index travels as its serialised bytes (it cannot be pickled as is)
    __getstate__ = MIPSIndex.__getstate__
    __setstate__ = MIPSIndex.__setstate__

    def __len__(self) -> int:
        return 0 if self._faiss is None else int(self._faiss.ntotal)

    @property
    def built(self) -> bool:
        """Whether :meth:`build` made a graph (:meth:`add` needs one)."""
        return self._faiss is not None

    @staticmethod
    def _array(x: torch.Tensor) -> np.ndarray:
        return np.ascontiguousarray(x.detach().to("cpu", torch.float32).numpy())

    def build(self, directions: torch.Tensor) -> DirectionIndex:
        """A fresh graph over ``directions`` ``(N, d)``; returns ``self``."""
        import faiss

        if directions.dim() != 2:
            raise ValueError(f"directions must have shape (N, d), got {tuple(directions.shape)}")
        index = faiss.IndexHNSWFlat(int(directions.shape[1]), self.hnsw_m, faiss.METRIC_INNER_PRODUCT)
        index.hnsw.efConstruction = self.ef_construction
        self._faiss = index
        return self.add(directions)

    def add(self, directions: torch.Tensor) -> DirectionIndex:
        """Append ``directions`` (their rows follow the ones already indexed)."""
        if directions.shape[0]:
            self._faiss.add(self._array(directions))
        return self

    def search(self, queries: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Float32 cosines and rows ``(B, k)`` of the (approximately) nearest directions,
        best first; missing entries have row -1 and cosine ``-inf``."""
        if self._faiss is None:
            raise RuntimeError("the index is empty: call build(directions) first")
        k = int(k)
        self._faiss.hnsw.efSearch = max(self.ef_search, BEAM_PER_CANDIDATE * k)
        cos, idx = self._faiss.search(self._array(queries), k)
        cos_t, idx_t = torch.from_numpy(cos), torch.from_numpy(idx).to(torch.long)
        return torch.where(idx_t < 0, torch.full_like(cos_t, -float("inf")), cos_t), idx_t
