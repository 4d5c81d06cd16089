"""One episodic memory: a temporally bounded eventuality with an importance value."""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Iterable
from datetime import datetime
from typing import Any

from ..store.shown_text import shown
from ..temporal.clock import to_utc, utcnow
from .eventuality import Eventuality
from .keys import predicate_of
from .sexpr import SExpr, format_sexpr, is_symbol, is_variable

_UNSET: Any = object()

DEFAULT_TELIC_PREDICATES = frozenset({
    "say-to.v", "paraphrase-to.v", "reply-to.v", "respond-to.v", "ask.v", "tell.v", "hear.v",
    "greet.v", "arrive.v", "leave.v",
})
"""Predicates of events taken as instantaneous (telic): the speech acts and arrivals of a
dialogue agent.  A :class:`MemoryStorage` takes its own set through ``telic_predicates``."""

NOW = "^now"
"""The indexical "now" of the time formulas of a memory that has not ended."""


def check_importance(value: Any, what: str = "importance") -> float:
    """``value`` as a finite float, or ``ValueError`` (NaN, infinite, not a number).

    Importance is "a numerical score" on any scale, as in the seed: retrieval only compares it
    with ``importance_threshold`` and min-max scales it over the candidates, neither of which
    needs ``[0, 1]``.  Any real number is accepted (``numbers.Real``: NumPy scalars too) and a
    one-element (0-d) tensor or array; never a bool."""
    v = as_real(value)
    if v is None or not math.isfinite(v):
        raise ValueError(f"{what} must be a finite number (any scale, e.g. 0.8 or 7), got {value!r}")
    return v


def check_time(value: Any, name: str, optional: bool = False) -> datetime | None:
    """``value`` as an aware UTC datetime; ``None`` too when ``optional``.  ``TypeError``
    naming ``name`` for anything else (a string, a number, a naive datetime: it would not
    compare with the storage's aware times), ``ValueError`` for NaT."""
    if value is None and optional:
        return None
    allowed = "a timezone-aware datetime" + (" or None (true now)" if optional else "")
    if not isinstance(value, datetime):
        hint = " (parse it first: datetime.fromisoformat(...))" if isinstance(value, str) else ""
        raise TypeError(f"{name} must be {allowed}, got {type(value).__name__}: {value!r}{hint}")
    if value != value:  # pandas NaT
        raise ValueError(f"{name} must be {allowed}, got NaT")
    if value.utcoffset() is None:
        raise TypeError(f"{name} must be {allowed}, got the naive {value.isoformat()} (give it a tzinfo, e.g. "
                        f"tzinfo=timezone.utc): a memory's times are compared with the storage's aware clock")
    return to_utc(value, name)


def order_problem(start: datetime, end: datetime | None, last: datetime) -> str | None:
    """What is out of order in a memory's times (``None`` when nothing is): an end or a
    last access before the start."""
    if end is not None and end < start:
        return f"ended (end_time {end.isoformat()}) before it starts (start_time {start.isoformat()})"
    if last < start:
        return f"been last accessed (last_access {last.isoformat()}) before it starts (start_time {start.isoformat()})"
    return None


def check_event(value: Any) -> Eventuality:
    """``value`` (an :class:`Eventuality` or its text) as the event of a memory: its episode
    a constant (``E3``, not the variable ``?e``) and its formula neither ``()`` nor a variable."""
    if isinstance(value, str):
        value = Eventuality.from_text(value)
    if not isinstance(value, Eventuality):
        raise TypeError(f"event must be an Eventuality (or its text \"(<wff> ** <episode>)\"), got "
                        f"{type(value).__name__}: {value!r}")
    if is_variable(value.ep):
        raise ValueError(f"a memory's episode must be a constant such as E3, not the variable {value.ep!r}: a "
                         f"memory records an episode (a variable belongs in a pattern, e.g. get_matching)")
    if value.wff == () or is_variable(value.wff):
        raise ValueError(f"a memory's formula must be a fact such as (a b.v), got {format_sexpr(value.wff)!r} in "
                         f"{value}")
    return value


def check_episode(ep: Any) -> str:
    """``ep`` when it is an episode constant (a symbol such as ``E3``); ``TypeError`` for a
    non-string, ``ValueError`` for a variable (``?e``) or a string that is not a symbol."""
    if not isinstance(ep, str):
        raise TypeError(f"an episode must be a symbol (str) such as E3, got {type(ep).__name__}: {ep!r}")
    if not is_symbol(ep) or is_variable(ep):
        raise ValueError(f"an episode must be a constant symbol such as E3, got {ep!r}")
    return ep


def check_episodes(value: Any) -> list[str]:
    """``value`` as a memory's episode list: a non-empty list (any iterable but a string) of
    distinct episode constants (:func:`check_episode`)."""
    if isinstance(value, (str, bytes)) or not isinstance(value, Iterable):
        raise TypeError(f"episodes must be a list of episode symbols such as [\"E3\"], got "
                        f"{type(value).__name__}: {value!r}")
    eps = [check_episode(e) for e in value]
    if not eps:
        raise ValueError("a memory characterises at least one episode: episodes must not be empty")
    if len(set(eps)) != len(eps):
        raise ValueError(f"episodes must be distinct, got {eps!r}")
    return eps


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
    :meth:`MemoryStorage.store`) lists them all in ``episodes``; :meth:`get_ep` and
    ``event.ep`` give the first.  Changing them (assigning ``episodes``,
    :meth:`add_episodes`, :meth:`drop_episode`) keeps the event and the index of the storage
    holding the memory in step.  Memories compare by identity.

    The times are checked when set (aware datetimes; ``end_time`` may be ``None``; neither
    ``end_time`` nor ``last_access`` before ``start_time``: :meth:`set_times` sets several at
    once), and so is ``event`` (see :func:`check_event`; a stored memory's event may only
    name another of its episodes, with the same formula).  A memory is held by at most one
    storage (:attr:`storage`); :meth:`copy` makes an unstored one to store elsewhere.

    Parameters
    ----------
    event: the :class:`Eventuality` (or its text ``"(<wff> ** <ep>)"``).
    importance: a finite number (the seed's "numerical score", any scale).
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
        event = check_event(event)
        if telic is not None and not isinstance(telic, bool):
            raise TypeError(f"telic must be True, False or None, got {telic!r}")
        if clock is not None and not callable(clock):
            raise TypeError("clock must be a callable returning a datetime")
        self._event = event
        self._holder: Any = None
        self._importance = check_importance(importance)
        self.telic = telic
        self.clock: Callable[[], datetime] = clock or utcnow
        self._own_clock = clock is not None
        self.telic_predicates: frozenset[str] = DEFAULT_TELIC_PREDICATES
        self._episodes = [event.ep]
        self._episode_set = {event.ep}
        self._start: datetime = self._now()
        self._end: datetime | None = None
        self._last: datetime = self._start
        self._stamp = self._start
        self._last_set = False  # until a last access is set or made, it follows the start time
        self.access_count = 0
        self.on_end: Callable[[EpisodicMemory], None] | None = None

    def adopt_clock(self, clock: Callable[[], datetime]) -> None:
        """Take ``clock`` (a storage's) for every later time.  A memory made without a clock
        whose start and last access are still the ones stamped at creation (not set by the
        caller, never accessed, not ended) takes them from ``clock`` now.  A last access
        nobody set follows the start time (:meth:`set_times`), so a back-filled memory
        (``m.start_time`` set in the past, then stored) keeps that past time as its last access."""
        fresh = (not self._own_clock and self._start is self._stamp and not self._last_set
                 and self._end is None and self.access_count == 0)
        self.clock, self._own_clock = clock, True
        if fresh:
            self._start = self._last = self._stamp = self._now()

    # ------------------------------------------------------------------ checked attributes
    @property
    def event(self) -> Eventuality:
        """The :class:`Eventuality`; setting it checks it (:func:`check_event`) and keeps
        :attr:`episodes` in step: the new episode first.  A memory held by a storage may only
        take an event with the same formula and one of its episodes (the storage indexes it
        by both); another event needs ``storage.remove(m)`` and a new memory."""
        return self._event

    @event.setter
    def event(self, value: Eventuality | str) -> None:
        event = check_event(value)
        keep = event.wff == self._event.wff and event.ep in self._episode_index()
        if self._holder is not None and not keep:
            raise ValueError(f"this memory is stored in a MemoryStorage, which indexes it by its formula and episodes "
                             f"({' '.join(self._episodes)}): its event may only name one of them, with the same "
                             f"formula, not {event}; remove the memory (storage.remove(m)) and store a new one")
        self._event = event
        self._replace_episodes([event.ep] + [e for e in self._episodes if e != event.ep] if keep else [event.ep])

    start_time = property(lambda self: self._start, lambda self, v: self.set_times(start_time=v),
                          doc="The earliest time the event is known to be true (aware UTC datetime).")
    end_time = property(lambda self: self._end, lambda self, v: self.set_times(end_time=v),
                        doc="The latest time the event is known to be true; ``None`` while it is true now. "
                            "Setting a time ends the memory as :meth:`end` does (it leaves its storage's context).")
    last_access = property(lambda self: self._last, lambda self, v: self.set_times(last_access=v),
                           doc="The latest access (first the start time).")

    def set_times(self, start_time: datetime = _UNSET, end_time: datetime | None = _UNSET,
                  last_access: datetime = _UNSET) -> None:
        """Set one or several times, checked together (:func:`check_time`; neither
        ``end_time`` nor ``last_access`` before ``start_time``).  Each attribute's setter
        comes here; an ``end_time`` ends the memory (``on_end``: it leaves the context).
        Until a last access is set (or made: :meth:`update_last_access`), it is the start
        time and moves with it, as a memory's last access starts as its start time."""
        start = self._start if start_time is _UNSET else check_time(start_time, "start_time")
        end = self._end if end_time is _UNSET else check_time(end_time, "end_time", optional=True)
        follow = last_access is _UNSET and not self._last_set
        last = start if follow else self._last if last_access is _UNSET else check_time(last_access, "last_access")
        problem = order_problem(start, end, last)
        if problem:
            given = [n for n, v in (("start_time", start_time), ("end_time", end_time), ("last_access", last_access))
                     if v is not _UNSET]
            how = "" if len(given) > 1 else " (to move several, pass them together to set_times(...))"
            raise ValueError(f"{', '.join(given)}: the memory would have {problem}; times never run backwards "
                             f"within a memory{how}")
        self._start, self._end, self._last = start, end, last
        self._last_set = not follow
        if end_time is not _UNSET and end is not None and self.on_end is not None:
            self.on_end(self)

    @property
    def last_access_set(self) -> bool:
        """Whether the last access was set (given, made by an access, or by a merge) rather
        than following the start time (:meth:`set_times`); saved with the memory."""
        return self._last_set

    @property
    def storage(self) -> Any:
        """The :class:`MemoryStorage` holding this memory, or ``None``."""
        return self._holder

    def bind(self, holder: Any, on_end: Callable[[EpisodicMemory], None]) -> None:
        """Called by a storage that takes this memory (``ValueError`` when another holds it:
        two storages would share its mutable state; store :meth:`copy` there)."""
        if self._holder is not None and self._holder is not holder:
            raise ValueError(f"{self!r} is already stored in another MemoryStorage; a memory belongs to one "
                             f"storage (their indexes would share its times and episodes): remove it there first, "
                             f"or store a copy (m.copy())")
        self._holder, self.on_end = holder, on_end

    def unbind(self) -> None:
        """Called by the storage that removes this memory."""
        self._holder, self.on_end = None, None

    def copy(self) -> EpisodicMemory:
        """An unstored memory with the same event, episodes, importance, times, access count
        and clock (to store in another storage)."""
        m = EpisodicMemory(self._event, self._importance, self.telic, clock=self.clock)
        m._own_clock = self._own_clock
        m.episodes, m.access_count = self._episodes, self.access_count
        m._start, m._end, m._last, m._last_set = self._start, self._end, self._last, self._last_set
        m.telic_predicates = self.telic_predicates
        return m

    @property
    def importance(self) -> float:
        """A finite number; setting it checks it."""
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
        is the event's).  A copy: changing the list returned changes nothing here.

        Assigning a list replaces them (checked: :func:`check_episodes`); the event then
        names the first (same formula), and a storage holding the memory re-indexes it
        (:meth:`MemoryStorage.reindex_episodes`), so ``get_episode`` and ``save`` see the
        new list.  :meth:`add_episodes` adds in O(1) each, :meth:`drop_episode` drops one."""
        return list(self._episodes)

    @episodes.setter
    def episodes(self, value: Iterable[str]) -> None:
        self._replace_episodes(check_episodes(value))

    def _replace_episodes(self, eps: list[str]) -> None:
        old = self._episode_set
        new = set(eps)
        if self._holder is not None:
            self._holder.reindex_episodes(self, dropped=[e for e in self._episodes if e not in new],
                                          added=[e for e in eps if e not in old])
        self._episodes, self._episode_set = eps, new
        if self._event.ep != eps[0]:
            self._event = Eventuality(self._event.wff, eps[0])

    def _episode_index(self) -> set[str]:
        return self._episode_set

    def add_episodes(self, episodes: Iterable[str]) -> list[str]:
        """Append the episodes not listed yet (O(1) each; each checked: :func:`check_episode`);
        returns those added.  A storage holding the memory indexes it under them."""
        if isinstance(episodes, (str, bytes)) or not isinstance(episodes, Iterable):
            raise TypeError(f"add_episodes takes a list of episode symbols, got {type(episodes).__name__}: "
                            f"{episodes!r}")
        index, added, seen = self._episode_set, [], set()
        for ep in episodes:
            if ep not in index and check_episode(ep) not in seen:
                seen.add(ep)
                added.append(ep)
        if added and self._holder is not None:
            self._holder.reindex_episodes(self, added=added)
        self._episodes.extend(added)
        index.update(added)
        return added

    def drop_episode(self, ep: str) -> None:
        """Remove one episode from :attr:`episodes` (``ValueError`` if it is not listed, or is
        the only one: a memory characterises at least one episode; remove the memory
        instead).  Dropping the first makes the event name the next; a storage holding the
        memory no longer finds it under ``ep``."""
        if ep not in self._episode_set:
            raise ValueError(f"{ep!r} is not one of this memory's episodes ({' '.join(self._episodes)})")
        if len(self._episodes) == 1:
            raise ValueError(f"{ep!r} is this memory's only episode; a memory characterises at least one "
                             f"(remove the memory instead: storage.remove(m) or storage.remove_episode({ep!r}))")
        self._replace_episodes([e for e in self._episodes if e != ep])

    def update_last_access(self) -> None:
        """Set the most recent access to now (and count the access); never earlier than the
        last access (a clock moved back does not move it back)."""
        self.last_access = max(self._now(), self.last_access, self.start_time)
        self.access_count += 1

    def end(self) -> None:
        """Declare that the event is no longer true: its end time becomes now (never before
        the start time), and the storage holding it takes it out of its context."""
        self.end_time = max(self._now(), self.start_time)  # the setter calls on_end

    def get_ep(self) -> str:
        """The (first) episode this memory characterises."""
        return self._episodes[0]

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
        earlier start, the later access (of the two last accesses before the merge: a back-filled
        duplicate's older start never moves this memory's last access back).  The end is the later of two ends; an ended memory
        is not reopened by absorbing an open one (only entering a storage's context makes a
        fact true now) and an open one stays open.  Returns the episodes that were new here
        (O(1) per episode of ``other``)."""
        added = self.add_episodes(other.episodes)
        self._importance = max(self._importance, other._importance)
        # together: a start moved first would drag a last access that follows it down before the max
        self.set_times(start_time=min(self.start_time, other.start_time),
                       last_access=max(self.last_access, other.last_access))
        self.access_count += other.access_count
        if self.end_time is not None and other.end_time is not None:
            self.end_time = max(self.end_time, other.end_time)
        if self.telic is None:
            self.telic = other.telic
        return added

    def __repr__(self) -> str:
        """The formula, episodes, importance and state; a terminal control or an invisible
        character in a symbol (``"hi\\x1b[2J"``) written as an escape (:func:`hypermem.store.shown_text.shown`)."""
        eps = " ".join(self._episodes)
        state = "now" if self.end_time is None else f"ended {self.end_time.isoformat()}"
        return shown(f"EpisodicMemory({format_sexpr(self.event.wff)} ** {eps}, importance={self._importance:g}, "
                     f"{state})")


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

