r"""Evaluating a hierarchy encoder: HiT's F1 protocol and parent ranking for unseen texts.

**F1 at 1 positive : 10 negatives** (He et al., "Language Models as Hierarchy Encoders",
NeurIPS 2024, sec. 4.2): every pair ``(c, p)`` is scored by the encoder's subsumption score
``s = -(d(c, p) + lambda (h(p) - h(c)))``; the centripetal weight ``lambda`` (a grid, HiT's
0.0-4.9 by 0.1) and the threshold are chosen on validation pairs to maximise F1 -- the
threshold exactly, over every cut of the sorted scores
(:func:`hypermem.hierarchy.evaluation.best_threshold`) -- then precision, recall and F1 are
reported once on test pairs.  The distances and norms are computed once; each ``lambda`` is a
vector operation (:func:`hypermem.geometry.subsumption.score_from_terms`).

**Ranking for unseen entities**: every known entity is a candidate parent of a held-out
text; reported are the parent MRR (the reciprocal rank of the best-ranked true direct
parent), Hits@1 / Hits@10, and the recall of the true ancestors in the top 10 by hop
distance (1, 2, 3-4, 5+), each averaged over the texts that have such ancestors.

A *scorer* is anything with ``encode(texts) -> (n, d)`` and ``score_terms(child, parent) ->
(dist, h_child, h_parent)``: a :class:`~hypermem.embed.HierarchyEncoder`, or
:class:`CosineScorer`, the pre-trained baseline (``dist = -cos``, no norm term).
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import torch

from ..geometry.subsumption import broadcast_inner, score_from_terms
from .evaluation import best_threshold, f1_at

__all__ = ["LAMBDAS", "CosineScorer", "PairTerms", "OperatingPoint", "encode_entities", "pair_terms",
           "choose_operating_point", "f1_report", "rank_parents", "HOP_BUCKETS", "ranking_sample",
           "choose_ranking_lambda", "CachedScorer"]

LAMBDAS = tuple(round(0.1 * i, 1) for i in range(50))
"""HiT's grid of centripetal weights."""

HOP_BUCKETS = ((1, 1), (2, 2), (3, 4), (5, 10**9))


class CosineScorer:
    """A plain sentence embedder scored by cosine similarity: ``s(c, p) = cos(c, p)``
    (``dist = -cos``, both norms 0, so ``lambda`` does nothing).  ``embedder`` is any
    :class:`~hypermem.embed.Embedder`; its vectors are L2-normalised here."""

    def __init__(self, embedder) -> None:
        self.embedder = embedder

    def encode(self, texts: Sequence[str]) -> torch.Tensor:
        x = torch.as_tensor(self.embedder.embed(list(texts))).float()
        return x / x.norm(dim=-1, keepdim=True).clamp_min(1e-12)

    def score_terms(self, child: torch.Tensor, parent: torch.Tensor) -> tuple[torch.Tensor, ...]:
        cos = broadcast_inner(child, parent)
        zero = torch.zeros((), dtype=cos.dtype)
        return -cos, zero, zero


def encode_entities(scorer, names: Mapping[str, str], ids: Sequence[str]) -> dict[str, torch.Tensor]:
    """``id -> point`` for the distinct ``ids`` (each text encoded once)."""
    uniq = sorted(set(ids))
    pts = scorer.encode([names[i] for i in uniq])
    return {i: pts[j] for j, i in enumerate(uniq)}


@dataclass
class PairTerms:
    """Distances and norms of labelled pairs: ``score(lambda) = -(dist + lambda (hp - hc))``."""

    dist: torch.Tensor
    hc: torch.Tensor
    hp: torch.Tensor
    labels: torch.Tensor

    def scores(self, lam: float) -> torch.Tensor:
        return score_from_terms(self.dist, self.hc, self.hp, lam)


def pair_terms(scorer, points: Mapping[str, torch.Tensor], pairs: Sequence[tuple[str, str]],
               labels: Sequence[int], chunk: int = 65536) -> PairTerms:
    """:class:`PairTerms` of ``pairs`` (ids into ``points``), in chunks."""
    if not len(pairs):
        raise ValueError("no pairs to score: the validation or test set is empty")
    parts = []
    for s in range(0, len(pairs), chunk):
        block = pairs[s:s + chunk]
        c = torch.stack([points[a] for a, _ in block])
        p = torch.stack([points[b] for _, b in block])
        d, hc, hp = scorer.score_terms(c, p)
        parts.append((d, hc.expand_as(d), hp.expand_as(d)))
    return PairTerms(*(torch.cat([x[i] for x in parts]).double().cpu() for i in range(3)),
                     labels=torch.as_tensor(labels, dtype=torch.bool))


@dataclass
class OperatingPoint:
    """A chosen ``lambda`` and threshold with the F1, precision and recall they give."""

    centripetal_weight: float
    threshold: float
    f1: float
    precision: float = float("nan")
    recall: float = float("nan")


def choose_operating_point(terms: PairTerms, lambdas: Sequence[float] = LAMBDAS) -> OperatingPoint:
    """The ``lambda`` and threshold of best F1 on ``terms`` (validation pairs)."""
    best = None
    for lam in lambdas:
        s = terms.scores(lam)
        t, f1 = best_threshold(-s, terms.labels)
        if best is None or f1 > best.f1 + 1e-12:
            best = OperatingPoint(float(lam), -t, f1)
    f, p, r = f1_at(-terms.scores(best.centripetal_weight), terms.labels, -best.threshold)
    return OperatingPoint(best.centripetal_weight, best.threshold, f, p, r)


def f1_report(terms: PairTerms, point: OperatingPoint) -> OperatingPoint:
    """F1, precision and recall of ``terms`` (test pairs) at a chosen operating point."""
    f, p, r = f1_at(-terms.scores(point.centripetal_weight), terms.labels, -point.threshold)
    return OperatingPoint(point.centripetal_weight, point.threshold, f, p, r)


def rank_parents(scorer, names: Mapping[str, str], queries: Sequence[str], candidates: Sequence[str],
                 parents: Mapping[str, Sequence[str]], ancestors_by_hop: Mapping[str, Mapping[str, int]],
                 lambdas: Sequence[float] = (0.0,), k: int = 10, chunk: int = 64,
                 candidate_points: torch.Tensor | None = None) -> dict[float, dict[str, float]]:
    """Rank every candidate as a parent of each query text, for each ``lambda``.

    ``parents[q]``: the true direct parents of ``q`` (ids among ``candidates``);
    ``ancestors_by_hop[q]``: ``ancestor -> hops``.  Returns ``lambda -> metrics`` with ``mrr``,
    ``hits@1``, ``hits@{k}`` and ``anc@{k}/hop=...`` recalls.  The distances and norms of a
    chunk of queries are computed once for all the ``lambdas``."""
    cand_pts = scorer.encode([names[c] for c in candidates]) if candidate_points is None else candidate_points
    q_pts = scorer.encode([names[q] for q in queries])
    index = {c: i for i, c in enumerate(candidates)}
    lams = [float(lam) for lam in lambdas]
    keys = [f"anc@{k}/hop={_bucket(b)}" for b in HOP_BUCKETS]
    rr: dict[float, list[float]] = {lam: [] for lam in lams}
    h1: dict[float, list[float]] = {lam: [] for lam in lams}
    hk: dict[float, list[float]] = {lam: [] for lam in lams}
    rec: dict[float, dict[str, list[float]]] = {lam: {key: [] for key in keys} for lam in lams}
    for s in range(0, len(queries), chunk):
        qs = queries[s:s + chunk]
        d, hc, hp = scorer.score_terms(q_pts[s:s + chunk].unsqueeze(1), cand_pts.unsqueeze(0))
        true = [[index[p] for p in parents.get(q, ()) if p in index] for q in qs]
        want = [[[a for a, hop in ancestors_by_hop.get(q, {}).items() if b[0] <= hop <= b[1] and a in index]
                 for b in HOP_BUCKETS] for q in qs]
        for lam in lams:
            scores = score_from_terms(d, hc, hp, lam)
            top = scores.topk(min(k, scores.shape[1]), dim=1).indices
            for row in range(len(qs)):
                if true[row]:
                    best = scores[row, true[row]].max()
                    rank = int((scores[row] > best).sum()) + 1
                    rr[lam].append(1.0 / rank)
                    h1[lam].append(float(rank <= 1))
                    hk[lam].append(float(rank <= k))
                got = {candidates[j] for j in top[row].tolist()}
                for key, w in zip(keys, want[row]):
                    if w:
                        rec[lam][key].append(sum(a in got for a in w) / len(w))
    out: dict[float, dict[str, float]] = {}
    for lam in lams:
        m = {"mrr": _mean(rr[lam]), "hits@1": _mean(h1[lam]), f"hits@{k}": _mean(hk[lam]),
             "queries": float(len(rr[lam]))}
        m.update({key: _mean(v) for key, v in rec[lam].items()})
        out[lam] = m
    return out


RANKING_LAMBDAS = (0.0, 0.25, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0)
"""The grid :func:`choose_ranking_lambda` searches."""


def ranking_sample(names: Mapping[str, str], edges: Sequence[tuple[str, str]], *, candidates: int = 5000,
                   queries: int = 500, seed: int = 0) -> tuple[list[str], list[str], dict[str, list[str]]]:
    """``(children, candidates, parents)`` that :func:`choose_ranking_lambda` ranks: at most
    ``queries`` children of ``edges``, their true parents and a sample of at most ``candidates``
    other entities (the children left out), and ``child -> its parents``."""
    rng = random.Random(seed)
    parents: dict[str, list[str]] = {}
    for c, p in edges:
        parents.setdefault(c, []).append(p)
    kids = sorted(parents)
    if len(kids) > queries:
        kids = sorted(rng.sample(kids, queries))
    true = {p for c in kids for p in parents[c]}
    left_out = set(parents)
    pool = sorted(e for e in names if e not in left_out and e not in true)
    cands = sorted(true - left_out) + (rng.sample(pool, min(candidates, len(pool))) if pool else [])
    return kids, cands, parents


def choose_ranking_lambda(scorer, names: Mapping[str, str], edges: Sequence[tuple[str, str]], *,
                          candidates: int = 5000, queries: int = 500, seed: int = 0,
                          lambdas: Sequence[float] = RANKING_LAMBDAS) -> tuple[float | None, dict[float, float]]:
    """The ``lambda`` that ranks each validation child's true parents highest among the
    entities, the way a store ranks the parents of a new text: parent MRR (:func:`rank_parents`)
    over ``lambdas``, for at most ``queries`` children of ``edges`` against their true parents
    and a sample of at most ``candidates`` other entities (the children left out:
    :func:`ranking_sample`).  Returns the best ``lambda`` (ties: the smallest) and the MRR at
    each; ``(None, {})`` when no child has a parent to rank."""
    kids, cands, parents = ranking_sample(names, edges, candidates=candidates, queries=queries, seed=seed)
    ranked = rank_parents(scorer, names, kids, cands, parents, {}, lambdas) if kids else {}
    mrr = {lam: m["mrr"] for lam, m in ranked.items() if m["queries"] > 0}
    if not mrr:  # no child with a parent to rank (every parent is a validation child too)
        return None, {}
    return max(mrr, key=lambda lam: (mrr[lam], -lam)), mrr


class CachedScorer:
    """A scorer that encodes each distinct text once: :meth:`encode` takes the points of texts
    already in ``points`` (``text -> point``) and encodes the others in one call of the wrapped
    scorer, adding them to ``points``; :meth:`score_terms` is the wrapped scorer's.  A
    validation's points then serve the ranking ``lambda``'s choice on the same weights
    (:func:`~hypermem.hierarchy.encoder_training.fit_hierarchy_encoder`)."""

    def __init__(self, scorer, points: dict[str, torch.Tensor] | None = None) -> None:
        self.scorer = scorer
        self.points: dict[str, torch.Tensor] = {} if points is None else points

    def encode(self, texts: Sequence[str]) -> torch.Tensor:
        texts = list(texts)
        missing = list(dict.fromkeys(t for t in texts if t not in self.points))
        if missing:
            self.points.update(zip(missing, self.scorer.encode(missing)))
        if not texts:
            return self.scorer.encode([])
        return torch.stack([self.points[t] for t in texts])

    def score_terms(self, child: torch.Tensor, parent: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return self.scorer.score_terms(child, parent)


def _bucket(b: tuple[int, int]) -> str:
    return str(b[0]) if b[0] == b[1] else (f"{b[0]}+" if b[1] > 1000 else f"{b[0]}-{b[1]}")


def _mean(v: list[float]) -> float:
    return sum(v) / len(v) if v else math.nan
