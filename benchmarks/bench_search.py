#!/usr/bin/env python
"""Benchmark the store against the NumPy reference (poincare-memory 0.1.4) and faiss.

Side by side, in one run, on the same data:

1. ``add_many`` of N memories (a third with parents), hashing embedder dim 256;
2. one exact ``search`` at N memories with HalfLife decay (median over queries);
3. ``search_batch`` of B queries over M memories, exact full score (HalfLife decay and a
   depth bias), against faiss ``IndexFlatIP`` over the same Lorentz MIPS vectors (which
   computes only the dot products); peak RSS of the process.

Usage::

    python benchmarks/bench_search.py                       # defaults: the README's 1M search_batch row
    python benchmarks/bench_search.py --n 150000 --queries 30 --ref-queries 1 --m 100000 --batch 500 --threads 1
        # the README's add_many and one-search rows (with the reference), one thread each
    python benchmarks/bench_search.py --n 2000 --m 20000 --batch 50 --ref-queries 2   # smoke
    python benchmarks/bench_search.py --skip single --m 200000 --batch 200 --threads 1 --guard 0.8

``--guard R`` makes the run fail when the exact distance-only ``search_batch`` falls below
``R`` times faiss ``IndexFlatIP``'s throughput on the same data in the same run (both
CPU-bound products, so the ratio holds across machines better than a time does; with
``--threads 1`` the ratio of CPU seconds, which a loaded machine disturbs less).  Set
``OPENBLAS_NUM_THREADS=1`` with ``--threads 1``: faiss and NumPy's OpenBLAS (the scan's
products on non-Intel processors, :mod:`hypermem.index.products`) keep their own threads.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import sys
import time
from datetime import datetime, timedelta, timezone

import numpy as np
import torch

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)
NOW = T0 + timedelta(days=60)


def texts_and_items(n: int, seed: int = 0):
    """Sentences of 6-12 words from a 5,000-word Zipfian vocabulary; a third have parents."""
    rng = np.random.default_rng(seed)
    vocab = np.array([f"w{i}{'abcdefgh'[i % 8]}" for i in range(5000)])
    p = 1.0 / np.arange(1, 5001) ** 1.05
    p /= p.sum()
    lengths = rng.integers(6, 13, size=n)
    words = rng.choice(vocab, size=int(lengths.sum()), p=p)
    cuts = np.cumsum(lengths)[:-1]
    texts = [" ".join(ws) for ws in np.split(words, cuts)]
    hours = rng.uniform(0, 60 * 24, size=n)
    items = []
    for i, (text, h) in enumerate(zip(texts, hours)):
        it = {"text": text, "id": f"m{i}", "t": T0 + timedelta(hours=float(h))}
        if i % 3 == 2:
            it["parent"] = f"m{int(rng.integers(0, i))}"
        items.append(it)
    return texts, items


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def current_rss_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024.0
    return float("nan")


CPU: list[float] = []
"""Process CPU seconds of the last :func:`timed` call's runs (one thread: the work, which a
loaded machine inflates less than the wall time)."""


def timed(fn, repeat=1):
    out, times = None, []
    CPU.clear()
    for _ in range(repeat):
        t, c = time.perf_counter(), time.process_time()
        out = fn()
        times.append(time.perf_counter() - t)
        CPU.append(time.process_time() - c)
    return out, times


def bench_add_and_single(n: int, n_queries: int, ref_queries: int) -> dict:
    from hypermem import HalfLife, HashingEmbedder, Memory

    _, items = texts_and_items(n)
    queries, _ = texts_and_items(n_queries, seed=1)
    res: dict = {"n": n}
    mem = Memory(embedder=HashingEmbedder(dim=256), decay=HalfLife(72), clock=lambda: NOW)
    _, t = timed(lambda: mem.add_many(items))
    res["hypermem_add_many_s"] = t[0]
    mem.search(queries[0], k=10, touch=False)  # warm-up
    _, ts = timed(lambda: [mem.search(q, k=10, touch=False) for q in queries])
    res["hypermem_search_ms"] = 1e3 * ts[0] / len(queries)
    per = []
    for q in queries:
        t0 = time.perf_counter()
        mem.search(q, k=10, touch=False)
        per.append(time.perf_counter() - t0)
    res["hypermem_search_median_ms"] = 1e3 * statistics.median(per)
    try:
        import poincare_memory as ref
    except ImportError:
        print("poincare-memory is not installed (the bench extra); skipping the reference", file=sys.stderr)
        return res
    if ref_queries <= 0:   # --ref-queries 0: the reference is not timed
        return res
    rmem = ref.Memory(embedder=ref.HashingEmbedder(dim=256), decay=ref.HalfLife(72), clock=lambda: NOW)
    _, t = timed(lambda: rmem.add_many(items))
    res["reference_add_many_s"] = t[0]
    per = []
    agree = 0
    for q in queries[:ref_queries]:
        t0 = time.perf_counter()
        r = rmem.search(q, k=10, touch=False)
        per.append(time.perf_counter() - t0)
        agree += [x.record.id for x in r] == [x.record.id for x in mem.search(q, k=10, touch=False)]
    res["reference_search_median_ms"] = 1e3 * statistics.median(per)
    res["same_top10_as_reference"] = f"{agree}/{len(per)}"
    return res


def bench_batch(m: int, batch: int, k: int, dtype: torch.dtype) -> dict:
    from hypermem import HalfLife, HashingEmbedder, Memory
    from hypermem.geometry import poincare as P
    from hypermem.geometry import to_mips_vectors

    res: dict = {"m": m, "batch": batch, "k": k, "dtype": str(dtype).replace("torch.", "")}
    rng = np.random.default_rng(2)
    emb = torch.from_numpy(rng.standard_normal((m, 256)))
    hours = rng.uniform(0, 60 * 24, size=m)
    parents = rng.integers(0, np.arange(1, m + 1))  # a random earlier memory

    def items():
        for i in range(m):
            it = {"text": f"memory {i}", "id": f"m{i}", "embedding": emb[i],
                  "t": T0 + timedelta(hours=float(hours[i]))}
            if i % 3 == 2:
                it["parent"] = f"m{int(parents[i - 1])}"
            yield it

    mem = Memory(embedder=HashingEmbedder(dim=256), decay=HalfLife(72), depth_bias=0.1, clock=lambda: NOW,
                 dtype=dtype)
    rss0 = peak_rss_mb()
    _, t = timed(lambda: mem.add_many(items()))
    res["build_s"] = t[0]
    res["rss_after_build_mb"] = current_rss_mb()
    queries = [torch.from_numpy(v) for v in rng.standard_normal((batch, 256))]
    qpts = [P.point_at(q, 1.0) for q in queries]
    mem.search_batch(qpts[:8], k=k, touch=False)  # warm-up
    rss_before = peak_rss_mb()
    out, ts = timed(lambda: mem.search_batch(qpts, k=k, touch=False), repeat=2)
    res["hypermem_batch_s"] = min(ts)
    res["hypermem_qps"] = batch / min(ts)
    res["peak_rss_mb_store"] = rss_before
    res["rss_before_build_mb"] = rss0
    # exactness: a few queries against a float64 brute force over all memories
    w = mem.time_weights().double()
    bias = 0.1 * mem.depths.double() + torch.log(w.clamp_min(1e-6))
    D = mem.directions.double()
    agree = 0
    for qi in range(min(5, batch)):
        q = queries[qi] / queries[qi].norm()
        cos = D @ q
        dist = P.shell_distance_from_cosine(cos, 1.0)
        ref_top = torch.topk(bias - dist, k).indices.tolist()
        agree += [mem.state.row[r.record.id] for r in out[qi]] == ref_top
    res["exact_vs_float64_bruteforce"] = f"{agree}/{min(5, batch)}"
    # The same search with the distance alone (no decay, no depth bias): no bias to prune
    # by, so every product is computed, as faiss does.
    full = (mem.time_coef, mem.depth_bias)
    mem.time_coef, mem.depth_bias = 0.0, 0.0
    _, ts = timed(lambda: mem.search_batch(qpts, k=k, touch=False), repeat=2)
    mem.time_coef, mem.depth_bias = full
    res["hypermem_distance_only_s"] = min(ts)
    res["hypermem_distance_only_cpu_s"] = min(CPU)
    res["peak_rss_mb_after_searches"] = peak_rss_mb()
    try:
        import faiss
    except ImportError:
        print("faiss is not installed (the ann extra); skipping faiss", file=sys.stderr)
        return res
    faiss.omp_set_num_threads(torch.get_num_threads())  # the same threads as hypermem (OpenMP spins when oversubscribed)
    shell = P.point_at(mem.directions.double(), 1.0)
    V = to_mips_vectors(P.to_lorentz(shell)).float().numpy()
    index = faiss.IndexFlatIP(V.shape[1])
    index.add(np.ascontiguousarray(V))
    Qv = P.to_lorentz(torch.stack(queries).double() / torch.stack(queries).double().norm(dim=1, keepdim=True)
                      * np.tanh(0.5)).float().numpy()
    index.search(Qv[:8], k)
    _, ts = timed(lambda: index.search(np.ascontiguousarray(Qv), k), repeat=2)
    res["faiss_flatip_s"] = min(ts)
    res["faiss_flatip_cpu_s"] = min(CPU)
    res["faiss_qps"] = batch / min(ts)
    res["throughput_vs_faiss"] = res["hypermem_qps"] / res["faiss_qps"]
    res["distance_only_throughput_vs_faiss"] = res["faiss_flatip_s"] / res["hypermem_distance_only_s"]
    # the guard's ratio: CPU seconds, both sides on one thread (wall times swing with the load)
    res["distance_only_cpu_vs_faiss"] = res["faiss_flatip_cpu_s"] / res["hypermem_distance_only_cpu_s"]
    return res


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=100_000, help="memories for add_many and single search")
    ap.add_argument("--queries", type=int, default=50, help="single queries timed for hypermem")
    ap.add_argument("--ref-queries", type=int, default=5, help="single queries timed for the reference")
    ap.add_argument("--m", type=int, default=1_000_000, help="memories for the batch benchmark")
    ap.add_argument("--batch", type=int, default=1000)
    ap.add_argument("-k", type=int, default=10)
    ap.add_argument("--dtype", choices=["float32", "float64"], default="float32")
    ap.add_argument("--skip", choices=["single", "batch"], action="append", default=[])
    ap.add_argument("--threads", type=int, default=0,
                    help="torch threads (0: torch's default); 1 compares single cores on a shared machine")
    ap.add_argument("--json", help="write the results here")
    ap.add_argument("--guard", type=float, default=None,
                    help="exit 1 when the distance-only search_batch throughput is below this share of faiss "
                         "IndexFlatIP's, measured in the same run (the hot path's regression guard)")
    args = ap.parse_args(argv)
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    results = {"date": datetime.now(timezone.utc).strftime("%Y-%m-%d"), "machine": platform.machine(),
               "torch_threads": torch.get_num_threads(), "torch": torch.__version__}
    if "single" not in args.skip:
        results["single"] = bench_add_and_single(args.n, args.queries, args.ref_queries)
        print(json.dumps(results["single"], indent=1), flush=True)
    if "batch" not in args.skip:
        results["batch"] = bench_batch(args.m, args.batch, args.k, getattr(torch, args.dtype))
        print(json.dumps(results["batch"], indent=1), flush=True)
    if args.json:
        os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
        print(f"results: {os.path.abspath(args.json)}")
    batch = results.get("batch", {})
    ratio = batch.get("distance_only_cpu_vs_faiss" if args.threads == 1 else "distance_only_throughput_vs_faiss")
    if args.guard is not None and ratio is not None and ratio < args.guard:
        print(f"REGRESSION: distance-only search_batch at {ratio:.2f}x faiss IndexFlatIP's throughput, "
              f"below the guard {args.guard:.2f}x", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
