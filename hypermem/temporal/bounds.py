r"""What the search may assume of a decay policy: an upper bound of its weights over a group
of memories from the group's extremes, and whether it reads access counts.

The built-in policies are monotone in each argument: the weight does not grow with age
(``HalfLife``, ``Ebbinghaus``), does not shrink with accesses (``Ebbinghaus``'s stability
``S_0 (1 + b * accesses)``), and is largest inside the validity window (``ValidityWindow``:
1 when ``valid_from <= now <= valid_until``); a ``Product`` of non-negative factors is at
most the product of their bounds.  So the weight of every memory of a group is at most the
policy's weight at the group's *corner*: its newest time, an unbounded access count, its
earliest ``valid_from`` and its latest ``valid_until``.  The approximate search bounds the
time term ``time_coef * log w`` of a band of memories this way
(:class:`hypermem.index.bands.BandedDirectionIndex`).  A custom policy promises nothing of
the kind: :func:`weight_upper_bound` returns None for it and the caller falls back to 1.
Only the exact built-in classes are trusted: a subclass may override ``weight`` (an
"evergreen" half-life that gives old memories weight 1 is not monotone in age), so it is a
custom policy here too.
"""

from __future__ import annotations

import torch

from .clock import now_seconds
from .policies import Ebbinghaus, HalfLife, NoDecay, Product, ValidityWindow

MONOTONE = (NoDecay, HalfLife, Ebbinghaus, ValidityWindow)
"""The policies whose weight is monotone in each argument (module docstring)."""

UNBOUNDED_ACCESSES = 1e300
"""The corner's access count: finite, so that ``0 * accesses`` stays 0."""


def uses_access_counts(policy) -> bool:
    """Whether a policy's weights depend on access counts (a touching search must then
    write them back first; custom policies: assume so, unless they say
    ``uses_access_counts = False``)."""
    kind = type(policy)  # the exact class: a subclass of a built-in policy is custom
    if kind in (NoDecay, HalfLife, ValidityWindow):
        return False
    if kind is Ebbinghaus:
        return True
    if kind is Product:
        return any(uses_access_counts(p) for p in policy.policies)
    return bool(getattr(policy, "uses_access_counts", True))


def corner_monotone(policy) -> bool:
    """Whether ``policy``'s weight at a group's corner bounds the group's weights: a
    :data:`MONOTONE` policy (its exact class), or a ``Product`` of them."""
    if type(policy) is Product:
        return all(corner_monotone(p) for p in policy.policies)
    return type(policy) in MONOTONE


def weight_upper_bound(policy, now, newest: torch.Tensor, earliest_from: torch.Tensor,
                       latest_until: torch.Tensor) -> torch.Tensor | None:
    """The largest weight ``policy`` can give a memory of each group ``(G,)``, from the
    groups' newest ``time``, earliest ``valid_from`` and latest ``valid_until`` (float64
    POSIX seconds); None when the policy is not :func:`corner_monotone`.  ``now`` is POSIX
    seconds, an aware ``datetime`` or a 0-d float64 tensor, and reaches the policy as seconds
    (or the tensor), as from :func:`~hypermem.temporal.policy_weights`.

    >>> import torch
    >>> day = 86400.0
    >>> w = weight_upper_bound(HalfLife(24.0), 10 * day, torch.tensor([8 * day, 9 * day]),
    ...                        torch.full((2,), -float("inf")), torch.full((2,), float("inf")))
    >>> [round(x, 6) for x in w.tolist()]
    [0.25, 0.5]
    """
    if not corner_monotone(policy):
        return None
    now = now_seconds(now)
    newest = newest.to(torch.float64)
    accesses = torch.full_like(newest, UNBOUNDED_ACCESSES)
    return torch.as_tensor(policy.weight(now, newest, accesses, earliest_from.to(torch.float64),
                                         latest_until.to(torch.float64)), dtype=torch.float64)
