"""``update(id, meta=...)`` on an indexed store, then the next search: the cost of a change
that moves no point (it used to rebuild the float32 mirror and the whole HNSW graph).

    python benchmarks/bench_update.py 100000

One thread; a store of N memories at dim 256 (the texts of ``bench_search.py``),
``build_index("faiss")``, then three times ``update`` + one exact and one ``use_index=True``
search; prints the seconds of each.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_search import texts_and_items  # noqa: E402

from hypermem import HashingEmbedder, Memory  # noqa: E402


def main(n: int) -> None:
    torch.set_num_threads(1)
    mem = Memory(embedder=HashingEmbedder(dim=256))
    _, items = texts_and_items(n, seed=1000)
    mem.add_many(items)
    q = "word3 word17 word101"
    mem.build_index("faiss")
    mem.search(q, k=10, use_index=True, touch=False)
    mem.search(q, k=10, touch=False)
    for what, kw in (("exact", {"use_index": False}), ("hnsw", {"use_index": True})):
        ts = []
        for j in range(3):
            t = time.perf_counter()
            mem.update(f"m{j}", meta={"tag": j})
            mem.search(q, k=10, touch=False, **kw)
            ts.append(time.perf_counter() - t)
        print(what, "update(meta) + next search, s:", " ".join(f"{x:.3f}" for x in ts), flush=True)


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("n", type=int, nargs="?", default=100_000, help="memories in the store (default 100,000)")
    main(ap.parse_args().n)
