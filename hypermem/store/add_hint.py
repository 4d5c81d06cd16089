"""A one-time hint, when a store is filled by many single ``add`` calls, to use ``add_many``.

Each :meth:`~hypermem.store.Memory.add` runs the embedder on one text (and a durable store
commits one transaction), where :meth:`~hypermem.store.Memory.add_many` embeds a whole batch
in one call: with all-MiniLM-L6-v2 on 2 CPU cores, 200 notes take 76 s one by one and 6.6 s
in one ``add_many`` (issue 32); short chat turns gain far less (1.1-1.4x: 438 LoCoMo turns, 10.1 s
against 9.3 s), so the hint says both and how to silence it.  On a durable store (``Memory.open``)
each ``add`` is also its own committed transaction (on SQLite with ``synchronous=FULL`` a sync to
disk) and ``add_many`` one for the batch: 1,000 single adds with the hashing embedder took 1.9-4.3 s
against 30-40x less in one ``add_many``, so there the hint names the commits too (``commits``).

:class:`OneByOne` watches the single adds of one store: a run of them, each starting within
``gap`` seconds of the previous one's end, that has spent more than ``seconds`` in ``add`` after
at least ``calls`` calls gets one :class:`AddManyHint` warning.  In a store that does not commit
each add (an in-memory ``Memory``) the run must also have averaged more than ``seconds / per``
in each add (10 ms by default), the order of an embedding model's call, so a cheap embedder (the
hashing one, a few ms an add) never gets the hint there: a warning after ``seconds`` of such adds
would make ``add`` raise in a test suite that runs with warnings as errors.  On a durable store any run is told, and where its adds
averaged ``seconds / per`` or less the hint blames the commits, not the embedder.
"""

from __future__ import annotations

import time

from .caller_warning import warn_caller

__all__ = ["AddManyHint", "OneByOne"]

_SILENCE = ("Shown once per store; an agent that must store as it goes can silence it: "
            "warnings.filterwarnings('ignore', category=hypermem.store.AddManyHint)")
_EMBEDDER_GAIN = ("faster by how much the embedder gains from batching (1.1-1.4x for short chat turns, ~10x for "
                  "longer notes, with MiniLM on 2 cores)")
_COMMIT_GAIN = "30-40x for 1,000 adds with the hashing embedder on SQLite"


class AddManyHint(UserWarning):
    """Many single ``add`` calls in a row took long: ``add_many`` would batch them."""


class OneByOne:
    """The run of single adds of one store, and whether it has been told about ``add_many``."""

    def __init__(self, seconds: float = 2.0, calls: int = 20, gap: float = 1.0, commits: bool = False,
                 per: int = 200):
        self.seconds, self.calls, self.gap, self.per = seconds, calls, gap, per
        self.commits = commits
        """Whether each add commits a transaction (a durable store), which the hint then names."""
        self.spent, self.count, self.last_end, self.told = 0.0, 0, None, False

    def start(self) -> float:
        """The clock at the start of a single add (placeholder: see the fixer's change)."""
        return self.clock()

    def record(self, start: float, end: float) -> None:
        """Count one single add that ran from ``start`` to ``end`` (``time.perf_counter``)."""
        if self.told:
            return
        if self.last_end is None or start - self.last_end > self.gap:
            self.spent, self.count = 0.0, 0  # a new run
        self.spent += end - start
        self.count += 1
        self.last_end = end
        if self.count < self.calls or self.spent <= self.seconds:
            return
        cheap = self.spent * self.per <= self.seconds * self.count  # mean add <= seconds / per
        if cheap and not self.commits:
            return  # a cheap embedder in memory: the documented rule, never told
        self.told = True
        head = f"{self.count} single add() calls in a row took {self.spent:.1f} s"
        if not self.commits:
            text = (f"{head} (one embedder call each); add_many(items) embeds and stores a batch in one call, "
                    f"{_EMBEDDER_GAIN}")
        elif cheap:
            text = (f"{head} (one embedder call and one committed transaction each); add_many(items) embeds and "
                    f"stores a batch in one call and commits it once. The embedder is cheap here "
                    f"({1000 * self.spent / self.count:.1f} ms an add in all): the commits of this durable store "
                    f"are what cost, and add_many saves them ({_COMMIT_GAIN})")
        else:
            text = (f"{head} (one embedder call and one committed transaction each); add_many(items) embeds and "
                    f"stores a batch in one call and commits it once, {_EMBEDDER_GAIN}; on this durable store "
                    f"also by the commits it saves ({_COMMIT_GAIN})")
        warn_caller(f"{text}. {_SILENCE}", AddManyHint)

    @staticmethod
    def clock() -> float:
        return time.perf_counter()
