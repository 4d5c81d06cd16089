"""A maximum-inner-product index over Lorentz vectors: exact (torch, numpy) or HNSW (faiss)."""

from __future__ import annotations

import math
import operator

import numpy as np
import torch

from ..geometry import PoincareBall, to_mips_vectors
from ..geometry.lorentz import distance_from_lorentz_inner
from .topk import exact_topk

BACKENDS = ("auto", "torch", "numpy", "faiss")


def faiss_available() -> bool:
    """Whether the ``ann`` extra (faiss) can be imported."""
    try:
        import faiss  # noqa: F401
    except ImportError:
        return False
    return True


class MIPSIndex:
    r"""Nearest-neighbour index for ball points through the Lorentz MIPS trick.

    Points are mapped to the hyperboloid and their time coordinate negated
    (:func:`~hypermem.geometry.to_mips_vectors`); then the largest dot products with the
    raw hyperboloid query are exactly the hyperbolic nearest neighbours, since
    ``d = (1/sqrt(c)) arcosh(-c <X, Y>_L)`` decreases with the inner product.

    Backends: ``"torch"`` (exact chunked matrix product, CPU or CUDA), ``"numpy"`` (exact,
    CPU), ``"faiss"`` (``IndexHNSWFlat`` over the MIPS vectors made Euclidean by Bachrach et
    al.'s extra coordinate, approximate, candidates' distances recomputed exactly; needs the
    ``ann`` extra).  ``"auto"`` is ``"torch"``: approximate search happens only when asked.

    Example::

        >>> from hypermem.geometry import PoincareBall
        >>> ball = PoincareBall()
        >>> idx = MIPSIndex(ball).build(ball.random_points(100, 8, seed=0))
        >>> dist, ind = idx.search(ball.random_points(2, 8, seed=1), k=3)
        >>> ind.shape
        torch.Size([2, 3])
    """

    def __init__(self, ball: PoincareBall, backend: str = "auto", hnsw_m: int = 32, ef_search: int = 64):
        if backend not in BACKENDS:
            raise ValueError(f"unknown backend {backend!r}; choose one of {BACKENDS}")
        if backend == "faiss" and not faiss_available():
            raise ImportError('the faiss backend needs the "ann" extra: pip install "hypermem-torch[ann]"')
        self.ball = ball
        self.backend = "torch" if backend == "auto" else backend
        self.hnsw_m = int(hnsw_m)
        self.ef_search = int(ef_search)
        self._vectors: torch.Tensor | None = None
        self._faiss = None
        self.recall_estimate: dict | None = None
        """The last :meth:`hypermem.Memory.index_recall` measurement (None until asked)."""

    def __getstate__(self) -> dict:
        """A faiss index is carried as its serialised bytes (it cannot be pickled as is)."""
        state = dict(self.__dict__)
        if state.get("_faiss") is not None:
            import faiss

            state["_faiss"] = faiss.serialize_index(state["_faiss"])
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        if self._faiss is not None:
            import faiss

            self._faiss = faiss.deserialize_index(self._faiss)

    @property
    def exact(self) -> bool:
        """True for the exact backends (torch, numpy)."""
        return self.backend != "faiss"

    def __len__(self) -> int:
        return 0 if self._vectors is None else int(self._vectors.shape[0])

    def build(self, points) -> MIPSIndex:
        """(Re)build the index over ``points`` ``(N, d)`` in the ball; returns ``self``."""
        X = self.ball.to_lorentz(points)
        if X.dim() != 2:
            raise ValueError(f"points must have shape (N, d), got {tuple(X.shape)[:-1] + (X.shape[-1] - 1,)}")
        self._vectors = to_mips_vectors(X)
        if self.backend == "faiss":
            import faiss

            # HNSW navigates a metric; inner products are not one.  The reduction of Bachrach
            # et al. (RecSys 2014) appends sqrt(M^2 - ||x||^2) to every stored vector (and 0 to
            # queries), after which the largest inner product is the smallest L2 distance.
            V = self._vectors.detach().cpu().to(torch.float64)
            sq = (V * V).sum(1)
            extra = (sq.max() - sq).clamp_min(0).sqrt().unsqueeze(1)
            vec = np.ascontiguousarray(torch.cat([V, extra], 1).numpy(), dtype=np.float32)
            index = faiss.IndexHNSWFlat(vec.shape[1], self.hnsw_m)
            index.hnsw.efSearch = max(self.ef_search, 1)
            index.add(vec)
            self._faiss = index
        return self

    def search(self, queries, k: int = 10) -> tuple[torch.Tensor, torch.Tensor]:
        """Hyperbolic distances and indices ``(B, k)`` of the nearest stored points
        (``(k,)`` for a single query); missing entries have index -1."""
        if self._vectors is None:
            raise RuntimeError("the index is empty: call build(points) first")
        if int(k) < 1:
            raise ValueError(f"k must be >= 1, got {k}")
        Q = self.ball.to_lorentz(queries)
        single = Q.dim() == 1
        Q = Q.reshape(-1, Q.shape[-1])
        if Q.shape[1] != self._vectors.shape[1]:
            raise ValueError(f"query dimension {Q.shape[1] - 1} does not match the index ({self._vectors.shape[1] - 1})")
        c = self.ball.curvature
        if self.backend == "faiss":
            self._faiss.hnsw.efSearch = max(self.ef_search, int(k))
            Qa = torch.cat([Q.detach().cpu().to(torch.float64), torch.zeros(Q.shape[0], 1, dtype=torch.float64)], 1)
            _, ind = self._faiss.search(np.ascontiguousarray(Qa.numpy(), dtype=np.float32), int(k))
            ind_t = torch.as_tensor(ind, dtype=torch.long)
            # exact inner products of the candidates, in the stored precision
            V = self._vectors.to(Q.device)
            ip = (V[ind_t.clamp_min(0).to(Q.device)] * Q.unsqueeze(1)).sum(-1)
            dist = distance_from_lorentz_inner(ip, c)
            dist = torch.where(ind_t.to(Q.device) < 0, torch.full_like(dist, math.inf), dist)
            order = torch.argsort(dist, dim=1, stable=True)
            out = torch.gather(dist, 1, order), torch.gather(ind_t.to(Q.device), 1, order)
        elif self.backend == "numpy":
            V = self._vectors.detach().cpu().numpy()
            ip = Q.detach().cpu().numpy() @ V.T
            kk = min(int(k), V.shape[0])
            part = np.argpartition(-ip, kk - 1, axis=1)[:, :kk]
            order = np.argsort(-np.take_along_axis(ip, part, 1), axis=1, kind="stable")
            ind = np.take_along_axis(part, order, 1)
            best = np.take_along_axis(ip, ind, 1)
            dist = distance_from_lorentz_inner(torch.as_tensor(best), c)
            out = _pad(dist.to(Q.dtype), torch.as_tensor(ind), int(k))
        else:
            def distance(s, idx):
                return distance_from_lorentz_inner(s, c)

            _, ind, dist = exact_topk(Q, self._vectors.to(Q.dtype), int(k), distance)
            out = dist, ind
        dist, ind = out
        return (dist[0], ind[0]) if single else (dist, ind)


    def query(self, point, k: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Indices and Lorentz inner products ``<X, Y>_L`` (larger is closer, ``-1/c`` for the
        point itself) of the ``k`` nearest stored points to one ball point ``(d,)``, as
        poincare-memory's ``MIPSIndex.query`` returns them.

        Best first, ties by ascending index; at most ``len(self)`` of them (no padding), and
        empty tensors for ``k < 1`` or an empty (or never built) index.  :meth:`search` is the
        batched form, with distances.
        """
        k = operator.index(k)
        empty = torch.empty(0, dtype=torch.long), torch.empty(0, dtype=torch.float64)
        if self._vectors is None or len(self) == 0 or k < 1:
            return empty
        Q = self.ball.to_lorentz(point)
        if Q.dim() != 1:
            raise ValueError(f"query takes one point of shape (d,), got {tuple(Q.shape[:-1])} points: "
                             "use search(queries, k) for a batch")
        if Q.shape[0] != self._vectors.shape[1]:
            raise ValueError(f"query dimension {Q.shape[0] - 1} does not match the index ({self._vectors.shape[1] - 1})")
        kk = min(k, len(self))
        V = self._vectors.to(device=Q.device, dtype=Q.dtype)
        if self.backend == "faiss":
            _, ind = self.search(point, kk)
            ind = ind[ind >= 0]
            scores = V[ind] @ Q
            order = torch.argsort(-scores, stable=True)
            return ind[order], scores[order]
        scores, ind, _ = exact_topk(Q.unsqueeze(0), V, kk, lambda s, idx: -s)
        return ind[0], scores[0]


def _pad(dist, ind, k):
    extra = k - dist.shape[1]
    if extra <= 0:
        return dist, ind
    B = dist.shape[0]
    return (torch.cat([dist, dist.new_full((B, extra), math.inf)], 1),
            torch.cat([ind, ind.new_full((B, extra), -1)], 1))
