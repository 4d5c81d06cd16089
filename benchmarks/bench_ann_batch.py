"""Exact search against the faiss HNSW bands at 100,000 memories: ``search_batch`` and single
``search``, k = 10 and 100 (the rule ``search_batch`` follows: exact unless ``use_index=True``).

Clustered 256-d unit vectors (2,000 clusters, noise 0.6) passed as ``embedding=``, a default
store (``HalfLife(hours=72)``, ``time_coef=1``), times spread over 60 days, queries near stored
points; best of 3::

    OMP_NUM_THREADS=1 PYTHONPATH=. python benchmarks/bench_ann_batch.py [--n 100000]
"""

from __future__ import annotations

import argparse
import math
import resource
import time
from datetime import datetime, timedelta, timezone

import numpy as np
import torch

from hypermem import HalfLife, Memory

NOW = datetime(2026, 12, 1, tzinfo=timezone.utc)


def clustered(n: int, dim: int = 256, clusters: int = 2000, seed: int = 0) -> np.ndarray:
    g = np.random.default_rng(seed)
    centres = g.standard_normal((clusters, dim)).astype(np.float32)
    x = centres[g.integers(0, clusters, n)] + 0.6 * g.standard_normal((n, dim)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def queries(x: np.ndarray, nq: int, seed: int = 1, noise: float = 0.3) -> list[torch.Tensor]:
    g = np.random.default_rng(seed)
    q = x[g.integers(0, x.shape[0], nq)] + noise * g.standard_normal((nq, x.shape[1])).astype(np.float32) \
        / math.sqrt(x.shape[1])
    q /= np.linalg.norm(q, axis=1, keepdims=True)
    return [torch.from_numpy(0.5 * r).double() for r in q]


def best(f, reps: int = 3) -> float:
    out = math.inf
    for _ in range(reps):
        t = time.perf_counter()
        f()
        out = min(out, time.perf_counter() - t)
    return out


def main(n: int = 100_000) -> None:
    torch.set_num_threads(1)
    x = clustered(n)
    mem = Memory(decay=HalfLife(hours=72), clock=lambda: NOW)
    for lo in range(0, n, 50_000):
        mem.add_many([{"text": f"m{i}", "id": f"m{i}", "embedding": x[i],
                       "t": NOW - timedelta(seconds=60 * 86400 * (1 - i / 1_000_000))}
                      for i in range(lo, min(n, lo + 50_000))])
    t0 = time.time()
    mem.build_index("faiss")
    print(f"build {time.time() - t0:.1f} s", flush=True)
    qs = queries(x, 200)
    for k in (10, 100):
        e = best(lambda k=k: mem.search_batch(qs, k=k, use_index=False, touch=False))
        a = best(lambda k=k: mem.search_batch(qs, k=k, use_index=True, touch=False))
        print(f"search_batch 200 k={k}: exact {e:.3f} s  faiss {a:.3f} s", flush=True)
    e = best(lambda: [mem.search(q, k=10, use_index=False, touch=False) for q in qs])
    a = best(lambda: [mem.search(q, k=10, use_index=True, touch=False) for q in qs])
    print(f"single search k=10: exact {e * 5:.2f} ms/query  faiss {a * 5:.2f} ms/query")
    print(f"index_recall@10 {mem.index_recall(sample=100):.3f}  "
          f"peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6:.2f} GB")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description="exact search against the faiss HNSW bands "
                                 "(search_batch and single search, k = 10 and 100)")
    ap.add_argument("--n", type=int, default=100_000, help="memories in the store (default 100000)")
    main(n=ap.parse_args().n)
