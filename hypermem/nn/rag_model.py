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

import contextlib

import geoopt
import torch
from torch import nn

from ..geometry.numerics import HALF_DTYPES, safe_norm
from ..store import Memory
from .dense_topk import dense_topk
from .encoder import BallEncoder
from .hyperbolic_memory import HyperbolicMemory
from .read_checks import check_k
from .readout import ParentVote
from .scripting import NotScriptable, refuse_tracing
from .sparse_rows import sparse_rows_allowed

__all__ = ["HyperbolicRAG", "cosine_topk", "no_autocast"]


def no_autocast(device: torch.device):
    """Autocast off on ``device`` (the ``meta`` device has no autocast: nothing to turn off), so
    a product runs in its operands' dtype: an exact top-``k`` under ``torch.autocast``."""
    return contextlib.nullcontext() if device.type == "meta" else torch.autocast(device.type, enabled=False)


@torch.no_grad()
def cosine_topk(qdirs: torch.Tensor, dirs: torch.Tensor, k: int, exclude: torch.Tensor | None = None
                ) -> torch.Tensor:
    """Top-``k`` slots ``(B, k)`` by cosine of unit query directions ``(B, d)`` with unit key
    directions ``(N, d)``: one matmul and ``topk``.  ``exclude`` ``(B,)`` or ``(B, m)``
    (``-1`` ignored) are never returned; missing entries are ``-1``.  The product runs with
    autocast off in the keys' dtype (half queries converted), so the top-``k`` under
    ``torch.autocast`` is the exact one, as :meth:`HyperbolicMemory.select`'s."""
    with no_autocast(dirs.device):
        cos = qdirs.detach().to(dirs.dtype) @ dirs.T
    return dense_topk(cos, k, None if exclude is None else torch.as_tensor(exclude))


DEFAULT_K = 32
"""The top-``k`` of training reads when ``k=None``: ``min(DEFAULT_K, slots)``."""


class HyperbolicRAG(NotScriptable, nn.Module):
    """Encoder -> hyperbolic memory -> hierarchy-aware readout.

    ``model(x)`` (:meth:`forward`, the same as :meth:`answer_scores`) gives every slot's answer
    score ``(B, N)`` for features ``x`` ``(B, feature_dim)``, ranking every slot exactly
    (:meth:`ParentVote.full`): ``model(x).argmax(1)`` is the predicted slot.  ``train_scores``
    uses exact top-``k`` reads (:meth:`ParentVote.topk`), so a training step costs the
    searches plus ``O(batch x k)`` work with gradient.

    Parameters (checked here, each named): ``parent`` ``(N,)`` the parent slot of every slot of
    ``store`` (``-1`` for roots; one entry per slot); ``k`` the top-``k`` of training reads, from
    1 to the number of slots (``None``: ``min(32, slots)``; a larger ``k`` is refused);
    ``metric`` ``"shell"`` or ``"hyperbolic"``; ``sparse_grad`` sparse gradients for the keys;
    ``dtype`` the one dtype of the encoders and the memory, ``torch.float32`` or
    ``torch.float64`` (``None``: ``torch.get_default_dtype()``; another one is refused, naming
    it).  Run it in half precision under ``torch.autocast``.

    **Optimizers.**  With ``sparse_grad=True`` (the default: a step touches ``O(batch x k)``
    key rows, whatever ``N``) the keys get sparse gradients, which
    :class:`geoopt.optim.RiemannianAdam` refuses: train :meth:`dense_parameters` with it and
    :meth:`sparse_parameters` (the keys) with :class:`geoopt.optim.SparseRiemannianAdam`, as
    :meth:`optimizers` does; or build the model with ``sparse_grad=False`` and one
    ``RiemannianAdam(model.parameters())``.  Under ``DistributedDataParallel`` the key gradients
    are dense (:mod:`hypermem.nn.sparse_rows`): call :meth:`optimizers` after
    ``init_process_group`` and it gives the keys to ``RiemannianAdam`` too.  Example::

        opts = model.optimizers(lr=3e-3)              # [RiemannianAdam, SparseRiemannianAdam]
        cand, scores = model.train_scores(x, targets, exclude)
        loss = torch.nn.functional.cross_entropy(scores, torch.zeros_like(targets))  # answer first
        for o in opts: o.zero_grad()
        loss.backward()
        for o in opts: o.step()
        model.after_step()

    The search (:meth:`select`): with the shell metric and no per-slot bias, the score
    ``-d/tau`` is a decreasing function of the cosine between the query's and the key's
    directions (:func:`hypermem.geometry.poincare.shell_distance_from_cosine`), so the
    top-``k`` slots are the top-``k`` cosines: one matrix product of unit directions and a
    ``topk``.  After an optimizer step, :meth:`after_step` refreshes the memory's cached key
    directions and radii only for the rows that moved (the rows of the sparse key gradient).
    """

    def __init__(self, store: Memory, parent: torch.Tensor, feature_dim: int, temperature: float = 0.1,
                 learn_keys: bool = True, two_heads: bool = False, k: int | None = None,
                 query_depth: float | str | None = None, combine: str = "logaddexp", children: str = "max",
                 metric: str = "shell", fast: bool = True, sparse_grad: bool = True,
                 dtype: torch.dtype | None = None):
        super().__init__()
        dt = torch.get_default_dtype() if dtype is None else dtype
        if dt not in (torch.float32, torch.float64):
            what = "the default dtype" if dtype is None else "dtype"
            raise ValueError(f"HyperbolicRAG holds its encoders and memory in torch.float32 or "
                             f"torch.float64, {what} is {dt}: pass dtype=torch.float32 (run half "
                             "precision under torch.autocast)")
        depth = store.base_depth if query_depth is None else query_depth
        init = "identity" if feature_dim == store.dim else "default"
        self.encoder = BallEncoder(feature_dim, store.dim, curvature=store.curvature, depth=depth, init=init,
                                   init_depth=store.base_depth, dtype=dt)
        self.vote_encoder = BallEncoder(feature_dim, store.dim, curvature=store.curvature, depth=depth, init=init,
                                        init_depth=store.base_depth, dtype=dt) if two_heads else None
        self.memory = HyperbolicMemory.from_memory(store, learn_keys=learn_keys, temperature=temperature,
                                                   sparse_grad=bool(sparse_grad), dtype=dt)
        self.memory.metric = metric  # checked by the memory (ValueError naming the metric)
        self.readout = ParentVote(parent, combine=combine, children=children)
        n = len(self.memory)
        if self.readout.parent.shape[0] != n:
            raise ValueError(f"parent must have one entry per slot of the store ({n}), "
                             f"got {self.readout.parent.shape[0]}")
        if k is None:
            k = min(DEFAULT_K, n)
        elif isinstance(k, int) and not isinstance(k, bool) and k > n:
            raise ValueError(f"k={k} is more than the store's {n} slots: pass k <= {n} "
                             f"(or k=None for min({DEFAULT_K}, slots))")
        self.k = check_k(k, n)
        self.fast = bool(fast)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Answer scores ``(B, N)`` of every slot for features ``x``: :meth:`answer_scores`."""
        refuse_tracing(self)
        return self.answer_scores(x)

    def sparse_parameters(self) -> list[nn.Parameter]:
        """The parameters with sparse gradients: the keys when they train with ``sparse_grad``
        (for :class:`geoopt.optim.SparseRiemannianAdam`), else none; none either while
        ``torch.distributed`` is initialised, where the memory's gathers are dense (DDP takes no
        other sparse gradients: :mod:`hypermem.nn.sparse_rows`)."""
        K = self.memory.keys
        return [K] if K.requires_grad and self.memory.sparse_grad and sparse_rows_allowed() else []

    def dense_parameters(self) -> list[nn.Parameter]:
        """Every trainable parameter but :meth:`sparse_parameters` (for
        :class:`geoopt.optim.RiemannianAdam`)."""
        sparse = {id(p) for p in self.sparse_parameters()}
        return [p for p in self.parameters() if p.requires_grad and id(p) not in sparse]

    def optimizers(self, lr: float = 3e-3, key_lr: float | None = None) -> list[torch.optim.Optimizer]:
        """``[RiemannianAdam(dense_parameters(), lr)]``, plus
        ``SparseRiemannianAdam(sparse_parameters(), key_lr or lr)`` when there are sparse ones;
        step every one after each backward (then :meth:`after_step`)."""
        opts: list[torch.optim.Optimizer] = [geoopt.optim.RiemannianAdam(self.dense_parameters(), lr=lr)]
        sparse = self.sparse_parameters()
        if sparse:
            opts.append(geoopt.optim.SparseRiemannianAdam(sparse, lr=lr if key_lr is None else key_lr))
        return opts

    def _queries(self, x):
        q = self.encoder(x)
        return q, (q if self.vote_encoder is None else self.vote_encoder(x))

    def answer_scores(self, x: torch.Tensor) -> torch.Tensor:
        """Answer scores ``(B, N)`` of every slot (exact, with gradient; also ``model(x)``)."""
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
        if queries.dtype in HALF_DTYPES:  # a .half() encoder: directions in the keys' dtype, as the memory's
            queries = queries.to(dirs.dtype)
        elif queries.dtype != dirs.dtype:
            raise ValueError(f"queries are {queries.dtype} but the memory is {dirs.dtype}; move one of them")
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
