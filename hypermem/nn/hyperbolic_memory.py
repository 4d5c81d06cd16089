r"""A differentiable memory in the Poincaré ball: an ``nn.Module`` that models backprop through.

A :class:`HyperbolicMemory` holds ``N`` slots.  Slot ``j`` has a key ``k_j`` (a point of
the Poincaré ball of curvature ``-c``, a :class:`geoopt.ManifoldParameter`, trainable or
frozen) and a value ``v_j`` (any vector; trainable or a buffer), and optionally a depth,
a timestamp, an access count, a validity window and an importance.  A query ``q`` (a point
of the ball) scores every slot by

.. math::

    s_j(q) = -\frac{d(q, k_j)}{\tau} + \beta_{depth}\, \mathrm{depth}_j
             + \gamma_{time} \log w_j(t),

the score of :meth:`hypermem.store.Memory.search` with a learnable temperature ``tau``:
``d`` is the hyperbolic distance (Nickel & Kiela 2017, eq. 1)

.. math::

    d(q, k) = \frac{1}{\sqrt c}\operatorname{arcosh}\Big(1 + \frac{2c\|q - k\|^2}
              {(1 - c\|q\|^2)(1 - c\|k\|^2)}\Big)

(``metric="hyperbolic"``) or the shell distance (``metric="shell"``: both points moved to
the radius ``base_depth``, a function of the angle only,
``d = (2/\sqrt c)\,\operatorname{arsinh}(\sinh(\sqrt c\,\rho)\,\|u_q - u_k\|/2)``);
``w_j(t)`` is the temporal policy's weight at time ``t`` times the importance, floored at
``MIN_WEIGHT``.  The read is the attention-weighted sum of the values (Graves et al.,
"Neural Turing Machines", 2014; Weston et al., "Memory Networks", 2015):

.. math::

    a = \mathrm{softmax}_j\, s_j(q), \qquad \mathrm{read}(q) = \sum_j a_j v_j.

**Top-k reads.**  With ``k=None`` the softmax runs over all slots (small memories).  With
``k`` the ``k`` best slots are chosen *without gradient* by the store's exact chunked
search (:func:`hypermem.index.exact_topk`, memory ``O(batch x chunk)``), then their
scores are recomputed *with* gradient from the gathered keys, and the softmax runs over
those ``k``.  Gradients reach the queries, the selected keys and values, and the
temperature; the backward pass costs ``O(batch x k x dim)``, whatever the number of slots
(with ``sparse_grad=True`` even the keys' and values' gradients are sparse, of that size).
The selection is exact, so the top-k read equals the full read restricted to those slots.
When the score has no bias term, the selection does not depend on the temperature.

Example::

    >>> import torch
    >>> from hypermem.nn import HyperbolicMemory
    >>> mem = HyperbolicMemory(keys=0.3 * torch.eye(4), values=torch.eye(4), metric="hyperbolic")
    >>> q = torch.tensor([[0.29, 0.01, 0.0, 0.0]], requires_grad=True)
    >>> out = mem(q, k=2)
    >>> out.indices.tolist()[0][0], out.read.shape
    (0, torch.Size([1, 4]))
    >>> out.read[0, 0].backward()   # gradients reach q, the keys and the temperature
    >>> q.grad is not None and mem.keys.grad is not None and mem.log_temperature.grad is not None
    True
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

import geoopt
import torch
import torch.nn.functional as F
from torch import nn

from ..geometry import PoincareBall
from ..geometry import poincare as P
from ..geometry.numerics import HALF_DTYPES, safe_norm
from ..index import HyperbolicDistance, ShellDistance, exact_topk
from ..temporal import NoDecay
from ..temporal.clock import utcnow
from .curvature import ball_c, points_manifold, shared_or_new_ball
from .dense_topk import dense_topk, exclusion_mask
from .distance import all_distance, gathered_distance
from .func_transforms import is_vmapped
from .indices import as_indices
from .key_cache import KeyCache
from .module_state import ModuleState, refuse_meta
from .read_checks import as_float as _as_float
from .read_checks import check_k, check_metric, check_query_values, check_slot_range
from .read_result import Readout, attention
from .scripting import refuse_tracing
from .slot_writes import TIME_BUFFERS as _TIME_BUFFERS
from .slot_writes import SlotWrites
from .sparse_rows import sparse_gather_ok
from .store_bridge import StoreBridge
from .time_scores import TimeScores

MIN_TEMPERATURE = 1e-3
"""Floor of the temperature: ``tau = max(exp(log_temperature), MIN_TEMPERATURE)``."""
MAX_TEMPERATURE = 1e4
"""Ceiling of the temperature (scores ``-d / tau`` never collapse to 0 / NaN either way)."""


_LOG_TAU_MIN, _LOG_TAU_MAX = math.log(MIN_TEMPERATURE), math.log(MAX_TEMPERATURE)


class HyperbolicMemory(ModuleState, KeyCache, SlotWrites, TimeScores, StoreBridge, nn.Module):
    """A memory layer on the Poincaré ball (see the module docstring for the maths).

    Parameters
    ----------
    keys: ``(N, d)`` points strictly inside the ball of curvature ``-curvature``.
    values: ``(N, value_dim)``; ``None`` stores no values and reads the keys' tangent
        vectors at the origin, ``log_0(k_j)``, instead.
    curvature: positive ``c``, or a :class:`~hypermem.geometry.PoincareBall` to share (e.g.
        ``encoder.ball``, so an encoder and the memory train one curvature).
    learn_curvature: train ``c`` (geoopt's ``softplus`` parametrisation, gradients from
        every read; see :mod:`hypermem.nn.curvature`).  Otherwise ``c`` is a buffer.  When
        ``c`` changes, the next read projects the keys onto the new ball (in place, as
        geoopt's optimizers do after a step).
    metric: ``"hyperbolic"`` (distance to the key itself) or ``"shell"`` (angle only, both
        points moved to ``base_depth``; what :class:`hypermem.store.Memory` uses by default).
    temperature: initial ``tau`` (held as ``log_temperature``; trainable when
        ``learn_temperature``).  Reads use ``tau`` clamped to ``[MIN_TEMPERATURE,
        MAX_TEMPERATURE]``, so an optimizer that drives ``log_temperature`` to ``-inf``
        leaves the scores finite (the clamp passes no gradient beyond the bounds).
    learn_temperature: train ``log_temperature`` (else its ``requires_grad`` is False: ``tau`` stays put).
    learn_keys, learn_values: train the keys (a ``geoopt.ManifoldParameter``, optimise it
        with :class:`geoopt.optim.RiemannianAdam`, which keeps them in the ball; a read
        raises ``ValueError`` when another optimizer moved a key out of it) / the values
        (else a buffer).
    depth: ``(N,)`` per-slot depth for the ``depth_bias`` term (``None``: the keys' own
        distance to the origin).
    timestamps, access_counts, valid_from, valid_until: ``(N,)`` float64 POSIX seconds /
        counts for the temporal policy ``decay`` (``None``: time does not count).
    importance: ``(N,)`` positive multipliers of the time weight.
    decay: a policy of :mod:`hypermem.temporal` (default :class:`~hypermem.temporal.NoDecay`).
    time_coef, depth_bias, base_depth: score weights and the shell radius.
    ids: ``N`` distinct slot names (default ``"0"``, ``"1"``, ...).
    sparse_grad: sparse gradients for the gathered keys and values of top-k reads (memory independent
        of ``N``; for a sparse optimizer); dense under DDP (:mod:`hypermem.nn.sparse_rows`).
    clock: callable returning "now" (used when ``at_time`` is not given).
    dtype, device: of the keys, values and per-slot tensors (default: the keys' own).
    check_finite: check every read's queries (finite, inside the ball: one host sync a read);
        ``False`` skips it (shapes, dtype and device are still checked).
    """

    def __init__(self, keys, values=None, *, curvature: float | PoincareBall = 1.0, metric: str = "hyperbolic",
                 temperature: float = 1.0, learn_temperature: bool = True, learn_keys: bool = True,
                 learn_values: bool = False, depth=None, timestamps=None, access_counts=None, valid_from=None,
                 valid_until=None, importance=None, decay=None, time_coef: float = 1.0,
                 depth_bias: float = 0.0, base_depth: float = 1.0, ids: Sequence[str] | None = None,
                 sparse_grad: bool = False, clock: Callable[[], datetime] | None = None,
                 dtype: torch.dtype | None = None, device: str | torch.device | None = None,
                 learn_curvature: bool = False, check_finite: bool = True):
        super().__init__()
        refuse_meta(keys, device)
        self.check_finite = bool(check_finite)
        self.metric = metric  # checked (read_checks.check_metric), here and on every later assignment
        self.ball = shared_or_new_ball(curvature, learn_curvature)
        self.base_depth = _as_float("base_depth", base_depth, positive=True)
        self.time_coef = _as_float("time_coef", time_coef)
        self.depth_bias = _as_float("depth_bias", depth_bias)
        self.sparse_grad = bool(sparse_grad)
        self.decay = NoDecay() if decay is None else decay
        if not callable(getattr(self.decay, "weight", None)):
            raise TypeError(f"decay must be a policy with a weight() method, got {decay!r}")
        if clock is not None and not callable(clock):
            raise TypeError("clock must be a callable returning a datetime")
        self.clock = clock or utcnow
        K = torch.as_tensor(keys)
        if dtype is None and K.is_floating_point() and K.dtype not in (torch.float32, torch.float64):
            raise ValueError(f"the keys are {K.dtype}: HyperbolicMemory holds them in torch.float32 or "
                             "torch.float64, pass dtype=torch.float32 to convert them")
        if dtype is None:
            dtype = K.dtype if K.is_floating_point() else torch.get_default_dtype()
        if dtype not in (torch.float32, torch.float64):
            raise ValueError(f"dtype must be torch.float32 or torch.float64, got {dtype}")
        K = K.detach().to(device=device, dtype=dtype)
        if K.dim() != 2 or K.shape[0] < 1 or K.shape[1] < 2:
            raise ValueError(f"keys must have shape (N, d) with N >= 1 and d >= 2, got {tuple(K.shape)}")
        self.ball.check_inside(K, name="keys")
        K = self.ball.projx(K).detach()  # kept at 1 - margin(dtype), like every point (docs/numerics.md)
        n = K.shape[0]
        self.__dict__["keys_manifold"] = points_manifold(self.ball)  # not a submodule: shares isp_c
        self.keys = geoopt.ManifoldParameter(K.clone(), manifold=self.keys_manifold, requires_grad=bool(learn_keys))
        V = None if values is None else self._slot_tensor("values", values, n, matrix=True)
        if V is not None and learn_values:
            self.values = nn.Parameter(V)
        else:
            if learn_values:
                raise ValueError("learn_values=True needs values")
            self.register_buffer("values", V)
        t = _as_float("temperature", temperature, positive=True)
        self.log_temperature = nn.Parameter(torch.tensor(math.log(t), dtype=dtype, device=K.device),
                                            requires_grad=bool(learn_temperature))
        self.register_buffer("depth", self._slot_tensor("depth", depth, n))
        self.register_buffer("importance", self._slot_tensor("importance", importance, n, positive=True))
        for name, value in zip(_TIME_BUFFERS, (timestamps, access_counts, valid_from, valid_until)):
            self.register_buffer(name, self._time_tensor(name, value, n))
        self.ids = self._check_ids(ids, n)
        self.records: list[Any] | None = None  # MemoryRecords when built by from_memory
        self._store_config: dict[str, Any] | None = None
        self._key_cache: tuple | None = None
        self._register_state_hooks()

    # ------------------------------------------------------------------ checks and helpers
    def extra_repr(self) -> str:
        vd = None if self.values is None else self.values.shape[1]
        return (f"slots={len(self)}, dim={self.dim}, value_dim={vd}, metric={self.metric!r}, "
                f"curvature={self.curvature:g}, learn_keys={self.keys.requires_grad}, "
                f"learn_values={isinstance(self.values, nn.Parameter)}")

    # ------------------------------------------------------------------ properties
    def __len__(self) -> int:
        return int(self.keys.shape[0])

    @property
    def metric(self) -> str:
        """``"hyperbolic"`` or ``"shell"``, used by full and top-k reads alike; assigning anything
        else (``"Shell"``, a typo) raises the constructor's ``ValueError``."""
        return self._metric

    @metric.setter
    def metric(self, value: str) -> None:
        self._metric = check_metric(value)

    @property
    def dim(self) -> int:
        return int(self.keys.shape[1])

    @property
    def curvature(self) -> float:
        return self.ball.curvature

    @property
    def _c(self) -> float | torch.Tensor:
        """``c`` for formulas with gradient (a tensor when the curvature is learnable)."""
        return ball_c(self.ball)

    @property
    def temperature(self) -> torch.Tensor:
        """``tau = exp(log_temperature)`` clamped to ``[MIN_TEMPERATURE, MAX_TEMPERATURE]``
        (a differentiable 0-d tensor)."""
        return self.log_temperature.clamp(_LOG_TAU_MIN, _LOG_TAU_MAX).exp()

    # ------------------------------------------------------------------ scoring pieces
    def _depth_term(self, idx: torch.Tensor | None) -> torch.Tensor | None:
        """``depth_bias * depth`` of the slots ``idx`` (all slots for ``None``), with gradient
        to the keys when the depth comes from them."""
        if self.depth_bias == 0.0:
            return None
        if self.depth is not None:
            d = self.depth if idx is None else self.depth[idx]
        else:
            K = self.keys if idx is None else self._gather(self.keys, idx)
            d = P.distance_to_origin(K, self._c)
        return self.depth_bias * d

    def _gather(self, table: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
        """Rows ``table[idx]`` for ``idx`` of any shape (``-1`` reads row 0; mask it after)."""
        flat = idx.clamp_min(0).reshape(-1)
        if self.sparse_grad and table.requires_grad and sparse_gather_ok("HyperbolicMemory"):  # dense under DDP
            rows = F.embedding(flat, table, sparse=True)
        else:
            rows = table.index_select(0, flat)
        return rows.reshape(*idx.shape, table.shape[-1])

    def _check_queries(self, queries: torch.Tensor) -> torch.Tensor:
        """Shape, dtype and device, then the values (:mod:`hypermem.nn.read_checks`: NaN/inf
        named as such, then outside the ball; no host sync under ``torch.compile``)."""
        if not isinstance(queries, torch.Tensor):
            raise TypeError(f"queries must be a tensor of shape (batch, {self.dim}), got {type(queries).__name__}")
        if queries.dim() != 2 or queries.shape[1] != self.dim:
            raise ValueError(f"queries must have shape (batch, {self.dim}), got {tuple(queries.shape)}")
        if queries.dtype in (torch.bfloat16, torch.float16):  # autocast or a .half() encoder
            queries = queries.to(self.keys.dtype)  # distances in the keys' dtype (docs/numerics.md)
        if queries.dtype != self.keys.dtype or queries.device != self.keys.device:
            raise ValueError(f"queries are {queries.dtype} on {queries.device} but the memory is "
                             f"{self.keys.dtype} on {self.keys.device}; move one of them")
        if self.check_finite:
            check_query_values(queries, self._c)
        return queries

    # ------------------------------------------------------------------ scoring
    def score_slots(self, queries: torch.Tensor, indices: torch.Tensor, at_time=None
                    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Scores and distances ``(B, m)`` of given slots ``indices`` ``(B, m)``, with gradient
        to the queries, the gathered keys and the temperature (``-1`` entries score ``-inf``).

        This is what a top-k read does after choosing its slots; losses use it to score the
        answer slot next to the hard negatives (:func:`hypermem.nn.losses.memory_info_nce`).
        """
        queries = self._check_queries(queries)
        if indices.dim() != 2 or indices.shape[0] != queries.shape[0]:
            raise ValueError(f"indices must have shape ({queries.shape[0]}, m), got {tuple(indices.shape)}")
        idx = as_indices("indices", indices, self.keys.device)
        check_slot_range(idx, len(self))
        return self._score_slots(queries, idx, at_time)

    def _score_slots(self, queries, idx, at_time) -> tuple[torch.Tensor, torch.Tensor]:
        """:meth:`score_slots` of checked queries and slot indices."""
        K = self._gather(self.keys, idx)
        if torch.compiler.is_compiling():
            self._check_keys()
        else:
            self.key_geometry()
        dist = gathered_distance(queries, K, self.metric, self._c, self.base_depth)
        scores = -dist / self.temperature
        for term in (self._depth_term(idx), self._time_term(idx, at_time)):
            if term is not None:
                scores = scores + term
        missing = idx < 0  # masked unconditionally: a branch on missing.any() would sync with the host
        return scores.masked_fill(missing, -math.inf), dist.masked_fill(missing, math.inf)

    def score_all(self, queries: torch.Tensor, at_time=None) -> tuple[torch.Tensor, torch.Tensor]:
        """Scores and distances ``(B, N)`` against every slot, with gradient (memory ``O(B N)``)."""
        return self._score_all(self._check_queries(queries), at_time)

    def _score_all(self, queries, at_time) -> tuple[torch.Tensor, torch.Tensor]:
        """:meth:`score_all` of checked queries."""
        if torch.compiler.is_compiling():
            self._check_keys()
        else:
            self.key_geometry()  # checks the keys once per change (cached)
        dist = all_distance(queries, self.keys, self.metric, self._c, self.base_depth)
        scores = -dist / self.temperature
        for term in (self._depth_term(None), self._time_term(None, at_time)):
            if term is not None:
                scores = scores + term
        return scores, dist

    @torch.no_grad()
    def select(self, queries: torch.Tensor, k: int, exclude: torch.Tensor | None = None, at_time=None,
               bias: torch.Tensor | None = None) -> torch.Tensor:
        """The exact top-``k`` slots ``(B, k)`` by score, chosen without gradient by the
        chunked search of the store (:func:`hypermem.index.exact_topk`).

        ``exclude`` ``(B,)`` or ``(B, m)``: slots never returned for that query (``-1``
        entries are ignored).  ``bias`` ``(N,)`` replaces :meth:`slot_bias` (``-inf``
        excludes a slot for every query).  Missing entries (fewer than ``k`` slots left)
        are ``-1``.  ``k`` is at most the number of slots (:func:`~hypermem.nn.read_checks.check_k`).

        Under ``torch.compile`` and :func:`torch.func.vmap` the selection is
        :func:`~hypermem.nn.dense_topk.dense_topk` of all ``N`` scores (the same exact top-``k``,
        memory ``O(B x N)``; no graph break, and no ``out=`` op that vmap cannot batch).
        """
        refuse_tracing(self)
        queries = self._check_queries(queries)
        k = check_k(k, len(self))
        return self._select(queries, k, self._check_exclude(exclude, queries.shape[0]), at_time, bias)

    @torch.no_grad()
    def _select(self, queries, k: int, ex, at_time, bias) -> torch.Tensor:
        """:meth:`select` of checked queries, ``k`` and exclusions ``(B, m)`` (or ``None``)."""
        queries = queries.detach()
        B = queries.shape[0]
        if torch.compiler.is_compiling() or is_vmapped(queries) or is_vmapped(self.keys):
            return self._dense_select(queries, k, ex, at_time, bias)  # the search's out= ops do not vmap
        extra = 0 if ex is None else ex.shape[1]
        dirs, radius, c = self._key_geometry()  # c: the float curvature, read once per change of it
        qn = safe_norm(queries, keepdim=True)
        qdir = queries / qn
        if bias is None:
            bias = self.slot_bias(at_time)
        if self.metric == "shell":
            g = ShellDistance(c, self.base_depth)
            dist_fn, inv = g, g.inverse
        else:
            q_radius = P.distance_to_origin(queries, c)
            dist_fn, inv = HyperbolicDistance(c, q_radius, radius), None
        if bias is not None:
            # rank by -d/tau + b, i.e. by -(d/tau) + b: scale the distance model
            tau = float(self.temperature.detach())  # the one host sync a biased search needs
            base_fn, base_inv = dist_fn, inv
            dist_fn = lambda s, idx: base_fn(s, idx) / tau  # noqa: E731
            inv = None if base_inv is None else (lambda y: base_inv(y * tau))
        _, idx, _ = exact_topk(qdir, dirs, min(k + extra, len(self)), dist_fn, bias, inv,
                               max_product=1.0)  # unit directions
        if ex is not None:
            hit = (idx.unsqueeze(2) == ex.unsqueeze(1)).any(2) | (idx < 0)
            order = torch.argsort(hit.to(torch.int8), dim=1, stable=True)
            idx = torch.gather(idx, 1, order)
            hit = torch.gather(hit, 1, order)
            idx = idx.masked_fill(hit, -1)
        if idx.shape[1] < k:
            idx = torch.cat([idx, idx.new_full((B, k - idx.shape[1]), -1)], 1)
        return idx[:, :k]

    def _dense_select(self, queries, k, ex, at_time, bias) -> torch.Tensor:
        """:meth:`select` by one dense score matrix (what a compiled read runs)."""
        scores = -all_distance(queries, self.keys.detach(), self.metric, self._c, self.base_depth) / self.temperature
        if bias is None:
            depth, time = self._depth_term(None), self._time_term(None, at_time)
            bias = depth if time is None else (time if depth is None else depth + time)
        if bias is not None:
            scores = scores + bias.detach()
        return dense_topk(scores, k, ex)

    def _check_exclude(self, exclude, B):
        """``exclude`` as ``(B, m)`` slot indices in ``[-1, N - 1]`` (``IndexError`` naming the
        first bad entry; one host sync, only when there are exclusions)."""
        if exclude is None:
            return None
        ex = as_indices("exclude", exclude, self.keys.device)
        ex = ex.unsqueeze(1) if ex.dim() == 1 else ex
        if ex.dim() != 2 or ex.shape[0] != B:
            raise ValueError(f"exclude must have shape ({B},) or ({B}, m), got {tuple(ex.shape)}")
        check_slot_range(ex, len(self), "exclude")
        return ex

    # ------------------------------------------------------------------ reading
    def forward(self, queries: torch.Tensor, k: int | None = None, exclude: torch.Tensor | None = None,
                at_time: datetime | float | None = None) -> Readout:
        """Read the memory at ``queries`` ``(B, d)`` (points of the ball).

        ``k=None``: softmax over all slots; ``k``: over the exact top-``k`` (see the module
        docstring).  ``exclude``: slots left out per query (``(B,)`` or ``(B, m)``).
        ``at_time``: "now" for the temporal policy (default: the clock), a datetime, POSIX seconds,
        or a 0-d float64 tensor of POSIX seconds (an input of an exported or compiled model:
        docs/nn.md, "Deploying").  A float16 / bfloat16 query is read in the memory's dtype and
        its ``read`` comes back in the query's dtype (weights, distances and scores do not).
        """
        refuse_tracing(self)
        half = queries.dtype if getattr(queries, "dtype", None) in HALF_DTYPES else None
        queries = self._check_queries(queries)  # the only check of the queries a read makes
        B = queries.shape[0]
        k = None if k is None else check_k(k, len(self))
        ex = self._check_exclude(exclude, B)
        if k is None:
            scores, dist = self._score_all(queries, at_time)
            if ex is not None:
                scores = scores.masked_fill(exclusion_mask(ex, len(self)), -math.inf)
            idx = torch.arange(len(self), device=self.keys.device).expand(B, -1)
            weights = attention(scores)
            values = self.values if self.values is not None else P.logmap0(self.keys, self._c)
            read = weights @ values
            return Readout(read if half is None else read.to(half), weights, idx, dist, scores)
        idx = self._select(queries, k, ex, at_time, None)
        scores, dist = self._score_slots(queries, idx, at_time)  # idx from the search: in range
        weights = attention(scores)
        if self.values is not None:
            V = self._gather(self.values, idx)
        else:
            V = P.logmap0(self._gather(self.keys, idx), self._c)
        read = torch.bmm(weights.unsqueeze(1), V).squeeze(1)
        return Readout(read if half is None else read.to(half), weights, idx, dist, scores)
