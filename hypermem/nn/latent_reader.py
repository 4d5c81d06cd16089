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
(:class:`PairReader`).  The loss is ``-log p(y | x)`` on the answer only.  The top-``k``
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

from .rag_model import cosine_topk

__all__ = ["CosineKeys", "LatentRead", "LatentRetrievalReader", "PairReader", "full_select", "marginal_log_probs"]


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
    """A Euclidean key set: scores ``cos(q, k_j) / tau`` (``tau`` learned), exact top-``k`` by
    one matmul of unit vectors and ``topk``; ``values`` ``(N, dv)`` are kept as a buffer.
    ``sparse_grad``: the keys' gradient is sparse (only the rows read), for a sparse optimizer."""

    def __init__(self, keys: torch.Tensor, temperature: float = 0.05, learn_keys: bool = True,
                 values: torch.Tensor | None = None, sparse_grad: bool = False):
        super().__init__()
        self.sparse_grad = bool(sparse_grad)
        self.keys = nn.Parameter(torch.as_tensor(keys).detach().clone().float(), requires_grad=bool(learn_keys))
        self.log_temperature = nn.Parameter(torch.tensor(math.log(float(temperature))))
        self.register_buffer("values", None if values is None else torch.as_tensor(values).detach().clone())

    def __len__(self) -> int:
        return int(self.keys.shape[0])

    @torch.no_grad()
    def select(self, queries: torch.Tensor, k: int, exclude: torch.Tensor | None = None, at_time=None
               ) -> torch.Tensor:
        """The top-``k`` slots ``(B, k)`` by cosine (``exclude`` never returned; ``-1`` missing)."""
        return cosine_topk(F.normalize(queries, dim=1), F.normalize(self.keys, dim=1), k, exclude)

    def score_slots(self, queries: torch.Tensor, indices: torch.Tensor, at_time=None
                    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Scores and cosine distances ``1 - cos`` ``(B, m)`` of the slots ``indices``, with
        gradient to the queries, the gathered keys and the temperature (``-1``: ``-inf``)."""
        K = F.normalize(F.embedding(indices.clamp_min(0), self.keys, sparse=self.sparse_grad), dim=-1)
        cos = (F.normalize(queries, dim=1).unsqueeze(1) * K).sum(-1)
        scores = (cos / self.log_temperature.exp()).masked_fill(indices < 0, -math.inf)
        return scores, 1.0 - cos


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


class LatentRetrievalReader(nn.Module):
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
    """

    def __init__(self, memory: nn.Module, reader: nn.Module, k: int = 8, values: torch.Tensor | None = None,
                 select=None):
        super().__init__()
        self.memory = memory
        self.reader = reader
        self.k = int(k)
        if self.k < 1:
            raise ValueError(f"k must be >= 1, got {k!r}")
        if values is not None:
            self.register_buffer("values", torch.as_tensor(values).detach().clone())
        elif getattr(memory, "values", None) is None:
            raise ValueError("the memory holds no values: pass values=(N, dv)")
        else:
            self.values = None
        self.select_fn = select

    def slot_values(self) -> torch.Tensor:
        return self.memory.values if self.values is None else self.values

    def forward(self, queries: torch.Tensor, features: torch.Tensor, exclude: torch.Tensor | None = None,
                indices: torch.Tensor | None = None) -> LatentRead:
        """Read at ``queries`` ``(B, d)`` (points for the memory) for ``features`` ``(B, df)``
        (the reader's input).  ``exclude`` ``(B,)`` or ``(B, m)``: slots never read (e.g. the
        query's own).  ``indices`` ``(B, k)``: read these slots instead of searching."""
        if indices is None:
            search = self.select_fn or self.memory.select
            indices = search(queries, self.k, exclude)
        scores, _ = self.memory.score_slots(queries, indices)
        log_prior = torch.log_softmax(scores, dim=1)
        V = self.slot_values()[indices.clamp_min(0)]
        log_lik = torch.log_softmax(self.reader(features, V), dim=-1)
        return LatentRead(marginal_log_probs(log_prior, log_lik), log_prior, log_lik, indices)

    def loss(self, queries: torch.Tensor, features: torch.Tensor, labels: torch.Tensor,
             exclude: torch.Tensor | None = None) -> torch.Tensor:
        """Mean ``-log p(y | x)`` of the answers ``labels`` ``(B,)``."""
        return F.nll_loss(self(queries, features, exclude).log_probs, labels)
