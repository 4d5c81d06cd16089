"""How far down the voted list ``parent="auto"`` should look for a candidate that passes the
encoder's threshold (``hypermem.store.auto_parent.WALK``), on a user's hierarchy.

10% of the entities that have a parent are held out with everything below them (the split of
``chance.py``); a hierarchy encoder is trained on the rest (or loaded), the rest is filed under
its first parent, and each held-out text is added with ``parent="auto"`` under each setting of
``WALK``, then removed.  Reported: the true parent, a true ancestor within 2 hops, attached at
all, and the share attached below rank 3 of the voted list; and, for texts from elsewhere
(LoCoMo utterances), the share attached at all (a false attachment).

    python experiments/placement_vote/walk.py runs/pyc/edges.tsv runs/pyc/names.tsv --seed 0 \
        --train runs/walk/enc-pyc --minutes 10
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path

import torch
from chance import ancestors, read, split  # the same split (this folder)

import hypermem.store.auto_parent as auto_parent
from hypermem import Memory
from hypermem.embed import HierarchyEncoder
from hypermem.hierarchy import fit_hierarchy_encoder

LOCOMO = Path(__file__).resolve().parents[3] / "shared" / "data" / "locomo"


def utterances(n: int, seed: int) -> list[str]:
    out = []
    for f in sorted(LOCOMO.glob("*.json")):
        conv = json.loads(f.read_text())   # speaker_a, speaker_b, session_N: [turns]
        for key, turns in conv.items():
            if key.startswith("session_") and isinstance(turns, list):
                out += [t["text"] for t in turns if isinstance(t, dict) and t.get("text")]
    return random.Random(seed).sample(out, min(n, len(out)))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("edges")
    ap.add_argument("names")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--encoder", help="a saved hierarchy encoder trained without the held-out entities")
    ap.add_argument("--train", help="train one into this folder (the held-out entities left out)")
    ap.add_argument("--minutes", type=float, default=10)
    ap.add_argument("--walks", default="1,2,3,5,10,none")
    ap.add_argument("--foreign", type=int, default=200)
    args = ap.parse_args()
    torch.set_num_threads(1)
    parent, text = read(args.edges, args.names, False)
    held, keep = split(parent, text, args.seed)   # keep: parents before children
    kept = set(keep)
    if args.train:
        edges = [(c, p) for c, p in parent.items() if c in kept and p in kept]
        enc = fit_hierarchy_encoder(edges, {i: text[i] for i in keep}, max_minutes=args.minutes, seed=args.seed,
                                    out=args.train)
    else:
        enc = HierarchyEncoder.load(args.encoder)
    mem = Memory(embedder=enc)
    mem.add_many([{"text": text[i], "id": i, "parent": parent.get(i) if parent.get(i) in kept else None}
                  for i in keep])
    foreign = utterances(args.foreign, args.seed)
    print(f"{len(mem)} filed, {len(held)} held out, {len(foreign)} foreign texts; threshold {enc.threshold:.3f}")
    for w in args.walks.split(","):
        auto_parent.WALK = None if w == "none" else int(w)
        got = []
        for i in sorted(held):
            j = mem.add(text[i], parent="auto")
            info = mem.get(j).meta["auto_parent"]
            p = info["parent"]
            anc = list(ancestors(parent, i))
            got.append((p == parent[i], p in anc[:2], p is not None, (info.get("rank") or 0) > 3))
            mem.remove(j)
        fa = 0
        for t in foreign:
            j = mem.add(t, parent="auto")
            fa += mem.parent(j) is not None
            mem.remove(j)
        r = [sum(g[k] for g in got) / len(got) for k in range(4)] + [fa / max(1, len(foreign))]
        print(f"walk {w:>4}: true parent {r[0]:.3f}  within 2 hops {r[1]:.3f}  attached {r[2]:.3f}  "
              f"below rank 3 {r[3]:.3f}  foreign attached {r[4]:.3f}", flush=True)
    auto_parent.WALK = None


if __name__ == "__main__":
    main()
