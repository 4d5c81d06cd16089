"""Metadata filters in process: one search's median time with each filter, and right after a write.

A store of ``n`` memories (hashing embedder, dim 256) with metadata ``{"user": one of 100,
"kind": one of 2, "n": the row}``; ten queries a filter (``k=5``, ``hybrid=0``), each also
right after an ``add``; one thread.  Prints one JSON line of medians in ms:

    OMP_NUM_THREADS=1 python benchmarks/bench_filters.py --n 100000
"""

from __future__ import annotations

import argparse
import json
import time

import torch

from hypermem.embed import HashingEmbedder
from hypermem.store import Memory


def median_ms(times: list[float]) -> float:
    return round(sorted(times)[len(times) // 2] * 1000, 1)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    n = args.n
    mem = Memory(embedder=HashingEmbedder(dim=256))
    mem.add_many([{"text": f"note {i} about topic {i % 977}",
                   "meta": {"user": f"u{i % 100}", "kind": "chat" if i % 3 else "fact", "n": i}} for i in range(n)])
    queries = [f"topic {j} note" for j in range(10)]
    filters = {"none": None, "user": {"user": "u7"}, "user_in": {"user": {"$in": ["u7", "u8"]}},
               "user_kind": {"user": "u7", "kind": "fact"}, "not_kind": {"$not": {"kind": "fact"}},
               "n_gt": {"n": {"$gt": n - 1000}}}
    out = {}
    for name, spec in filters.items():
        mem.search(queries[0], k=5, filters=spec, touch=False, hybrid=0)   # a field's columns are built here
        alone, after_add = [], []
        for j, q in enumerate(queries):
            t = time.perf_counter()
            mem.search(q, k=5, filters=spec, touch=False, hybrid=0)
            alone.append(time.perf_counter() - t)
            mem.add(f"fresh {name} {j}", meta={"user": "u7", "kind": "fact", "n": n + j})
            t = time.perf_counter()
            mem.search(q, k=5, filters=spec, touch=False, hybrid=0)
            after_add.append(time.perf_counter() - t)
        out[name], out[name + "_after_add"] = median_ms(alone), median_ms(after_add)
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
