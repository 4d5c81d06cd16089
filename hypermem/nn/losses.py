r"""Losses for models in the Poincaré ball; each works with any model that produces points.

* :func:`hyperbolic_info_nce` — InfoNCE (van den Oord, Li & Vinyals, "Representation
  Learning with Contrastive Predictive Coding", 2018) with the negative hyperbolic
  distance over a temperature as the logit:
  ``L = -log( exp(-d(q, k_y)/tau) / sum_j exp(-d(q, k_j)/tau) )``.
* :func:`memory_info_nce` — the same over the slots of a
  :class:`~hypermem.nn.HyperbolicMemory`, with the memory's full score (temperature,
  depth and time terms); with ``k`` the answer competes with the ``k`` hardest other
  slots (chosen without gradient), so the cost does not grow with the number of slots.
* :func:`poincare_ranking_loss` — Nickel & Kiela, "Poincaré Embeddings for Learning
  Hierarchical Representations", NeurIPS 2017, eq. 6:
  ``L = -log( exp(-d(u, v)) / sum_{v' in N(u) + {v}} exp(-d(u, v')) )``.
* :func:`entailment_cone_loss` — Ganea, Bécigneul & Hofmann, "Hyperbolic Entailment
  Cones", ICML 2018, eq. 32: ``sum_P E(u, v) + sum_N max(0, margin - E(u', v'))`` with the
  cone energy ``E`` of :func:`hypermem.retrieval.cones.cone_energy`.

Example::

    >>> import torch
    >>> from hypermem.geometry import PoincareBall
    >>> ball = PoincareBall()
    >>> u = ball.point_at(torch.tensor([[1.0, 0.0]]), 2.0)
    >>> near, far = ball.point_at(torch.tensor([[1.0, 0.1]]), 2.0), ball.point_at(torch.tensor([[0.0, 1.0]]), 2.0)
    >>> good = poincare_ranking_loss(u, near, far.unsqueeze(1))
    >>> bad = poincare_ranking_loss(u, far, near.unsqueeze(1))
    >>> bool(good < bad)
    True
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F

from ..geometry import poincare as P
from ..geometry.cones import DEFAULT_K, cone_energy
from ..hierarchy.ranking_loss import reduce_loss as _reduce
from ..hierarchy.ranking_loss import softmax_ranking_loss
from .curvature import ball_c
from .func_transforms import is_vmapped
from .indices import as_indices
from .read_checks import check_query_values, host_check, refuse_empty_mean

if TYPE_CHECKING:
    from .hyperbolic_memory import HyperbolicMemory


def _curvature(ball) -> float | torch.Tensor:
    """``c`` for the distance formulas: 1 for ``None``, a number as a float, a 0-d tensor as
    itself, and a ball's :func:`~hypermem.nn.curvature.ball_c` (the tensor
    ``softplus(isp_c)`` of a learnable ball, so the loss reaches its curvature)."""
    if ball is None:
        return 1.0
    if isinstance(ball, (int, float)) and not isinstance(ball, bool):
        return float(ball)
    if isinstance(ball, torch.Tensor) and ball.dim() == 0:
        return ball
    return ball_c(ball)


def _points(name: str, x, dim: int | None = None) -> torch.Tensor:
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{name} must be a tensor of points, got {type(x).__name__}")
    if dim is not None and x.dim() != dim:
        raise ValueError(f"{name} must have {dim} dimensions, got shape {tuple(x.shape)}")
    return x


def _fix(loss: str) -> str:
    """What the ``RuntimeError`` of a value check under ``torch.func.vmap`` tells to do."""
    return f"call {loss}(..., check_finite=False)"


def _inside(name: str, x: torch.Tensor, c, loss: str) -> None:
    """``x`` ``(..., d)`` finite and inside the ball of curvature ``-c``, checked as a read checks
    its queries (:func:`~hypermem.nn.read_checks.check_query_values`: one pass, one host sync),
    so a point outside the ball is refused by name instead of giving a NaN loss."""
    check_query_values(x, c, what=f"{name} row", fix=_fix(loss))


def _temperature(t, check_finite: bool = True) -> float | torch.Tensor:
    """A finite number > 0 (a float, or a tensor checked by value unless ``check_finite`` is
    False), else ``ValueError``."""
    if isinstance(t, torch.Tensor):
        if check_finite:
            host_check(torch.isfinite(t.detach()) & (t.detach() > 0), lambda: f"temperature must be a finite "
                       f"number > 0, got {t.detach().tolist()!r}", "temperature must be a finite number > 0",
                       _fix("hyperbolic_info_nce"))
        return t
    if isinstance(t, (int, float)) and not isinstance(t, bool) and math.isfinite(t) and t > 0:
        return float(t)
    raise ValueError(f"temperature must be a finite number > 0, got {t!r}")


def hyperbolic_info_nce(queries: torch.Tensor, keys: torch.Tensor, targets: torch.Tensor,
                        temperature: float | torch.Tensor = 1.0, ball=None, reduction: str = "mean",
                        check_finite: bool = True) -> torch.Tensor:
    """InfoNCE with logits ``-d(q_i, k_j) / temperature``.

    ``queries`` ``(B, d)``; ``keys`` ``(N, d)`` shared by all queries (in-batch or memory
    negatives) or ``(B, N, d)`` per query; ``targets`` ``(B,)`` the index of each query's
    positive among its keys.  ``ball`` is a :class:`~hypermem.geometry.PoincareBall` or a
    curvature (default 1).  An empty batch with ``reduction="mean"`` raises ``ValueError``, as
    :func:`memory_info_nce` does; so do a ``temperature`` that is not a finite number > 0 and
    queries or keys that are NaN / inf or outside the ball (named, as a read names them).

    ``check_finite=False`` skips the checks of values (points, a tensor temperature), which
    read a value on the host: under ``torch.func.vmap`` (per-sample gradients,
    ``vmap(grad(loss))``) there is none to read, and with ``check_finite=True`` the loss raises
    ``RuntimeError`` saying so.  Its derivatives exist to every order, in reverse and forward
    mode (:func:`~hypermem.geometry.poincare.pairwise_distance`).
    """
    c = _curvature(ball)
    temperature = _temperature(temperature, check_finite)
    _points("queries", queries, 2)
    _points("keys", keys)
    refuse_empty_mean("hyperbolic_info_nce", queries.shape[0], reduction)
    if check_finite:
        _inside("queries", queries, c, "hyperbolic_info_nce")
        _inside("keys", keys, c, "hyperbolic_info_nce")
    if keys.dim() == 2:
        d = P.pairwise_distance(queries, keys, c)
    elif keys.dim() == 3:
        d = P.distance_arcosh(queries.unsqueeze(1), keys, c)
    else:
        raise ValueError(f"keys must have shape (N, d) or (B, N, d), got {tuple(keys.shape)}")
    targets = as_indices("targets", targets, d.device)
    return _reduce(F.cross_entropy(-d / temperature, targets, reduction="none"), reduction)


def memory_info_nce(memory: HyperbolicMemory, queries: torch.Tensor, targets: torch.Tensor, k: int | None = None,
                    exclude: torch.Tensor | None = None, at_time=None, reduction: str = "mean") -> torch.Tensor:
    """InfoNCE over the slots of a :class:`~hypermem.nn.HyperbolicMemory`: the answer slot
    ``targets`` ``(B,)`` against the others, with the memory's scores as logits.

    ``k=None``: against every slot (memory ``O(B N)``).  ``k``: against the ``k`` best-scoring
    other slots (hard negatives, chosen without gradient by :meth:`HyperbolicMemory.select`);
    backward cost ``O(B k d)``.  ``exclude`` ``(B,)`` or ``(B, m)``: slots that are neither
    answer nor negative (for instance the query's own slot); a row whose target is among its
    excluded slots raises ``ValueError`` naming the row, with or without ``k``.

    An empty batch has no mean: ``reduction="mean"`` raises ``ValueError`` (torch's
    ``cross_entropy`` would return NaN, and its backward put NaN in every gradient), as
    :func:`hyperbolic_info_nce` does; skip such a batch, or use ``"sum"`` (0, with zero
    gradients) or ``"none"`` (an empty tensor).  Under ``torch.compile(fullgraph=True)`` the
    range check of ``targets`` is an async assert on CPU (no graph break); under
    ``torch.func.vmap`` (per-sample gradients) it is left out, as batched targets have no value
    to read on the host (a target out of range fails in ``cross_entropy``), and the queries are
    checked as the memory's ``check_finite`` says (build it with ``check_finite=False`` there).
    """
    targets = as_indices("targets", targets, memory.keys.device)
    if targets.dim() != 1 or targets.shape[0] != queries.shape[0]:
        raise ValueError(f"targets must have shape ({queries.shape[0]},), got {tuple(targets.shape)}")
    refuse_empty_mean("memory_info_nce", queries.shape[0], reduction)
    ok = (targets >= 0) & (targets < len(memory))
    answer_excluded = _excluded_targets(targets, exclude)
    valid = ok if answer_excluded is None else ok & ~answer_excluded
    if torch.compiler.is_compiling():  # an async assert on CPU, no graph break (read_checks.host_check)
        host_check(ok, str, "targets out of range")
        if answer_excluded is not None:
            host_check(~answer_excluded, str, "a target is also in exclude")
    elif not is_vmapped(valid) and not bool(valid.all()):  # one host sync
        if not bool(ok.all()):
            raise IndexError(f"targets must be slot indices in [0, {len(memory) - 1}]")
        row = int(answer_excluded.nonzero()[0, 0])
        raise ValueError(f"targets row #{row}: the answer slot {int(targets[row])} is also in exclude; an "
                         "excluded slot is neither answer nor negative (drop it from that row's exclude)")
    if k is None:
        out = memory(queries, k=None, exclude=exclude, at_time=at_time)
        loss = F.cross_entropy(out.scores, targets, reduction="none")
        return _reduce(loss, reduction)
    ex = targets.unsqueeze(1)
    if exclude is not None:
        extra = as_indices("exclude", exclude, ex.device)
        ex = torch.cat([ex, extra.unsqueeze(1) if extra.dim() == 1 else extra], 1)
    negatives = memory.select(queries, k, exclude=ex, at_time=at_time)
    cand = torch.cat([targets.unsqueeze(1), negatives], 1)
    scores, _ = memory.score_slots(queries, cand, at_time=at_time)
    zero = torch.zeros_like(targets)
    return _reduce(F.cross_entropy(scores, zero, reduction="none"), reduction)


def _excluded_targets(targets: torch.Tensor, exclude) -> torch.Tensor | None:
    """``(B,)`` True where ``targets[i]`` is among ``exclude[i]`` (``(B,)`` or ``(B, m)``, ``-1``
    ignored); ``None`` without exclusions or when their shape is wrong (the read names it)."""
    if exclude is None:
        return None
    ex = as_indices("exclude", exclude, targets.device)
    ex = ex.unsqueeze(1) if ex.dim() == 1 else ex
    if ex.dim() != 2 or ex.shape[0] != targets.shape[0]:
        return None
    return (ex == targets.unsqueeze(1)).any(1)


def poincare_ranking_loss(u: torch.Tensor, v: torch.Tensor, negatives: torch.Tensor, ball=None,
                          reduction: str = "mean", check_finite: bool = True) -> torch.Tensor:
    """Nickel & Kiela's loss for a related pair ``(u, v)`` against non-neighbours of ``u``.

    ``u``, ``v`` ``(B, d)``; ``negatives`` ``(B, m, d)`` (the ``N(u)`` of the paper: points
    not related to ``u``).  Equals :func:`hyperbolic_info_nce` at temperature 1 with the
    positive first.  An empty batch with ``reduction="mean"`` and points that are NaN / inf or
    outside the ball raise ``ValueError`` (named), as for :func:`hyperbolic_info_nce`, whose
    ``check_finite`` this shares.
    """
    _points("u", u, 2)
    _points("v", v, 2)
    _points("negatives", negatives, 3)
    refuse_empty_mean("poincare_ranking_loss", u.shape[0], reduction)
    c = _curvature(ball)
    for name, x in (("u", u), ("v", v), ("negatives", negatives)) if check_finite else ():
        _inside(name, x, c, "poincare_ranking_loss")
    return softmax_ranking_loss(P.distance_arcosh(u, v, c), P.distance_arcosh(u.unsqueeze(1), negatives, c),
                                reduction=reduction)


def entailment_cone_loss(general: torch.Tensor, specific: torch.Tensor, neg_general: torch.Tensor | None = None,
                         neg_specific: torch.Tensor | None = None, ball=None, K: float = DEFAULT_K,
                         margin: float = 0.01, reduction: str = "mean", check_finite: bool = True) -> torch.Tensor:
    """Ganea et al.'s max-margin loss on cone energies.

    Positive pairs (``general`` entails ``specific``, both ``(B, d)``) pay their energy
    ``E(u, v)`` (zero once ``v`` is inside ``u``'s cone); negative pairs (``neg_general``,
    ``neg_specific`` ``(M, d)``) pay ``max(0, margin - E(u', v'))`` until they are at least
    ``margin`` outside.  ``reduction="mean"`` divides the sum by the number of pairs, and
    raises ``ValueError`` when there are none (an empty batch).  Points that are NaN / inf or
    outside the ball raise ``ValueError`` (named), as for :func:`poincare_ranking_loss`: outside
    the ball the cone is undefined and the energy can read 0 with zero gradient ("solved").
    ``check_finite=False`` skips those checks, as for :func:`hyperbolic_info_nce`.
    """
    if not (isinstance(margin, (int, float)) and math.isfinite(margin) and margin >= 0):
        raise ValueError(f"margin must be a finite number >= 0, got {margin!r}")
    _points("general", general)
    _points("specific", specific)
    if general.shape != specific.shape:
        raise ValueError(f"general and specific must have the same shape, got {tuple(general.shape)} "
                         f"and {tuple(specific.shape)}")
    if (neg_general is None) != (neg_specific is None):
        raise ValueError("give both neg_general and neg_specific, or neither")
    named = [("general", general), ("specific", specific)]
    if neg_general is not None:
        named += [("neg_general", _points("neg_general", neg_general)),
                  ("neg_specific", _points("neg_specific", neg_specific))]
        if neg_general.shape != neg_specific.shape:
            raise ValueError(f"neg_general and neg_specific must have the same shape, got "
                             f"{tuple(neg_general.shape)} and {tuple(neg_specific.shape)}")
    c = _curvature(ball)
    for name, x in named if check_finite else ():
        _inside(name, x, c, "entailment_cone_loss")
    parts = [cone_energy(general, specific, ball, K)]
    if neg_general is not None:
        parts.append((margin - cone_energy(neg_general, neg_specific, ball, K)).clamp_min(0.0))
    loss = torch.cat([p.reshape(-1) for p in parts])
    refuse_empty_mean("entailment_cone_loss", loss.shape[0], reduction, what="pairs")
    return _reduce(loss, reduction)
