"""A one-time hint, when a store is filled by many single ``add`` calls, to use ``add_many``.

Each :meth:`~hypermem.store.Memory.add` runs the embedder on one text (and a durable store
commits one transaction), where :meth:`~hypermem.store.Memory.add_many` embeds a whole batch
in one call: with all-MiniLM-L6-v2 on 2 CPU cores, 200 notes take 76 s one by one and 6.6 s
in one ``add_many`` (issue 32); short chat turns gain far less (1.1-1.4x: 438 LoCoMo turns, 10.1 s
against 9.3 s), so the hint says both and how to silence it.  On a durable store (``Memory.open``)
each ``add`` is also its own committed transaction (on SQLite with ``synchronous=FULL`` a sync to
disk) and ``add_many`` one for the batch: 1,000 single adds with the hashing embedder took 1.9-4.3 s
against 30-40x less in one ``add_many``, so there the hint names the commits too (``commits``).

The rule counts calls; it does not time them.  :class:`OneByOne` watches the single adds of one
store: a run of them (each starting within ``gap`` seconds of the previous one's end) gets one
:class:`AddManyHint` warning once it reaches

* ``calls`` adds (20) when the store's embedder gains from batching: any embedder but the hashing
  one (a model, an API behind a :class:`~hypermem.embed.callable.CallableEmbedder`);
* ``commit_calls`` adds (500) when the embedder is the hashing one (a few ms an add, nothing to gain
  from a batch) and the store is durable: the commits are what cost, 500 of them about 1-2 s at the
  measured 2-4 ms a commit;
* never for the hashing embedder in an in-memory store: nothing there for ``add_many`` to save.

Counted, not timed: the same code warns at the same add on every machine, so a test suite run
with warnings as errors (``pytest -W error``) does not pass or fail with the machine's load.
The one clock left is ``gap``: a pause of more
than a second between two adds (the caller's own work between them, not the adds' embedding or
commits) starts a new run, so an agent that stores a turn now and then is not told, and a loop that
does under a second of its own work per add is.

The hint is given at the *start* of the single add after the one that made it due
(:meth:`OneByOne.start`, before that add embeds or writes anything), never after an add's
write: under ``python -W error`` (or a ``filterwarnings("error")``) the warning is raised from
``add``, and raised after the commit it would tell the caller the add failed when the memory was
stored, so that a retry stored it twice.  Raised at the start, nothing of that add is stored,
and the store counts itself told before it warns, so the retry stores it once.

The text names the rule (the thresholds), not the run: the same store settings give the same
text, so Python's default warning filter, which shows a text once per line of the caller's code,
shows it once per process at that line, also to a service that opens a store per request (each
store has its own :class:`OneByOne`); a ``filterwarnings("always")`` still shows it once per
store.  Not a flag of the process: a test, or a second store of another kind, is told by its own
store, and the filter stays the one switch over what is shown.
"""

from __future__ import annotations

import time
from typing import Any

from ..embed import HashingEmbedder
from .caller_warning import warn_caller

__all__ = ["AddManyHint", "OneByOne"]

_SILENCE = ("Shown once per store (and, by Python's default warning filter, once per line of your code); "
            "an agent that must store as it goes can silence it: "
            "warnings.filterwarnings('ignore', category=hypermem.store.AddManyHint)")
_EMBEDDER_GAIN = ("faster by how much the embedder gains from batching (1.1-1.4x for short chat turns, ~10x for "
                  "longer notes, with MiniLM on 2 cores)")
_COMMIT_GAIN = "30-40x for 1,000 adds with the hashing embedder on SQLite"


class AddManyHint(UserWarning):
    """Many single ``add`` calls in a row: ``add_many`` would batch them (:mod:`hypermem.store.add_hint`)."""


class OneByOne:
    """The run of single adds of one store, and whether it has been told about ``add_many``."""

    def __init__(self, calls: int = 20, commit_calls: int = 500, gap: float = 1.0, commits: bool = False):
        self.calls, self.commit_calls, self.gap = calls, commit_calls, gap
        self.commits = commits
        """Whether each add commits a transaction (a durable store), which the hint then names."""
        self.count, self.last_end, self.told = 0, None, False
        self.due: str | None = None
        """The hint's text once :meth:`record` decided it is due (given by the next :meth:`start`)."""

    def start(self) -> float:
        """The clock at the start of a single add, after giving the hint if it is due: before the
        add writes, so a warning raised as an error (``-W error``) leaves nothing stored; ``told``
        is set first, so the caller's retry is not told again."""
        if self.due is not None:
            text, self.due, self.told = self.due, None, True
            warn_caller(text, AddManyHint)
        return self.clock()

    def record(self, start: float, end: float, embedder: Any = None) -> None:
        """Count one single add that ran from ``start`` to ``end`` (``time.perf_counter``) with the
        store's ``embedder`` (``None``: one taken to gain from batching); when the run reaches its
        count (module docstring), the hint is due (given by the next :meth:`start`, not here)."""
        if self.told or self.due is not None:
            return
        if self.last_end is None or start - self.last_end > self.gap:
            self.count = 0  # a new run
        self.count += 1
        self.last_end = end
        if self.count < self.calls:
            return
        cheap = isinstance(embedder, HashingEmbedder)  # nothing to gain from batching its calls
        if not cheap or (self.commits and self.count >= self.commit_calls):
            self.due = self.text(cheap)

    def text(self, cheap: bool) -> str:
        """The hint: constant for the store's settings (module docstring), ``cheap`` for the
        hashing embedder."""
        head = f"{self.commit_calls if cheap else self.calls} or more single add() calls in a row"
        if not self.commits:
            text = (f"{head} (one embedder call each); add_many(items) embeds and stores a batch in one call, "
                    f"{_EMBEDDER_GAIN}")
        elif cheap:
            text = (f"{head} (one embedder call and one committed transaction each); add_many(items) embeds and "
                    f"stores a batch in one call and commits it once. The hashing embedder is cheap (a few ms "
                    f"an add): the commits of this durable store are what cost, and add_many saves them "
                    f"({_COMMIT_GAIN})")
        else:
            text = (f"{head} (one embedder call and one committed transaction each); add_many(items) embeds and "
                    f"stores a batch in one call and commits it once, {_EMBEDDER_GAIN}; on this durable store "
                    f"also by the commits it saves ({_COMMIT_GAIN})")
        return f"{text}. {_SILENCE}"

    @staticmethod
    def clock() -> float:
        return time.perf_counter()
