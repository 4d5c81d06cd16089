r"""The slot bias of :class:`~hypermem.nn.HyperbolicMemory`'s score (a mixin of the layer).

``b_j = depth_bias * depth_j + time_coef * log w_j(t)``, where ``w_j(t)`` is the temporal
policy's weight of slot ``j`` at time ``t`` (:mod:`hypermem.temporal`) times its
importance, floored at ``MIN_WEIGHT`` — the bias terms of
:meth:`hypermem.store.Memory.search`.  The policy is asked through
:func:`hypermem.temporal.policy_weights` and the time term is
:func:`hypermem.retrieval.scoring.score_bias`, the homes of both formulas.
"""

from __future__ import annotations

from datetime import datetime

import torch

from ..retrieval.scoring import score_bias
from ..temporal import MIN_WEIGHT, NoDecay, policy_weights
from ..temporal.clock import to_seconds, to_utc


class TimeScores:
    """``time_weights``, ``slot_bias`` and the time term of the scores."""

    def time_weights(self, at_time: datetime | float | None = None) -> torch.Tensor | None:
        """Per-slot weight ``(N,)`` in ``[MIN_WEIGHT, ...]``: the policy's weight at ``at_time``
        (default: the clock) times the importance; ``None`` when neither is set."""
        w = None
        if self.timestamps is not None and not isinstance(self.decay, NoDecay):
            now = to_seconds(to_utc(at_time) if isinstance(at_time, datetime) else at_time) \
                if at_time is not None else to_seconds(to_utc(self.clock()))
            w = policy_weights(self.decay, now, self.timestamps, self.access_counts, self.valid_from,
                               self.valid_until)
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
            d = self.depth if self.depth is not None else self.key_geometry()[1]
            bias = self.depth_bias * d.detach()
        tb = self._time_term(None, at_time)
        if tb is not None:
            bias = tb if bias is None else bias + tb
        return bias

    def _time_term(self, idx: torch.Tensor | None, at_time) -> torch.Tensor | None:
        if self.time_coef == 0.0:
            return None
        w = self.time_weights(at_time)
        if w is None:
            return None
        tb = score_bias(w, None, self.time_coef, 0.0).to(self.keys.dtype)
        return tb if idx is None else tb[idx]
