r"""A retrieval model trained end to end through the hyperbolic memory: frozen features ->
:class:`~hypermem.nn.BallEncoder` -> :class:`~hypermem.nn.HyperbolicMemory` (keys started at a
store's hierarchy placement) -> the hierarchy-aware readout :class:`~hypermem.nn.ParentVote`.

A slot ``p`` scores as the answer to a query point ``q`` from its own key and its children's
keys (:mod:`hypermem.nn.readout`), with the memory's scores ``s_j = -d(q, k_j) / tau``.  Under
the shell metric without a per-slot bias the distance is a decreasing function of the cosine
between the directions of ``q`` and ``k_j`` (the hyperbolic law of cosines,
:func:`hypermem.geometry.poincare.shell_distance_from_cosine`):

.. math::

    d(q, k_j) = \frac{2}{\sqrt c}\,\operatorname{arsinh}\Big(\sinh(\sqrt c\,\rho)
                \sqrt{(1 - \cos\theta_j) / 2}\Big),

so the top-``k`` slots are the top-``k`` cosines of unit directions (:func:`cosine_topk`, one
matrix product and a ``topk``).  Scores and keys: Nickel & Kiela, "Poincaré Embeddings for
Learning Hierarchical Representations", NeurIPS 2017.

The WordNet hypernym-retrieval experiment that trains and compares it lives in the checkout
(``experiments/rag``), not in the package.
"""

from __future__ import annotations

import torch
from torch import nn

from ..geometry.numerics import safe_norm
from ..store import Memory
from .dense_topk import dense_topk
from .encoder import BallEncoder
from .hyperbolic_memory import HyperbolicMemory
from .read_checks import check_k
from .readout import ParentVote

__all__ = ["HyperbolicRAG", "cosine_topk"]


@torch.no_grad()
def cosine_topk(qdirs: torch.Tensor, dirs: torch.Tensor, k: int, exclude: torch.Tensor | None = None
                ) -> torch.Tensor:
    """Top-``k`` slots ``(B, k)`` by cosine of unit query directions ``(B, d)`` with unit key
    directions ``(N, d)``: one matmul and ``topk``.  ``exclude`` ``(B,)`` or ``(B, m)``
    (``-1`` ignored) are never returned; missing entries are ``-1``."""
    return dense_topk(qdirs.detach() @ dirs.T, k, None if exclude is None else torch.as_tensor(exclude))


class HyperbolicRAG(nn.Module):
    """Encoder -> hyperbolic memory -> hierarchy-aware readout.

    ``answer_scores`` ranks every slot exactly (:meth:`ParentVote.full`); ``train_scores``
    uses exact top-``k`` reads (:meth:`ParentVote.topk`), so a training step costs the
    searches plus ``O(batch x k)`` work with gradient.

    The search (:meth:`select`): with the shell metric and no per-slot bias, the score
    ``-d/tau`` is a decreasing function of the cosine between the query's and the key's
    directions (:func:`hypermem.geometry.poincare.shell_distance_from_cosine`), so the
    top-``k`` slots are the top-``k`` cosines: one matrix product of unit directions and a
    ``topk``.  After an optimizer step, :meth:`after_step` refreshes the memory's cached key
    directions and radii only for the rows that moved (the rows of the sparse key gradient).
    """

    def __init__(self, store: Memory, parent: torch.Tensor, feature_dim: int, temperature: float = 0.1,
                 learn_keys: bool = True, two_heads: bool = False, k: int = 32, query_depth: float | str | None = None,
                 combine: str = "logaddexp", children: str = "max", metric: str = "shell", fast: bool = True):
        super().__init__()
        depth = store.base_depth if query_depth is None else query_depth
        init = "identity" if feature_dim == store.dim else "default"
        self.encoder = BallEncoder(feature_dim, store.dim, curvature=store.curvature, depth=depth, init=init,
                                   init_depth=store.base_depth)
        self.vote_encoder = BallEncoder(feature_dim, store.dim, curvature=store.curvature, depth=depth, init=init,
                                        init_depth=store.base_depth) if two_heads else None
        self.memory = HyperbolicMemory.from_memory(store, learn_keys=learn_keys, temperature=temperature,
                                                   sparse_grad=True, dtype=torch.float32)
        self.memory.metric = metric
        self.readout = ParentVote(parent, combine=combine, children=children)
        self.k = int(k)
        self.fast = bool(fast)

    def _queries(self, x):
        q = self.encoder(x)
        return q, (q if self.vote_encoder is None else self.vote_encoder(x))

    def answer_scores(self, x: torch.Tensor) -> torch.Tensor:
        q, v = self._queries(x)
        own = self.memory.score_all(q)[0]
        vote = own if v is q else self.memory.score_all(v)[0]
        return self.readout.full(own, vote)

    @torch.no_grad()
    def select(self, queries: torch.Tensor, k: int, exclude: torch.Tensor | None = None) -> torch.Tensor:
        """The top-``k`` slots ``(B, k)`` of :meth:`HyperbolicMemory.select` (``exclude``
        ``(B,)`` or ``(B, m)``, ``-1`` ignored; missing entries ``-1``), by one cosine matmul
        and ``topk`` when the metric is the shell metric without slot bias, else by the
        memory's own search."""
        mem = self.memory
        k = check_k(k, len(mem))  # a k above the slots is refused here too (hypermem.nn.read_checks)
        if not self.fast or mem.metric != "shell" or mem.slot_bias(None) is not None:
            return mem.select(queries, k, exclude=exclude)
        dirs, _ = mem.key_geometry()
        return cosine_topk(queries / safe_norm(queries, keepdim=True), dirs, k, exclude)

    def train_scores(self, x, targets, exclude):
        """Candidates (answer first) and their scores; the label is position 0."""
        q, v = self._queries(x)
        return self.readout.topk(self.memory, q, v, self.k, targets=targets, exclude=exclude, select=self.select)

    @torch.no_grad()
    def after_step(self) -> None:
        """Refresh the memory's cached key directions and radii for the rows the last sparse
        key step moved (the other rows did not change), instead of all ``N`` rows."""
        K = self.memory.keys
        if not self.fast or not K.requires_grad or K.grad is None or not K.grad.is_sparse:
            return
        self.memory.refresh_key_rows(K.grad.coalesce().indices()[0].unique())
