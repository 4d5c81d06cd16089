"""Touches that wait for no other process's write: the accesses a search records.

A search counts an access of every memory it returns (``touch=True``, the default), and a
durable store writes that count in a small write transaction.  Another process's long write
(a bulk ``add_many``, a stalled or stopped writer) holds the store's write lock; a search must
not queue behind it.  So a touch tries the write lock without waiting (SQLite: a busy timeout
of :data:`TOUCH_WAIT_MS` for that ``BEGIN IMMEDIATE`` alone; PostgreSQL: ``FOR UPDATE NOWAIT``
on the version row) and, when the lock is busy, keeps the counts **pending in this process**
(:class:`PendingTouches`): the in-process records show them at once, and the next write
transaction of this process that gets the lock (any write call, the next touch, ``close``)
writes them first.  Nothing is lost silently: ``close`` (and, for a store still open, the
end of the process) retries for a short while and warns with the number of accesses it
could not record.  The counts pending when the process forks are the parent's to write: a
forked child's copy starts empty (:mod:`.fork_guard`), or each process would write them once.
"""

from __future__ import annotations

import atexit
import time
import warnings
import weakref
from collections import Counter
from datetime import datetime

from . import fork_guard

TOUCH_WAIT_MS = 20
"""How long (ms) a touch waits for SQLite's write lock before it leaves its counts pending."""

CLOSE_TRIES = 8
"""Attempts of ``close`` to write pending touches (doubling pauses from 10 ms: ~2.5 s in all)."""


class LockBusy(Exception):
    """The write lock was held by another process (a touch that does not wait for it)."""


class PendingTouches:
    """Accesses counted in this process but not written yet: id -> [count, last access]."""

    def __init__(self) -> None:
        self.items: dict[str, list] = {}
        fork_guard.watch(self)

    def after_fork(self) -> None:
        """In a forked child: the counts pending at the fork are the parent's to write."""
        self.items = {}

    def __bool__(self) -> bool:
        return bool(self.items)

    def __len__(self) -> int:
        return sum(n for n, _ in self.items.values())

    def add(self, counts: dict[str, int] | Counter, when: datetime | None) -> None:
        for i, n in counts.items():
            slot = self.items.setdefault(i, [0, when])
            slot[0] += n
            if when is not None and (slot[1] is None or when >= slot[1]):
                slot[1] = when

    def rows(self) -> list[tuple]:
        """``(increment, last_accessed, id)`` of each pending id (the storages' ``touch`` rows)."""
        return [(n, t, i) for i, (n, t) in self.items.items()]

    def count(self, id: str) -> int:
        slot = self.items.get(id)
        return 0 if slot is None else slot[0]

    def clear(self) -> None:
        self.items.clear()

    def reapply(self, state, ids=None) -> None:
        """Add the pending counts back to ``state``'s records after they were re-read from the
        storage (which does not hold them yet): the in-process view is stored + pending."""
        for i in (self.items if ids is None else [i for i in ids if i in self.items]):
            if i in state.row:
                n, t = self.items[i]
                last = state.records.last_accessed(i)
                state.set_access(i, int(state.access[state.row[i]]) + n,
                                 t if last is None or (t is not None and t > last) else last)


def flush_at_close(try_once, pending: PendingTouches, where: str) -> None:
    """Write ``pending`` touches before a store closes: ``try_once()`` (which raises
    :class:`LockBusy` while another process holds the write lock) a few times with short
    pauses, then a warning naming how many accesses were not recorded."""
    pause = 0.01
    for attempt in range(CLOSE_TRIES):
        try:
            try_once()
            return
        except LockBusy:
            if attempt == CLOSE_TRIES - 1:
                break
            time.sleep(pause)
            pause *= 2
        except Exception as exc:  # noqa: BLE001 - a failed flush must not hide the close
            warnings.warn(f"{where}: {len(pending)} access counts of this process were not recorded: {exc}",
                          RuntimeWarning, stacklevel=3)
            return
    warnings.warn(f"{where}: {len(pending)} access counts of this process were not recorded: another process "
                  "held the store's write lock until the close", RuntimeWarning, stacklevel=3)


_HOLDERS: weakref.WeakSet = weakref.WeakSet()
"""Open stores holding pending touches, flushed when the process exits (:func:`remember`)."""


def remember(store) -> None:
    """Flush ``store``'s pending touches (its ``_flush_touches()``) at the process's exit, if
    it is still open then."""
    if not _HOLDERS:
        atexit.unregister(_at_exit)
        atexit.register(_at_exit)
    _HOLDERS.add(store)


def _at_exit() -> None:
    for store in list(_HOLDERS):
        store._flush_touches()
