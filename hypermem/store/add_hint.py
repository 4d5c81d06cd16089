"""A one-time hint, when a store is filled by many single ``add`` calls, to use ``add_many``.

Each :meth:`~hypermem.store.Memory.add` runs the embedder on one text (and a durable store
commits one transaction), where :meth:`~hypermem.store.Memory.add_many` embeds a whole batch
in one call: with all-MiniLM-L6-v2 on 2 CPU cores, 200 notes take 76 s one by one and 6.6 s
in one ``add_many`` (issue 32); short chat turns gain far less (1.1-1.4x: 438 LoCoMo turns, 10.1 s
against 9.3 s), so the hint says both and how to silence it.  On a durable store (``Memory.open``)
each ``add`` is also its own committed transaction (on SQLite with ``synchronous=FULL`` a sync to
disk) and ``add_many`` one for the batch: 1,000 single adds with the hashing embedder took 1.9-4.3 s
against 30-40x less in one ``add_many``, so there the hint names the commits too (``commits``).
:class:`OneByOne` watches the single adds of one store: a
run of them, each starting within ``gap`` seconds of the previous one's end, that has spent
more than ``seconds`` in ``add`` after at least ``calls`` calls gets one :class:`AddManyHint`
warning; a cheap embedder (the hashing one) reaches it only on a durable store.
"""

from __future__ import annotations

import time

from .caller_warning import warn_caller

__all__ = ["AddManyHint", "OneByOne"]


class AddManyHint(UserWarning):
    """Many single ``add`` calls in a row took long: ``add_many`` would batch them."""


class OneByOne:
    """The run of single adds of one store, and whether it has been told about ``add_many``."""

    def __init__(self, seconds: float = 2.0, calls: int = 20, gap: float = 1.0, commits: bool = False):
        self.seconds, self.calls, self.gap = seconds, calls, gap
        self.commits = commits
        """Whether each add commits a transaction (a durable store), which the hint then names."""
        self.spent, self.count, self.last_end, self.told = 0.0, 0, None, False

    def record(self, start: float, end: float) -> None:
        """Count one single add that ran from ``start`` to ``end`` (``time.perf_counter``)."""
        if self.told:
            return
        if self.last_end is None or start - self.last_end > self.gap:
            self.spent, self.count = 0.0, 0  # a new run
        self.spent += end - start
        self.count += 1
        self.last_end = end
        if self.count >= self.calls and self.spent > self.seconds:
            self.told = True
            each, batch = ("one embedder call and one committed transaction", " and commits it once") \
                if self.commits else ("one embedder call", "")
            gain = ("; on this durable store also by the commits it saves (30-40x for 1,000 adds with the hashing "
                    "embedder on SQLite)") if self.commits else ""
            warn_caller(f"{self.count} single add() calls in a row took {self.spent:.1f} s ({each} each); "
                        f"add_many(items) embeds and stores a batch in one call{batch}, faster by how much the "
                        f"embedder gains from batching (1.1-1.4x for short chat turns, ~10x for longer notes, with "
                        f"MiniLM on 2 cores){gain}. Shown once per store; an agent that must store as it goes can "
                        f"silence it: warnings.filterwarnings('ignore', category=hypermem.store.AddManyHint)",
                        AddManyHint)

    @staticmethod
    def clock() -> float:
        return time.perf_counter()
