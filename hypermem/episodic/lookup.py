"""Lookup in a :class:`~hypermem.episodic.MemoryStorage`: by episode, and by predicate
pattern through the ``wff_ht`` index (:func:`~hypermem.episodic.keys.lookup_key`), then
one-way unification (:func:`~hypermem.episodic.matching.matches`)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from .episodic_memory import EpisodicMemory
from .keys import lookup_key, predicate_of
from .matching import matches
from .negation import canonical
from .sexpr import SExpr, is_variable, parse_sexpr, to_sexpr


class LookupMixin:
    """:meth:`get_episode`, :meth:`get_matching`, :meth:`get_from_context` and the
    characterisation queries of :class:`MemoryStorage`."""
    def _episode_members(self, ep: Any, strict: bool) -> list[EpisodicMemory]:
        if not isinstance(ep, str):
            raise TypeError(f"an episode must be a symbol (str), got {type(ep).__name__}: {ep!r}")
        if ep not in self.ep_ht:
            if strict:
                raise KeyError(f"unknown episode {ep!r}")
            return []
        return self._ordered(self.ep_ht[ep])

    def get_episode(self, ep: str, access: bool = False) -> list[EpisodicMemory]:
        """The memories characterising the episode ``ep`` (``[]`` if unknown), in insertion
        order; with ``access`` they are accessed."""
        with self._lock:
            mems = self._episode_members(ep, strict=False)
            if access:
                self.access(mems)
            return mems

    def _pattern(self, pred_patt: Any) -> SExpr:
        if isinstance(pred_patt, str):
            if pred_patt.lstrip().startswith("("):
                return parse_sexpr(pred_patt)
            return to_sexpr(pred_patt, "pattern")
        if isinstance(pred_patt, (list, tuple)):
            return to_sexpr(pred_patt, "pattern")
        raise TypeError(f"a pattern must be a predicate symbol (str) or a list of S-expressions, got "
                        f"{type(pred_patt).__name__}: {pred_patt!r}")

    def _matching(self, pred_patt: Any, within: set[EpisodicMemory] | None) -> list[EpisodicMemory]:
        """Formula and pattern are read with double negations cancelled (:func:`canonical`):
        ``(not (not W))`` is found as ``W``, as the context treats it."""
        pattern = canonical(self._pattern(pred_patt))
        if isinstance(pattern, str):
            if is_variable(pattern):
                pool: Iterable[EpisodicMemory] = self.memories
            else:
                pool = [m for m in self.wff_ht.get(pattern, ()) if predicate_of(canonical(m.get_wff())) == pattern]
        else:
            key = lookup_key(pattern)
            pool = self.memories if key is None else self.wff_ht.get(key, ())
            pool = [m for m in pool if matches(pattern, canonical(m.get_wff()))]
        if within is not None:
            pool = [m for m in pool if m in within]
        return self._ordered(pool)

    def get_matching(self, pred_patt: Any, access: bool = False) -> list[EpisodicMemory]:
        """The memories matching a predicate symbol (their formula's predicate is it, e.g.
        ``"between.p"``) or a pattern (a list, or its text, with variables at any depth,
        e.g. ``["Block1", "between.p", "?x", "Block2"]``; a repeated variable must bind to
        the same value), in insertion order.  With ``access`` they are accessed.
        ``(not (not W))`` counts as ``W`` (in the formulas and in the pattern)."""
        with self._lock:
            mems = self._matching(pred_patt, None)
            if access:
                self.access(mems)
            return mems

    def get_from_context(self, pred_patt: Any, access: bool = False) -> list[EpisodicMemory]:
        """The memories in context matching the pattern (see :meth:`get_matching`)."""
        with self._lock:
            mems = self._matching(pred_patt, self.context)
            if access:
                self.access(mems)
            return mems

    def get_characterizing_episode(self, pred_patt: Any, ep: str) -> list[EpisodicMemory]:
        """The memories that match the pattern and characterise ``ep`` (``[]`` if unknown)."""
        with self._lock:
            return self._matching(pred_patt, set(self._episode_members(ep, strict=False)))

    def does_characterize_episode(self, pred_patt: Any, ep: str) -> bool:
        """Whether some memory matching the pattern characterises ``ep``."""
        return bool(self.get_characterizing_episode(pred_patt, ep))
