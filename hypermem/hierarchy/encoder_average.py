r"""A moving average of the trained weights, validated beside the weights themselves.

After every optimiser step the average follows the weights,

.. math::  \bar\theta_t = \beta_t \bar\theta_{t-1} + (1 - \beta_t)\,\theta_t,
           \qquad \beta_t = \min\!\Big(\beta, \frac{1 + t}{10 + t}\Big),

an exponential moving average (Polyak & Juditsky, "Acceleration of stochastic approximation by
averaging", SIAM J. Control Optim. 1992; the EMA form of Tarvainen & Valpola, "Mean teachers",
NeurIPS 2017) whose ramp ``(1 + t) / (10 + t)`` keeps the first steps from weighing the base
model for hundreds of steps.  An average of the points along the end of a run lies nearer
the middle of the region of low loss than the last point, which is why it often generalises
better -- here, the question is whether it places texts the encoder never saw (a held-out
leaf's direct parent) better.  The trainer validates both the weights and their average and
keeps whichever scores best (:func:`~hypermem.hierarchy.encoder_training.fit_hierarchy_encoder`,
setting ``average``); the average costs one copy of the trained parameters and one
``lerp`` a step.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager

import torch

from .encoder_inputs import checked_fraction

__all__ = ["WeightAverage", "check_average"]


def check_average(decay) -> float:
    """``average`` checked: 0 (off) or a decay ``beta`` in (0, 1)."""
    return checked_fraction(decay, f"average must be 0 (off) or a decay between 0 and 1, got {decay!r}", one=False)


class WeightAverage:
    """The exponential moving average of ``params`` (the trained ones), with decay ``decay``.

    Example::

        >>> w = torch.nn.Parameter(torch.zeros(2))
        >>> avg = WeightAverage([w], decay=0.5)
        >>> with torch.no_grad():
        ...     _ = w.fill_(1.0)
        >>> avg.update()   # beta_1 = min(0.5, 2/11)
        >>> round(float(avg.shadow[0][0]), 4)
        0.8182
        >>> with avg.applied():
        ...     round(float(w[0]), 4)
        0.8182
        >>> float(w[0])
        1.0
    """

    def __init__(self, params: Iterable[torch.nn.Parameter], decay: float):
        self.params = list(params)
        self.decay = check_average(decay)
        self.shadow = [p.detach().clone() for p in self.params]
        self.steps = 0

    def update(self) -> None:
        """One step of the average, after the optimiser's."""
        self.steps += 1
        beta = min(self.decay, (1.0 + self.steps) / (10.0 + self.steps))
        with torch.no_grad():
            torch._foreach_lerp_(self.shadow, [p.detach() for p in self.params], 1.0 - beta)

    @contextmanager
    def applied(self) -> Iterator[None]:
        """The average in the parameters for the ``with`` block; the weights back after it."""
        with torch.no_grad():
            saved = [p.detach().clone() for p in self.params]
            for p, s in zip(self.params, self.shadow):
                p.copy_(s)
        try:
            yield
        finally:
            with torch.no_grad():
                for p, s in zip(self.params, saved):
                    p.copy_(s)
