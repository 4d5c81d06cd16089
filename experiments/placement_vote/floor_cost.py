"""The cost of the nearest-neighbour floor (``hypermem.store.nearest_floor``): the first
``add(parent="auto")`` of a 100,000-memory store reads it, the next ones reuse it.

    python experiments/placement_vote/floor_cost.py

A hashing embedder (dim 384), 100 parents and 100,000 notes under them; six ``add(text,
parent="auto")`` calls (each removed after), without and with the floor.
"""

from __future__ import annotations

import time
import warnings

import torch

import hypermem.store.nearest_floor as nf
from hypermem import HashingEmbedder, Memory


def main() -> None:
    torch.set_num_threads(1)
    warnings.simplefilter("ignore")
    for q in (None, 0.01):
        nf.FLOOR_QUANTILE = q
        m = Memory(embedder=HashingEmbedder(dim=384))
        m.add_many([{"id": f"p{j}", "text": f"topic {j}"} for j in range(100)])
        m.add_many([{"id": f"m{i}", "text": f"note {i} about topic {i % 100} and {i % 977}", "parent": f"p{i % 100}"}
                    for i in range(100_000)])
        ts = []
        for j in range(6):
            t = time.perf_counter()
            k = m.add(f"a new note about topic {j} and {j * 7}", parent="auto")
            ts.append(time.perf_counter() - t)
            m.remove(k)
        print(f"floor {q}: first add(parent='auto') {ts[0] * 1e3:.0f} ms, next (median of 5) "
              f"{sorted(ts[1:])[2] * 1e3:.0f} ms, floor {m.suggester.floor():.3f}", flush=True)


if __name__ == "__main__":
    main()
