"""Texts from elsewhere under ``parent="auto"``: the nearest-neighbour floor
(``hypermem.store.nearest_floor``) at several quantiles, and none.

The split, the store and the texts from elsewhere are those of ``walk.py`` (10% of a tree's
entities with a parent held out with their subtrees; a saved hierarchy encoder trained
without them, or MiniLM; the rest filed under their first parent; 200 LoCoMo utterances).
Each held-out and foreign text is added with ``parent="auto"`` (the store's rule, the
encoder's threshold), then removed.  Reported: the held-out texts' true parent, a true
ancestor within 2 hops, attached at all; the foreign texts attached (a false attachment).

    python experiments/placement_vote/foreign.py runs/pyc/edges.tsv runs/pyc/names.tsv --seed 0 \\
        --encoder runs/walk/enc-pyc-s0      # or --encoder minilm
"""

from __future__ import annotations

import argparse
import warnings

import torch
from chance import ancestors, read, split  # the split of this folder
from walk import utterances

import hypermem.store.nearest_floor as nf
from hypermem import Memory, SentenceTransformerEmbedder
from hypermem.embed import HierarchyEncoder
from hypermem.store import AddManyHint


def place(mem: Memory, text: str) -> str | None:
    """The parent ``parent="auto"`` gives ``text`` (removed again)."""
    j = mem.add(text, parent="auto")
    p = mem.parent(j)
    mem.remove(j)
    return p


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("edges")
    ap.add_argument("names")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--encoder", required=True, help="a saved hierarchy encoder, or minilm")
    ap.add_argument("--quantiles", default="none,0.01,0.02,0.05")
    ap.add_argument("--foreign", type=int, default=200)
    args = ap.parse_args()
    torch.set_num_threads(1)
    warnings.filterwarnings("ignore", category=AddManyHint)   # one add at a time is the point here
    parent, text = read(args.edges, args.names, False)
    held, keep = split(parent, text, args.seed)
    kept = set(keep)
    enc = SentenceTransformerEmbedder() if args.encoder == "minilm" else HierarchyEncoder.load(args.encoder)
    mem = Memory(embedder=enc)
    mem.add_many([{"text": text[i], "id": i, "parent": parent.get(i) if parent.get(i) in kept else None}
                  for i in keep])
    foreign = utterances(args.foreign, args.seed)
    print(f"{args.encoder}: {len(mem)} filed, {len(held)} held out, {len(foreign)} foreign", flush=True)
    for q in args.quantiles.split(","):
        nf.FLOOR_QUANTILE = None if q == "none" else float(q)
        got = [(place(mem, text[i]), list(ancestors(parent, i))[:2]) for i in sorted(held)]
        fa = sum(place(mem, t) is not None for t in foreign) / max(1, len(foreign))
        n = len(got)
        print(f"floor {q:>5} ({mem.suggester.floor():.3f}): held out: true parent "
              f"{sum(p == a[0] for p, a in got if a) / n:.3f} within 2 hops {sum(p in a for p, a in got) / n:.3f} "
              f"attached {sum(p is not None for p, _ in got) / n:.3f} | foreign attached {fa:.3f}", flush=True)


if __name__ == "__main__":
    main()
