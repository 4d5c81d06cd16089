"""One consistent read of a memory for drawing: every figure and page of :mod:`hypermem.viz`
is built from a :class:`Snapshot`, never from several reads of the live store.

A store opened with ``Memory.open`` (SQLite, PostgreSQL) catches up with the other processes
(:meth:`~hypermem.Memory.refresh`) before each whole-store read (iteration, ``time_weights``,
``depths``, ``directions``, ``stats``, ...).  A drawing that made several such reads could mix
two states when another process wrote in between: records of one, weights of another (the
inspector's weight grid then no longer has a row per memory).  :func:`consistent` refreshes
**once**, then holds ``state.lock`` and copies the columns straight from the in-process state,
which no other thread changes while the lock is held and no further refresh touches.  The
decay weights at any time are then computed from the copied columns with
:func:`~hypermem.temporal.policy_weights`, the formula ``Memory.time_weights`` uses.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import numpy as np
import torch

from ..temporal import policy_weights
from ..temporal.clock import now_of

__all__ = ["Snapshot", "as_snapshot", "consistent", "snapshot"]


@dataclass(frozen=True)
class Snapshot:
    """The memories of one state: ``records`` (in row order), ``ids``, ``row`` (id -> row),
    ``parent`` (the parent's row, ``-1`` for a root), ``directions`` and ``depths`` (float64,
    CPU), and the decay columns ``time``, ``access``, ``valid_from``, ``valid_until`` (copies
    on the store's device)."""

    records: list
    ids: list[str]
    row: dict[str, int]
    parent: np.ndarray
    directions: torch.Tensor
    depths: torch.Tensor
    time: torch.Tensor
    access: torch.Tensor
    valid_from: torch.Tensor
    valid_until: torch.Tensor
    curvature: float
    decay: Any
    clock: Callable[[], datetime]

    @property
    def n(self) -> int:
        return len(self.records)

    def weights(self, at_time: datetime | None = None) -> torch.Tensor:
        """The decay policy's weight of every memory at ``at_time`` (the clock's time if None),
        float64 ``(n,)``: ``Memory.time_weights`` of this state, with no refresh."""
        return policy_weights(self.decay, now_of(at_time, self.clock), self.time, self.access, self.valid_from, self.valid_until)


def _read(memory) -> Snapshot:
    """The snapshot of ``memory``'s in-process state (the caller holds ``state.lock``)."""
    st = memory.state
    n = st.n
    records = st.records.values()
    row = dict(st.row)
    parent = np.array([-1 if r.parent_id is None else row[r.parent_id] for r in records], dtype=np.int64)
    cpu = {"device": "cpu", "dtype": torch.float64}
    return Snapshot(
        records=records, ids=[r.id for r in records], row=row, parent=parent,
        directions=st.direction[:n].detach().to(**cpu, copy=True), depths=st.depth[:n].detach().to(**cpu, copy=True),
        time=st.time[:n].clone(), access=st.access[:n].clone(), valid_from=st.valid_from[:n].clone(),
        valid_until=st.valid_until[:n].clone(), curvature=memory.curvature, decay=memory.decay, clock=memory.clock)


@contextmanager
def consistent(memory) -> Iterator[Snapshot]:
    """Hold ``memory.state.lock``, catch up with the other processes once (``refresh()``) and
    yield the :class:`Snapshot` of that state.  Inside the block, other reads must not refresh
    again: use ``memory.views`` (``stats``, ``level``, ``children``), which read the state as is."""
    with memory.state.lock:
        memory.refresh()
        yield _read(memory)


def snapshot(memory) -> Snapshot:
    """:func:`consistent` without the block: the snapshot, lock released."""
    with consistent(memory) as snap:
        return snap


def as_snapshot(memory) -> Snapshot:
    """``memory`` itself when it is a :class:`Snapshot` (drawn as it is, no new read), else its
    :func:`snapshot` taken now."""
    return memory if isinstance(memory, Snapshot) else snapshot(memory)
