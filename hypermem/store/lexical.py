r"""The lexical side of the hybrid search: BM25 over a store's texts, kept in step with it.

With ``hybrid = λ > 0`` a search ranks by

.. math::

    -d(q, m) + \text{depth\_bias}\,\text{depth}(m) + \text{time\_coef}\,\log w(m)
        + λ\Bigl(\ell(m) + ν \max\bigl(\ell(m^-), \ell(m^+)\bigr)
        + ρ\,\frac{\operatorname{bm25_F}(q, p(m))}{\max_{p'} \operatorname{bm25_F}(q, p')}\Bigr),
    \qquad \ell(m) = \frac{\operatorname{bm25}(q, m)}{\max_{m'} \operatorname{bm25}(q, m')},

the store's score plus the Okapi BM25 score of the memory's text for the query text
(:mod:`hypermem.retrieval.bm25`, Robertson & Zaragoza 2009), divided by the best BM25 score of
the query over the store so that the term lies in ``[0, λ]`` whatever the query's length: a
convex fusion of a geometric and a lexical score (Bruch, Gai & Ingber, "An Analysis of Fusion
Functions for Hybrid Retrieval", ACM TOIS 2023, found it more accurate than reciprocal-rank
fusion once its weight is tuned).  ``λ`` is in distance units: ``λ = 0.3`` lets a memory that
holds the query's rarest words most often win over one that is 0.3 closer in the ball.

**Neighbours.** ``m^-`` and ``m^+`` are the siblings just before and after ``m`` in time under
the same parent (by ``t``, in the order added where times tie; none for a root, or at either
end), so a conversation loaded out of order (a backfill, a merge) ranks as one loaded in order.
A turn answering "what did you paint?" holds none of its words, the question just before it
does, so it takes ``ν`` of its best neighbour's own term (:data:`NEIGHBOUR_SHARE`; on LoCoMo conversations 0-4 R@10 0.746 -> 0.766).

**Families.** The second term is the hierarchy's share: ``bm25_F`` scores *families*, one
document per parent memory made of its own text and its children's texts (a session and its
turns, a topic and its notes), over the corpus of families; a memory inherits ``ρ`` times its
parent's family score, normalised the same way (a root memory inherits nothing; a store
without parents ranks as without the term).  A turn that says "it was lovely" sits in the
session where the question's words were said, and ranks above an equally close turn of a
session that never mentions them: document-level evidence for passage retrieval (Callan,
"Passage-level evidence in document retrieval", SIGIR 1994).  :data:`FAMILY_SHARE` ``ρ`` is
chosen on LoCoMo conversations 0-4 with the parent's text in the family (R@10 0.666 -> 0.746);
``Lexical(family=0)`` turns it off.

:data:`HYBRID_DEFAULT` is the weight chosen on LoCoMo conversations 0-4
(``benchmarks/bench_locomo.py``); :func:`default_hybrid` turns it on for every embedder but
the hashing one, which is itself lexical (character n-grams) and keeps the seed's ranking.

The indexes are not written to files: they are a function of the texts and the parents, which
every store keeps, and :class:`Lexical` rebuilds them on the first hybrid search after loading
(and follows adds, updates, moves and removals incrementally, by the store's ``version``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from ..embed import HashingEmbedder
from ..retrieval.bm25 import BM25Index, tokenize
from .checks import check_finite

__all__ = ["FAMILY_SHARE", "HYBRID_DEFAULT", "NEIGHBOUR_SHARE", "Lexical", "default_hybrid"]

HYBRID_DEFAULT = 0.3
"""The lexical weight λ of the default hybrid search (chosen on LoCoMo conversations 0-4)."""

NEIGHBOUR_SHARE = 0.6
"""ν: the share of its best adjacent sibling's own BM25 term that a memory adds (chosen on
LoCoMo conversations 0-4)."""

FAMILY_SHARE = 1.0
"""ρ: the share of λ that a memory inherits from its parent's family score (chosen on LoCoMo
conversations 0-4)."""


def default_hybrid(embedder: Any) -> float:
    """The default ``hybrid`` of a store with ``embedder``: 0 for the hashing embedder (the
    seed's ranking), :data:`HYBRID_DEFAULT` otherwise."""
    return 0.0 if isinstance(embedder, HashingEmbedder) else HYBRID_DEFAULT


class Lexical:
    """A :class:`~hypermem.retrieval.bm25.BM25Index` of a store's texts by memory id and one
    of its families (a parent's text with its children's), synced with the store's
    :class:`~hypermem.store.state.MemoryState` before each use.

    Its settings (``tokenizer``, ``k1``, ``b``, ``family``, ``neighbour``) are saved with the store
    (``save``, ``to_json``; a durable store records those passed as ``Memory.open(...,
    lexical=Lexical(...))`` when it creates it): a built-in tokenizer by its name, a custom one
    only by name, to be passed again (:mod:`hypermem.store.lexical_settings`)."""

    def __init__(self, family: float = FAMILY_SHARE, neighbour: float = NEIGHBOUR_SHARE, k1: float = 1.2,
                 b: float = 0.75, tokenizer: Callable[[str], list[str]] = tokenize) -> None:
        k1, b = check_finite("k1", k1, lo=0.0), check_finite("b", b, lo=0.0, hi=1.0)  # saved as JSON numbers
        self.index = BM25Index(k1, b, tokenizer)
        self.families = BM25Index(k1, b, tokenizer)  # key: a parent id; its document: its text and its children's
        self.family = check_finite("family", family, lo=0.0)
        self.neighbour = check_finite("neighbour", neighbour, lo=0.0)
        self.texts: dict[str, str] = {}
        self.parents: dict[str, str | None] = {}
        self.members: dict[str, set[str]] = {}  # parent id -> its children's ids
        self.slots: dict[str, int] = {}  # parent id -> its family's slot in family_row
        self.family_row = torch.empty(0, dtype=torch.long)  # row -> its parent's slot (-1: a root)
        self.prev_row = self.next_row = torch.empty(0, dtype=torch.long)  # adjacent siblings (-1: none)
        self.version = -1
        self.mark: tuple | None = None  # how far the record table's journal was read
        self.times = torch.empty(0, dtype=torch.float64)  # each row's t at the last layout (CPU)

    def sync(self, state) -> None:
        """Index the texts added or changed since the last sync, forget the removed ones, and
        bring the families in step: a new child's text is appended to its parent's family, any
        other change rebuilds the families it touches."""
        if self.version == state.version:
            return
        ids = state.ids[: state.n]
        texts, parents = self.texts, self.parents
        table = state.records
        now_text, now_parent = table.texts, table.parents  # row-aligned with ids
        got = table.since(getattr(self, "mark", None))
        if got is not None:  # only the rows rewritten or appended since the last sync, and the removals
            rows, removed = got
            now = table.texts.many(rows)
            changed = [i for r, t in zip(rows, now) if (old := texts.get(i := ids[r])) is None
                       or old != t or parents[i] != now_parent[r]]
            gone = {i for i in removed if i in texts and i not in state.row}
        else:
            rows, removed = None, ()
            changed = [i for i, now, p in zip(ids, now_text, now_parent) if (old := texts.get(i)) is None
                       or old != now or parents[i] != p]
        fresh = [i for i in changed if i not in texts]
        if rows is None and len(texts) + len(fresh) > len(ids):
            gone = set(texts) - set(ids)
        elif rows is None:
            gone = set()
        dirty: set[str] = set()
        appended: list[tuple[str, str]] = []
        moved = False
        for i in changed:
            text, parent = state.records.text(i), state.records.parent(i)
            known = i in texts
            old, old_parent = texts.get(i), parents.get(i)
            if old is None or (old is not text and old != text):
                self.index.add(i, text)
                texts[i] = text
                if i in self.members:
                    dirty.add(i)  # a head's own text changed
            if known and old_parent is not None:
                dirty.add(old_parent)
                if old_parent != parent:
                    self.members[old_parent].discard(i)
            if parent is not None and (not known or old_parent != parent):
                self.members.setdefault(parent, set()).add(i)
                if known or parent not in self.families:
                    dirty.add(parent)
                else:
                    appended.append((parent, text))
            moved = moved or (known and old_parent != parent)
            parents[i] = parent
        for i in gone:
            self.index.remove(i)
            del texts[i]
            p = parents.pop(i)
            if p is not None and p in self.members:
                self.members[p].discard(i)
                dirty.add(p)
            if i in self.members:
                dirty.add(i)
        for p, text in appended:
            if p not in dirty:
                self.families.extend(p, text)
        for p in dirty:
            self.families.remove(p)
            kids = self.members.get(p)
            if kids and p in texts:
                self.families.add(p, texts[p])
                for c in kids:
                    self.families.extend(p, texts[c])
            else:
                self.members.pop(p, None)
        retimed = self._retimed(state, None if removed or gone else rows)  # update(t=) reorders siblings
        if removed or gone or moved or retimed or len(self.family_row) + len(fresh) != len(ids):
            self._layout(state, ids, state.children)
        elif fresh:
            self._append_layout(state, fresh)
        self.version = state.version
        self.mark = table.mark()

    def _retimed(self, state, rows: list[int] | None) -> bool:
        """Bring :attr:`times` (each row's ``t``, CPU float64) in step and say whether a row known
        before got another time.  ``rows``: the rows rewritten since the last sync (the record
        table's journal; appended rows are the tail); None: compare every row."""
        col, n, seen = state.time, state.n, len(self.times)
        if rows is None or seen > n:
            times = col[:n].detach().to("cpu", torch.float64, copy=True)
            changed = seen > n or not torch.equal(times[:seen], self.times)
            self.times = times
            return changed
        changed = False
        old = [r for r in rows if r < seen]
        if old:
            idx = torch.tensor(old, dtype=torch.long)
            now = col[idx.to(col.device)].detach().to("cpu", torch.float64)
            changed = not torch.equal(now, self.times[idx])
            self.times[idx] = now
        if n > seen:
            self.times = torch.cat([self.times, col[seen:n].detach().to("cpu", torch.float64)])
        return changed

    def _slot(self, parent: str | None) -> int:
        if parent is None:
            return -1
        return self.slots.setdefault(parent, len(self.slots))

    def _layout(self, state, ids, families) -> None:
        """``family_row``, ``prev_row`` and ``next_row`` of every row (after removals or moves):
        the children lists laid end to end, each next to the one before it in its family."""
        slots: dict[str, int] = {}
        self.slots = slots
        self.family_row = torch.tensor([-1 if p is None else slots.setdefault(p, len(slots))
                                        for p in map(self.parents.__getitem__, ids)], dtype=torch.long)
        n = len(ids)
        self.prev_row = torch.full((n,), -1, dtype=torch.long)
        self.next_row = torch.full((n,), -1, dtype=torch.long)
        row = state.row
        lists = [kids for kids in families.values() if len(kids) > 1]
        if lists:
            flat = torch.tensor([row[c] for kids in lists for c in kids], dtype=torch.long)
            fam = torch.repeat_interleave(torch.tensor([len(kids) for kids in lists]))
            flat, fam = self._by_time(flat, fam)
            same = fam[1:] == fam[:-1]  # adjacent in one family
            self.prev_row[flat[1:][same]] = flat[:-1][same]
            self.next_row[flat[:-1][same]] = flat[1:][same]

    def _append_layout(self, state, fresh: list[str]) -> None:
        """The layout extended by rows appended at the end (``fresh``, in row order)."""
        self.family_row = torch.cat([self.family_row, torch.tensor([self._slot(self.parents[i]) for i in fresh],
                                                                   dtype=torch.long)])
        extra = torch.full((len(fresh),), -1, dtype=torch.long)
        self.prev_row, self.next_row = torch.cat([self.prev_row, extra]), torch.cat([self.next_row, extra])
        for p in {self.parents[i] for i in fresh} - {None}:
            self._link_siblings(state, p)

    def _link_siblings(self, state, parent: str) -> None:
        kids = state.children.get(parent, ())
        if len(kids) > 1:
            rows = self._by_time(torch.tensor([state.row[c] for c in kids], dtype=torch.long))[0]
            self.prev_row[rows[1:]] = rows[:-1]
            self.next_row[rows[:-1]] = rows[1:]

    def _by_time(self, rows: torch.Tensor, fam: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """``rows`` (children lists laid end to end, family ``fam``) in time order within each
        family: two stable sorts, so the order added breaks ties of time."""
        order = torch.sort(self.times[rows], stable=True).indices
        fam = torch.zeros_like(rows) if fam is None else fam
        order = order[torch.sort(fam[order], stable=True).indices]
        return rows[order], fam[order]

    def term(self, state, query: str, weight: float) -> torch.Tensor:
        """The lexical term of every row for ``query`` (float64 ``(n,)``, on the store's
        device; the module docstring's formula); zeros when no memory holds a query word."""
        self.sync(state)
        out = torch.zeros(state.n, dtype=torch.float64)
        scores = self.index.scores(query)
        if not scores:
            return out.to(state.device)
        best = max(scores.values())
        if best > 0:
            rows = torch.tensor([state.row[i] for i in scores], dtype=torch.long)
            out[rows] = torch.tensor(list(scores.values()), dtype=torch.float64) * (weight / best)
        if self.neighbour > 0:
            padded = torch.cat([out, out.new_zeros(1)])  # row -1 reads the 0 at the end
            out = out + self.neighbour * torch.maximum(padded[self.prev_row], padded[self.next_row])
        fam_scores = self.families.scores(query) if self.family > 0 else {}
        top = max(fam_scores.values(), default=0.0)
        if top > 0:
            fam = torch.zeros(len(self.slots) + 1, dtype=torch.float64)  # the last slot: roots (-1), 0
            slots = [self.slots[p] for p in fam_scores]
            fam[slots] = torch.tensor(list(fam_scores.values()), dtype=torch.float64) * (weight * self.family / top)
            out += fam[self.family_row]
        return out.to(state.device)
