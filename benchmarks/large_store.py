"""A large store saved to a file, for the import / export / load measurements (RESULTS,
"a memory JSON read a record at a time").

    python benchmarks/large_store.py 100000 d.db      # then: hypermem export d.db d.json

``n`` memories of 12 random words from 5,000 (seed 0), a 256-dimensional hashing embedder,
two metadata fields, every third memory the child of the one before it.
"""

from __future__ import annotations

import argparse
import random

from hypermem import Memory
from hypermem.embed import HashingEmbedder


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("n", type=int)
    ap.add_argument("out")
    a = ap.parse_args(argv)
    rng = random.Random(0)
    words = [f"w{i}" for i in range(5000)]
    mem = Memory(embedder=HashingEmbedder(dim=256))
    mem.add_many([{"id": f"m{i}", "text": " ".join(rng.choices(words, k=12)), "meta": {"k": i % 7, "tag": "x"},
                   **({"parent": f"m{i - 1}"} if i % 3 == 2 else {})} for i in range(a.n)])
    mem.save(a.out)
    print(f"{len(mem)} memories saved to {a.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
