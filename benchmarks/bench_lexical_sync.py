"""The hybrid search right after a write: what the lexical index's sync costs at size.

A store with ``hybrid > 0`` keeps a BM25 index of its texts (``hypermem.store.lexical``) and
brings it up to the store before a search when something was written.  This times, at ``n``
memories (random 8-word texts over a 20,000-word vocabulary, the hashing embedder at dim 64,
one thread): the first hybrid search (the index built from every text), then ``--rounds``
times one ``add`` followed by a hybrid search (the sync after one write) and a second search
(nothing to sync), and the same with one ``update`` of an old memory's text.  Medians.

    python benchmarks/bench_lexical_sync.py --n 100000
    PYTHONPATH=/tmp/before python benchmarks/bench_lexical_sync.py --n 100000   # another tree
"""

from __future__ import annotations

import argparse
import random
import statistics
import time

import torch


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--rounds", type=int, default=9)
    args = ap.parse_args()
    torch.set_num_threads(1)
    import hypermem
    from hypermem import Memory
    from hypermem.embed import HashingEmbedder

    rng = random.Random(0)
    words = [f"w{i}" for i in range(20_000)]

    def text() -> str:
        return " ".join(rng.choice(words) for _ in range(8))

    mem = Memory(embedder=HashingEmbedder(dim=64), hybrid=0.3)
    mem.add_many([{"text": text(), "id": f"m{i}"} for i in range(args.n)])
    t = time.perf_counter()
    mem.search("w1 w2 w3", k=10)
    first = time.perf_counter() - t
    after_add, after_update, quiet = [], [], []
    for _ in range(args.rounds):
        mem.add(text())
        t = time.perf_counter()
        mem.search("w5 w7", k=10)
        after_add.append(time.perf_counter() - t)
        t = time.perf_counter()
        mem.search("w5 w7", k=10)
        quiet.append(time.perf_counter() - t)
        mem.update(f"m{rng.randrange(args.n)}", text=text())
        t = time.perf_counter()
        mem.search("w5 w7", k=10)
        after_update.append(time.perf_counter() - t)
    ms = {k: 1000 * statistics.median(v) for k, v in
          (("add", after_add), ("update", after_update), ("none", quiet))}
    print(f"hypermem from {hypermem.__file__}")
    print(f"n={args.n:,}: first hybrid search (index built) {first * 1000:.0f} ms; a hybrid search right after "
          f"one add {ms['add']:.1f} ms, after one update {ms['update']:.1f} ms, with nothing written {ms['none']:.1f} ms "
          f"(medians of {args.rounds})")


if __name__ == "__main__":
    main()
