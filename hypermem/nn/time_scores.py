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
from ..temporal.clock import seconds_scalar, to_seconds, to_utc


@torch.compiler.disable
def _clock_seconds(clock) -> torch.Tensor:
    """The clock's "now" as a 0-d float64 tensor, read in Python: under ``torch.compile`` a graph
    break (``fullgraph=True`` refuses it), after which the compiled graph takes the time as a
    tensor input and does not recompile as it changes."""
    return torch.tensor(to_seconds(to_utc(clock())), dtype=torch.float64)


class TimeScores:
    """``time_weights``, ``slot_bias`` and the time term of the scores."""

    def time_weights(self, at_time: datetime | float | torch.Tensor | None = None) -> torch.Tensor | None:
        """Per-slot weight ``(N,)`` in ``[MIN_WEIGHT, ...]``: the policy's weight at ``at_time``
        (default: the clock; a 0-d float64 tensor of POSIX seconds too) times the importance;
        ``None`` when neither is set.  Under ``torch.export`` a policy needs ``at_time``
        (``RuntimeError``: the clock would be frozen at the time of export)."""
        w = None
        if self.timestamps is not None and not isinstance(self.decay, NoDecay):
            if isinstance(at_time, torch.Tensor):
                now = seconds_scalar(at_time)
            elif torch.compiler.is_compiling() and isinstance(at_time, (int, float)):
                now = torch.tensor(at_time, dtype=torch.float64)  # a float that changes: no host check
            elif at_time is not None:
                now = to_seconds(to_utc(at_time) if isinstance(at_time, datetime) else at_time)
            elif torch.compiler.is_exporting():
                raise RuntimeError("this memory has a temporal policy and no at_time: torch.export would freeze the "
                                   "clock's time of export as 'now' forever. Pass at_time as a 0-d float64 tensor "
                                   "of POSIX seconds, an input of the exported model (docs/nn.md, 'Deploying')")
            elif torch.compiler.is_compiling():
                now = _clock_seconds(self.clock)  # one graph break; the time enters the graph as a tensor
            else:
                now = to_seconds(to_utc(self.clock()))
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
