#!/usr/bin/env python
"""A million memories on one machine: the in-process table (and the durable one, when
``benchmarks/scale_durable.py`` is there), printed as RESULTS.md rows.

In process, on one store of ``--n`` memories at dim ``--dim`` (texts from a Zipfian
vocabulary through the hashing embedder, a third with parents, times spread on 60 days,
HalfLife 30 days), one torch thread:

1. ``add_many`` in batches (memories/s), the process's resident memory above the empty
   process per memory (VmRSS and RssAnon, read from ``/proc/self/status``);
2. one exact ``search`` (median over ``--queries`` held-out texts): the float32 mirror with
   the float64 re-score (the default) against the float64 scan, alternating, with the
   largest score difference between the two; the bytes a query reads and the memory
   bandwidth measured by summing the mirror (the floor of an exact scan);
3. ``--ann``: ``build_index("faiss", bands=...)`` (HNSW over the directions, one graph per
   band of time, for each of ``--bands``) and, for each ``--ef``,
   the median latency of ``search(use_index=True)`` and its recall@10 against the exact
   search (``oversample=2``: 20 graph candidates, more while the bias bound asks), with the
   time term (the full score) and without it (distance only).

Durable rows (``--durable ingest,refresh,ann``): ``scale_durable.py``'s
``ingest_rows``, ``refresh_rows`` and ``pg_ann_rows`` (SQLite and PostgreSQL ingest,
incremental refresh under another process's touches, PostgreSQL HNSW), printed with its
``markdown``.

Usage::

    python benchmarks/bench_scale.py --n 1000000 --ann              # the issue's table, in process
    python benchmarks/bench_scale.py --n 1000000 --ann --build-threads 2 --durable ingest,refresh,ann   # the whole table (refresh at 100k)
    python benchmarks/bench_scale.py --n 20000 --queries 5 --ann --ef 20,80   # smoke
    python benchmarks/bench_scale.py --n 200000 --embeddings float32 --dtype float32   # RSS, float32 columns
    python benchmarks/bench_scale.py --n 200000 --embeddings float32 --dtype float32 --bound sqlite   # RSS of a bound store
    python benchmarks/bench_scale.py --n 100000 --ann --durable ingest,refresh,ann   # everything
"""

from __future__ import annotations

import argparse
import gc
import os
import random
import statistics
import sys
import time
from datetime import datetime, timedelta, timezone

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_search import texts_and_items  # noqa: E402 (the benchmarks' shared data)

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)
NOW = T0 + timedelta(days=60)


def status() -> dict[str, int]:
    """VmRSS, RssAnon and RssFile of this process, in bytes."""
    out = {}
    with open("/proc/self/status") as f:
        for line in f:
            key = line.split(":")[0]
            if key in ("VmRSS", "RssAnon", "RssFile", "VmHWM"):
                out[key] = int(line.split()[1]) * 1024
    return out


def load() -> str:
    return "load {:.1f} {:.1f} {:.1f}".format(*os.getloadavg())


def row(*cells) -> None:
    print("| " + " | ".join(str(c) for c in cells) + " |", flush=True)


def build(n: int, dim: int, batch: int, dtype: torch.dtype, float32_embeddings: bool = False, bound: str = ""):
    """The store: in process, or (``bound="sqlite"``) bound to a SQLite file in a temporary
    folder, which then holds the embeddings (the state reads them back when needed)."""
    from hypermem import HalfLife, HashingEmbedder, Memory

    class Float32Hashing(HashingEmbedder):
        """The hashing embedder's vectors rounded to float32, as a float32 text embedder
        (sentence-transformers, most APIs) delivers them."""

        def embed(self, texts):
            return super().embed(texts).to(torch.float32).to(torch.float64)

    gc.collect()
    base = status()
    emb = (Float32Hashing if float32_embeddings else HashingEmbedder)(dim=dim)
    kw = {"embedder": emb, "decay": HalfLife(30 * 24), "clock": lambda: NOW, "dtype": dtype}
    if bound == "sqlite":
        import tempfile

        mem = Memory.open(os.path.join(tempfile.mkdtemp(prefix="bench_scale_"), "m.db"), **kw)
    else:
        mem = Memory(**kw)
    t_total = 0.0
    for start in range(0, n, batch):
        m = min(batch, n - start)
        _, items = texts_and_items(m, seed=1000 + start)
        for it in items:  # ids and parents of this batch, shifted to the whole store
            j = int(it["id"][1:]) + start
            it["id"] = f"m{j}"
            if "parent" in it:
                it["parent"] = f"m{int(it['parent'][1:]) + start}"
        t = time.perf_counter()
        mem.add_many(items)
        t_total += time.perf_counter() - t
        del items
    gc.collect()
    return mem, base, t_total


def bandwidth(x: torch.Tensor, repeat: int = 3) -> float:
    """GB/s of one pass summing ``x`` (the floor of any scan that reads it once)."""
    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        float(x.sum())
        best = min(best, time.perf_counter() - t)
    return x.numel() * x.element_size() / best / 1e9


def timed_searches(mem, queries, **kw) -> tuple[str, list]:
    """"wall / CPU" median milliseconds of one search each (CPU time: this process's, which a
    loaded machine inflates less than the wall time), and the answers."""
    wall, cpu, out = [], [], []
    for q in queries:
        t, c = time.perf_counter(), time.process_time()
        out.append(mem.search(q, k=10, touch=False, **kw))
        wall.append(time.perf_counter() - t)
        cpu.append(time.process_time() - c)
    return f"{1e3 * statistics.median(wall):.1f} / {1e3 * statistics.median(cpu):.1f}", out


def exact_section(mem, queries, base, n, dim, rounds: int) -> None:
    st = mem.state
    mem.search(queries[0], k=10, touch=False)  # builds the mirror
    rss = status()
    where = "In process" if mem.storage is None else f"Bound to {type(mem.storage).__name__}"
    print(f"\n### {where}, {n:,} memories x {dim} ({st.dtype} store, float32 mirror), {load()}\n")
    row("metric", "value")
    row("---", "---:")
    row("RSS above the empty process, per memory (VmRSS / RssAnon)",
        f"{(rss['VmRSS'] - base['VmRSS']) / n:,.0f} B / {(rss['RssAnon'] - base['RssAnon']) / n:,.0f} B")
    names = ("direction", "embedding", "depth", "time", "access", "valid_from", "valid_until")
    cols = {name: None if getattr(st, name) is None else getattr(st, name)[: st.n] for name in names}
    cols["mirror"] = st.search_keys()
    for name, t in cols.items():
        size = "0 (in the storage)" if t is None else f"{t.element_size() * (t.numel() // max(1, st.n)):,}"
        row(f"column `{name}`, bytes per memory", size)
    mirror_ms, f64_ms, worst = [], [], 0.0
    for _ in range(rounds):
        ms, fast = timed_searches(mem, queries)
        mirror_ms.append(ms)
        mem.searcher.mirror_min_rows = 1 << 62
        ms, slow = timed_searches(mem, queries)
        f64_ms.append(ms)
        mem.searcher.mirror_min_rows = 0
        for a, b in zip(fast, slow):
            assert [r.record.id for r in a] == [r.record.id for r in b], "mirror and float64 scan disagree"
            worst = max([worst] + [abs(x.score - y.score) for x, y in zip(a, b)])
    scalar = 8 * 5  # depth, time, access, validity: read by the weights and the bias
    read32, read64 = n * (dim * 4 + scalar), n * (dim * 8 + scalar)
    bw = bandwidth(st.search_keys())
    row("exact `search`, float32 mirror + float64 re-score, median ms wall / CPU (rounds)", "; ".join(mirror_ms))
    row("exact `search`, float64 scan, median ms wall / CPU (rounds)", "; ".join(f64_ms))
    row("largest score difference, mirror vs float64 scan (same ids)", f"{worst:.1e}")
    row("bytes read per query, mirror / float64", f"{read32 / 1e9:.2f} GB / {read64 / 1e9:.2f} GB")
    row("memory bandwidth (one thread summing the mirror)", f"{bw:.1f} GB/s")
    row("bandwidth floor of the mirror scan", f"{read32 / bw / 1e6:.0f} ms")


def remove_section(mem, queries, count: int, seed: int = 0) -> None:
    """``count`` removals of memories drawn over the whole store (one in the first tenth
    of the rows each time: the worst case moves nearly every row) and ``count`` of the
    newest memory, each followed by a search (the first after a change pays for bringing
    the mirror and the indexes in step): median ms wall / CPU."""
    rng = random.Random(seed)
    n = mem.state.n
    print(f"\n### Removing memories from {n:,} ({mem.state.dtype} store), {load()}\n")
    row("removal", "`remove`, median ms wall / CPU", "the `search` after it, median ms wall / CPU")
    row("---", "---:", "---:")
    for label, pick in (("a memory drawn from the first tenth of the rows", lambda: rng.randrange(n // 10)),
                        ("the newest memory (just added)", None)):
        rm_wall, rm_cpu, s_wall, s_cpu = [], [], [], []
        for j in range(count):
            if pick is None:
                victim = mem.add(f"a note added to be removed {j}")
                mem.search(queries[0], k=10, touch=False)
            else:
                victim = mem.state.ids[pick()]
            t, c = time.perf_counter(), time.process_time()
            mem.remove(victim, cascade=True)
            rm_wall.append(time.perf_counter() - t)
            rm_cpu.append(time.process_time() - c)
            t, c = time.perf_counter(), time.process_time()
            mem.search(queries[j % len(queries)], k=10, touch=False)
            s_wall.append(time.perf_counter() - t)
            s_cpu.append(time.process_time() - c)
        row(label, f"{1e3 * statistics.median(rm_wall):.1f} / {1e3 * statistics.median(rm_cpu):.1f}",
            f"{1e3 * statistics.median(s_wall):.1f} / {1e3 * statistics.median(s_cpu):.1f}")


def recall(exact, got) -> float:
    """recall@k, tie-aware: a returned memory counts when it is in the exact top-k or scores
    at least the exact k-th score (texts that hash alike tie, and ties are broken by row)."""
    hits = total = 0
    for e, g in zip(exact, got):
        ids = {r.record.id for r in e}
        kth = e[-1].score if e else float("inf")
        hits += min(len(e), sum(r.record.id in ids or r.score >= kth - 1e-12 for r in g))
        total += len(e)
    return hits / max(1, total)


def ann_section(mem, queries, efs, n, m, ef_construction, bands="auto", build_threads=1, threads=1) -> None:
    import faiss

    faiss.omp_set_num_threads(build_threads)
    t = time.perf_counter()
    index = mem.build_index("faiss", hnsw_m=m, ef_construction=ef_construction, bands=bands)
    build_s = time.perf_counter() - t
    faiss.omp_set_num_threads(threads)
    print(f"\n### ANN in process: faiss HNSW over the directions (M {m}, ef_construction {ef_construction}, "
          f"{index.n_bands} band(s) of time, bands={bands!r}), {load()}\n")
    rss = status()
    row("score", "ef_search", "median ms wall / CPU", "recall@10 vs exact")
    row("---", "---:", "---:", "---:")
    full = mem.time_coef
    for label, coef in (("full score (HalfLife 30 d)", full), ("distance only", 0.0)):
        mem.time_coef = coef
        exact = mem.search_batch(queries, k=10, touch=False, use_index=False)
        timed_searches(mem, queries, use_index=True, oversample=2)  # warm-up: every query once (the graphs paged in)
        for ef in efs:
            index.ef_search = ef
            ms, got = timed_searches(mem, queries, use_index=True, oversample=2)
            row(label, ef, ms, f"{recall(exact, got):.3f}")
    mem.time_coef = full
    print(f"\nHNSW build {build_s:.0f} s ({build_threads} thread(s)) for {n:,} memories; peak RSS {rss['VmHWM'] / 1e9:.1f} GB", flush=True)


def durable_section(args) -> None:
    """The durable rows of ``scale_durable`` (ingest, refresh, PostgreSQL ANN), if it is there."""
    if not args.durable:
        return
    try:
        import scale_durable
    except ImportError:
        print("\n(benchmarks/scale_durable.py is not there: durable rows skipped)", flush=True)
        return
    backends = tuple(args.backends.split(","))
    print(f"\n### Durable: {', '.join(backends)}, {args.n:,} memories x {args.dim}, {load()}\n", flush=True)
    for part in args.durable.split(","):
        if part == "ingest":
            rows = scale_durable.ingest_rows(args.n, args.dim, backends=backends)
        elif part == "refresh":
            rows = scale_durable.refresh_rows(min(args.n, args.refresh_n), args.dim, backends=backends)
        elif part == "ann":
            rows = scale_durable.pg_ann_rows(args.n, args.dim, tuple(int(e) for e in args.ef.split(",")), on=("dirv",),
                                             ef_construction=128, queries=args.queries)
        else:
            raise SystemExit(f"unknown durable part {part!r}")
        print(scale_durable.markdown(rows), flush=True)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--dim", type=int, default=256)
    ap.add_argument("--batch", type=int, default=100_000, help="add_many batch size")
    ap.add_argument("--queries", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=2, help="alternations of mirror / float64 scan")
    ap.add_argument("--ann", action="store_true", help="the HNSW recall-latency curve")
    ap.add_argument("--ef", default="20,50,100,200,400,800")
    ap.add_argument("--hnsw-m", type=int, default=32)
    ap.add_argument("--ef-construction", type=int, default=40)
    ap.add_argument("--bands", default="auto", help="build_index(bands=...) of each ANN build: auto or integers, comma-separated")
    ap.add_argument("--dtype", choices=["float64", "float32"], default="float64",
                    help="the store's dtype (float32: no separate mirror; ANN runs need less RAM)")
    ap.add_argument("--embeddings", choices=["float64", "float32"], default="float64",
                    help="float32: the hashing vectors rounded to float32, as a float32 text embedder gives them")
    ap.add_argument("--skip-exact", action="store_true", help="no exact rows (with --ann: the ANN rows alone)")
    ap.add_argument("--bound", choices=["", "sqlite"], default="",
                    help="sqlite: the store bound to a SQLite file (its embeddings there, not in RAM)")
    ap.add_argument("--skip-in-process", action="store_true")
    ap.add_argument("--durable", default="", help="durable parts of scale_durable.py: ingest,refresh,ann")
    ap.add_argument("--backends", default="sqlite,postgres", help="durable backends")
    ap.add_argument("--refresh-n", type=int, default=100_000,
                    help="the refresh part's store size, at most --n (the issue measures it at 100k: at 1M "
                         "its full re-read alone takes minutes)")
    ap.add_argument("--remove", type=int, default=0, help="time this many removals (old and newest memories)")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--build-threads", type=int, default=None, help="faiss threads of the HNSW build (default --threads)")
    args = ap.parse_args(argv)
    started = time.perf_counter()
    torch.set_num_threads(args.threads)
    try:
        import faiss

        faiss.omp_set_num_threads(args.threads)
    except ImportError:
        faiss = None
    print(f"bench_scale {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC, torch {torch.__version__}, "
          f"{args.threads} thread(s), {os.cpu_count()} cores, {load()}", flush=True)
    if not args.skip_in_process:
        t = time.perf_counter()
        mem, base, add_s = build(args.n, args.dim, args.batch, getattr(torch, args.dtype), args.embeddings == "float32",
                                 args.bound)
        print(f"built {args.n:,} memories in {time.perf_counter() - t:.0f} s (add_many {args.n / add_s:,.0f} "
              f"memories/s, embedding included)", flush=True)

        texts, _ = texts_and_items(args.queries, seed=7)
        queries = [mem.embed_query(q) for q in texts]
        mem.searcher.mirror_min_rows = 0
        if not args.skip_exact:
            exact_section(mem, queries, base, args.n, args.dim, args.rounds)
        if args.ann:
            if faiss is None:
                print("faiss is not installed (the ann extra): ANN rows skipped")
            else:
                for bands in args.bands.split(","):
                    ann_section(mem, queries, [int(x) for x in args.ef.split(",")], args.n, args.hnsw_m,
                                args.ef_construction, bands if bands == "auto" else int(bands),
                                args.build_threads or args.threads, args.threads)
        if args.remove:
            remove_section(mem, queries, args.remove)
        del mem
        gc.collect()
    durable_section(args)
    print(f"\nwhole run: {(time.perf_counter() - started) / 60:.1f} min, {load()}", flush=True)
    return 0


if __name__ == "__main__":
    np.seterr(all="ignore")
    sys.exit(main())
