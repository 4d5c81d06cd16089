"""Where a hierarchy encoder's F1 errors are: recall by the positive's hop, false positives by
level difference, and how well the norm carries an entity's level (RESULTS, "45 minutes at the
new centripetal margin, and where the sibling errors are").

    python benchmarks/encoder_errors.py runs/temp/mixed-poincare-s0-cm2.0/encoder --positives 1500

Validation positives of HiT's mixed-hop task (seed 0), a seeded sample with their negatives; the
operating point (lambda, threshold) is chosen on that sample; a hop is the distance up the whole
DAG, a level the fewest hops below a root (:func:`hypermem.hierarchy.encoder_batches.levels`).
"""

from __future__ import annotations

import argparse
import collections
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch  # noqa: E402
from scipy.stats import spearmanr  # noqa: E402

from hypermem.data.hierarchy_tasks import hop_distances, mixed_hop_task  # noqa: E402
from hypermem.data.wordnet import hit_noun_hierarchy  # noqa: E402
from hypermem.embed.hierarchy_encoder import HierarchyEncoder  # noqa: E402
from hypermem.hierarchy.encoder_batches import levels  # noqa: E402
from hypermem.hierarchy.encoder_eval import LAMBDAS, choose_operating_point, encode_entities, pair_terms  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("encoder")
    ap.add_argument("--positives", type=int, default=1500)
    ap.add_argument("--sample-seed", type=int, default=1)
    ap.add_argument("--threads", type=int, default=1)
    a = ap.parse_args(argv)
    torch.set_num_threads(a.threads)
    h = hit_noun_hierarchy()
    task = mixed_hop_task(h, seed=0)
    val = task.val.subset(a.positives, seed=a.sample_seed)
    as_child = {c for c, _ in task.train_edges}
    as_parent = {p for _, p in task.train_edges}
    enc = HierarchyEncoder.load(a.encoder)
    ids = [e for pos, r, hh in zip(val.positives, val.random_negatives, val.hard_negatives) for e in (*pos, *r, *hh)]
    pts = encode_entities(enc, h.names, ids)
    hops = hop_distances(h, {c for c, _ in val.positives})
    order = sorted(h.names)
    index = {e: i for i, e in enumerate(order)}
    lv = levels([(index[c], index[p]) for c, p in h.edges], len(order))
    level = {e: int(lv[index[e]]) for e in set(ids)}
    for kind in ("random", "hard"):
        pairs, labels = val.pairs(kind)
        terms = pair_terms(enc, pts, pairs, labels)
        op = choose_operating_point(terms, LAMBDAS)
        pred = terms.scores(op.centripetal_weight) >= op.threshold
        recall = collections.defaultdict(lambda: [0, 0])
        seen = collections.defaultdict(lambda: [0, 0])  # hop-1 positives by how the child occurs in training
        fp = collections.Counter()
        for i, (c, p) in enumerate(pairs):
            if labels[i]:
                b = recall[min(hops[c][p], 5)]
                b[0] += int(pred[i])
                b[1] += 1
                if hops[c][p] == 1:
                    s = seen["child of a training edge" if c in as_child else
                             "parent only" if c in as_parent else "in no training edge"]
                    s[0] += int(pred[i])
                    s[1] += 1
            elif pred[i]:
                fp[max(-3, min(3, level[p] - level[c]))] += 1
        print(f"{kind}: F1 {op.f1:.3f} (lambda {op.centripetal_weight}, threshold {op.threshold:.2f})")
        print("  recall by hop (5 = 5+):", {k: (round(v[0] / v[1], 3), v[1]) for k, v in sorted(recall.items())})
        print("  hop-1 recall by the child's training edges:", {k: (round(v[0] / v[1], 3), v[1])
                                                              for k, v in sorted(seen.items())})
        print("  false positives by level(negative) - level(child), clipped to +-3:", sorted(fp.items()),
              f"of {len(labels) - sum(labels)} negatives")
    ents = sorted(set(ids))
    norms = enc.norms(torch.stack([pts[e] for e in ents])).float()
    lev = torch.tensor([level[e] for e in ents])
    print(f"Spearman(norm, level) over {len(ents)} entities: {spearmanr(norms.numpy(), lev.numpy()).statistic:.3f}")
    for lo in range(0, 16, 2):
        m = (lev >= lo) & (lev < lo + 2)
        if m.any():
            print(f"  level {lo}-{lo + 1}: n {int(m.sum())}, norm mean {norms[m].mean():.2f} sd {norms[m].std():.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
