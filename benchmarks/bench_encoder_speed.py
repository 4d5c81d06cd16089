"""CPU seconds per trained positive edge: hypermem's in-batch trainer against HiT's triplet
training (the ``hierarchy-transformers`` package's model and loss), side by side.

HiT trains on triplets ``(child, parent, negative)``, ten per positive edge, and encodes the
three texts of every triplet (its ``HierarchyTransformerLoss`` over a sentence-transformers
batch); hypermem encodes each distinct entity of a parent-grouped batch once
(:mod:`hypermem.hierarchy.encoder_batches`).  Both steps here run the same base model
(all-MiniLM-L6-v2), the same AdamW, the same WordNet-noun edges, one thread, and are timed
alternately with ``time.process_time``; the figure is CPU seconds per positive edge (each
positive seen with ten negatives in both).  HiT's own trainer cannot run on
sentence-transformers 6 (its ``compute_loss`` override breaks), so its step is reproduced
here from its model and loss classes: tokenise the triplet texts, forward, loss, backward,
AdamW step -- what ``SentenceTransformerTrainer`` does per batch, without its logging.

    python benchmarks/bench_encoder_speed.py --steps 8 --hit-batch 64
"""

from __future__ import annotations

import argparse
import os
import random
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch  # noqa: E402
from optional_deps import HIERARCHY_TRANSFORMERS, require  # noqa: E402

from hypermem.data.wordnet import hit_noun_hierarchy  # noqa: E402
from hypermem.embed.hierarchy_encoder import HierarchyEncoder  # noqa: E402
from hypermem.embed.sentence_transformer import local_minilm_path  # noqa: E402
from hypermem.hierarchy.encoder_batches import EdgeBatches, closure_sets  # noqa: E402
from hypermem.hierarchy.encoder_losses import LossWeights  # noqa: E402
from hypermem.hierarchy.encoder_step import TokenCache, batch_losses  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--hit-batch", type=int, default=64, help="triplets per HiT step (HiT uses 256 on a GPU)")
    ap.add_argument("--batch", type=int, default=128, help="positives per hypermem step")
    ap.add_argument("--throughput", type=int, default=0, help="also time encoding this many names")
    args = ap.parse_args()
    require("hierarchy_transformers", HIERARCHY_TRANSFORMERS, script="bench_encoder_speed.py")
    torch.set_num_threads(1)
    from hierarchy_transformers import HierarchyTransformer
    from hierarchy_transformers.losses import HierarchyTransformerLoss

    h = hit_noun_hierarchy()
    ids = sorted(h.names)
    ix = {e: i for i, e in enumerate(ids)}
    edges = [(ix[c], ix[p]) for c, p in h.edges]
    anc = closure_sets(edges, len(ids))
    rng = random.Random(0)

    hit = HierarchyTransformer.from_pretrained(local_minilm_path())
    hit.train()
    hit_loss = HierarchyTransformerLoss(hit)
    hit_opt = torch.optim.AdamW(hit.parameters(), lr=1e-5)
    ours = HierarchyEncoder.from_pretrained("all-MiniLM-L6-v2")
    ours.model.train()
    tokens = TokenCache(ours.model.tokenizer, [h.names[e] for e in ids], 32)
    opt = torch.optim.AdamW(ours.model.parameters(), lr=1e-5)
    batches = iter(EdgeBatches(edges, anc, batch_size=args.batch, seed=0).epoch(0))
    w = LossWeights()

    def hit_step() -> int:
        trip = []
        for c, p in rng.sample(edges, max(1, args.hit_batch // 10)):
            for _ in range(10):
                n = rng.randrange(len(ids))
                while n in anc[c] or n == c:
                    n = rng.randrange(len(ids))
                trip.append((h.names[ids[c]], h.names[ids[p]], h.names[ids[n]]))
        trip = trip[: args.hit_batch]
        feats = [hit.tokenize([t[k] for t in trip]) for k in range(3)]
        out = hit_loss(feats, torch.zeros(len(trip)))
        hit_opt.zero_grad()
        out["loss"].backward()
        hit_opt.step()
        return len(trip) / 10          # positives

    def our_step() -> int:
        b = next(batches)
        loss = batch_losses(ours, tokens, b, w)["loss"]
        opt.zero_grad()
        loss.backward()
        opt.step()
        return len(b)

    cpu = {"hit": 0.0, "ours": 0.0}
    pos = {"hit": 0.0, "ours": 0.0}
    for i in range(args.steps + 1 if args.steps else 0):
        for name, fn in (("hit", hit_step), ("ours", our_step)):
            t = time.process_time()
            n = fn()
            if i:                       # the first step of each warms up
                cpu[name] += time.process_time() - t
                pos[name] += n
    per = {k: cpu[k] / max(pos[k], 1) for k in cpu}
    if args.steps:
        print(f"CPU s per positive edge (10 negatives each), {args.steps} steps each, 1 thread, "
              f"load {os.getloadavg()[0]:.1f}:")
        print(f"  HiT triplets ({args.hit_batch} a step): {per['hit'] * 1000:.1f} ms")
        print(f"  hypermem in-batch ({args.batch} positives a step): {per['ours'] * 1000:.1f} ms")
        print(f"  ratio: {per['hit'] / per['ours']:.1f}x")
    if args.throughput:
        from sentence_transformers import SentenceTransformer

        base = SentenceTransformer(local_minilm_path(), device="cpu")
        texts = [h.names[e] for e in rng.sample(ids, args.throughput)]
        ours.model.eval()
        t_ours = t_base = 0.0
        for _ in range(3):
            t = time.process_time()
            ours.encode(texts, batch_size=128)
            t_ours += time.process_time() - t
            t = time.process_time()
            base.encode(texts, batch_size=128, convert_to_tensor=True)
            t_base += time.process_time() - t
        print(f"encoding {args.throughput} names x3, 1 thread: HierarchyEncoder {args.throughput * 3 / t_ours:.0f}/s, "
              f"the base all-MiniLM-L6-v2 {args.throughput * 3 / t_base:.0f}/s (ratio {t_base / t_ours:.2f})")


if __name__ == "__main__":
    main()
