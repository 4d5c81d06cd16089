r"""A hierarchy-aware readout: score each slot as an *answer* from its own key and its
children's keys.

Retrieving the parent (hypernym) of a query that is not in memory is a question about
the tree, not only about nearest keys.  The query's nearest neighbours are often its
siblings, whose parent is the answer; a parent is also matched directly by its own key.
:class:`ParentVote` combines both, for slots ``p`` with children ``ch(p)``:

.. math::

    A(p) = \operatorname{logaddexp}\big(s^{own}_p + a,\;
           \max_{c \in ch(p)} s^{vote}_c + b\big),

where ``s^own`` and ``s^vote`` are the memory's scores (:class:`~hypermem.nn.HyperbolicMemory`)
of two query points (one placed to meet the answer's key, one to meet its children's
keys; they may be the same point) and ``a``, ``b`` are learned offsets.  A slot without
children keeps ``s^own_p + a``.  The training-free version with cosine scores is the
"sibling vote" baseline (the query's nearest siblings vote for their parent).

Two ways to evaluate it:

* :meth:`ParentVote.full` — over all slots, from ``(B, N)`` score matrices (exact).
* :meth:`ParentVote.topk` — from the memory's exact top-``k`` reads: candidates are the
  ``k`` best slots for the own query and the parents of the ``k`` best slots for the vote
  query (plus given ``targets``, for training), scored with gradient; cost
  ``O(B k (k + d))``, independent of the number of slots.  The own-score part is exact;
  the vote only counts the ``k`` best voters, so a candidate's score is a lower bound of
  its full score (equal when its best children are among them, always when ``k = N``),
  and a slot outside the candidates scores at most
  ``logaddexp(s^own_(k) + a, s^vote_(k) + b)`` with the ``k``-th best scores.  It is meant
  for training (hard negatives); rank with :meth:`~ParentVote.full`.

Example::

    >>> import torch
    >>> vote = ParentVote(torch.tensor([-1, 0, 0]))   # slot 0 is the parent of 1 and 2
    >>> own = torch.tensor([[0.0, 5.0, -9.0]])
    >>> vote.full(own, own).argmax(1).tolist()        # child 1 votes for slot 0
    [0]
"""

from __future__ import annotations

import math

import torch
from torch import nn

from .indices import as_indices

COMBINE = ("logaddexp", "sum")
CHILDREN = ("max", "logsumexp")


class ParentVote(nn.Module):
    """The readout of the module docstring over a tree given as parent slot indices.

    Parameters
    ----------
    parent: ``(N,)`` long tensor, the parent slot of every slot (``-1`` for roots).
    own_bias, vote_bias: initial offsets ``a`` and ``b`` (learned unless ``learn=False``).
    learn: train ``a`` and ``b`` (else they stay at ``own_bias`` and ``vote_bias``).
    combine: ``"logaddexp"`` (the module docstring's ``A(p)``) or ``"sum"``:
        ``e^a s^own_p + e^b max(s^vote_p, max_{c in ch(p)} s^vote_c)`` (the slot's own vote
        score counts as one of its voters).
    children: how the children's scores make the vote: ``"max"`` (the best child, as above)
        or ``"logsumexp"`` (a smooth maximum over all children).
    """

    def __init__(self, parent: torch.Tensor, own_bias: float = 0.0, vote_bias: float = 0.0, learn: bool = True,
                 combine: str = "logaddexp", children: str = "max"):
        super().__init__()
        if combine not in COMBINE:
            raise ValueError(f"combine must be one of {COMBINE}, got {combine!r}")
        if children not in CHILDREN:
            raise ValueError(f"children must be one of {CHILDREN}, got {children!r}")
        self.combine_mode = combine
        self.children_mode = children
        parent = torch.as_tensor(parent).detach()
        if parent.dim() != 1 or parent.dtype not in (torch.int64, torch.int32):
            raise ValueError(f"parent must be a 1-d integer tensor of slot indices, got {parent.dtype} "
                             f"{tuple(parent.shape)}")
        parent = parent.long()
        n = parent.shape[0]
        if bool((parent < -1).any()) or bool((parent >= n).any()):
            raise ValueError(f"parent indices must be -1 or in [0, {n - 1}]")
        if bool((parent == torch.arange(n)).any()):
            raise ValueError("a slot cannot be its own parent")
        self.register_buffer("parent", parent)
        self.bias = nn.Parameter(torch.tensor([float(own_bias), float(vote_bias)]), requires_grad=bool(learn))

    def extra_repr(self) -> str:
        a, b = self.bias.detach().tolist()
        return f"slots={self.parent.shape[0]}, own_bias={a:.3g}, vote_bias={b:.3g}"

    def _combine(self, own: torch.Tensor, vote: torch.Tensor, self_vote: torch.Tensor) -> torch.Tensor:
        a, b = self.bias.to(own.dtype)
        # -inf (no children, missing slot) becomes a huge finite number so that the
        # gradients stay finite; missing slots are masked again by the caller.
        low = torch.finfo(own.dtype).min / 8
        own, vote = _finite(own, low), _finite(vote, low)
        if self.combine_mode == "logaddexp":
            return _logaddexp(own + a, vote + b)
        voters = torch.maximum(_finite(self_vote, low), vote)
        return a.exp() * own + b.exp() * voters

    def children_vote(self, scores: torch.Tensor) -> torch.Tensor:
        """The children's vote for every slot ``p`` ``(B, N)``: ``max_{c in ch(p)} scores[:, c]``
        (or their log-sum-exp); ``-inf`` without children.

        Every slot scatters its score to its parent (roots a huge negative number to slot 0,
        which never wins over a child), so the shapes do not depend on the tree's values: no
        ``nonzero``, one graph under ``torch.compile``.  The scatter starts from that finite
        number, not ``-inf``, and slots without children get ``-inf`` by a ``where``: finite
        second derivatives (Hessian-vector products)."""
        parent = self.parent.to(scores.device)
        child = parent >= 0
        to = parent.clamp_min(0)
        has = torch.zeros_like(parent).scatter_add(0, to, child.long()) > 0  # slots with children
        low = torch.finfo(scores.dtype).min / 8
        idx = to.expand(scores.shape[0], -1)
        src = scores.masked_fill(~child, low)
        top = torch.full_like(scores, low).scatter_reduce(1, idx, src, "amax", include_self=False)
        if self.children_mode == "logsumexp":
            shift = top.detach().clamp_min(low)
            total = torch.zeros_like(scores).scatter_add(1, idx, (src - shift.gather(1, idx)).exp())
            top = torch.where(has, total, 1.0).log() + shift
        return torch.where(has, top, -math.inf)

    def full(self, own: torch.Tensor, vote: torch.Tensor | None = None) -> torch.Tensor:
        """Answer scores ``(B, N)`` from the own and vote score matrices ``(B, N)``
        (``vote=None``: the same scores)."""
        if own.dim() != 2 or own.shape[1] != self.parent.shape[0]:
            raise ValueError(f"scores must have shape (B, {self.parent.shape[0]}), got {tuple(own.shape)}")
        vote = own if vote is None else vote
        return self._combine(own, self.children_vote(vote), vote)

    def topk(self, memory, own_queries: torch.Tensor, vote_queries: torch.Tensor | None, k: int,
             targets: torch.Tensor | None = None, exclude: torch.Tensor | None = None, at_time=None,
             select=None) -> tuple[torch.Tensor, torch.Tensor]:
        """Candidate slots ``(B, C)`` and their answer scores ``(B, C)`` from top-``k`` reads of
        ``memory`` (see the module docstring).

        ``targets`` ``(B,)`` are put first among the candidates (for a loss on the answer:
        ``cross_entropy(scores, 0)``).  ``exclude`` ``(B,)`` or ``(B, m)``: slots that are
        neither candidates nor voters (for instance the query's own slot).  Duplicates and
        missing entries score ``-inf``.  ``select(queries, k, exclude)`` replaces
        ``memory.select`` for choosing the slots (it must return the same top-``k`` slots,
        for instance :meth:`hypermem.nn.HyperbolicRAG.select`).
        """
        if len(memory) != self.parent.shape[0]:
            raise ValueError(f"the memory has {len(memory)} slots, the tree {self.parent.shape[0]}")
        vote_queries = own_queries if vote_queries is None else vote_queries
        B = own_queries.shape[0]
        dev = memory.keys.device
        parent = self.parent.to(dev)
        if select is None:
            def select(queries, k, exclude):
                return memory.select(queries, k, exclude=exclude, at_time=at_time)
        sel_own = select(own_queries, k, exclude)
        same = vote_queries is own_queries
        sel_vote = sel_own if same else select(vote_queries, k, exclude)
        voted = torch.where(sel_vote >= 0, parent[sel_vote.clamp_min(0)], torch.full_like(sel_vote, -1))
        parts = [sel_own, voted]
        if targets is not None:
            parts.insert(0, as_indices("targets", targets, dev).reshape(B, 1))
        raw = torch.cat(parts, 1)
        own_raw, _ = memory.score_slots(own_queries, raw, at_time=at_time)
        if same:  # the voters' scores are the own scores of sel_own
            start = 0 if targets is None else 1
            s_vote = own_raw[:, start:start + sel_own.shape[1]]
        else:
            s_vote, _ = memory.score_slots(vote_queries, sel_vote, at_time=at_time)
        cand = _mask_duplicates(raw)
        if exclude is not None:
            ex = torch.as_tensor(exclude, device=dev).long()
            ex = ex.unsqueeze(1) if ex.dim() == 1 else ex
            hit = (cand.unsqueeze(2) == ex.unsqueeze(1)).any(2)
            if targets is not None:
                hit[:, 0] = False
            cand = cand.masked_fill(hit, -1)
        own = own_raw.masked_fill(cand < 0, -math.inf)
        match = (voted.unsqueeze(1) == cand.unsqueeze(2)) & (cand.unsqueeze(2) >= 0)  # (B, C, k)
        per = s_vote.unsqueeze(1).expand(-1, cand.shape[1], -1).masked_fill(~match, -math.inf)
        vote = per.amax(2) if self.children_mode == "max" else torch.logsumexp(per, 2)
        if self.combine_mode == "sum":
            self_vote = own if vote_queries is own_queries else memory.score_slots(vote_queries, cand, at_time)[0]
        else:
            self_vote = own
        scores = self._combine(own, vote, self_vote).masked_fill(cand < 0, -math.inf)
        return cand, scores


def _finite(x: torch.Tensor, low: float) -> torch.Tensor:
    """``x`` with ``-inf`` replaced by ``low`` (and NaN by 0, ``+inf`` by the largest float, as
    ``torch.nan_to_num``).  The ``-inf`` go by a ``where`` first: ``nan_to_num``'s double
    backward is NaN at an infinite entry."""
    return torch.nan_to_num(torch.where(x == -math.inf, low, x))


def _logaddexp(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    r"""``log(e^x + e^y) = max(x, y) + log1p(e^{-|x - y|})``, the value of ``torch.logaddexp``
    with finite second derivatives: torch's double backward multiplies by ``e^{|x - y|}``,
    which overflows (NaN) once the two differ by more than ~88 (float32) or ~709 (float64)."""
    return torch.maximum(x, y) + torch.log1p(torch.exp(-(x - y).abs()))


def _mask_duplicates(cand: torch.Tensor) -> torch.Tensor:
    """``-1`` for every repeat of a value already seen earlier in its row."""
    C = cand.shape[1]
    same = cand.unsqueeze(2) == cand.unsqueeze(1)  # (B, C, C)
    earlier = torch.ones(C, C, dtype=torch.bool, device=cand.device).tril(-1)
    dup = (same & earlier).any(2)
    return cand.masked_fill(dup, -1)
