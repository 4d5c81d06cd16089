"""The cost of the chance share in ``suggest_parents``: 100k memories under one root, or in a tree
of fan-out 8; ms per call, then the first call after a write (the counts read again), against
the plain share.

    python experiments/placement_vote/chance_cost.py
"""

from __future__ import annotations

import argparse
import time

import torch

import hypermem.store.suggest as suggest
from hypermem import Memory
from hypermem.store.vote import neighbour_vote

QUERIES = [f"a note about item {j} and thing {j % 7}" for j in range(20)]


def plain(*args, chance=None, **kw):   # the share alone, as before 2026-12-06
    return neighbour_vote(*args, **kw)


def per_call(mem: Memory) -> float:
    t = time.perf_counter()
    for q in QUERIES:
        mem.suggest_parents(q, k=5)
    return (time.perf_counter() - t) / len(QUERIES) * 1e3


def after_a_write(mem: Memory, text: str) -> float:
    mem.add(text, parent="r0")
    t = time.perf_counter()
    mem.suggest_parents(QUERIES[0], k=5)
    return (time.perf_counter() - t) * 1e3


def main() -> None:
    torch.set_num_threads(1)
    store_rule = suggest.neighbour_vote
    for n, fan in ((100_000, None), (100_000, 8)):
        mem = Memory(hybrid=0.0)
        items = [{"text": "everything", "id": "r0"}]
        for i in range(1, n):
            items.append({"text": f"note {i} about item {i % 97} and thing {i % 31}", "id": f"r{i}",
                          "parent": "r0" if fan is None else f"r{(i - 1) // fan}"})
        mem.add_many(items)
        per_call(mem)
        less = per_call(mem)
        suggest.neighbour_vote = plain
        per_call(mem)
        base = per_call(mem)
        base_write = after_a_write(mem, "one more")
        suggest.neighbour_vote = store_rule
        less_write = after_a_write(mem, "one more again")
        shape = "one root" if fan is None else f"fan-out {fan}"
        print(f"n={n} {shape}: suggest_parents less chance {less:.1f} ms, plain {base:.1f} ms; the first call "
              f"after a write {less_write:.1f} ms, plain {base_write:.1f} ms")


if __name__ == "__main__":
    argparse.ArgumentParser(description=__doc__.split("\n\n")[0]).parse_args()   # --help, no options
    main()
