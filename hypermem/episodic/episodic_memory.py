"""One episodic memory: a temporally bounded eventuality with an importance value."""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Iterable
from datetime import datetime
from typing import Any

from ..temporal.clock import to_utc, utcnow
from .eventuality import Eventuality
from .keys import predicate_of
from .sexpr import SExpr, format_sexpr

DEFAULT_TELIC_PREDICATES = frozenset({
    "say-to.v", "paraphrase-to.v", "reply-to.v", "respond-to.v", "ask.v", "tell.v", "hear.v",
    "greet.v", "arrive.v", "leave.v",
})
"""Predicates of events taken as instantaneous (telic): the speech acts and arrivals of a
dialogue agent.  A :class:`MemoryStorage` takes its own set through ``telic_predicates``."""

NOW = "^now"
"""The indexical "now" of the time formulas of a memory that has not ended."""


def check_importance(value: Any, what: str = "importance") -> float:
    """``value`` as a float in ``[0, 1]``, or ``ValueError`` (NaN, out of range, not a number).

    Any real number is accepted (``numbers.Real``: NumPy scalars too) and a one-element
    (0-d) tensor or array; never a bool."""
    v = as_real(value)
    if v is None:
        raise ValueError(f"{what} must be a number in [0, 1], got {value!r}")
    if not (0.0 <= v <= 1.0):  # also rejects NaN
        raise ValueError(f"{what} must be a number in [0, 1], got {value!r}")
    return v


def _scalar(value: Any) -> Any:
    """The Python number inside a 0-d tensor or array (``item()``), else ``value``."""
    if not isinstance(value, (numbers.Number, str, bytes)) and getattr(value, "shape", None) == () \
            and callable(getattr(value, "item", None)):
        return value.item()
    return value


def as_real(value: Any) -> float | None:
    """``value`` as a float when it is a real number (an int beyond float64 is ``inf``), else
    ``None``; bools (and NumPy bools) are not numbers here."""
    value = _scalar(value)
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or type(value).__name__ == "bool_":
        return None
    try:
        return float(value)
    except OverflowError:  # an int beyond float64
        return math.inf


def as_count(value: Any) -> int | None:
    """``value`` as an int when it is an integer (``numbers.Integral``, a NumPy integer, a
    0-d integer tensor), else ``None``; never a bool."""
    value = _scalar(value)
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or type(value).__name__ == "bool_":
        return None
    return int(value)


class EpisodicMemory:
    """A temporally bounded event with some importance (the design document's ``Memory``).

    ``start_time`` is the earliest time the event is known to be true (the creation time);
    ``end_time`` the latest (``None`` while it is "true now"); ``last_access`` the latest
    access, first the start time.  Their logical reading is ``(<start_time> during <ep>)``
    and ``(<end_time> during <ep>)``, with ``^now`` for an open end (:meth:`get_time_wffs`).

    A memory merged from duplicate formulas of several episodes (see
    :meth:`MemoryStorage.store`) lists them all in ``episodes``; :meth:`get_ep` gives the
    first.  Memories compare by identity.

    Parameters
    ----------
    event: the :class:`Eventuality` (or its text ``"(<wff> ** <ep>)"``).
    importance: a number in ``[0, 1]``.
    telic: ``True``/``False`` to say whether the event is instantaneous; ``None`` (default)
        decides from the predicate (``telic_predicates`` of the storage holding it, or
        :data:`DEFAULT_TELIC_PREDICATES`).
    clock: callable returning the current aware datetime (default: the system clock, UTC).
        A :class:`MemoryStorage` sets it to its own clock when it stores the memory; a memory
        made without a clock whose times nobody set then takes its start and last access
        from the storage's clock at that moment (:meth:`adopt_clock`), so every time of a
        storage comes from its one clock.

    Times never run backwards within a memory: :meth:`end` and :meth:`update_last_access`
    clamp to the start time (and the last access), should the clock be moved back.  When
    the memory ends (:meth:`end`), ``on_end`` (set by the storage holding it) is called, so
    the storage takes it out of its context of facts true now.

    Example::

        >>> from datetime import datetime, timezone
        >>> clock = lambda: datetime(2026, 1, 1, 9, tzinfo=timezone.utc)
        >>> m = EpisodicMemory(Eventuality(("^you", "reply-to.v", "E1"), "E3"), importance=0.5, clock=clock)
        >>> m.get_ep(), m.is_telic(), m.end_time is None
        ('E3', True, True)
    """

    def __init__(self, event: Eventuality | str, importance: float = 0.25, telic: bool | None = None, *,
                 clock: Callable[[], datetime] | None = None):
        if isinstance(event, str):
            event = Eventuality.from_text(event)
        if not isinstance(event, Eventuality):
            raise TypeError(f"event must be an Eventuality (or its text), got {type(event).__name__}")
        if telic is not None and not isinstance(telic, bool):
            raise TypeError(f"telic must be True, False or None, got {telic!r}")
        if clock is not None and not callable(clock):
            raise TypeError("clock must be a callable returning a datetime")
        self.event = event
        self._importance = check_importance(importance)
        self.telic = telic
        self.clock: Callable[[], datetime] = clock or utcnow
        self._own_clock = clock is not None
        self.telic_predicates: frozenset[str] = DEFAULT_TELIC_PREDICATES
        self.episodes = [event.ep]
        self.start_time: datetime = self._now()
        self.end_time: datetime | None = None
        self.last_access: datetime = self.start_time
        self._stamp = self.start_time
        self.access_count = 0
        self.on_end: Callable[[EpisodicMemory], None] | None = None

    def adopt_clock(self, clock: Callable[[], datetime]) -> None:
        """Take ``clock`` (a storage's) for every later time.  A memory made without a clock
        whose start and last access are still the ones stamped at creation (not set by the
        caller, never accessed, not ended) takes them from ``clock`` now."""
        fresh = (not self._own_clock and self.start_time is self._stamp and self.last_access is self._stamp
                 and self.end_time is None and self.access_count == 0)
        self.clock, self._own_clock = clock, True
        if fresh:
            self.start_time = self.last_access = self._stamp = self._now()

    @property
    def importance(self) -> float:
        """A number in ``[0, 1]``; setting it checks the range."""
        return self._importance

    @importance.setter
    def importance(self, value: float) -> None:
        self._importance = check_importance(value)

    def _now(self) -> datetime:
        now = self.clock()
        if not isinstance(now, datetime) or now.tzinfo is None:
            raise TypeError(f"the clock must return a timezone-aware datetime, got {now!r}")
        return to_utc(now)

    @property
    def episodes(self) -> list[str]:
        """The episodes this memory characterises, in the order they were added (the first
        is the event's).  Assigning a list replaces them; :meth:`add_episodes` and
        :meth:`drop_episode` change them in O(1) each."""
        return self._episodes

    @episodes.setter
    def episodes(self, value: Iterable[str]) -> None:
        self._episodes = list(value)
        self._episode_set = set(self._episodes)

    def _episode_index(self) -> set[str]:
        if len(self._episode_set) != len(self._episodes):  # the list was changed in place
            self._episode_set = set(self._episodes)
        return self._episode_set

    def add_episodes(self, episodes: Iterable[str]) -> list[str]:
        """Append the episodes not listed yet (O(1) each); returns those added."""
        index, added = self._episode_index(), []
        for ep in episodes:
            if ep not in index:
                index.add(ep)
                self._episodes.append(ep)
                added.append(ep)
        return added

    def drop_episode(self, ep: str) -> None:
        """Remove one episode from :attr:`episodes` (``ValueError`` if it is not listed)."""
        self._episodes.remove(ep)
        self._episode_index().discard(ep)

    def update_last_access(self) -> None:
        """Set the most recent access to now (and count the access); never earlier than the
        last access (a clock moved back does not move it back)."""
        self.last_access = max(self._now(), self.last_access, self.start_time)
        self.access_count += 1

    def end(self) -> None:
        """Declare that the event is no longer true: its end time becomes now (never before
        the start time), and the storage holding it takes it out of its context."""
        self.end_time = max(self._now(), self.start_time)
        if self.on_end is not None:
            self.on_end(self)

    def get_ep(self) -> str:
        """The (first) episode this memory characterises."""
        return self.episodes[0]

    def get_wff(self) -> SExpr:
        """The formula of the event."""
        return self.event.wff

    def get_time_wffs(self) -> list[SExpr]:
        """``[(<start> during <ep>), (<end> during <ep>)]`` with ISO 8601 time symbols;
        the end is ``^now`` while the memory has not ended."""
        ep = self.get_ep()
        end = NOW if self.end_time is None else self.end_time.isoformat()
        return [(self.start_time.isoformat(), "during", ep), (end, "during", ep)]

    def is_telic(self) -> bool:
        """Whether the event is instantaneous (see ``telic`` in the class docstring)."""
        if self.telic is not None:
            return self.telic
        pred = predicate_of(self.event.wff)
        return isinstance(pred, str) and pred in self.telic_predicates

    def absorb(self, other: EpisodicMemory) -> list[str]:
        """Absorb a duplicate of this formula: its episodes, the larger importance, the
        earlier start, the later access.  The end is the later of two ends; an ended memory
        is not reopened by absorbing an open one (only entering a storage's context makes a
        fact true now) and an open one stays open.  Returns the episodes that were new here
        (O(1) per episode of ``other``)."""
        added = self.add_episodes(other.episodes)
        self._importance = max(self._importance, other._importance)
        self.start_time = min(self.start_time, other.start_time)
        self.last_access = max(self.last_access, other.last_access)
        self.access_count += other.access_count
        if self.end_time is not None and other.end_time is not None:
            self.end_time = max(self.end_time, other.end_time)
        if self.telic is None:
            self.telic = other.telic
        return added

    def __repr__(self) -> str:
        eps = " ".join(self.episodes)
        state = "now" if self.end_time is None else f"ended {self.end_time.isoformat()}"
        return f"EpisodicMemory({format_sexpr(self.event.wff)} ** {eps}, importance={self._importance:g}, {state})"


def as_memory_list(memory: EpisodicMemory | Iterable[EpisodicMemory], what: str = "memory") -> tuple[list, bool]:
    """``(memories, was_single)``: a memory or a list of memories as a list, type-checked."""
    if isinstance(memory, EpisodicMemory):
        return [memory], True
    if isinstance(memory, (str, bytes)) or not isinstance(memory, Iterable):
        raise TypeError(f"{what} must be an EpisodicMemory or a list of them, got {type(memory).__name__}")
    out = list(memory)
    for i, m in enumerate(out):
        if not isinstance(m, EpisodicMemory):
            raise TypeError(f"{what} #{i} must be an EpisodicMemory, got {type(m).__name__}")
    return out, False

