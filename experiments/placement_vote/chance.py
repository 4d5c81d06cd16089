"""The neighbours' vote against the vote less each candidate's chance share, in a filed store.

The store ranks by the share less the chance share (``hypermem.store.vote``); the plain share
is the rule before 2026-12-06.  A candidate's chance share is the vote it would get from neighbours drawn at random from the
store: ``(self_weight [c stored] + sum_h decay^(h-1) |memories h links below c|) / N`` for
h = 1..3 (:mod:`hypermem.store.vote`'s settings).  An ancestor of most memories (one root over
a user's whole tree) collects votes from every neighbourhood by chance; less its chance share,
it wins only where the neighbours point at it more than random ones would.

10% of the entities that have a parent are held out with everything below them; the rest are
filed under their first parent (MiniLM vectors, or a saved hierarchy encoder); each held-out
text's ``suggest_parents(k=1)`` is scored as the true parent / a true ancestor within 2 hops /
the store's largest family.  ``--one-root`` first puts every root under one added top node.

    python experiments/placement_vote/chance.py runs/pyc/edges.tsv runs/pyc/names.tsv --seed 0 [--one-root]
"""

from __future__ import annotations

import argparse
import collections
import random

import hypermem.store.suggest as suggest
import hypermem.store.vote as vote
from hypermem import Memory

ROOT = "ROOT"


def read(edges: str, names: str, one_root: bool) -> tuple[dict[str, str], dict[str, str]]:
    rows = [line.rstrip("\n").split("\t") for line in open(edges, encoding="utf-8")]
    rows = rows[1:] if rows[0][0] == "child" else rows
    text = dict(line.rstrip("\n").split("\t", 1) for line in open(names, encoding="utf-8"))
    text.pop("id", None)
    parent: dict[str, str] = {}
    for c, p in rows:
        parent.setdefault(c, p)   # the first parent
    if one_root:   # the tree under one top node, as a user's notes under "everything"
        text[ROOT] = "Python classes of installed packages"
        parent.update({i: ROOT for i in text if i != ROOT and i not in parent})
    return parent, text


def ancestors(parent: dict[str, str], i: str):
    seen = set()
    while i in parent and parent[i] not in seen:
        i = parent[i]
        seen.add(i)
        yield i


def split(parent: dict[str, str], text: dict[str, str], seed: int) -> tuple[set[str], list[str]]:
    """``(held, keep)``: 10% of the entities that have a parent held out (seeded), and the others
    that have no held-out ancestor, parents before children."""
    ids = sorted(text)
    random.seed(seed)
    held = set(random.sample([i for i in ids if i in parent and i != ROOT], len(ids) // 10))
    order: list[str] = []
    seen: set[str] = set()
    for start in ids:   # parents before children
        path = [start] + list(ancestors(parent, start))
        for i in reversed(path):
            if i not in seen:
                seen.add(i)
                order.append(i)
    return held, [i for i in order if i not in held and not any(a in held for a in ancestors(parent, i))]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("edges")
    ap.add_argument("names")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--encoder", help="a saved hierarchy encoder (default: MiniLM)")
    ap.add_argument("--one-root", action="store_true")
    args = ap.parse_args()
    parent, text = read(args.edges, args.names, args.one_root)
    held, keep = split(parent, text, args.seed)
    if args.encoder:
        from hypermem.embed import HierarchyEncoder
        emb = HierarchyEncoder.load(args.encoder)
    else:
        from hypermem.embed import SentenceTransformerEmbedder
        emb = SentenceTransformerEmbedder()
    mem = Memory(embedder=emb)
    kept = set(keep)
    mem.add_many([{"text": text[i], "id": i, "parent": parent.get(i) if parent.get(i) in kept else None}
                  for i in keep])
    n = len(mem)
    store_rule = vote.neighbour_vote   # the store's: the share less the chance share (hypermem.store.vote)

    def plain(nb, parent_of, allowed=None, chance=None, **kw):   # the share alone, as before 2026-12-06
        return store_rule(nb, parent_of, allowed, **kw)

    big = collections.Counter(mem.parent(i) for i in mem.ids if mem.parent(i)).most_common(1)[0]
    print(f"{n} filed, {len(mem.roots())} roots, {len(held)} held out; the largest family {big}")
    for name, rule in (("vote", plain), ("vote less chance", store_rule)):
        suggest.neighbour_vote = rule
        got = []
        for i in sorted(held):
            s = mem.suggest_parents(text[i], k=1)[0].record.id
            got.append((s == parent[i], s in list(ancestors(parent, i))[:2], s == big[0]))
        print(f"{name}: true parent %.3f, within 2 hops %.3f, the largest family %.3f" %
              tuple(sum(g[j] for g in got) / len(got) for j in range(3)))
    suggest.neighbour_vote = store_rule


if __name__ == "__main__":
    main()
