r"""Approximate nearest directions: faiss HNSW over float32 unit directions.

The shell distance ``g(s) = (2 / sqrt(c)) arsinh(sinh(sqrt(c) rho) sqrt((1 - s) / 2))``
decreases with the cosine ``s`` between directions, so the shell-nearest memories are the
maximum-inner-product directions; for unit vectors that is also the L2-nearest order
(``||x - y||^2 = 2 - 2 s``), a metric HNSW navigates (Malkov & Yashunin, "Efficient and
robust approximate nearest neighbor search using Hierarchical Navigable Small World
graphs", TPAMI 2018).  The Lorentz MIPS vectors of :class:`~hypermem.index.MIPSIndex`
give the same order for points on one shell, at 257 float64 columns instead of 256
float32 ones; this index keeps only the float32 directions and its graph, and grows by
``add`` when memories are appended (no rebuild).  HNSW cannot delete a point: :meth:`remove`
leaves a tombstone instead, an entry the graph still walks through but never returns (a faiss
``IDSelectorBitmap`` of the live entries), so a removed or moved memory costs no rebuild.

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

import math

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
        self.dead = 0
        """How many entries are tombstones (:meth:`remove`)."""
        self._live = np.ones(0, dtype=bool)
        self._params = None

    def __getstate__(self) -> dict:
        """A faiss index travels as its serialised bytes (it cannot be pickled as is); the
        search parameters of the tombstones are made again on the next search."""
        state = MIPSIndex.__getstate__(self)
        state["_params"] = None
        return state

    def __setstate__(self, state: dict) -> None:
        MIPSIndex.__setstate__(self, {"dead": 0, "_live": np.ones(0, dtype=bool), **state, "_params": None})
        if self._live.size < len(self):  # pickled before tombstones: every entry live
            self._live = np.ones(len(self), dtype=bool)

    def __len__(self) -> int:
        """The graph's entries, tombstones included (:attr:`live`: without them)."""
        return 0 if self._faiss is None else int(self._faiss.ntotal)

    @property
    def live(self) -> int:
        """The entries that are not tombstones."""
        return len(self) - self.dead

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
        self._faiss, self.dead, self._live, self._params = index, 0, np.ones(0, dtype=bool), None
        return self.add(directions)

    def add(self, directions: torch.Tensor) -> DirectionIndex:
        """Append ``directions`` (their rows follow the ones already indexed)."""
        if directions.shape[0]:
            self._faiss.add(self._array(directions))
            self._live = np.concatenate([self._live, np.ones(int(directions.shape[0]), dtype=bool)])
            self._params = None
        return self

    def remove(self, entries: torch.Tensor) -> None:
        """Make ``entries`` (positions in the graph) tombstones: still walked through by a
        search, never returned by it."""
        at = entries.to("cpu", torch.long).numpy()
        if at.size:
            self._live[at] = False
            self.dead = int(self._live.size - np.count_nonzero(self._live))
            self._params = None

    def vectors(self) -> torch.Tensor:
        """The graph's float32 vectors ``(len, d)``, tombstones included: a view of faiss's own
        storage (no copy), valid until the next :meth:`add` or :meth:`build`."""
        import faiss

        if self._faiss is None:
            raise RuntimeError("the index is empty: call build(directions) first")
        flat = faiss.downcast_index(self._faiss.storage)
        n, d = len(self), int(self._faiss.d)
        return torch.from_numpy(faiss.rev_swig_ptr(flat.get_xb(), n * d).reshape(n, d))

    def search(self, queries: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Float32 cosines and rows ``(B, k)`` of the (approximately) nearest directions,
        best first; missing entries have row -1 and cosine ``-inf``."""
        if self._faiss is None:
            raise RuntimeError("the index is empty: call build(directions) first")
        k = int(k)
        ef = max(self.ef_search, BEAM_PER_CANDIDATE * k)
        if self.dead:  # the beam widened by the share of tombstones it walks through
            cos, idx = self._faiss.search(self._array(queries), k, params=self._search_params(ef))
        else:
            self._faiss.hnsw.efSearch = ef
            cos, idx = self._faiss.search(self._array(queries), k)
        cos_t, idx_t = torch.from_numpy(cos), torch.from_numpy(idx).to(torch.long)
        return torch.where(idx_t < 0, torch.full_like(cos_t, -float("inf")), cos_t), idx_t

    def _search_params(self, ef: int):
        import faiss

        ef = int(math.ceil(ef * len(self) / max(1, self.live)))
        if self._params is None:
            bitmap = np.packbits(self._live, bitorder="little")
            sel = faiss.IDSelectorBitmap(len(self), faiss.swig_ptr(bitmap))
            self._params = (faiss.SearchParametersHNSW(sel=sel, efSearch=ef), sel, bitmap)  # kept alive together
        self._params[0].efSearch = ef
        return self._params[0]
