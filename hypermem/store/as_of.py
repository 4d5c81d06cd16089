"""The store as it was at a time: the memories that ``search``, ``stats`` and ``table`` see at ``at_time``.

One rule, used by all three (:meth:`hypermem.store.search.Searcher.run`,
:class:`hypermem.store.views.MemoryViews`): at an explicit ``at_time = T`` a memory is left out
when it was *recorded* after ``T`` (its creation time ``t > T``); with ``valid_only`` also when
``T`` lies outside its validity window (``valid_from <= T <= valid_until``).  Recorded and true
are different times: a fact recorded today with ``valid_from=2019`` is true in 2021 but was not
yet in the store, so ``search(q, at_time=2021)`` leaves it out.  When that makes a search come back
short, :func:`rows_at` warns, once a store (docs/store.md, "Facts true in the past"): the advice is
the same for every such search, and a service searching the past on each request would otherwise
log it on each, a new count each time (a text Python's default filter does not de-duplicate).
"""

from __future__ import annotations

import weakref
from collections.abc import Callable

import torch

from .caller_warning import warn_caller

__all__ = ["keep_at", "rows_at"]

_WARNED: weakref.WeakSet = weakref.WeakSet()
"""The stores' states (:class:`~hypermem.store.state.MemoryState`) :func:`rows_at` has warned (once a store)."""


def keep_at(state, now: float, explicit: bool, valid_only: bool) -> torch.Tensor:
    """Boolean mask ``(n,)`` of the memories kept at ``now`` (POSIX seconds): created at or before
    it when ``explicit`` (an ``at_time`` was given), inside their window when ``valid_only``."""
    n = state.n
    keep = torch.ones(n, dtype=torch.bool, device=state.time.device)
    if explicit:
        keep &= state.time[:n] <= now
    if valid_only:
        keep &= (state.valid_from[:n] <= now) & (state.valid_until[:n] >= now)
    return keep


def rows_at(state, rows: torch.Tensor | None, when: Callable[[], float], explicit: bool, valid_only: bool,
            k: int = 0) -> torch.Tensor | None:
    """``rows`` (None: all) less the memories :func:`keep_at` leaves out at ``now = when()`` (called
    only when a rule applies: a plain search reads no clock here).  When an explicit
    ``at_time`` keeps fewer than ``k`` rows, warns if some of the left-out ones were valid at
    ``now`` (a finite ``valid_from <= now <= valid_until``) and recorded after it (only then:
    the normal path pays nothing)."""
    if not explicit and not valid_only:
        return rows
    now = when()
    keep = keep_at(state, now, explicit, valid_only)
    if rows is None:
        out = None if bool(keep.all()) else keep.nonzero().squeeze(1)
    else:
        out = rows[keep[rows]]
    if explicit and state not in _WARNED and (state.n if out is None else out.numel()) < k:
        _warn_recorded_later(state, rows, now)
    return out


def _warn_recorded_later(state, rows: torch.Tensor | None, now: float) -> None:
    """Warn, once a store, that this search left out memories valid at ``now`` but recorded after it."""
    n = state.n
    vf = state.valid_from[:n]
    later = (state.time[:n] > now) & torch.isfinite(vf) & (vf <= now) & (state.valid_until[:n] >= now)
    count = int(later.sum() if rows is None else later[rows].sum())
    if count:
        _WARNED.add(state)
        warn_caller(f"at_time left out {count} memor{'y' if count == 1 else 'ies'} valid at that time but "
                    "recorded after it (at_time searches the store as it was then: recorded is not true); "
                    "record a past fact with t=valid_from, or search without at_time and filter on "
                    "valid_from / valid_until (docs/store.md, 'Facts true in the past'). Warned once a "
                    "store: later at_time searches may leave out such memories without a word")
