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
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

import geoopt
import torch
import torch.nn.functional as F
from torch import nn

from ..geometry import PoincareBall
from ..geometry import poincare as P
from ..geometry.numerics import arcosh1p, safe_norm, tiny
from ..index import HyperbolicDistance, ShellDistance, exact_topk
from ..temporal import MIN_WEIGHT, NoDecay
from ..temporal.clock import to_seconds, to_utc, utcnow

METRICS = ("shell", "hyperbolic")
_TIME_BUFFERS = ("timestamps", "access_counts", "valid_from", "valid_until")
"""float64 buffers (POSIX seconds, counts) that keep float64 whatever the module's dtype."""


@dataclass
class Readout:
    """What a read of :class:`HyperbolicMemory` returns.

    ``read`` ``(batch, value_dim)``: the weighted sum of the values; ``weights``
    ``(batch, k)``: the softmax over the read slots (rows sum to 1); ``indices``
    ``(batch, k)``: the slots read (all slots in order for a full read; ``-1`` where fewer
    than ``k`` slots were left after exclusions, with weight 0); ``distances`` ``(batch, k)``;
    ``scores`` ``(batch, k)``: the logits of the softmax (``-inf`` for missing slots).
    """

    read: torch.Tensor
    weights: torch.Tensor
    indices: torch.Tensor
    distances: torch.Tensor
    scores: torch.Tensor


# -- distances with gradient ------------------------------------------------------------------
def _from_products(qk: torch.Tensor, q2: torch.Tensor, k2: torch.Tensor, metric: str, curvature: float,
                   base_depth: float) -> torch.Tensor:
    """Distances from inner products ``<q, k>`` and squared norms (broadcasting shapes)."""
    c = curvature
    t = tiny(qk.dtype)
    if metric == "hyperbolic":
        diff2 = (q2 + k2 - 2.0 * qk).clamp_min(0.0)
        a = (1.0 - c * q2).clamp_min(t)
        b = (1.0 - c * k2).clamp_min(t)
        return arcosh1p(2.0 * c * diff2 / (a * b)) / math.sqrt(c)
    cos = qk / (q2.clamp_min(t) * k2.clamp_min(t)).sqrt()
    # ||u - v|| / 2 = sqrt((1 - cos) / 2) for unit directions u, v
    half_chord = ((1.0 - cos) * 0.5).clamp_min(t).sqrt()
    sc = math.sqrt(c)
    return (2.0 / sc) * torch.asinh(math.sinh(sc * base_depth) * half_chord)


def gathered_distance(queries: torch.Tensor, keys: torch.Tensor, metric: str, curvature: float,
                      base_depth: float) -> torch.Tensor:
    """Distances ``(B, m)`` between queries ``(B, d)`` and per-query keys ``(B, m, d)``.

    One batched matrix product of queries and keys plus the keys' squared norms, then
    the formulas of the module docstring written in terms of ``<q, k>``, ``||q||^2`` and
    ``||k||^2`` (as :func:`all_distance` does, so a top-k read and a full read agree to
    rounding): cost ``O(B m d)``.
    """
    qk = torch.bmm(keys, queries.unsqueeze(2)).squeeze(2)
    q2 = queries.pow(2).sum(-1, keepdim=True)
    k2 = keys.pow(2).sum(-1)
    return _from_products(qk, q2, k2, metric, curvature, base_depth)


def all_distance(queries: torch.Tensor, keys: torch.Tensor, metric: str, curvature: float,
                 base_depth: float) -> torch.Tensor:
    """Distances ``(B, N)`` between queries ``(B, d)`` and all keys ``(N, d)`` (one matrix
    product; memory ``O(B N)``)."""
    qk = queries @ keys.T
    q2 = queries.pow(2).sum(-1, keepdim=True)
    k2 = keys.pow(2).sum(-1).unsqueeze(0)
    return _from_products(qk, q2, k2, metric, curvature, base_depth)


def _as_float(name: str, value: Any, positive: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError(f"{name} must be a finite number, got {value!r}")
    if positive and value <= 0:
        raise ValueError(f"{name} must be positive, got {value!r}")
    return float(value)


class HyperbolicMemory(nn.Module):
    """A memory layer on the Poincaré ball (see the module docstring for the maths).

    Parameters
    ----------
    keys: ``(N, d)`` points strictly inside the ball of curvature ``-curvature``.
    values: ``(N, value_dim)``; ``None`` stores no values and reads the keys' tangent
        vectors at the origin, ``log_0(k_j)``, instead.
    curvature: positive ``c``.
    metric: ``"hyperbolic"`` (distance to the key itself) or ``"shell"`` (angle only, both
        points moved to ``base_depth``; what :class:`hypermem.store.Memory` uses by default).
    temperature: initial ``tau`` (held as ``log_temperature``; trainable when
        ``learn_temperature``).
    learn_keys, learn_values: train the keys (a ``geoopt.ManifoldParameter``, optimise it
        with :class:`geoopt.optim.RiemannianAdam`) / the values (else a buffer).
    depth: ``(N,)`` per-slot depth for the ``depth_bias`` term (``None``: the keys' own
        distance to the origin).
    timestamps, access_counts, valid_from, valid_until: ``(N,)`` float64 POSIX seconds /
        counts for the temporal policy ``decay`` (``None``: time does not count).
    importance: ``(N,)`` positive multipliers of the time weight.
    decay: a policy of :mod:`hypermem.temporal` (default :class:`~hypermem.temporal.NoDecay`).
    time_coef, depth_bias, base_depth: score weights and the shell radius.
    ids: ``N`` distinct slot names (default ``"0"``, ``"1"``, ...).
    sparse_grad: sparse gradients for the gathered keys and values of top-k reads
        (memory independent of ``N``; needs an optimizer that takes sparse gradients).
    clock: callable returning "now" (used when ``at_time`` is not given).
    """

    def __init__(self, keys, values=None, *, curvature: float = 1.0, metric: str = "hyperbolic",
                 temperature: float = 1.0, learn_temperature: bool = True, learn_keys: bool = True,
                 learn_values: bool = False, depth=None, timestamps=None, access_counts=None, valid_from=None,
                 valid_until=None, importance=None, decay=None, time_coef: float = 1.0,
                 depth_bias: float = 0.0, base_depth: float = 1.0, ids: Sequence[str] | None = None,
                 sparse_grad: bool = False, clock: Callable[[], datetime] | None = None,
                 dtype: torch.dtype | None = None, device: str | torch.device | None = None):
        super().__init__()
        if metric not in METRICS:
            raise ValueError(f"unknown metric {metric!r}; choose one of {METRICS}")
        self.ball = PoincareBall(curvature)
        self.metric = metric
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
        if dtype is None:
            dtype = K.dtype if K.is_floating_point() else torch.get_default_dtype()
        if dtype not in (torch.float32, torch.float64):
            raise ValueError(f"dtype must be torch.float32 or torch.float64, got {dtype}")
        K = K.detach().to(device=device, dtype=dtype)
        if K.dim() != 2 or K.shape[0] < 1 or K.shape[1] < 2:
            raise ValueError(f"keys must have shape (N, d) with N >= 1 and d >= 2, got {tuple(K.shape)}")
        self.ball.check_inside(K, name="keys")
        n = K.shape[0]
        self.keys = geoopt.ManifoldParameter(K.clone(), manifold=self.ball, requires_grad=bool(learn_keys))
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

    # ------------------------------------------------------------------ checks and helpers
    def _slot_tensor(self, name, value, n, matrix=False, positive=False):
        if value is None:
            return None
        K = self.keys
        t = torch.as_tensor(value).detach().to(device=K.device, dtype=K.dtype).clone()
        if matrix and (t.dim() != 2 or t.shape[0] != n):
            raise ValueError(f"{name} must have shape ({n}, value_dim), got {tuple(t.shape)}")
        if not matrix and t.shape != (n,):
            raise ValueError(f"{name} must have shape ({n},), got {tuple(t.shape)}")
        if not bool(torch.isfinite(t).all()):
            raise ValueError(f"{name} has non-finite values")
        if positive and not bool((t > 0).all()):
            raise ValueError(f"{name} must be positive")
        return t

    def _time_tensor(self, name, value, n):
        if value is None:
            return None
        t = torch.as_tensor(value, dtype=torch.float64).detach().to(self.keys.device).clone()
        if t.shape != (n,):
            raise ValueError(f"{name} must have shape ({n},), got {tuple(t.shape)}")
        if name in ("timestamps", "access_counts") and not bool(torch.isfinite(t).all()):
            raise ValueError(f"{name} has non-finite values")
        return t

    @staticmethod
    def _check_ids(ids, n, taken=(), start=0):
        if ids is None:
            out, used = [], set(taken)
            for i in range(n):
                name = str(start + i)
                while name in used:
                    name = uuid.uuid4().hex[:16]
                out.append(name)
                used.add(name)
            return out
        ids = [str(i) for i in ids]
        if len(ids) != n:
            raise ValueError(f"got {len(ids)} ids for {n} slots")
        if len(set(ids)) != n or set(ids) & set(taken):
            raise ValueError("slot ids must be distinct")
        return ids

    def _apply(self, fn, recurse=True):
        # Timestamps and counts stay float64 whatever dtype the module is cast to.
        saved = {n: self._buffers.pop(n) for n in _TIME_BUFFERS if n in self._buffers}
        try:
            out = super()._apply(fn, recurse)
        finally:
            dev = self.keys.device
            for n, t in saved.items():
                self._buffers[n] = None if t is None else t.to(dev)
        self._key_cache = None
        return out

    def extra_repr(self) -> str:
        vd = None if self.values is None else self.values.shape[1]
        return (f"slots={len(self)}, dim={self.dim}, value_dim={vd}, metric={self.metric!r}, "
                f"curvature={self.curvature:g}, learn_keys={self.keys.requires_grad}, "
                f"learn_values={isinstance(self.values, nn.Parameter)}")

    # ------------------------------------------------------------------ properties
    def __len__(self) -> int:
        return int(self.keys.shape[0])

    @property
    def dim(self) -> int:
        return int(self.keys.shape[1])

    @property
    def curvature(self) -> float:
        return self.ball.curvature

    @property
    def temperature(self) -> torch.Tensor:
        """``tau = exp(log_temperature)`` (a differentiable 0-d tensor)."""
        return self.log_temperature.exp()

    def index_of(self, ids: str | Sequence[str]) -> torch.Tensor:
        """Slot indices of ``ids`` (``KeyError`` naming an unknown id)."""
        single = isinstance(ids, str)
        pos = {i: r for r, i in enumerate(self.ids)}
        out = []
        for i in [ids] if single else ids:
            if i not in pos:
                raise KeyError(f"unknown slot id {i!r}")
            out.append(pos[i])
        return torch.tensor(out, dtype=torch.long, device=self.keys.device)

    # ------------------------------------------------------------------ scoring pieces
    def _key_geometry(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Unit directions ``(N, d)`` and hyperbolic radii ``(N,)`` of the keys, cached until
        the keys change (in-place optimizer steps bump the tensor's version)."""
        K = self.keys
        stamp = (K._version, K.data_ptr(), tuple(K.shape), K.dtype, K.device)
        if self._key_cache is None or self._key_cache[0] != stamp:
            with torch.no_grad():
                n = safe_norm(K, keepdim=True)
                radius = P.distance_to_origin(K, self.curvature)
                self._key_cache = (stamp, K / n, radius)
        return self._key_cache[1], self._key_cache[2]

    def time_weights(self, at_time: datetime | float | None = None) -> torch.Tensor | None:
        """Per-slot weight ``(N,)`` in ``[MIN_WEIGHT, ...]``: the policy's weight at ``at_time``
        (default: the clock) times the importance; ``None`` when neither is set."""
        w = None
        if self.timestamps is not None and not isinstance(self.decay, NoDecay):
            now = to_seconds(to_utc(at_time) if isinstance(at_time, datetime) else at_time) \
                if at_time is not None else to_seconds(to_utc(self.clock()))
            n = len(self)
            dev = self.keys.device
            acc = self.access_counts if self.access_counts is not None else \
                torch.zeros(n, dtype=torch.float64, device=dev)
            lo = self.valid_from if self.valid_from is not None else \
                torch.full((n,), -math.inf, dtype=torch.float64, device=dev)
            hi = self.valid_until if self.valid_until is not None else \
                torch.full((n,), math.inf, dtype=torch.float64, device=dev)
            w = torch.as_tensor(self.decay.weight(now, self.timestamps, acc, lo, hi), dtype=torch.float64,
                                device=dev)
            if w.shape != (n,):
                raise ValueError(f"the decay policy returned shape {tuple(w.shape)}, expected ({n},)")
        if self.importance is not None:
            imp = self.importance.to(torch.float64)
            w = imp if w is None else w * imp
        return None if w is None else w.clamp_min(MIN_WEIGHT)

    def slot_bias(self, at_time: datetime | float | None = None) -> torch.Tensor | None:
        """``depth_bias * depth + time_coef * log(time_weight)`` per slot ``(N,)`` (no
        gradient), or ``None`` when it is zero.  With ``depth=None`` the depth is the
        keys' distance to the origin."""
        bias = None
        if self.depth_bias != 0.0:
            d = self.depth if self.depth is not None else self._key_geometry()[1]
            bias = self.depth_bias * d.detach()
        tb = self._time_term(None, at_time)
        if tb is not None:
            bias = tb if bias is None else bias + tb
        return bias

    def _depth_term(self, idx: torch.Tensor | None) -> torch.Tensor | None:
        """``depth_bias * depth`` of the slots ``idx`` (all slots for ``None``), with gradient
        to the keys when the depth comes from them."""
        if self.depth_bias == 0.0:
            return None
        if self.depth is not None:
            d = self.depth if idx is None else self.depth[idx]
        else:
            K = self.keys if idx is None else self._gather(self.keys, idx)
            d = P.distance_to_origin(K, self.curvature)
        return self.depth_bias * d

    def _time_term(self, idx: torch.Tensor | None, at_time) -> torch.Tensor | None:
        if self.time_coef == 0.0:
            return None
        w = self.time_weights(at_time)
        if w is None:
            return None
        tb = (self.time_coef * w.log()).to(self.keys.dtype)
        return tb if idx is None else tb[idx]

    def _gather(self, table: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
        """Rows ``table[idx]`` for ``idx`` of any shape (``-1`` reads row 0; mask it after)."""
        flat = idx.clamp_min(0).reshape(-1)
        if self.sparse_grad and table.requires_grad:
            rows = F.embedding(flat, table, sparse=True)
        else:
            rows = table.index_select(0, flat)
        return rows.reshape(*idx.shape, table.shape[-1])

    def _check_queries(self, queries: torch.Tensor) -> torch.Tensor:
        if not isinstance(queries, torch.Tensor):
            raise TypeError(f"queries must be a tensor of shape (batch, {self.dim}), got {type(queries).__name__}")
        if queries.dim() != 2 or queries.shape[1] != self.dim:
            raise ValueError(f"queries must have shape (batch, {self.dim}), got {tuple(queries.shape)}")
        if queries.dtype != self.keys.dtype or queries.device != self.keys.device:
            raise ValueError(f"queries are {queries.dtype} on {queries.device} but the memory is "
                             f"{self.keys.dtype} on {self.keys.device}; move one of them")
        if not bool(P.is_inside(queries.detach(), self.curvature).all()):
            bad = int((~P.is_inside(queries.detach(), self.curvature)).nonzero()[0])
            raise ValueError(f"query #{bad} is not inside the Poincaré ball of curvature {self.curvature:g}")
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
        idx = indices.to(self.keys.device, torch.long)
        if bool((idx >= len(self)).any()) or bool((idx < -1).any()):
            raise IndexError(f"slot indices must be in [-1, {len(self) - 1}]")
        K = self._gather(self.keys, idx)
        dist = gathered_distance(queries, K, self.metric, self.curvature, self.base_depth)
        scores = -dist / self.temperature
        for term in (self._depth_term(idx), self._time_term(idx, at_time)):
            if term is not None:
                scores = scores + term
        missing = idx < 0
        if bool(missing.any()):
            scores = scores.masked_fill(missing, -math.inf)
            dist = dist.masked_fill(missing, math.inf)
        return scores, dist

    def score_all(self, queries: torch.Tensor, at_time=None) -> tuple[torch.Tensor, torch.Tensor]:
        """Scores and distances ``(B, N)`` against every slot, with gradient (memory ``O(B N)``)."""
        queries = self._check_queries(queries)
        dist = all_distance(queries, self.keys, self.metric, self.curvature, self.base_depth)
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
        are ``-1``.
        """
        queries = self._check_queries(queries).detach()
        k = self._check_k(k)
        B = queries.shape[0]
        ex = self._check_exclude(exclude, B)
        extra = 0 if ex is None else ex.shape[1]
        dirs, radius = self._key_geometry()
        qn = safe_norm(queries, keepdim=True)
        qdir = queries / qn
        if bias is None:
            bias = self.slot_bias(at_time)
        tau = float(self.temperature.detach())
        if self.metric == "shell":
            g = ShellDistance(self.curvature, self.base_depth)
            dist_fn, inv = g, g.inverse
        else:
            q_radius = P.distance_to_origin(queries, self.curvature)
            dist_fn, inv = HyperbolicDistance(self.curvature, q_radius, radius), None
        if bias is not None:
            # rank by -d/tau + b, i.e. by -(d/tau) + b: scale the distance model
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

    def _check_k(self, k) -> int:
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise ValueError(f"k must be a positive integer or None, got {k!r}")
        return k

    def _check_exclude(self, exclude, B):
        if exclude is None:
            return None
        ex = torch.as_tensor(exclude, device=self.keys.device)
        if ex.dtype not in (torch.int64, torch.int32):
            raise TypeError(f"exclude must hold slot indices (integers), got {ex.dtype}")
        ex = ex.long()
        if ex.dim() == 1:
            ex = ex.unsqueeze(1)
        if ex.dim() != 2 or ex.shape[0] != B:
            raise ValueError(f"exclude must have shape ({B},) or ({B}, m), got {tuple(ex.shape)}")
        return ex

    # ------------------------------------------------------------------ reading
    def forward(self, queries: torch.Tensor, k: int | None = None, exclude: torch.Tensor | None = None,
                at_time: datetime | float | None = None) -> Readout:
        """Read the memory at ``queries`` ``(B, d)`` (points of the ball).

        ``k=None``: softmax over all slots; ``k``: over the exact top-``k`` (see the module
        docstring).  ``exclude``: slots left out per query (``(B,)`` or ``(B, m)``).
        ``at_time``: "now" for the temporal policy (default: the clock).
        """
        queries = self._check_queries(queries)
        B = queries.shape[0]
        if k is None:
            scores, dist = self.score_all(queries, at_time)
            ex = self._check_exclude(exclude, B)
            if ex is not None:
                mask = torch.zeros_like(scores, dtype=torch.bool)
                valid = ex >= 0
                rows = torch.arange(B, device=ex.device).unsqueeze(1).expand_as(ex)
                mask[rows[valid], ex[valid]] = True
                scores = scores.masked_fill(mask, -math.inf)
            idx = torch.arange(len(self), device=self.keys.device).expand(B, -1)
            weights = torch.softmax(scores, dim=1)
            values = self.values if self.values is not None else P.logmap0(self.keys, self.curvature)
            read = weights @ values
            return Readout(read, weights, idx, dist, scores)
        idx = self.select(queries, k, exclude, at_time)
        scores, dist = self.score_slots(queries, idx, at_time)
        weights = torch.softmax(scores, dim=1)
        if self.values is not None:
            V = self._gather(self.values, idx)
        else:
            V = P.logmap0(self._gather(self.keys, idx), self.curvature)
        read = torch.bmm(weights.unsqueeze(1), V).squeeze(1)
        return Readout(read, weights, idx, dist, scores)

    # ------------------------------------------------------------------ writing (no gradient)
    def _resize(self, keep: torch.Tensor | None, add: dict[str, torch.Tensor | None] | None, n_add: int) -> None:
        """Rebuild every per-slot tensor: keep the rows ``keep`` and append the rows ``add``."""
        def new_rows(name, old):
            parts = [old if keep is None else old[keep]]
            if n_add:
                extra = None if add is None else add.get(name)
                if extra is None:
                    extra = _default_rows(name, old, n_add)
                parts.append(extra.to(old.device, old.dtype))
            return torch.cat(parts, 0)

        with torch.no_grad():
            K = new_rows("keys", self.keys.data)
            self.keys = geoopt.ManifoldParameter(K, manifold=self.ball, requires_grad=self.keys.requires_grad)
            if self.values is not None:
                V = new_rows("values", self.values.data)
                if isinstance(self.values, nn.Parameter):
                    self.values = nn.Parameter(V)
                else:
                    self.values = V
            for name in ("depth", "importance", *_TIME_BUFFERS):
                old = getattr(self, name)
                if old is not None:
                    setattr(self, name, new_rows(name, old))
        self._key_cache = None

    def append(self, keys, values=None, *, ids: Sequence[str] | None = None, depth=None, timestamps=None,
               access_counts=None, valid_from=None, valid_until=None, importance=None) -> list[str]:
        """Add slots (no gradient); returns their ids.  All or nothing.

        Parameters are replaced by larger ones, so create the optimizer again after writing.
        Optional per-slot tensors the memory has but that are not given get defaults (depth:
        the keys' distance to the origin; timestamps: now; counts 0; open windows;
        importance 1).
        """
        K = torch.as_tensor(keys).detach().to(self.keys.device, self.keys.dtype)
        if K.dim() != 2 or K.shape[1] != self.dim:
            raise ValueError(f"keys must have shape (m, {self.dim}), got {tuple(K.shape)}")
        m = K.shape[0]
        self.ball.check_inside(K, name="keys")
        add: dict[str, torch.Tensor | None] = {"keys": K}
        if self.values is None:
            if values is not None:
                raise ValueError("this memory stores no values; pass values=None")
        else:
            if values is None:
                raise ValueError(f"values of shape ({m}, {self.values.shape[1]}) are needed")
            V = torch.as_tensor(values).detach().to(self.keys.device, self.keys.dtype)
            if V.shape != (m, self.values.shape[1]):
                raise ValueError(f"values must have shape ({m}, {self.values.shape[1]}), got {tuple(V.shape)}")
            add["values"] = V
        for name, value in (("depth", depth), ("importance", importance)):
            if value is not None:
                if getattr(self, name) is None:
                    raise ValueError(f"this memory has no {name}; build it with {name}=...")
                add[name] = self._slot_tensor(name, value, m, positive=name == "importance")
        for name, value in zip(_TIME_BUFFERS, (timestamps, access_counts, valid_from, valid_until)):
            if value is not None:
                if getattr(self, name) is None:
                    raise ValueError(f"this memory has no {name}; build it with {name}=...")
                add[name] = self._time_tensor(name, value, m)
        if self.depth is not None and "depth" not in add:
            add["depth"] = P.distance_to_origin(K, self.curvature)
        if self.timestamps is not None and "timestamps" not in add:
            add["timestamps"] = torch.full((m,), to_seconds(to_utc(self.clock())), dtype=torch.float64)
        new_ids = self._check_ids(ids, m, taken=self.ids, start=len(self))
        self._resize(None, add, m)
        self.ids.extend(new_ids)
        if self.records is not None:
            self.records.extend([None] * m)
        return new_ids

    def update(self, slots, keys=None, values=None, *, depth=None, timestamps=None, importance=None) -> None:
        """Overwrite slots in place (no gradient).  ``slots``: indices or ids.  All or nothing."""
        idx = self._slots(slots)
        m = int(idx.numel())
        with torch.no_grad():
            new: list[tuple[torch.Tensor, torch.Tensor]] = []
            if keys is not None:
                K = torch.as_tensor(keys).detach().to(self.keys.device, self.keys.dtype).reshape(m, self.dim)
                self.ball.check_inside(K, name="keys")
                new.append((self.keys, K))
            if values is not None:
                if self.values is None:
                    raise ValueError("this memory stores no values")
                V = torch.as_tensor(values).detach().to(self.keys.device, self.keys.dtype)
                new.append((self.values, V.reshape(m, self.values.shape[1])))
            for name, value in (("depth", depth), ("importance", importance)):
                if value is not None:
                    if getattr(self, name) is None:
                        raise ValueError(f"this memory has no {name}")
                    new.append((getattr(self, name), self._slot_tensor(name, value, m, positive=name == "importance")))
            if timestamps is not None:
                if self.timestamps is None:
                    raise ValueError("this memory has no timestamps")
                new.append((self.timestamps, self._time_tensor("timestamps", timestamps, m)))
            for table, rows in new:
                table[idx] = rows
        self._key_cache = None

    def remove(self, slots) -> list[str]:
        """Remove slots (indices or ids); returns the removed ids.  Create the optimizer again after."""
        idx = self._slots(slots)
        keep = torch.ones(len(self), dtype=torch.bool, device=self.keys.device)
        keep[idx] = False
        if not bool(keep.any()):
            raise ValueError("cannot remove every slot (a memory needs at least one)")
        gone = [self.ids[i] for i in idx.tolist()]
        kept = keep.nonzero().squeeze(1)
        self._resize(kept, None, 0)
        kl = kept.tolist()
        self.ids = [self.ids[i] for i in kl]
        if self.records is not None:
            self.records = [self.records[i] for i in kl]
        return gone

    def _slots(self, slots) -> torch.Tensor:
        if isinstance(slots, str) or (isinstance(slots, (list, tuple)) and slots and isinstance(slots[0], str)):
            idx = self.index_of(slots)
        else:
            idx = torch.as_tensor(slots, dtype=torch.long, device=self.keys.device).reshape(-1)
            if bool((idx < 0).any()) or bool((idx >= len(self)).any()):
                raise IndexError(f"slot indices must be in [0, {len(self) - 1}]")
        if idx.numel() != int(torch.unique(idx).numel()):
            raise ValueError("slots are repeated")
        return idx

    # ------------------------------------------------------------------ the store
    @classmethod
    def from_memory(cls, memory, learn_keys: bool = True, learn_values: bool = False,
                    temperature: float = 1.0, learn_temperature: bool = True, sparse_grad: bool = False,
                    dtype: torch.dtype | None = None) -> HyperbolicMemory:
        """A layer holding the slots of a :class:`hypermem.store.Memory`.

        Keys are the store's points, values its raw embeddings, depth, timestamps, access
        counts and validity windows its records'; metric, curvature, base depth, score
        weights, temporal policy and clock are the store's.  ``ids`` are the store's ids.
        """
        with memory._lock:
            if len(memory) == 0:
                raise ValueError("the memory is empty; a layer needs at least one slot")
            dt = memory.dtype if dtype is None else dtype
            n = len(memory)
            layer = cls(memory.points.to(dt), memory.embeddings.to(dt), curvature=memory.curvature,
                        metric=memory.metric, temperature=temperature, learn_temperature=learn_temperature,
                        learn_keys=learn_keys, learn_values=learn_values, depth=memory.depths.to(dt),
                        timestamps=memory._time[:n], access_counts=memory._access[:n],
                        valid_from=memory._vfrom[:n], valid_until=memory._vuntil[:n], decay=memory.decay,
                        time_coef=memory.time_coef, depth_bias=memory.depth_bias, base_depth=memory.base_depth,
                        ids=memory.ids, sparse_grad=sparse_grad, clock=memory.clock, dtype=dt,
                        device=memory.device)
            layer.records = [memory.get(i) for i in memory.ids]
            layer._store_config = {
                "embedder": memory.embedder, "curvature": memory.curvature, "decay": memory.decay,
                "base_depth": memory.base_depth, "depth_step": memory.depth_step, "inherit": memory.inherit,
                "cone_constrained": memory.cone_constrained, "cone_k": memory.cone_k, "metric": memory.metric,
                "time_coef": memory.time_coef, "depth_bias": memory.depth_bias, "clock": memory.clock,
                "dtype": memory.dtype, "device": memory.device,
            }
        return layer

    def to_memory(self, embedder=None, texts: Sequence[str] | None = None, parents: Sequence[str | None] | None = None):
        """A :class:`hypermem.store.Memory` holding the slots as they are now.

        Each slot becomes a memory at its key (``point``), with its value as the stored
        embedding when the value has the embedder's dimension.  Records (text, parent,
        time, metadata, validity, access counts) come from :meth:`from_memory` when the
        layer was built that way; otherwise ``texts`` (default the ids) and ``parents``
        (ids, default none) describe them.  ``embedder`` defaults to the source store's
        (or a :class:`~hypermem.embed.HashingEmbedder` of the keys' dimension).
        """
        from ..embed import HashingEmbedder
        from ..store import Memory

        cfg = dict(self._store_config or {})
        if embedder is not None:
            cfg["embedder"] = embedder
        cfg.setdefault("embedder", HashingEmbedder(dim=self.dim))
        if int(cfg["embedder"].dim) != self.dim:
            raise ValueError(f"the embedder has dimension {cfg['embedder'].dim}, the keys {self.dim}")
        cfg.update(curvature=self.curvature, metric=self.metric, base_depth=self.base_depth,
                   time_coef=self.time_coef, depth_bias=self.depth_bias, decay=self.decay, clock=self.clock)
        cfg.setdefault("dtype", self.keys.dtype)
        cfg.setdefault("device", self.keys.device)
        n = len(self)
        if texts is not None and len(texts) != n:
            raise ValueError(f"got {len(texts)} texts for {n} slots")
        if parents is not None and len(parents) != n:
            raise ValueError(f"got {len(parents)} parents for {n} slots")
        recs = self.records if self.records is not None else [None] * n
        K = self.keys.detach().to("cpu", torch.float64)
        V = None if self.values is None else self.values.detach().to("cpu", torch.float64)
        items = []
        for i in range(n):
            rec = recs[i]
            item: dict[str, Any] = {"id": self.ids[i], "point": K[i]}
            if rec is not None and texts is None:
                item.update(text=rec.text, parent=rec.parent_id, t=rec.t, meta=dict(rec.meta),
                            valid_from=rec.valid_from, valid_until=rec.valid_until)
            else:
                item["text"] = texts[i] if texts is not None else self.ids[i]
                if parents is not None:
                    item["parent"] = parents[i]
                if self.timestamps is not None:
                    item["t"] = datetime.fromtimestamp(float(self.timestamps[i]), tz=timezone.utc)
            if V is not None and V.shape[1] == self.dim:
                item["embedding"] = V[i]
            else:
                item["embedding"] = K[i] / K[i].norm().clamp_min(1e-300)
            items.append(item)
        mem = Memory(**cfg)
        ids = mem.add_many(_parents_first(items))
        if self.access_counts is not None:
            acc = self.access_counts.detach().cpu().tolist()
            pos = {i: r for r, i in enumerate(self.ids)}
            with mem._lock:
                for id_ in ids:
                    r = pos[id_]
                    rec = mem.get(id_)
                    rec.access_count = int(acc[r])
                    src = recs[r]
                    rec.last_accessed = None if src is None else src.last_accessed
                    mem._access[mem._row[id_]] = float(acc[r])
        return mem


def _default_rows(name: str, old: torch.Tensor, m: int) -> torch.Tensor:
    if name == "access_counts":
        return torch.zeros(m, dtype=old.dtype)
    if name == "valid_from":
        return torch.full((m,), -math.inf, dtype=old.dtype)
    if name == "valid_until":
        return torch.full((m,), math.inf, dtype=old.dtype)
    if name == "importance":
        return torch.ones(m, dtype=old.dtype)
    raise ValueError(f"{name} of the new slots must be given")


def _parents_first(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Order items so that every parent precedes its children (stable otherwise)."""
    by_id = {it["id"]: it for it in items}
    done: set[str] = set()
    out: list[dict[str, Any]] = []
    for it in items:
        stack = []
        cur = it
        while cur is not None and cur["id"] not in done:
            stack.append(cur)
            p = cur.get("parent")
            cur = by_id.get(p) if p is not None else None
            if cur is not None and cur in stack:
                raise ValueError(f"the slots' parents form a cycle through {cur['id']!r}")
        for s in reversed(stack):
            if s["id"] not in done:
                done.add(s["id"])
                out.append(s)
    return out
