"""Terms added to HiT's subsumption score, chosen on one half of a validation sample and read
on the other (issue 30; RESULTS, "score-side terms for the sibling errors").

    python experiments/encoder_score/run.py ENCODER --term base|own|two

HiT scores ``s = -(d(c, p) + lambda (|p| - |c|))``.  ``base``: ``s + w cos_MiniLM(c, p)`` (the
pre-trained model's cosine); ``own``: ``s + w cos(c, p)`` of the trained points' directions;
``two``: ``-(d + lp |p| - lc |c|)``, a weight for each norm.  Mixed-hop validation (seed 0), a
seeded sample of 3,000 positives with their negatives split in two halves by positive; the
weights and the threshold are chosen for F1 on one half and the F1 is read on the other.
"""

from __future__ import annotations

import argparse
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch  # noqa: E402

from hypermem.data.hierarchy_tasks import mixed_hop_task  # noqa: E402
from hypermem.data.wordnet import hit_noun_hierarchy  # noqa: E402
from hypermem.embed import SentenceTransformerEmbedder  # noqa: E402
from hypermem.embed.hierarchy_encoder import HierarchyEncoder  # noqa: E402
from hypermem.hierarchy.encoder_eval import LAMBDAS, CosineScorer, encode_entities, pair_terms  # noqa: E402
from hypermem.hierarchy.evaluation import best_threshold, f1_at  # noqa: E402

WEIGHTS = (0.0, 2.0, -2.0, -4.0, -8.0, -16.0)
NORM_WEIGHTS = tuple(x / 10 for x in range(31))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("encoder")
    ap.add_argument("--term", choices=("base", "own", "two"), required=True)
    ap.add_argument("--positives", type=int, default=3000)
    a = ap.parse_args(argv)
    torch.set_num_threads(1)
    h = hit_noun_hierarchy()
    val = mixed_hop_task(h, seed=0).val.subset(a.positives, seed=1)
    enc = HierarchyEncoder.load(a.encoder)
    ids = [e for pos, r, hh in zip(val.positives, val.random_negatives, val.hard_negatives) for e in (*pos, *r, *hh)]
    pts = encode_entities(enc, h.names, ids)
    base = CosineScorer(SentenceTransformerEmbedder()) if a.term == "base" else None
    bpts = encode_entities(base, h.names, ids) if base is not None else None
    half = torch.rand(len(val.positives), generator=torch.Generator().manual_seed(0)) < 0.5
    for kind in ("random", "hard"):
        pairs, labels = val.pairs(kind)
        t = pair_terms(enc, pts, pairs, labels)
        first = half[torch.arange(len(pairs)) // (len(pairs) // len(val.positives))]
        if a.term == "two":
            scores = {(lp, lc): -(t.dist + lp * t.hp - lc * t.hc) for lp in NORM_WEIGHTS for lc in NORM_WEIGHTS}
        else:
            if a.term == "base":
                cos = -pair_terms(base, bpts, pairs, labels).dist
            else:
                unit = {e: v / v.norm().clamp_min(1e-12) for e, v in pts.items()}
                cos = torch.stack([unit[x] @ unit[y] for x, y in pairs]).double()
            scores = {(w, lam): t.scores(lam) + w * cos for w in WEIGHTS for lam in LAMBDAS}
        hit = {(lam, 0.0): t.scores(lam) for lam in LAMBDAS}   # HiT's score alone
        for name, fit, ev in (("A->B", first, ~first), ("B->A", ~first, first)):
            out = []
            for label, table in (("HiT", hit), (a.term, scores)):
                key, (th, f_fit) = max(((k, best_threshold(-s[fit], t.labels[fit])) for k, s in table.items()),
                                       key=lambda x: x[1][1])
                f_ev = f1_at(-table[key][ev], t.labels[ev], th)[0]
                out.append(f"{label} {key} fit {f_fit:.3f} read {f_ev:.3f}")
            print(kind, name, " | ".join(out), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
