r"""Episodic memory storage: eventualities, a context of "true now" facts, hash indexes by
episode and by predicate pattern, and retrieval by recency, importance and salience.

This is the ``MemoryStorage`` of the episodic-memory design document (Eta's ``eta.memory``),
on the hyperbolic :class:`hypermem.Memory` for salience, with the document's TODOs done:
negation maintains the context, duplicate formulas merge across episodes, patterns may
nest variables at any depth, and :meth:`MemoryStorage.forget` evicts.

Retrieval (recency, importance and salience, min-max scaled) is
:mod:`hypermem.episodic.retrieval`.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from datetime import datetime
from typing import Any, overload

import torch

from ..store import Memory as MemoryStore
from ..store.caller_warning import warn_caller
from ..temporal.clock import to_utc, utcnow
from .episodic_memory import DEFAULT_TELIC_PREDICATES, EpisodicMemory, as_memory_list, check_importance
from .eventuality import Eventuality
from .keys import Key, wff_keys
from .lookup import LookupMixin
from .negation import canonical, polarity
from .persistence import load_storage, save_storage
from .retrieval import RetrievalMixin
from .sexpr import SExpr, format_sexpr, is_symbol

DEFAULT_THRESHOLD = 0.5
"""The default ``importance_threshold`` (the seed reads its own from ``eta.constants``)."""


class MemoryStorage(LookupMixin, RetrievalMixin):
    """Stores episodic memories and a context of "true now" facts, keyed on episode names
    and on predicates for efficient lookup (retrieval: :mod:`hypermem.episodic.retrieval`).

    Attributes
    ----------
    memories: ``set`` of all stored :class:`EpisodicMemory`.
    ep_ht: ``dict`` episode symbol -> ``set`` of the memories characterising it.
    wff_ht: ``dict`` key -> ``set`` of the memories whose formula has that key; the keys
        are those of :func:`hypermem.episodic.keys.wff_keys` (the predicate,
        ``(subj, pred)``, and ``(subj, pred, None, ...)``, ``(None, pred, obj1, None, ...)``, ...).
    context: ``set`` of the memories that are "true now".
    embedder, importance_threshold, clock, telic_predicates, decay: as given.
    hyperbolic: the :class:`hypermem.Memory` holding one point per memory (``None``
        without an embedder); its ids are :meth:`key_of` the memories, its texts the
        formulas printed by :func:`format_sexpr`.

    Parameters
    ----------
    embedder: embeds the formulas for salience (``None``: salience is always 1).
    importance_threshold: only memories *above* this importance are retrieved (the seed's
        rule); a finite number on the importances' scale; ``None``: the default, 0.5.
    clock: callable returning the current timezone-aware datetime, used for the start,
        end and access times of every memory this storage holds (default: UTC now).
    telic_predicates: predicates of instantaneous events (they leave the context when
        accessed or flushed).
    decay: a :mod:`hypermem.temporal` policy for recency (``None``: the last access time
        itself, min-max scaled, as in the design document).
    curvature, dtype, device: of the hyperbolic store.

    Example::

        >>> from hypermem.episodic import MemoryStorage
        >>> s = MemoryStorage()
        >>> m = s.instantiate("((Block1 between.p Block2 Block3) ** E1)", importance=0.8)
        >>> [x.get_wff() for x in s.get_matching("between.p")]
        [('Block1', 'between.p', 'Block2', 'Block3')]
        >>> s.get_from_context(["?a", "between.p", "?b", "Block3"]) == [m]
        True
    """

    def __init__(self, embedder: Any = None, importance_threshold: float | None = DEFAULT_THRESHOLD,
                 clock: Callable[[], datetime] | None = None,
                 telic_predicates: Iterable[str] = DEFAULT_TELIC_PREDICATES, decay: Any = None, *,
                 curvature: float = 1.0, dtype: torch.dtype = torch.float64, device: str | torch.device = "cpu"):
        if importance_threshold is None:  # the seed: "if not given, the default threshold"
            importance_threshold = DEFAULT_THRESHOLD
        self.importance_threshold = check_importance(importance_threshold, "importance_threshold")
        if clock is not None and not callable(clock):
            raise TypeError("clock must be a callable returning a timezone-aware datetime")
        self.clock: Callable[[], datetime] = clock or utcnow
        if isinstance(telic_predicates, str) or not isinstance(telic_predicates, Iterable):
            raise TypeError("telic_predicates must be a collection of predicate symbols")
        telic = frozenset(telic_predicates)
        bad = [p for p in telic if not is_symbol(p)]
        if bad:
            raise ValueError(f"telic_predicates must be symbols, got {bad[:3]!r}")
        self.telic_predicates = telic
        if decay is not None and not callable(getattr(decay, "weight", None)):
            raise TypeError(f"decay must be a temporal policy with a weight() method, got {decay!r}")
        self.decay = decay
        self.embedder = embedder
        self._hyper_config = {"curvature": curvature, "dtype": dtype, "device": device}
        self.hyperbolic: MemoryStore | None = self._new_hyperbolic()
        self.memories: set[EpisodicMemory] = set()
        self.ep_ht: dict[str, set[EpisodicMemory]] = {}
        self.wff_ht: dict[Key, set[EpisodicMemory]] = {}
        self.context: set[EpisodicMemory] = set()
        self._seq: dict[EpisodicMemory, int] = {}
        self._by_wff: dict[SExpr, list[EpisodicMemory]] = {}  # insertion order: the latest last
        self._by_core: dict[SExpr, set[EpisodicMemory]] = {}  # by the formula without its negations
        self._next = 0
        self._lock = threading.RLock()

    def _new_hyperbolic(self) -> MemoryStore | None:
        if self.embedder is None:
            return None
        return MemoryStore(embedder=self.embedder, clock=self.clock, **self._hyper_config)

    # ------------------------------------------------------------------ basics
    def __len__(self) -> int:
        return len(self.memories)

    def __contains__(self, memory: object) -> bool:
        return memory in self._seq

    def __iter__(self) -> Iterator[EpisodicMemory]:
        """The memories in insertion order."""
        with self._lock:
            return iter(self._ordered(self.memories))

    def __repr__(self) -> str:
        return (f"MemoryStorage(memories={len(self.memories)}, context={len(self.context)}, "
                f"episodes={len(self.ep_ht)}, importance_threshold={self.importance_threshold:g}, "
                f"embedder={type(self.embedder).__name__ if self.embedder is not None else None})")

    def key_of(self, memory: EpisodicMemory) -> str:
        """The stable key of a stored memory (its id in :attr:`hyperbolic`)."""
        try:
            return f"m{self._seq[memory]}"
        except (KeyError, TypeError):
            raise KeyError(f"{memory!r} is not stored in this MemoryStorage") from None

    def point(self, memory: EpisodicMemory) -> torch.Tensor:
        """The memory's point in the Poincaré ball of :attr:`hyperbolic`."""
        key = self.key_of(memory)
        if self.hyperbolic is None:
            raise ValueError("this MemoryStorage has no embedder, so its memories have no points")
        return self.hyperbolic.point(key)

    def _ordered(self, memories: Iterable[EpisodicMemory]) -> list[EpisodicMemory]:
        return sorted(memories, key=self._seq.__getitem__)

    # ------------------------------------------------------------------ state (persistence)
    lock = property(lambda self: self._lock, doc="The re-entrant lock (hold it to read several fields at once).")
    next_seq = property(lambda self: self._next, doc="The insertion number the next new memory gets.")

    def seq(self, memory: EpisodicMemory) -> int:
        """The insertion number of a stored memory (its hyperbolic id is ``f"m{seq}"``)."""
        return self._seq[memory]

    @property
    def hyperbolic_settings(self) -> dict[str, Any]:
        """``curvature``, ``dtype`` and ``device`` of the hyperbolic index (a copy)."""
        return dict(self._hyper_config)

    def restore(self, entries: Iterable[tuple[EpisodicMemory, int, bool]], next_seq: int) -> None:
        """Register loaded memories: ``(memory, seq, in_context)`` in insertion order, then
        the next insertion number (the loader has added their formulas to ``hyperbolic``)."""
        with self._lock:
            for m, seq, in_context in entries:
                self._register(m, seq)
                if in_context and m.end_time is None:  # an ended fact is not true now
                    self.context.add(m)
            self._next = int(next_seq)

    def _now(self) -> datetime:
        now = self.clock()
        if not isinstance(now, datetime) or now.tzinfo is None:
            raise TypeError(f"the clock must return a timezone-aware datetime, got {now!r}")
        return to_utc(now)

    def _stored(self, memory: Any) -> list[EpisodicMemory]:
        """A memory or list of memories, each checked to be stored here, in insertion order
        (duplicates dropped)."""
        mems, _ = as_memory_list(memory)
        for m in mems:
            if m not in self._seq:
                raise KeyError(f"{m!r} is not stored in this MemoryStorage")
        return self._ordered(set(mems))

    # ------------------------------------------------------------------ storing
    def store(self, memory: EpisodicMemory | Iterable[EpisodicMemory], context: bool = True):
        """Store a memory (or list of memories), adding it to both hash tables and, with
        ``context``, to the context.  Returns the stored memory (or list).

        A memory whose formula is already stored (under another episode, or the same)
        is *merged* into the stored one, which is returned instead: its ``episodes``
        gain the new episode(s), its importance becomes the larger, its start the
        earlier; a merge never reopens an ended memory.  But when the stored memory has
        *ended* and the new one enters the context, the fact holds again after a gap: it
        becomes a new memory with its own start (the ended one keeps its interval), as a
        homogeneous fact over ``[start, now]`` would otherwise claim the gap (storing a stored
        memory that ended does the same: it is not reopened).  Entering
        the context makes a memory "true now" (``end_time`` None) and keeps the context
        consistent: storing ``(not W)`` removes ``W`` from the context (ending it), storing
        ``W`` removes ``(not W)``; ``(not (not W))`` counts as ``W``.  A memory made without
        a clock takes its times from this storage's clock now (see
        :meth:`EpisodicMemory.adopt_clock`).  A memory held by another storage is refused
        (``ValueError``: store ``m.copy()``).  All or nothing.
        """
        mems, single = as_memory_list(memory)
        if not isinstance(context, bool):
            raise TypeError(f"context must be True or False, got {context!r}")
        with self._lock:
            for i, m in enumerate(mems):
                if m.storage is not None and m.storage is not self:
                    raise ValueError(f"memory #{i}, {m!r}, is stored in another MemoryStorage; a memory belongs to "
                                     "one storage (both would change its times, context and episodes): remove it "
                                     "there first, or store a copy (m.copy()); nothing was stored")
            plan: list[tuple[EpisodicMemory, EpisodicMemory]] = []
            new: list[EpisodicMemory] = []
            pending: dict[SExpr, EpisodicMemory] = {}
            for m in mems:
                wff = m.get_wff()
                if m in self._seq or pending.get(wff) is m:
                    if not (context and m.end_time is not None and m in self._seq):
                        plan.append((m, m))
                        continue
                    # a stored memory that ended, stored again into the context: the fact
                    # holds again after a gap, as below -- a new memory, never the old reopened
                    m = EpisodicMemory(m.event, m.importance, m.telic, clock=self.clock)
                target = pending.get(wff)
                if target is None:
                    target = self._latest(wff)
                    if target is not None and context and target.end_time is not None:
                        target = None  # holds again after a gap: a new interval
                if target is None:
                    new.append(m)
                    pending[wff] = m
                    target = m
                plan.append((m, target))
            first = self._next
            for m, _ in plan:  # new and merged alike: a clockless memory's times come from this clock
                if m.storage is None:
                    m.adopt_clock(self.clock)
            if self.hyperbolic is not None and new:  # may raise (embedder): nothing stored yet
                self.hyperbolic.add_many([{"text": format_sexpr(m.get_wff()), "id": f"m{first + i}",
                                           "t": m.start_time} for i, m in enumerate(new)])
            for i, m in enumerate(new):
                self._register(m, first + i)
            self._next = first + len(new)
            for m, target in plan:
                if target is not m:
                    target.absorb(m)  # its new episodes reach ep_ht through reindex_episodes: O(1) each
                if context:
                    self._enter_context(target)
            out = [t for _, t in plan]
            return out[0] if single else out

    def _latest(self, wff: SExpr) -> EpisodicMemory | None:
        same = self._by_wff.get(wff)
        return same[-1] if same else None

    def _register(self, m: EpisodicMemory, seq: int) -> None:
        m.adopt_clock(self.clock)
        m.telic_predicates = self.telic_predicates
        m.bind(self, self._ended)
        self._seq[m] = seq
        self.memories.add(m)
        self._by_wff.setdefault(m.get_wff(), []).append(m)
        self._by_core.setdefault(polarity(m.get_wff())[0], set()).add(m)
        for ep in m.episodes:
            self.ep_ht.setdefault(ep, set()).add(m)
        for key in wff_keys(canonical(m.get_wff())):  # (not (not W)) is found as W
            self.wff_ht.setdefault(key, set()).add(m)

    def reindex_episodes(self, memory: EpisodicMemory, dropped: Iterable[str] = (),
                         added: Iterable[str] = ()) -> None:
        """Keep :attr:`ep_ht` in step with a stored memory whose episodes change: it is no
        longer found under ``dropped``, and is found under ``added``.  The memory calls this
        (assigning ``m.episodes``, ``m.add_episodes``, ``m.drop_episode``) before it changes
        its list; ``KeyError`` for a memory not stored here."""
        with self._lock:
            if memory not in self._seq:
                raise KeyError(f"{memory!r} is not stored in this MemoryStorage")
            for ep in dropped:
                _discard(self.ep_ht, ep, memory)
            for ep in added:
                self.ep_ht.setdefault(ep, set()).add(memory)

    def _enter_context(self, m: EpisodicMemory) -> None:
        core, positive = polarity(m.get_wff())
        opposite = [o for o in self._by_core.get(core, ()) if o in self.context and polarity(o.get_wff())[1] != positive]
        for o in self._ordered(opposite):
            self._leave_context(o)
        self.context.add(m)
        m.end_time = None

    def _ended(self, m: EpisodicMemory) -> None:
        """``on_end`` of the stored memories: an ended memory is not true now."""
        with self._lock:
            self.context.discard(m)

    def _leave_context(self, m: EpisodicMemory) -> None:
        if m in self.context:
            self.context.discard(m)
            if m.end_time is None:
                m.end()

    @overload
    def instantiate(self, event: Eventuality | str, importance: float = 0.25,
                    context: bool = True) -> EpisodicMemory: ...

    @overload
    def instantiate(self, event: Iterable[Eventuality | str], importance: float | Sequence[float] = 0.25,
                    context: bool = True) -> list[EpisodicMemory]: ...

    def instantiate(self, event: Eventuality | str | Iterable[Eventuality | str],
                    importance: float | Sequence[float] = 0.25,
                    context: bool = True) -> EpisodicMemory | list[EpisodicMemory]:
        """Make new memories of an event (or list of events; an event may be given as its
        text ``"(<wff> ** <ep>)"``) and store them (see :meth:`store`).  ``importance`` is
        one number for all or one per event.  Returns the stored memory (or list; ``[]``
        for no events).  A memory's episode must be a constant and its formula a fact
        (``ValueError`` for ``?e`` or ``()``, see :func:`check_event`).

        A memory at or below :attr:`importance_threshold` is stored but :meth:`retrieve`
        never returns it (only memories strictly above it are retrieved, as in the seed):
        ``instantiate`` then warns (``UserWarning``).  The seed's defaults do this: importance
        0.25, threshold 0.5; pass ``importance=`` or a lower ``importance_threshold``."""
        single = isinstance(event, (Eventuality, str))
        if not single and (isinstance(event, (bytes, bytearray, memoryview, Mapping))
                           or not isinstance(event, Iterable)):
            hint = " (decode bytes to str first)" if isinstance(event, (bytes, bytearray, memoryview)) else ""
            raise TypeError(f"instantiate(event=...) takes an Eventuality, its text (str) or a list of them, "
                            f"got {type(event).__name__}{hint}")
        events = [event] if single else list(event)
        if isinstance(importance, (list, tuple)):
            if single:
                raise ValueError("one event takes one importance value, got a list")
            if len(importance) != len(events):
                raise ValueError(f"{len(events)} events but {len(importance)} importance values")
            imps = [check_importance(v, f"importance #{i}") for i, v in enumerate(importance)]
        else:
            imps = [check_importance(importance)] * len(events)
        if not events:
            return []
        parsed = []
        for i, e in enumerate(events):
            if isinstance(e, str):
                e = Eventuality.from_text(e)
            if not isinstance(e, Eventuality):
                raise TypeError(f"instantiate(event=...): event #{i} must be an Eventuality or its text (str), "
                                f"got {type(e).__name__}")
            parsed.append(e)
        mems = [EpisodicMemory(e, v, clock=self.clock) for e, v in zip(parsed, imps)]
        for m in mems:
            m.telic_predicates = self.telic_predicates
        stored = self.store(mems, context=context)
        low = min(imps)
        if low <= self.importance_threshold:
            how = "below" if low < self.importance_threshold else "at"
            warn_caller(f"instantiate(): a memory stored at importance {low:g}, {how} this storage's "
                        f"importance_threshold {self.importance_threshold:g}: retrieve() and scores() only return "
                        "memories above the threshold, so they leave it out, and forget() may evict it; pass "
                        "importance= (e.g. 0.8) or a lower importance_threshold= to MemoryStorage")
        return stored[0] if single else stored

    # ------------------------------------------------------------------ access and removal
    def access(self, memory: EpisodicMemory | Iterable[EpisodicMemory]):
        """Access a memory (or list): its last access becomes now; a telic (instantaneous)
        event also leaves the context.  Returns what it was given."""
        with self._lock:
            mems, single = as_memory_list(memory)
            for m in self._stored(mems):
                m.update_last_access()
                if m.is_telic():
                    self._leave_context(m)
            return mems[0] if single else mems

    def remove(self, memory: EpisodicMemory | Iterable[EpisodicMemory]) -> list[EpisodicMemory]:
        """Remove a memory (or list) from every set and hash table, and its point from
        :attr:`hyperbolic`.  ``KeyError`` (nothing removed) if one is not stored.
        Returns the removed memories."""
        with self._lock:
            mems = self._stored(memory)
            self._drop(mems)
            return mems

    def _drop(self, mems: list[EpisodicMemory]) -> None:
        if not mems:
            return
        keys = [self.key_of(m) for m in mems]
        if self.hyperbolic is not None:
            self.hyperbolic.remove_many(keys)  # one compaction of the store's rows
        for m in mems:
            self.memories.discard(m)
            self.context.discard(m)
            for ep in m.episodes:
                _discard(self.ep_ht, ep, m)
            for key in wff_keys(canonical(m.get_wff())):
                _discard(self.wff_ht, key, m)
            same = self._by_wff.get(m.get_wff(), [])
            same.remove(m)
            if not same:
                del self._by_wff[m.get_wff()]
            _discard(self._by_core, polarity(m.get_wff())[0], m)
            m.unbind()
            del self._seq[m]

    def remove_from_context(self, memory: EpisodicMemory | Iterable[EpisodicMemory]) -> None:
        """Remove a memory (or list) from the context: it is no longer "true now", so its
        end time becomes now.  A stored memory not in context is left as it is;
        ``KeyError`` (nothing changed) for a memory not stored here."""
        with self._lock:
            mems = self._stored(memory)
            for m in mems:
                self._leave_context(m)

    def remove_episode(self, ep: str | Iterable[str]) -> list[EpisodicMemory]:
        """Remove every memory characterising the episode ``ep`` (or each episode of a list,
        in one removal from :attr:`hyperbolic`); ``KeyError`` (nothing changed) for an
        unknown episode.  A memory merged from several episodes only loses ``ep`` (it still
        characterises the others) and is removed when no episode is left.  Returns the
        memories that were removed entirely, in insertion order."""
        with self._lock:
            members = self._episodes_of(ep)
            gone: set[EpisodicMemory] = set()
            for e, mems in members.items():
                for m in mems:
                    if m.episodes == [e]:
                        gone.add(m)
                    else:  # leaves ep_ht[e] (reindex_episodes); the event names the first episode left
                        m.drop_episode(e)
                self.ep_ht.pop(e, None)
            out = self._ordered(gone)
            self._drop(out)
            return out

    def remove_episode_from_context(self, ep: str | Iterable[str]) -> None:
        """Remove from the context every memory characterising ``ep`` (or each episode of a
        list, as :meth:`remove_episode`); ``KeyError`` (nothing changed) for an unknown episode."""
        with self._lock:
            members = self._episodes_of(ep)
            for m in self._ordered({m for mems in members.values() for m in mems}):
                self._leave_context(m)

    def _episodes_of(self, ep: Any) -> dict[str, list[EpisodicMemory]]:
        """Episode -> its memories, for one episode symbol or a list of them; ``TypeError``
        for a non-symbol, ``KeyError`` for an unknown episode (before anything changes)."""
        eps = [ep] if isinstance(ep, str) else list(ep) if isinstance(ep, Iterable) else [ep]
        return {e: self._episode_members(e, strict=True) for e in dict.fromkeys(eps)}

    def remove_matching(self, pred_patt: Any) -> list[EpisodicMemory]:
        """Remove every memory matching the pattern (see :meth:`get_matching`); returns them."""
        with self._lock:
            mems = self._matching(pred_patt, None)
            self._drop(mems)
            return mems

    def remove_matching_from_context(self, pred_patt: Any) -> list[EpisodicMemory]:
        """Remove from the context every memory of it matching the pattern; returns them."""
        with self._lock:
            mems = self._matching(pred_patt, self.context)
            for m in mems:
                self._leave_context(m)
            return mems

    def flush_context(self) -> list[EpisodicMemory]:
        """Remove every telic (instantaneous) event from the context; returns them."""
        with self._lock:
            mems = self._ordered(m for m in self.context if m.is_telic())
            for m in mems:
                self._leave_context(m)
            return mems

    # ------------------------------------------------------------------ persistence
    def save(self, path: str | os.PathLike[str], overwrite: bool = False) -> None:
        """Write the whole storage to one SQLite file, atomically (see
        :mod:`hypermem.episodic.persistence`).  A SQLite file of another kind (e.g. a
        ``hypermem.Memory`` store) is not replaced (``FileExistsError``) unless ``overwrite``."""
        save_storage(self, path, overwrite=overwrite)

    @classmethod
    def load(cls, path: str | os.PathLike[str], embedder: Any = None, clock: Callable[[], datetime] | None = None,
             decay: Any = None) -> MemoryStorage:
        """Read a storage written by :meth:`save`: memories, times, episodes, context and
        indexes.  ``embedder``/``decay`` are needed only when saved ones were custom."""
        return load_storage(path, embedder=embedder, clock=clock, decay=decay, cls=cls)


def _discard(table: dict, key: Any, m: EpisodicMemory) -> None:
    bucket = table.get(key)
    if bucket is not None:
        bucket.discard(m)
        if not bucket:
            del table[key]
