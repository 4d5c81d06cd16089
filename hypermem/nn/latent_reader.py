r"""A retriever trained through a reader, with no retrieval labels: the marginalised top-``k`` read.

A query with features ``x`` (what the reader sees) and a point ``q`` (what the memory is
searched with, e.g. a :class:`~hypermem.nn.BallEncoder` of ``x``) reads the ``k`` best slots
``z`` of a memory.  The answer ``y`` (a class, not a slot) is predicted by marginalising over
that read, as in REALM (Guu et al., "REALM: Retrieval-Augmented Language Model
Pre-Training", ICML 2020) and RAG-Sequence (Lewis et al., "Retrieval-Augmented Generation
for Knowledge-Intensive NLP Tasks", NeurIPS 2020):

.. math::

    p(y \mid x) = \sum_{z \in \mathrm{top}_k(q)} p(z \mid q)\, p(y \mid x, v_z), \qquad
    p(z \mid q) = \frac{\exp s_z(q)}{\sum_{z' \in \mathrm{top}_k(q)} \exp s_{z'}(q)},

where ``s_z(q)`` is the memory's score (for :class:`~hypermem.nn.HyperbolicMemory`
``-d(q, k_z)/tau + ...``; for :class:`CosineKeys` ``cos(q, k_z)/tau``) and
``p(y | x, v_z)`` a reader over the query features and the slot's value ``v_z``
(:class:`PairReader`); ``v_z`` is fixed or, with ``learn_values``, a trainable value per slot
(a key-value memory).  The loss is ``-log p(y | x)`` on the answer only.  The top-``k``
is chosen without gradient; its scores are recomputed with gradient
(``memory.score_slots``), so the query point, the keys and the temperature get gradient
*only* through the read weights ``p(z | q)``; the reader gets it through ``p(y | x, v_z)``.

Any memory with ``select(queries, k, exclude)`` and ``score_slots(queries, indices)``
(returning ``(scores, distances)``) works: :class:`~hypermem.nn.HyperbolicMemory` or the
Euclidean :class:`CosineKeys`.

Example::

    >>> import torch
    >>> keys = CosineKeys(torch.eye(4), temperature=0.5, values=torch.eye(4))
    >>> model = LatentRetrievalReader(keys, PairReader(4, 4, n_classes=3), k=2)
    >>> x = torch.randn(5, 4)
    >>> out = model(x, x)
    >>> out.log_probs.shape, bool(torch.allclose(out.log_probs.exp().sum(1), torch.ones(5)))
    (torch.Size([5, 3]), True)
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from ..geometry.numerics import HALF_DTYPES
from .rag_model import cosine_topk, no_autocast
from .read_checks import check_finite_rows, check_k, refuse_empty_mean
from .scripting import NotScriptable, refuse_tracing
from .sparse_rows import sparse_gather_ok

VALUE_MODES = (None, "copy", "zero")
"""``learn_values`` of :class:`LatentRetrievalReader`: frozen values, or a trainable value per slot
initialised from the given values (``"copy"``) or at 0 (``"zero"``)."""

__all__ = ["VALUE_MODES", "CosineKeys", "LatentRead", "LatentRetrievalReader", "PairReader", "full_select",
           "marginal_log_probs"]


def marginal_log_probs(log_prior: torch.Tensor, log_likelihood: torch.Tensor) -> torch.Tensor:
    """``log sum_z p(z) p(y | z)`` ``(B, C)`` from ``log p(z)`` ``(B, k)`` and ``log p(y | z)``
    ``(B, k, C)`` (a log-sum-exp over ``z``; ``-inf`` priors drop their slot)."""
    return torch.logsumexp(log_prior.unsqueeze(2) + log_likelihood, dim=1)


@dataclass
class LatentRead:
    """What :class:`LatentRetrievalReader` returns: ``log_probs`` ``(B, C)`` ``log p(y | x)``;
    ``log_prior`` ``(B, k)`` ``log p(z | q)`` (the read weights, ``-inf`` for missing slots);
    ``log_likelihood`` ``(B, k, C)`` ``log p(y | x, v_z)``; ``indices`` ``(B, k)`` the slots read."""

    log_probs: torch.Tensor
    log_prior: torch.Tensor
    log_likelihood: torch.Tensor
    indices: torch.Tensor


class CosineKeys(nn.Module):
    r"""A Euclidean key set: scores ``cos(q, k_j) / tau`` (``tau`` learned), exact top-``k`` by
    one matmul of unit vectors and ``topk``; ``values`` ``(N, dv)`` are kept as a buffer.
    ``sparse_grad``: the keys' gradient is sparse (only the rows read), for a sparse optimizer
    (dense while ``torch.distributed`` is initialised: :mod:`hypermem.nn.sparse_rows`).

    ``depth`` ``(N,)`` (e.g. each slot's level in a tree) adds a learned, per-query pull
    towards general or specific slots, the Euclidean counterpart of a hyperbolic query at a
    learned radius (a query near the origin of the ball is closest to the shallow keys):

    .. math::

        s_j(q) = \frac{\cos(q, k_j)}{\tau} + \beta(q)\, \mathrm{depth}_j, \qquad
        \beta(q) = w^\top \frac{q}{\lVert q \rVert} + b \quad (w, b \text{ start at } 0),

    and the top-``k`` is then taken over these scores (one ``(B, N)`` matmul).

    **Dtypes**, as :class:`~hypermem.nn.HyperbolicMemory`'s: ``dtype`` (``None``: the keys'
    floating dtype, else ``torch.get_default_dtype()``) is ``torch.float32`` or
    ``torch.float64`` (another is refused, naming it) and holds the keys, the temperature, the
    depths and the depth head.  Half-precision queries (``torch.autocast``, a ``.half()``
    encoder) are converted to it; queries of the other float dtype are refused (``ValueError``
    naming both).  The scores run with autocast off, so the top-``k`` under ``torch.autocast``
    is the exact one."""

    def __init__(self, keys: torch.Tensor, temperature: float = 0.05, learn_keys: bool = True,
                 values: torch.Tensor | None = None, sparse_grad: bool = False, depth: torch.Tensor | None = None,
                 dtype: torch.dtype | None = None):
        super().__init__()
        self.sparse_grad = bool(sparse_grad)
        K = torch.as_tensor(keys).detach()
        dt = dtype if dtype is not None else K.dtype if K.is_floating_point() else torch.get_default_dtype()
        if dt not in (torch.float32, torch.float64):
            what = "dtype is" if dtype is not None else "the keys are"
            raise ValueError(f"CosineKeys holds its keys in torch.float32 or torch.float64, {what} {dt}: pass "
                             "dtype=torch.float32 (run half precision under torch.autocast)")
        self.keys = nn.Parameter(K.to(dt).clone(), requires_grad=bool(learn_keys))
        self.log_temperature = nn.Parameter(torch.tensor(math.log(float(temperature)), dtype=dt, device=K.device))
        self.register_buffer("values", None if values is None else torch.as_tensor(values).detach().clone())
        self.register_buffer("depth", None if depth is None else torch.as_tensor(depth).detach().to(dt).clone())
        self.depth_head = None
        if depth is not None:
            if self.depth.shape != (len(self),):
                raise ValueError(f"depth must have shape ({len(self)},), got {tuple(self.depth.shape)}")
            self.depth_head = nn.Linear(self.keys.shape[1], 1, dtype=dt, device=K.device)
            nn.init.zeros_(self.depth_head.weight)
            nn.init.zeros_(self.depth_head.bias)

    def __len__(self) -> int:
        return int(self.keys.shape[0])

    def forward(self, queries: torch.Tensor) -> torch.Tensor:
        """Not a read: ``CosineKeys`` is the key set a :class:`LatentRetrievalReader` searches,
        called through :meth:`select`, :meth:`score_all` and :meth:`score_slots`; calling it
        raises ``NotImplementedError`` naming them (torch's default names no method)."""
        raise NotImplementedError(
            "CosineKeys is a key set, not a read layer: call keys.select(queries, k) for the top-k slots, "
            "keys.score_all(queries) or keys.score_slots(queries, indices) for (scores, distances), "
            "or wrap it in LatentRetrievalReader(keys, reader, k) for a differentiable read")

    def extra_repr(self) -> str:
        vd = None if self.values is None else self.values.shape[1]
        return (f"slots={len(self)}, dim={self.keys.shape[1]}, value_dim={vd}, learn_keys={self.keys.requires_grad}, "
                f"depth_pull={self.depth_head is not None}")

    def _queries(self, queries: torch.Tensor) -> torch.Tensor:
        """Half-precision ``queries`` in the keys' dtype; another dtype refused, naming both."""
        if queries.dtype in HALF_DTYPES:
            return queries.to(self.keys.dtype)
        if queries.dtype != self.keys.dtype:
            raise ValueError(f"queries are {queries.dtype} but the CosineKeys keys are {self.keys.dtype}; "
                             "move one of them")
        return queries

    def _depth_term(self, u: torch.Tensor, indices: torch.Tensor | None) -> torch.Tensor | None:
        """``beta(q) depth_j`` ``(B, m)`` (``indices=None``: every slot), or ``None``."""
        if self.depth_head is None:
            return None
        depth = self.depth if indices is None else self.depth[indices.clamp_min(0)]
        return self.depth_head(u) * depth

    @torch.no_grad()
    def select(self, queries: torch.Tensor, k: int, exclude: torch.Tensor | None = None, at_time=None
               ) -> torch.Tensor:
        """The top-``k`` slots ``(B, k)`` by score (``exclude`` never returned; ``-1`` missing).
        ``k`` above the number of slots and NaN / inf queries raise ``ValueError``, as for
        :class:`~hypermem.nn.HyperbolicMemory` (:mod:`~hypermem.nn.read_checks`)."""
        k = check_k(k, len(self))
        check_finite_rows(queries, "query")
        if self.depth_head is None:
            return cosine_topk(F.normalize(self._queries(queries), dim=1), F.normalize(self.keys, dim=1), k, exclude)
        return full_select(self)(queries, k, exclude)

    def score_all(self, queries: torch.Tensor, at_time=None) -> tuple[torch.Tensor, torch.Tensor]:
        """Scores and cosine distances ``(B, N)`` against every slot (autocast off)."""
        with no_autocast(self.keys.device):
            u = F.normalize(self._queries(queries), dim=1)
            cos = u @ F.normalize(self.keys, dim=1).T
            scores = cos / self.log_temperature.exp()
            term = self._depth_term(u, None)
        return (scores if term is None else scores + term), 1.0 - cos

    def score_slots(self, queries: torch.Tensor, indices: torch.Tensor, at_time=None
                    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Scores and cosine distances ``1 - cos`` ``(B, m)`` of the slots ``indices``, with
        gradient to the queries, the gathered keys and the temperature (``-1``: ``-inf``); a
        NaN / inf query raises ``ValueError`` naming its row (one host sync)."""
        check_finite_rows(queries, "query")
        sparse = self.sparse_grad and sparse_gather_ok("CosineKeys")
        with no_autocast(self.keys.device):
            K = F.normalize(F.embedding(indices.clamp_min(0), self.keys, sparse=sparse), dim=-1)
            u = F.normalize(self._queries(queries), dim=1)
            cos = (u.unsqueeze(1) * K).sum(-1)
            scores = cos / self.log_temperature.exp()
            term = self._depth_term(u, indices)
        if term is not None:
            scores = scores + term
        return scores.masked_fill(indices < 0, -math.inf), 1.0 - cos


class PairReader(nn.Module):
    """``p(y | x, v)``: logits ``(..., C)`` of an MLP (``hidden=0``: linear) on ``[x, v]``.
    With ``value_dim=0`` it reads ``x`` alone (the reader without memory).

    The first layer is split, ``A [x, v] = A_x x + A_v v``, so a query's ``A_x x`` is
    computed once for its ``k`` slots (``x`` may be ``(B, df)`` with ``v`` ``(B, k, dv)``)."""

    def __init__(self, feature_dim: int, value_dim: int, n_classes: int, hidden: int = 0, dropout: float = 0.0):
        super().__init__()
        self.value_dim = int(value_dim)
        width = int(hidden) or int(n_classes)
        self.features = nn.Linear(int(feature_dim), width)
        self.values = nn.Linear(self.value_dim, width, bias=False) if self.value_dim else None
        self.dropout = nn.Dropout(dropout)
        self.out = nn.Sequential(nn.ReLU(), nn.Linear(width, n_classes)) if hidden else None

    def forward(self, features: torch.Tensor, values: torch.Tensor | None = None) -> torch.Tensor:
        h = self.features(self.dropout(features))
        if self.values is not None:
            if values is None:
                raise ValueError(f"this reader reads slot values: pass values (..., {self.value_dim})")
            if h.dim() == values.dim() - 1:
                h = h.unsqueeze(-2)
            h = h + self.values(self.dropout(values.to(features.dtype)))
        return h if self.out is None else self.out(self.dropout(h))


def full_select(memory):
    """``select(queries, k, exclude)`` that scores every slot without gradient
    (``memory.score_all``) and takes the ``topk``: exact, for memories small enough for a
    ``(B, N)`` score matrix.  Missing entries (fewer than ``k`` slots left) are ``-1``."""

    @torch.no_grad()
    def select(queries, k, exclude=None):
        s = memory.score_all(queries.detach())[0]
        if exclude is not None:
            ex = torch.as_tensor(exclude, device=s.device).long().view(s.shape[0], -1)
            s = s.scatter(1, ex.clamp_min(0), torch.where(ex >= 0, -math.inf, s.gather(1, ex.clamp_min(0))))
        vals, idx = s.topk(min(int(k), s.shape[1]), dim=1)
        return idx.masked_fill(vals == -math.inf, -1)

    return select


class LatentRetrievalReader(NotScriptable, nn.Module):
    """The marginalised top-``k`` read of the module docstring.

    Parameters
    ----------
    memory: :class:`~hypermem.nn.HyperbolicMemory`, :class:`CosineKeys` or anything with
        ``select`` and ``score_slots``.
    reader: a module ``reader(features (B, df), values (B, k, dv)) -> logits (B, k, C)``
        (:class:`PairReader`).
    k: slots read per query.
    values: ``(N, dv)`` slot values (default ``memory.values``).
    select: ``select(queries, k, exclude) -> (B, k)`` in place of ``memory.select`` (it must
        return the same top-``k``; e.g. :func:`full_select` or :meth:`hypermem.nn.HyperbolicRAG.select`).
    learn_values: ``None`` (the values are fixed), ``"copy"`` or ``"zero"``: a key-value
        memory (Miller et al., "Key-Value Memory Networks for Directly Reading Documents",
        EMNLP 2016) whose value ``u_z`` of each slot is a parameter, initialised from the values
        or at 0; the answer loss then teaches every slot read what it stands for.  The keys
        (what is searched) and the values (what is read) stay apart, so the query map and the
        keys still learn only through ``p(z | q)``.
    see_score: the reader also sees ``k p(z | q)`` of each slot (detached, so again no
        gradient reaches the query or the keys through the reader); its ``value_dim`` is then
        ``dv + 1``.
    """

    def __init__(self, memory: nn.Module, reader: nn.Module, k: int = 8, values: torch.Tensor | None = None,
                 select=None, learn_values: str | None = None, see_score: bool = False):
        super().__init__()
        self.memory = memory
        self.reader = reader
        self.k = int(k)
        if self.k < 1:
            raise ValueError(f"k must be >= 1, got {k!r}")
        if learn_values not in VALUE_MODES:
            raise ValueError(f"learn_values must be one of {VALUE_MODES}, got {learn_values!r}")
        if values is None and getattr(memory, "values", None) is None:
            raise ValueError("the memory holds no values: pass values=(N, dv)")
        base = torch.as_tensor(memory.values if values is None else values).detach().clone()
        self.learn_values = learn_values
        self.see_score = bool(see_score)
        if learn_values is None:
            if values is not None:
                self.register_buffer("values", base)
            else:
                self.values = None
        else:  # a key-value memory: slot j's value u_j is a parameter
            base = base if base.is_floating_point() else base.float()
            self.values = nn.Parameter(base if learn_values == "copy" else torch.zeros_like(base))
        self.select_fn = select

    def extra_repr(self) -> str:
        return f"k={self.k}, learn_values={self.learn_values!r}, see_score={self.see_score}"

    def slot_values(self) -> torch.Tensor:
        return self.memory.values if self.values is None else self.values

    def forward(self, queries: torch.Tensor, features: torch.Tensor, exclude: torch.Tensor | None = None,
                indices: torch.Tensor | None = None) -> LatentRead:
        """Read at ``queries`` ``(B, d)`` (points for the memory) for ``features`` ``(B, df)``
        (the reader's input).  ``exclude`` ``(B,)`` or ``(B, m)``: slots never read (e.g. the
        query's own).  ``indices`` ``(B, k)``: read these slots instead of searching."""
        refuse_tracing(self)
        if indices is None:
            search = self.select_fn or self.memory.select
            indices = search(queries, self.k, exclude)
        scores, _ = self.memory.score_slots(queries, indices)
        log_prior = torch.log_softmax(scores, dim=1)
        V = self.slot_values()[indices.clamp_min(0)]
        if self.see_score:  # the reader sees k p(z|q) (detached: no path from the reader to q or the keys)
            w = (log_prior.detach().exp() * log_prior.shape[1]).unsqueeze(-1)
            V = torch.cat([V.to(w.dtype), w], dim=-1)
        log_lik = torch.log_softmax(self.reader(features, V), dim=-1)
        return LatentRead(marginal_log_probs(log_prior, log_lik), log_prior, log_lik, indices)

    def loss(self, queries: torch.Tensor, features: torch.Tensor, labels: torch.Tensor,
             exclude: torch.Tensor | None = None, reduction: str = "mean") -> torch.Tensor:
        """``-log p(y | x)`` of the answers ``labels`` ``(B,)``, reduced by ``reduction`` (``"mean"``,
        ``"sum"`` or ``"none"``); an empty batch with ``"mean"`` raises ``ValueError`` (its mean is
        NaN), as the losses of :mod:`hypermem.nn.losses` do."""
        refuse_empty_mean("LatentRetrievalReader.loss", int(labels.shape[0]), reduction)
        return F.nll_loss(self(queries, features, exclude).log_probs, labels, reduction=reduction)
