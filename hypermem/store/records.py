"""Records and search results of a :class:`~hypermem.store.Memory`."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import torch

from ..temporal.clock import utcnow
from .gc_pause import gc_paused


def _iso(t: datetime | None) -> str | None:
    return None if t is None else t.isoformat()


def _short(text: str, width: int = 40) -> str:
    """``text``, cut to ``width`` characters with an ellipsis (the reprs' text)."""
    return text if len(text) <= width else text[: width - 1] + "…"


def _meta_summary(meta: Any) -> str:
    """A short ``meta``: the dict itself when its repr is short, else its key count and first keys."""
    shown = repr(meta)
    if len(shown) <= 40 or not isinstance(meta, dict):
        return _short(shown)
    keys = ", ".join(_short(repr(k), 16) for k in list(meta)[:3])
    return f"<{len(meta)} keys: {keys}{', …' if len(meta) > 3 else ''}>"


@dataclass(slots=True, repr=False)
class MemoryRecord:
    """One stored memory.  Its position lives in the :class:`~hypermem.store.Memory` that owns it."""

    id: str
    text: str
    parent_id: str | None = None
    t: datetime = field(default_factory=utcnow)
    meta: dict[str, Any] = field(default_factory=dict)
    valid_from: datetime | None = None
    valid_until: datetime | None = None
    access_count: int = 0
    last_accessed: datetime | None = None

    def __repr__(self) -> str:
        """Short, as :class:`SearchResult`'s: the text cut to 40 characters, ``meta`` summarized
        (:meth:`to_dict` has every field)."""
        parent = "" if self.parent_id is None else f", parent_id={self.parent_id!r}"
        when = _iso(self.t) if isinstance(self.t, datetime) else repr(self.t)
        meta = f", meta={_meta_summary(self.meta)}" if self.meta else ""
        return f"MemoryRecord(id={self.id!r}{parent}, t={when}, text={_short(self.text)!r}{meta})"

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly dict (datetimes as ISO 8601 strings)."""
        return {
            "id": self.id,
            "text": self.text,
            "parent_id": self.parent_id,
            "t": _iso(self.t),
            "meta": dict(self.meta),
            "valid_from": _iso(self.valid_from),
            "valid_until": _iso(self.valid_until),
            "access_count": int(self.access_count),
            "last_accessed": _iso(self.last_accessed),
        }


@dataclass
class SearchResult:
    """One hit of :meth:`~hypermem.store.Memory.search`.

    ``score = -distance + depth_bias * depth + time_coef * log(time_weight)``;
    ``cone_energy`` is set in ``mode="cone"`` (0 inside the root's entailment cone).
    """

    record: MemoryRecord
    score: float
    distance: float
    time_weight: float
    depth: float
    cone_energy: float | None = None

    @property
    def id(self) -> str:
        return self.record.id

    def __repr__(self) -> str:
        text = _short(self.record.text)
        extra = "" if self.cone_energy is None else f", cone_energy={self.cone_energy:.3g}"
        return (f"SearchResult(id={self.record.id!r}, score={self.score:.4f}, distance={self.distance:.4f}, "
                f"time_weight={self.time_weight:.4g}, depth={self.depth:.3f}{extra}, text={text!r})")

    @property
    def text(self) -> str:
        return self.record.text

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly dict: the record's fields plus the scores; the parent's id under both
        ``parent_id`` (the record's field) and ``parent`` (poincare-memory's key)."""
        d = self.record.to_dict()
        d.update(parent=self.record.parent_id, score=self.score, distance=self.distance, time_weight=self.time_weight, depth=self.depth,
                 cone_energy=self.cone_energy)
        return d


def search_results(state, scores: torch.Tensor, idx: torch.Tensor, dist: torch.Tensor, weights: torch.Tensor,
                   energies: torch.Tensor | None) -> list[list[SearchResult]]:
    """The :class:`SearchResult` lists of a ranked search: ``(B, k)`` scores, rows (-1: no
    hit), distances; ``weights`` (indexable by a tensor of rows) and ``energies`` (cone mode) of
    every row of ``state``.
    Each hit row's record, weight and depth are read once however many queries found it.
    The cyclic collector is paused meanwhile (:mod:`hypermem.store.gc_pause`): the results
    hold no cycles, and in a process of millions of objects the collections their
    allocation set off took 0.15 of a 1M-memory batch's 3.6 CPU seconds."""
    with gc_paused():
        return _results(state, scores, idx, dist, weights, energies)


def _results(state, scores, idx, dist, weights, energies) -> list[list[SearchResult]]:
    s_l, i_l, d_l = scores.tolist(), idx.tolist(), dist.tolist()
    hit = sorted({i for row in i_l for i in row if i >= 0})
    if not hit:
        return [[] for _ in i_l]
    hit_t = torch.tensor(hit, dtype=torch.long, device=state.device)
    w_of = dict(zip(hit, weights[hit_t].tolist()))
    dep_of = dict(zip(hit, state.depth[hit_t].tolist()))
    energy_of = None if energies is None else dict(zip(hit, energies[hit_t].tolist()))
    rec_of, inf = dict(zip(hit, state.records.at_rows(hit))), -math.inf
    # tolist() gave Python floats: the results take them as they are
    return [[SearchResult(rec_of[i], s, d, w_of[i], dep_of[i], None if energy_of is None else energy_of[i])
             for s, i, d in zip(s_row, i_row, d_row) if i >= 0 and s != inf]
            for s_row, i_row, d_row in zip(s_l, i_l, d_l)]
