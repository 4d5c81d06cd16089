r"""Any named hierarchy as evaluation tasks for a hierarchy encoder (HiT's protocol and more).

An :class:`EntityHierarchy` is what a user has: entity ids, a text per id, and direct
``(child, parent)`` edges (a DAG).  From it, following Hierarchy Transformers (He et al.,
"Language Models as Hierarchy Encoders", NeurIPS 2024, sec. 4.1):

* **multi-hop inference** (:func:`multi_hop_task`): train on every direct edge; validation
  and test are two disjoint slices (``eval_fraction`` each, 5%) of the *transitive* edges
  (pairs of the closure that are not direct edges), which the model must infer;
* **mixed-hop prediction** (:func:`mixed_hop_task`): direct edges split 90/5/5; validation
  and test hold their direct slice plus the same transitive slices as multi-hop;
* **unseen entities** (:func:`unseen_entity_task`, not in HiT): ``fraction`` (2%) of the
  entities are held out with every edge that touches them -- the case of a new memory's text;
  the test ranks every known entity as a parent of each held-out text.

Each positive pair ``(c, p)`` comes with ``negatives`` (10) negative parents of two kinds:
**random** (uniform over entities that are neither ``c`` nor an ancestor of ``c``) and
**hard** (``c``'s siblings -- the other children of its parents -- that are not its
ancestors, topped up with the random ones), as HiT's dataset builder does.  Everything is
seeded: the same hierarchy and seed give the same task.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from .dag import hypernym_closure

__all__ = ["EntityHierarchy", "PairSet", "EncoderTask", "multi_hop_task", "mixed_hop_task",
           "unseen_entity_task", "hop_distances", "NegativeSampler", "carve_validation"]


@dataclass
class EntityHierarchy:
    """Named entities and their direct ``(child, parent)`` edges."""

    names: dict[str, str]
    edges: list[tuple[str, str]]
    name: str = "hierarchy"

    def __post_init__(self) -> None:
        missing = sorted({e for pair in self.edges for e in pair} - set(self.names))
        if missing:
            raise ValueError(f"{len(missing)} entities of the edges have no name, e.g. {missing[:3]}")
        for c, p in self.edges:
            if c == p:
                raise ValueError(f"edge ({c!r}, {p!r}) is a self-loop")

    def __repr__(self) -> str:
        return f"EntityHierarchy({self.name!r}, entities={len(self.names)}, edges={len(self.edges)})"

    def parents(self) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {}
        for c, p in self.edges:
            out.setdefault(c, []).append(p)
        return out

    def children(self) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {}
        for c, p in self.edges:
            out.setdefault(p, []).append(c)
        return out

    def ancestors(self) -> dict[str, set[str]]:
        """Every entity's ancestors (the transitive closure of the edges; raises on a cycle)."""
        out = hypernym_closure(self.parents())
        for e in self.names:
            out.setdefault(e, set())
        return out


@dataclass
class PairSet:
    """Positive ``(child, parent)`` pairs with their random and hard negative parents."""

    positives: list[tuple[str, str]]
    random_negatives: list[list[str]]
    hard_negatives: list[list[str]]

    def __len__(self) -> int:
        return len(self.positives)

    def pairs(self, kind: str) -> tuple[list[tuple[str, str]], list[int]]:
        """Labelled pairs (1 positive : ``negatives`` negatives) of ``kind`` ``"random"`` or
        ``"hard"``: ``(pairs, labels)``."""
        negs = {"random": self.random_negatives, "hard": self.hard_negatives}[kind]
        pairs, labels = [], []
        for (c, p), ns in zip(self.positives, negs):
            pairs.append((c, p))
            labels.append(1)
            pairs.extend((c, n) for n in ns)
            labels.extend([0] * len(ns))
        return pairs, labels

    def subset(self, n: int, seed: int = 0) -> PairSet:
        """At most ``n`` positives (a seeded sample) with their negatives."""
        if n >= len(self):
            return self
        idx = sorted(random.Random(seed).sample(range(len(self)), n))
        return PairSet([self.positives[i] for i in idx], [self.random_negatives[i] for i in idx],
                       [self.hard_negatives[i] for i in idx])


@dataclass
class EncoderTask:
    """Training edges and the validation / test pairs of one task.

    ``held_out`` lists the unseen entities (unseen-entity task only; empty otherwise), and
    ``val_entities`` / ``test_entities`` split them."""

    name: str
    hierarchy: EntityHierarchy
    train_edges: list[tuple[str, str]]
    val: PairSet
    test: PairSet
    val_entities: list[str] = field(default_factory=list)
    test_entities: list[str] = field(default_factory=list)

    def __repr__(self) -> str:
        return (f"EncoderTask({self.name!r}, train_edges={len(self.train_edges)}, val={len(self.val)}, "
                f"test={len(self.test)}, held_out={len(self.val_entities) + len(self.test_entities)})")


class NegativeSampler:
    """Seeded negative parents for a child: random non-ancestors, hard = siblings first."""

    def __init__(self, h: EntityHierarchy, negatives: int, seed: int):
        self.ids = sorted(h.names)
        self.anc = h.ancestors()
        self.par = h.parents()
        self.kids = h.children()
        self.k = int(negatives)
        self.rng = random.Random(seed)

    def random(self, child: str, exclude: set[str] | None = None) -> list[str]:
        bad = self.anc[child] | {child} | (exclude or set())
        free = len(self.ids) - len(bad)
        if free < self.k:
            fix = f"lower the negatives= setting to at most {free}" if free else "add entities"
            raise ValueError(f"the hierarchy has too few entities for {self.k} negatives of {child!r}: only {free} "
                             f"of its {len(self.ids)} entities are neither {child!r} nor an ancestor of it"
                             f"{' nor held out' if exclude else ''}; {fix}")
        out: list[str] = []
        seen: set[str] = set()
        while len(out) < self.k:
            e = self.ids[self.rng.randrange(len(self.ids))]
            if e not in bad and e not in seen:
                seen.add(e)
                out.append(e)
        return out

    def hard(self, child: str, random_ones: list[str]) -> list[str]:
        sib = sorted({s for p in self.par.get(child, ()) for s in self.kids.get(p, ())} - self.anc[child] - {child})
        self.rng.shuffle(sib)
        out = sib[: self.k]
        out += [e for e in random_ones if e not in out][: self.k - len(out)]
        return out

    def pair_set(self, positives: Sequence[tuple[str, str]]) -> PairSet:
        rnd, hard = [], []
        for c, _ in positives:
            r = self.random(c)
            rnd.append(r)
            hard.append(self.hard(c, r))
        return PairSet(list(positives), rnd, hard)


def carve_validation(edges: Sequence[tuple[str, str]], seed: int = 0, fraction: float = 0.05,
                     most: int = 2000) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """``(train, validation)``: a seeded ``fraction`` of ``edges`` (at least 1, at most ``most``)
    held out for validation, the rest for training."""
    shuffled = sorted(edges)
    random.Random(seed).shuffle(shuffled)
    n = min(most, max(1, int(len(shuffled) * fraction)))
    return shuffled[n:], shuffled[:n]


def _transitive(h: EntityHierarchy) -> list[tuple[str, str]]:
    direct = set(h.edges)
    return sorted((c, a) for c, anc in h.ancestors().items() for a in anc if (c, a) not in direct)


def _slices(items: list, fraction: float, rng: random.Random) -> tuple[list, list, list]:
    items = list(items)
    rng.shuffle(items)
    n = int(round(len(items) * fraction))
    return items[2 * n:], items[:n], items[n:2 * n]


def multi_hop_task(h: EntityHierarchy, seed: int = 0, eval_fraction: float = 0.05,
                   negatives: int = 10) -> EncoderTask:
    """HiT's multi-hop inference: train on all direct edges, evaluate on transitive ones."""
    rng = random.Random(seed)
    _, val, test = _slices(_transitive(h), eval_fraction, rng)
    neg = NegativeSampler(h, negatives, seed + 1)
    return EncoderTask("multi", h, list(h.edges), neg.pair_set(val), neg.pair_set(test))


def mixed_hop_task(h: EntityHierarchy, seed: int = 0, eval_fraction: float = 0.05,
                   negatives: int = 10) -> EncoderTask:
    """HiT's mixed-hop prediction: direct edges 90/5/5 plus the multi-hop transitive slices."""
    rng = random.Random(seed)
    _, tval, ttest = _slices(_transitive(h), eval_fraction, rng)
    train, dval, dtest = _slices(sorted(h.edges), eval_fraction, rng)
    neg = NegativeSampler(h, negatives, seed + 1)
    return EncoderTask("mixed", h, train, neg.pair_set(dval + tval), neg.pair_set(dtest + ttest))


def unseen_entity_task(h: EntityHierarchy, seed: int = 0, fraction: float = 0.02,
                       negatives: int = 10) -> EncoderTask:
    """Hold out ``fraction`` of the entities (never a root) with every edge touching them.

    Validation and test split the held-out entities in halves; their positives are each
    held-out entity's direct parents among the known entities, with negatives drawn from
    the known ones.  Ranking metrics use :attr:`EncoderTask.val_entities` /
    ``test_entities`` and :func:`hop_distances`."""
    rng = random.Random(seed)
    par = h.parents()
    candidates = sorted(e for e in h.names if par.get(e))
    n = max(2, int(round(len(h.names) * fraction)))
    held = rng.sample(candidates, min(n, len(candidates)))
    held_set = set(held)
    train = [(c, p) for c, p in h.edges if c not in held_set and p not in held_set]
    val_e, test_e = sorted(held[: len(held) // 2]), sorted(held[len(held) // 2:])
    neg = NegativeSampler(h, negatives, seed + 1)

    def pairs(ents: list[str]) -> PairSet:
        pos = [(e, p) for e in ents for p in par.get(e, ()) if p not in held_set]
        rnd, hard = [], []
        for c, _ in pos:
            r = neg.random(c, exclude=held_set)
            rnd.append(r)
            hard.append([x for x in neg.hard(c, r) if x not in held_set][:negatives])
        return PairSet(pos, rnd, hard)

    return EncoderTask("unseen", h, train, pairs(val_e), pairs(test_e), val_e, test_e)


def hop_distances(h: EntityHierarchy, entities: Iterable[str],
                  parents: Mapping[str, Sequence[str]] | None = None) -> dict[str, dict[str, int]]:
    """For each entity, its ancestors with their hop distance (shortest path up the DAG)."""
    par = h.parents() if parents is None else parents
    out: dict[str, dict[str, int]] = {}
    for e in entities:
        dist: dict[str, int] = {}
        frontier, hop = [e], 0
        while frontier:
            hop += 1
            nxt = []
            for x in frontier:
                for p in par.get(x, ()):
                    if p not in dist:
                        dist[p] = hop
                        nxt.append(p)
            frontier = nxt
        out[e] = dist
    return out
