r"""Where a text belongs: suggested parents, ``add(text, parent="auto")`` and the ancestors of a text no one filed.

With a hierarchy encoder as the store's embedder (:mod:`hypermem.store.encoder_points`), every
memory ``p`` has the encoder's vector ``x_p`` (the ``embedding`` column: the ball point, or
the twin's vector in R^d), and "``text`` is-a ``p``" is scored by the encoder's subsumption
score (HiT, He et al. NeurIPS 2024, eq. 5; :mod:`hypermem.geometry.subsumption`)::

    s(t, p) = -( d(x_t, x_p) + lambda (h(x_p) - h(x_t)) ),   h(x) = d(0, x)

with the ball's geodesic distance (or the Euclidean one for the twin) and the ``lambda``
chosen on validation.  A suggestion's :class:`~hypermem.store.records.SearchResult` has
``distance = -s`` and ``score = s + time_coef * log(time_weight)`` (the store's time term, as
in :meth:`~hypermem.store.Memory.search`; 0 under ``NoDecay``).

* :meth:`Suggester.suggest_parents`: the ``k`` memories with the best score, exact over all
  memories (filters, ``at_time``, ``valid_only`` as in ``search``); ``use_index=True`` scores
  only the ``k * oversample`` nearest memories of the store's own nearest search instead.
* **A store that holds a tree** (a memory has a parent, declared or auto-chosen) ranks by the
  vote of the text's nearest memories and their ancestors instead (``by="auto"``, the
  default; :mod:`hypermem.store.vote`; in the suggestions and ``parent="auto"`` plus the
  text's own evidence: the memories it names, its cosine, the candidates' children,
  :mod:`hypermem.store.parent_choice`): where the neighbours were filed is better evidence
  than the pair score alone (benchmarks/RESULTS.md).  A voted suggestion has ``score`` = that
  ranking's value (the time factor inside the vote's weights) and ``distance = -s`` of the pair;
  ``by="subsumption"`` or ``by="vote"`` asks for one ranking whatever the store holds.
* ``search(text, mode="ancestors")`` without a ``root``: the same ranking (the subsumption
  score is what the encoder's validation chose its ``lambda`` and threshold on; the entailment
  cones of the ball are not trained by the encoder).
* ``add(text, parent="auto")`` / ``add_many`` items with ``"parent": "auto"``: the same
  candidates and the decision of :mod:`hypermem.store.auto_parent`.

**A text is not its own parent.**  A memory whose text is the query's text, exactly, is no
candidate of any of these (its point is the text's own: the pair score ranks it near the top);
it still votes, for where that text was filed.  Only the candidates are compared, never every
memory: the few a ranking returns and those the vote names (:func:`first_other_texts`).  A
query given as a vector excludes nothing.

The ranking uses the encoder's ``ranking_lambda`` (the ``lambda`` chosen on validation for
ranking parents; the centripetal weight when none was chosen); the decision to attach
uses the pair score that the threshold was chosen on.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

import numpy as np
import torch

from ..embed import check_texts, embed_checked
from ..embed.reranker import PlacementReranker
from ..temporal.clock import to_seconds
from . import nearest_floor as nf
from .as_of import keep_at
from .checks import Filter
from .encoder_points import hierarchy_encoder, is_hierarchy_encoder, places_points
from .mentions import Mentions
from .parent_choice import placement_order, reranked
from .records import SearchResult
from .subsumption_scan import SubsumptionScan
from .vote import FILED_MIN, VOTE_K, below_counts, chance_share, filed_share, neighbour_vote

__all__ = ["BLOCK", "Suggester", "cosines", "decision_scores", "first_other_texts"]

BLOCK = 256
"""Queries (and auto-placed items, store.auto_parent) scored per block."""
ANCESTORS_VOTE: dict = {}
"""How the root-free ancestors search votes, as :func:`~hypermem.store.vote.neighbour_vote`'s
keywords (``alpha``, ``decay``, ``self_weight``, ``hops``) and ``"chance"``: the weight of each
candidate's chance share subtracted (a parent's choice subtracts all of it).  Empty: the
vote's defaults and the plain share, the setting the measured alternatives did not beat on
every hierarchy (benchmarks/RESULTS.md, "walk 69")."""
BY = ("auto", "vote", "subsumption")
"""How suggestions rank: the neighbours' vote when the store holds a tree (``"auto"``), or always one of the two."""


def decision_scores(enc, x: torch.Tensor, P: torch.Tensor, scan: SubsumptionScan) -> torch.Tensor:
    """The score ``parent="auto"`` compares with the encoder's threshold, of text point ``x``
    under each candidate of ``P`` ``(m, d)``: the pair score at the ``lambda`` the threshold was
    chosen with (``centripetal_weight``; the ranking's scan when the two lambdas are the same),
    ``(m,)`` float64."""
    lam = getattr(enc, "centripetal_weight", None)
    x, P = x.to(torch.float64), P.to(torch.float64)
    if lam is None or getattr(enc, "ranking_lambda", lam) == lam:
        return scan.scores(enc, x[None], P)[0]
    return enc.subsumption_scores(x[None], P, centripetal_weight=lam).to(torch.float64).reshape(-1)


def first_other_texts(order: torch.Tensor, text_at, text: str | None, k: int) -> torch.Tensor:
    """The first ``k`` entries of ``order`` (candidates, the best first) whose ``text_at(entry)``
    is not ``text`` (module docstring: a text is not its own parent); ``text`` None: the first
    ``k``.  Reads the texts of a head of ``order`` only, twice as long while too few remain."""
    if text is None or order.numel() == 0:
        return order[:k]
    m = k
    while True:
        head = order[:m]
        keep = [text_at(c) != text for c in head.tolist()]
        if sum(keep) >= k or m >= order.numel():
            return head[torch.tensor(keep, dtype=torch.bool)][:k]
        m *= 2


def cosines(X: torch.Tensor, E: torch.Tensor, norms: torch.Tensor) -> torch.Tensor:
    """``cos(x_b, e_j)`` ``(B, m)`` float64 of queries ``X`` ``(B, d)`` and rows ``E`` ``(m, d)``
    whose norms are ``norms`` (a zero vector has cosine 0)."""
    X = X.to(torch.float64)
    return (X @ E.to(torch.float64).T) / (X.norm(dim=1, keepdim=True) * norms[None]).clamp_min(1e-300)


class Suggester:
    """The hierarchy encoder's side of a store (module docstring): ``Memory.suggest_parents``,
    the root-free ancestors search and ``parent="auto"``."""

    def __init__(self, memory):
        self.memory = memory
        self.scan = SubsumptionScan()
        """The stored vectors' terms of the score, kept until the store changes (store.subsumption_scan)."""
        self.mentions = Mentions()
        """The memories' titles, for the vote's mention term (store.mentions)."""
        self.norm_key: tuple | None = None
        self.chance_key: tuple | None = None
        self.chance_cache: dict[str, list[int]] = {}
        self.norm_cache = torch.zeros(0, dtype=torch.float64)
        self.floor_key: tuple | None = None
        self.floor_value = -math.inf
        self.filed_key: tuple | None = None
        self.filed_cache: torch.Tensor | None = None
        """The filed memories' mask (:meth:`filed_mask`)."""
        self.reranker = None
        """The placement reranker (``Memory.reranker``; :mod:`hypermem.embed.reranker`), or None."""

    def set_reranker(self, reranker) -> None:
        """Set :attr:`reranker`: None or a :class:`~hypermem.embed.reranker.PlacementReranker`
        (whose constructor checked its weight, candidates and rule)."""
        if reranker is not None and not isinstance(reranker, PlacementReranker):
            raise TypeError(f"reranker must be a PlacementReranker or None, got {type(reranker).__name__}")
        self.reranker = reranker

    def reranker_record(self) -> dict:
        """What an auto-placed memory's meta keeps of the reranker that chose its parent."""
        return {"weight": self.reranker.weight, "rule": dict(self.reranker.rule), "checksum": self.reranker.checksum}

    # ------------------------------------------------------------------ queries
    def vectors(self, queries: Sequence[Any]) -> torch.Tensor:
        """The encoder's vectors ``(B, dim)`` float64 of texts, or of given vectors (the
        encoder's output for a text: the ball point, or the twin's vector)."""
        enc, dim = self.memory.embedder, self.memory.dim
        texts = [q for q in queries if isinstance(q, str)]
        if texts:
            check_texts(texts, what="query")
            emb = iter(embed_checked(enc, texts))
        out = []
        for q in queries:
            if isinstance(q, str):
                out.append(next(emb))
                continue
            if q is None:
                raise ValueError("suggestions and ancestors without root= need a query (a text)")
            if isinstance(q, (list, tuple)) and any(isinstance(e, str) for e in q):
                raise TypeError(f"a query is one text or one vector, got a {type(q).__name__} of texts: "
                                "call once a text (or use search_batch for many queries)")
            v = torch.as_tensor(q).detach().to("cpu", torch.float64)
            if v.shape != (dim,) or not bool(torch.isfinite(v).all()):
                raise ValueError(f"a query must be text or a finite vector of shape ({dim},), got shape "
                                 f"{tuple(v.shape)}")
            out.append(v)
        return torch.stack(out)

    def suggest_parents(self, text: Any, k: int = 5, *, filters: Filter = None, at_time: datetime | None = None,
                        valid_only: bool = False, use_index: bool = False, oversample: int = 8,
                        touch: bool = False, by: str = "auto") -> list[SearchResult]:
        """The ``k`` memories most likely to subsume ``text`` (the best first): the store's
        hierarchy encoder's subsumption score plus the time term, exact over all memories
        (module docstring).  ``filters``, ``at_time`` and ``valid_only`` as in
        :meth:`~hypermem.store.Memory.search`; ``use_index=True`` re-scores only the
        ``k * oversample`` memories the store's nearest search returns.  ``text`` may be
        the encoder's vector of a text.  ``by="vote"`` ranks by the vote of the text's nearest
        memories and their ancestors instead (:mod:`hypermem.store.vote`; ``score`` is the vote
        share, ``distance`` still ``-s``), ``"subsumption"`` by the score alone, ``"auto"`` (the
        default) votes when the store holds a tree (a memory has a parent).  The vote needs no
        hierarchy encoder: with any embedder a store that holds a tree votes (``distance`` is
        then ``1 - cos``); the pair score, and so a store without a tree, needs one (else a
        ``ValueError``).  A memory whose text is ``text``, exactly, is never suggested (a text is
        not its own parent; module docstring)."""
        return self.rank([text], k, filters, at_time, valid_only, use_index, oversample, touch, by)[0]

    def rank(self, queries: Sequence[Any], k: int, filters: Filter = None, at_time: datetime | None = None,
             valid_only: bool = False, use_index: bool = False, oversample: int = 8,
             touch: bool = False, by: str = "auto", parents: bool = True) -> list[list[SearchResult]]:
        """:meth:`suggest_parents` for each query (one encoder call); ``parents=False`` leaves
        out the text's evidence (:mod:`hypermem.store.parent_choice`), as the root-free ancestors
        search does: it lifts a text's parents and pushes its farther ancestors down."""
        if by not in BY:
            raise ValueError(f"by must be one of {', '.join(map(repr, BY))}, got {by!r}")
        enc = self.memory.embedder
        voting = by == "vote" or (by == "auto" and self.holds_tree())
        fallback = by == "auto" and is_hierarchy_encoder(enc)  # the pair score where the neighbours are unfiled
        if not voting:  # the pair score is the encoder's; the vote needs only the embedding column
            enc = hierarchy_encoder(self.memory, "suggest_parents() and search(mode='ancestors') without root= in a "
                                                 "store that holds no tree (no memory has a parent)")
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise ValueError(f"k must be an integer >= 1, got {k!r}")
        if isinstance(oversample, bool) or not isinstance(oversample, int) or oversample < 1:
            raise ValueError(f"oversample must be an integer >= 1, got {oversample!r}")
        self.memory.refresh()
        X = self.vectors(queries)
        pools = None
        if use_index:
            qs = list(X) if places_points(enc) else list(queries)  # a ball store's vector is its point: no re-encoding
            pools = [[h.id for h in hits] for hits in self.memory.search_batch(
                qs, k=k * oversample, filters=filters, at_time=at_time, valid_only=valid_only,
                use_index=True, metric="shell", hybrid=0.0, touch=False)]
        st = self.memory.state
        with st.lock:
            if st.n == 0:
                return [[] for _ in queries]
            k = min(k, st.n)  # no result list longer than the store
            rows = self.candidates(filters, at_time, valid_only)
            weights = self.memory.searcher.weights(at_time).to("cpu", torch.float64)
            time_term = self.memory.time_coef * torch.log(weights)
            out = []
            if voting:
                for b0 in range(0, X.shape[0], BLOCK):
                    near = None if pools is not None or (rows is not None and rows.numel() == 0) else \
                        self.neighbours(X[b0: b0 + BLOCK], rows, VOTE_K)
                    for b in range(b0, min(b0 + BLOCK, X.shape[0])):
                        r = rows if pools is None else torch.tensor(sorted(st.row[i] for i in pools[b]),
                                                                    dtype=torch.long)
                        nb = None if near is None else (near[0][b - b0: b - b0 + 1], near[1][b - b0: b - b0 + 1])
                        own = queries[b] if isinstance(queries[b], str) else None   # never its own parent
                        got = self._voted(enc, X[b], r, rows, weights, k, nb, FILED_MIN if fallback else 0.0,
                                          own if parents else None, own=own,
                                          vote=None if parents else ANCESTORS_VOTE)
                        if got is None:  # a neighbourhood of roots: the pair score ranks (module docstring)
                            got = self._top(self.stored_scores(enc, X[b: b + 1], r)[0], r, weights, time_term, k,
                                            own)
                        out.append(got)
                if touch:
                    self.memory.touch([h.id for res in out for h in res])
                return out
            for b0 in range(0, X.shape[0], BLOCK):
                if pools is None:
                    S = self.stored_scores(enc, X[b0: b0 + BLOCK], rows)
                    out += [self._top(S[j], rows, weights, time_term, k, _text(queries[b0 + j]))
                            for j in range(S.shape[0])]
                    continue
                for b in range(b0, min(b0 + BLOCK, X.shape[0])):
                    r = torch.tensor(sorted(st.row[i] for i in pools[b]), dtype=torch.long)
                    out.append(self._top(self.stored_scores(enc, X[b: b + 1], r)[0], r, weights, time_term, k,
                                         _text(queries[b])))
            if touch:
                self.memory.touch([h.id for res in out for h in res])
            return out

    def candidates(self, filters: Filter, at_time: datetime | None, valid_only: bool) -> torch.Tensor | None:
        """Rows (CPU, ascending) that pass ``filters``, exist at an explicit ``at_time`` and,
        with ``valid_only``, are valid then (the rules of ``search``); None: every row."""
        if filters is None and at_time is None and not valid_only:
            return None
        st = self.memory.state
        n = st.n
        keep = torch.ones(n, dtype=torch.bool)
        if at_time is not None or valid_only:
            now = to_seconds(self.memory.searcher.now(at_time))
            keep &= keep_at(st, now, at_time is not None, valid_only).cpu()
        if isinstance(filters, Mapping):   # by value groups (hypermem.store.meta_columns)
            keep &= self.memory.searcher.meta.mask(st.records, filters)
        elif callable(filters):
            keep &= torch.tensor([bool(filters(rec)) for rec in st.records.values()], dtype=torch.bool)
        elif filters is not None:
            raise TypeError(f"filters must be a dict or a callable, got {type(filters).__name__}")
        return keep.nonzero().squeeze(1)

    def holds_tree(self) -> bool:
        """Whether a stored memory has a parent: the case for the neighbours' vote."""
        return bool(self.memory.state.children)

    def places_text(self) -> bool:
        """Whether this store ranks the ancestors of an unfiled text (``mode="ancestors"``
        without ``root``, ``parent="auto"``): with a hierarchy encoder, or once it holds a tree."""
        return is_hierarchy_encoder(self.memory.embedder) or self.holds_tree()

    def parent_of(self, id: str) -> str | None:
        """A stored memory's parent id (None: a root)."""
        return self.memory.state.records.parent(id)

    def below(self, mid: str) -> list[int]:
        """A stored memory's :func:`~hypermem.store.vote.below_counts`, kept until the store changes."""
        st = self.memory.state
        key = (id(st), st.version, st.n)
        if key != self.chance_key:
            self.chance_cache, self.chance_key = {}, key
        got = self.chance_cache.get(mid)
        if got is None:
            got = self.chance_cache[mid] = below_counts(mid, lambda p: st.children.get(p, ()))
        return got

    def chance_of(self, mid: str) -> float:
        """A stored memory's chance share of the vote (:func:`~hypermem.store.vote.chance_share`)."""
        return chance_share(self.below(mid), self.memory.state.n)

    def norms(self) -> torch.Tensor:
        """``|x_p|`` of the stored embeddings (float64, CPU), kept until the store changes."""
        st = self.memory.state
        key = (id(st), st.version, st.n)
        if key != self.norm_key:
            self.norm_cache = torch.linalg.vector_norm(st.embedding_column().to(torch.float64), dim=1)
            self.norm_key = key
        return self.norm_cache

    def neighbours(self, X: torch.Tensor, rows: torch.Tensor | None, kn: int) -> tuple[torch.Tensor, torch.Tensor]:
        """``(cosines, rows)`` of the ``kn`` stored memories (among ``rows``; None: all) nearest to
        each query of ``X`` ``(B, d)`` by the cosine of the embedding column, each ``(B, <= kn)``."""
        st = self.memory.state
        norms = self.norms()
        E, nrm = (st.embedding_column(), norms) if rows is None else (st.embedding_column()[rows], norms[rows])
        cos = cosines(X, E, nrm)
        top = torch.topk(cos, min(kn, cos.shape[1]), dim=1)
        at = top.indices if rows is None else rows[top.indices]
        return top.values, at

    def filed_mask(self) -> torch.Tensor | None:
        """Which stored memories are in the tree (a parent or children), a bool ``(n,)`` kept until
        the store changes; None when it holds no tree (then every memory counts: store.nearest_floor)."""
        st = self.memory.state
        key = (id(st), st.version, st.n)
        if key != self.filed_key:
            mask = torch.from_numpy(np.fromiter((p is not None for p in st.records.parents), bool, st.n))
            kids = [st.row[p] for p in st.children if p in st.row]
            if kids:
                mask[kids] = True
            self.filed_cache = mask if bool(mask.any()) else None
            self.filed_key = key
        return self.filed_cache

    def floor(self) -> float:
        """The store's nearest-neighbour floor for ``parent="auto"`` over its filed memories
        (:mod:`hypermem.store.nearest_floor`), kept while their number stays within 10% of the
        number it was read at."""
        st = self.memory.state
        mask = self.filed_mask()
        filed = None if mask is None else mask.nonzero().squeeze(1)
        n = st.n if filed is None else int(filed.numel())
        key = (id(st), nf.FLOOR_QUANTILE, nf.FLOOR_SAMPLE, filed is None)
        if key != (self.floor_key or (None,))[:4] or nf.stale(n, self.floor_key[4]):
            E, nrm = st.embedding_column(), self.norms()

            def nearest_of(pos: torch.Tensor) -> torch.Tensor:   # leave-one-out, over the filed memories
                rows = pos if filed is None else filed[pos]
                cos = cosines(E[rows.to(E.device)], E, nrm.to(E.device))
                if mask is not None:
                    cos[:, ~mask.to(cos.device)] = -math.inf
                cos[torch.arange(len(rows)), rows.to(cos.device)] = -math.inf
                return cos.max(dim=1).values

            self.floor_value = nf.nearest_floor(n, nearest_of)
            self.floor_key = (*key, n)
        return self.floor_value

    def nearest_filed(self, X: torch.Tensor) -> list[float]:
        """Each query's cosine with its nearest filed memory (every memory without a tree), the
        statistic the floor bounds; ``-inf`` in an empty store."""
        st = self.memory.state
        if not st.n:
            return [-math.inf] * X.shape[0]
        cos = cosines(X, st.embedding_column(), self.norms())
        mask = self.filed_mask()
        if mask is not None:
            cos[:, ~mask.to(cos.device)] = -math.inf
        return cos.max(dim=1).values.tolist()

    def _voted(self, enc, x: torch.Tensor, rows: torch.Tensor | None, allowed_rows: torch.Tensor | None,
               weights: torch.Tensor, k: int, near: tuple | None = None,
               min_filed: float = 0.0, text: str | None = None,
               own: str | None = None, vote: dict | None = None) -> list[SearchResult] | None:
        """The ``k`` best candidates of the neighbours' vote for one query ``x`` (module
        :mod:`hypermem.store.vote`): neighbours among ``rows``, candidates among ``allowed_rows``
        (None: all); ``score`` is the vote share (plus, with ``text``, the query's text when it
        is one, that text's evidence: store.parent_choice), ``distance`` the pair's ``-s``;
        ``near``: the neighbours when already found.  None when less than ``min_filed`` of the
        neighbours' weight sits under a parent (:func:`~hypermem.store.vote.filed_share`).
        ``vote``: None for a parent's choice (each candidate's share less its chance share,
        :func:`~hypermem.store.vote.chance_share`), else the root-free ancestors search's
        settings (:data:`ANCESTORS_VOTE`: the vote's keywords, and ``"chance"``, the weight of
        the chance share subtracted; 0 or absent: the plain share).
        ``own``: the query's text; a candidate of that very text is dropped (it still voted)."""
        st = self.memory.state
        if rows is not None and rows.numel() == 0:
            return []
        cos, at = self.neighbours(x[None], rows, VOTE_K) if near is None else near
        factor = weights.pow(self.memory.time_coef)
        ok = None if allowed_rows is None else set(allowed_rows.tolist())
        nb = [(st.ids[r], c, float(factor[r])) for c, r in zip(cos[0].tolist(), at[0].tolist())]
        if min_filed and filed_share(nb, self.parent_of) < min_filed:
            return None
        named = () if text is None else self.mentions.find(st, text)
        opts = dict(vote or {})
        less = opts.pop("chance", 0.0) if vote is not None else 1.0
        ranked = neighbour_vote(nb, self.parent_of, None if ok is None else (lambda i: st.row[i] in ok),
                                mentioned=named, chance=None if not less else self.chance_of if less == 1.0
                                else (lambda c: less * self.chance_of(c)), **opts)
        if own is not None:   # the voted candidates only (a few dozen), not a text per memory
            ranked = [(c, v) for c, v in ranked if st.records.text(c) != own]
        if not ranked:
            return []
        if text is not None:   # the text's own evidence (store.parent_choice)
            r = torch.tensor([st.row[i] for i, _ in ranked], dtype=torch.long)
            ranked = self.parent_order(x, ranked, self.mentions.find_first(st, text), st.embeddings_of(r),
                                       lambda c: len(st.children.get(c, ())), text,
                                       lambda c: st.records[c].text)[0]
        ranked = ranked[:k]
        r = torch.tensor([st.row[i] for i, _ in ranked], dtype=torch.long)
        dist = self.pair_distance(enc, x, r)
        depth = st.depth[r.to(st.device)].tolist()
        return [SearchResult(record=st.records[i], score=float(v), distance=float(dist[j]),
                             time_weight=float(weights[r[j]]), depth=float(depth[j]))
                for j, (i, v) in enumerate(ranked)]

    def parent_order(self, x: torch.Tensor, ranked: list[tuple[str, float]], first: list[str], P: torch.Tensor,
                     children, text: str | None = None, text_of=None) -> tuple[list[tuple[str, float]], torch.Tensor]:
        """The vote's candidates ``ranked`` re-ranked by the text's own evidence
        (:func:`~hypermem.store.parent_choice.placement_order`: ``first``, the first memory the text
        names; the cosine of the text's vector ``x`` and the candidates' ``P``; ``children(id)``),
        then, with a :attr:`reranker`, its best candidates by the reranker's reading of ``text``
        and each candidate's ``text_of(id)`` (:func:`~hypermem.store.parent_choice.reranked`);
        ``P`` in the new order."""
        P = P.to(torch.float64)
        cos = cosines(x[None], P, torch.linalg.vector_norm(P, dim=1))[0].tolist()
        rr = self.reranker if text is not None else None
        rule = {} if rr is None else {"nu": rr.rule["first"], "a": rr.rule["cos"]}   # the reranker's rule
        order = placement_order(ranked, set(first), cos, children, **rule)
        if rr is not None and order:
            head = [text_of(c) for c, _ in order[:rr.candidates]]
            ce = torch.as_tensor(rr.scores(text, head), dtype=torch.float64).reshape(-1)
            if ce.numel() != len(head) or not bool(torch.isfinite(ce).all()):
                raise ValueError(f"the reranker gave {ce.numel()} scores for {len(head)} candidates, or a non-finite "
                                 "one")
            order = reranked(order, ce.tolist(), rr.weight)
        at = {c: j for j, (c, _) in enumerate(ranked)}
        return order, P[[at[c] for c, _ in order]]

    def pair_distance(self, enc, x: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
        """A voted suggestion's ``distance``: ``-s`` of the pair under a hierarchy encoder, else
        the cosine distance ``1 - cos(x, p)``, for the stored ``rows``."""
        p = self.memory.state.embeddings_of(rows)
        if is_hierarchy_encoder(enc):
            return -self.scan.scores(enc, x[None].to(torch.float64), p)[0]
        return 1.0 - cosines(x[None], p, self.norms()[rows])[0]

    def stored_scores(self, enc, X: torch.Tensor, rows: torch.Tensor | None) -> torch.Tensor:
        """``s(x_b, p)`` of queries ``X`` against the stored ``rows`` (None: all), ``(B, m)``."""
        st = self.memory.state
        terms = self.scan.stored(st, enc)
        if rows is None:
            return self.scan.scores(enc, X, st.embedding_column(), terms)
        return self.scan.scores(enc, X, st.embedding_column()[rows], tuple(t[rows] for t in terms))

    def _top(self, s: torch.Tensor, rows: torch.Tensor | None, weights: torch.Tensor, time_term: torch.Tensor,
             k: int, own: str | None = None) -> list[SearchResult]:
        """The ``k`` best of one query's scores ``s`` over ``rows`` (None: all), with the time term;
        none whose text is ``own``, the query's (:func:`first_other_texts`)."""
        if s.numel() == 0:
            return []
        st = self.memory.state
        total = s + (time_term if rows is None else time_term[rows])
        texts = st.records.texts
        order = first_other_texts(torch.argsort(-total, stable=True), (lambda j: texts[j]) if rows is None else
                                  (lambda j: texts[int(rows[j])]), own, k)  # ties: insertion order
        at = order if rows is None else rows[order]
        depth = st.depth[at.to(st.device)].tolist()
        return [SearchResult(record=st.records[st.ids[int(r)]], score=float(total[j]), distance=-float(s[j]),
                             time_weight=float(weights[r]), depth=float(d))
                for j, r, d in zip(order.tolist(), at.tolist(), depth)]


def _text(query) -> str | None:
    """A query's text (None for a vector): what a candidate must not be (module docstring)."""
    return query if isinstance(query, str) else None
