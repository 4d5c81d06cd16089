"""Reclaiming a durable SQLite store's space after many removals (docs/storage.md, "Reclaiming
disk space"): the file's size and free pages before and after ``VACUUM``, and its time, while
a writer and a reader keep the store open.  The store is in WAL mode: ``VACUUM`` writes the
rewritten pages to the ``-wal`` file and a ``PRAGMA wal_checkpoint(TRUNCATE)`` after it moves
them into the file, shrinks it and empties the log (without it the file shrinks only when a later
checkpoint completes).

    python benchmarks/bench_vacuum.py --n 64000 --remove 54000
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import tempfile
import time

from hypermem import Memory


def free_mb(path: str) -> tuple[float, float, float]:
    """The file's size, its free pages and its ``-wal`` file's size, in MB."""
    con = sqlite3.connect(path)
    try:
        size = con.execute("PRAGMA page_size").fetchone()[0]
        free = con.execute("PRAGMA freelist_count").fetchone()[0]
    finally:
        con.close()
    wal = path + "-wal"
    return os.path.getsize(path) / 2**20, free * size / 2**20, (os.path.getsize(wal) if os.path.exists(wal) else 0) / 2**20


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=64_000)
    ap.add_argument("--remove", type=int, default=54_000)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "mem.db")
        writer = Memory.open(path)
        writer.add_many([{"text": f"note {i} about item {i % 97}", "id": f"m{i}"} for i in range(args.n)])
        writer.remove_many([f"m{i}" for i in range(args.remove)])
        reader = Memory.open(path, read_only=True)
        before = free_mb(path)
        t = time.perf_counter()
        con = sqlite3.connect(path, timeout=60)
        con.execute("VACUUM")   # in WAL mode the rewritten pages go to the -wal file first;
        con.execute("PRAGMA wal_checkpoint(TRUNCATE)")   # the checkpoint moves them and shrinks the file
        con.close()
        seconds = time.perf_counter() - t
        after = free_mb(path)
        writer.add("written after the vacuum", id="after")
        still = reader.refresh() and "after" in reader and len(reader) == args.n - args.remove + 1
        print(json.dumps({"n": args.n, "removed": args.remove, "file_mb_before": round(before[0], 1),
                          "free_mb_before": round(before[1], 1), "wal_mb_before": round(before[2], 1),
                          "file_and_wal_mb_before": round(before[0] + before[2], 1),
                          "file_and_wal_mb_after": round(after[0] + after[2], 1),
                          "vacuum_s": round(seconds, 3), "file_mb_after": round(after[0], 1),
                          "free_mb_after": round(after[1], 1), "wal_mb_after": round(after[2], 1),
                          "writer_and_reader_still_work": bool(still)}))
        reader.close()
        writer.close()


if __name__ == "__main__":
    main()
