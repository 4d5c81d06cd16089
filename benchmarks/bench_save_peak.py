"""Peak RAM and time of ``Memory.save``, ``Memory.load`` and ``Memory.open`` (SQLite) on a store of
``N`` memories with their own 256-dimensional embeddings (``add_many(embedding=...)``).

Each operation runs in a fresh subprocess; the peak is ``ru_maxrss`` of that process (the
build's own peak is reported before the operation, so the save line shows whether the save
raised it).  Files go to a temporary folder, removed at the end.

    OMP_NUM_THREADS=1 PYTHONPATH=. python benchmarks/bench_save_peak.py [N]    # default 100000

``--open N FOLDER`` runs only the ``open`` case against ``FOLDER/durable.db`` (built there by the
first such run and kept), so open can be timed before and after a change on one file.
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timedelta, timezone

import numpy as np

NOW = datetime(2026, 12, 1, tzinfo=timezone.utc)
DIM = 256


def _clock():
    return NOW


def _no_text(texts):
    raise RuntimeError("the benchmark passes every embedding")


def _rss() -> float:
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS")) / 1e6


def _peak() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6


def _items(n: int):
    """``n`` add_many items in parts of 20k: clustered unit embeddings, a meta, one parent in ten."""
    g = np.random.default_rng(0)
    centres = g.standard_normal((500, DIM)).astype(np.float32)
    for lo in range(0, n, 20_000):
        hi = min(n, lo + 20_000)
        x = centres[g.integers(0, 500, hi - lo)] + 0.6 * g.standard_normal((hi - lo, DIM)).astype(np.float32)
        x /= np.linalg.norm(x, axis=1, keepdims=True)
        yield [{"text": f"m{i}", "id": f"m{i}", "embedding": x[i - lo], "t": NOW - timedelta(seconds=i),
                "meta": {"tenant": i % 1000}, **({"parent": f"m{i - i % 10}"} if i % 10 else {})}
               for i in range(lo, hi)]


def _child(op: str, n: int, folder: str) -> None:
    from hypermem import Memory
    from hypermem.embed import CallableEmbedder
    emb = CallableEmbedder(_no_text, dim=DIM)
    snap, durable = os.path.join(folder, "snap.db"), os.path.join(folder, "durable.db")
    if op in ("save", "build-durable"):
        mem = (Memory.open(durable, embedder=emb, clock=_clock, vector_dtype="float32") if op == "build-durable"
               else Memory(embedder=emb, clock=_clock))
        for part in _items(n):
            mem.add_many(part)
        if op == "build-durable":
            mem.close()
            return
        before, build_peak = _rss(), _peak()
        t0 = time.perf_counter()
        mem.save(snap)
        print(f"save {n}: {time.perf_counter() - t0:.1f} s, resident {before:.2f} GB (build peak {build_peak:.2f}), "
              f"peak {_peak():.2f} GB, file {os.path.getsize(snap) / 1e9:.2f} GB", flush=True)
        return
    before = _rss()
    t0 = time.perf_counter()
    mem = (Memory.load(snap, embedder=emb, clock=_clock) if op == "load"
           else Memory.open(durable, embedder=emb, clock=_clock))
    print(f"{op} {n}: {time.perf_counter() - t0:.1f} s, before {before:.2f} GB, resident after {_rss():.2f} GB, "
          f"peak {_peak():.2f} GB", flush=True)


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description="peak RAM and time of Memory.save, Memory.load and "
                                 "Memory.open (SQLite), each in a fresh subprocess")
    ap.add_argument("n", nargs="?", type=int, default=100_000, help="memories in the store (default 100000)")
    ap.add_argument("--open", nargs=2, metavar=("N", "FOLDER"),
                    help="only the open case against FOLDER/durable.db (built there by the first such run, kept)")
    ap.add_argument("--child", nargs=3, metavar=("OP", "N", "FOLDER"), help=argparse.SUPPRESS)
    return ap


def main(argv: list[str] | None = None) -> None:
    args = _parser().parse_args(argv)
    if args.child:
        op, n, folder = args.child
        _child(op, int(n), folder)
        return
    if args.open:
        n, folder = int(args.open[0]), args.open[1]
        ops = ("open",) if os.path.exists(os.path.join(folder, "durable.db")) else ("build-durable", "open")
        for op in ops:
            subprocess.run([sys.executable, __file__, "--child", op, str(n), folder], check=True)
        return
    with tempfile.TemporaryDirectory() as folder:
        for op in ("save", "load", "build-durable", "open"):
            subprocess.run([sys.executable, __file__, "--child", op, str(args.n), folder], check=True)


if __name__ == "__main__":
    main()
