#!/usr/bin/env python
"""CPU seconds of one training step of the RAG model (hypermem.train.rag.HyperbolicRAG).

The step cost depends on the sizes (slots, dim, batch, k), not on what the embeddings say, so
the texts are embedded by the fast HashingEmbedder (dim 384, like MiniLM) unless
--minilm is given.  Each configuration: one warm-up step, then --steps timed steps;
time.process_time (CPU seconds of this process, all threads) and wall seconds per step.

    .venv/bin/python benchmarks/bench_rag.py                 # all nouns
    .venv/bin/python benchmarks/bench_rag.py --root mammal.n.01
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("HF_HUB_OFFLINE", "1")


def step_seconds(data, fast: bool, learn_keys: bool, steps: int, batch: int, k: int) -> tuple[float, float]:
    import torch

    from hypermem.train.rag import HyperbolicRAG, RAGModule, build_store, train_step

    torch.manual_seed(0)
    model = HyperbolicRAG(build_store(data), data.slot_parent, data.dim, k=k, learn_keys=learn_keys, fast=fast)
    opts = RAGModule(model).configure_optimizers()
    order = torch.randperm(len(data.train_slots))
    cpu = wall = 0.0
    for i in range(steps + 1):
        rows = data.train_slots[order[(i * batch) % len(order):][:batch]]
        x, y = data.slot_emb[rows], data.slot_parent[rows]
        c0, w0 = time.process_time(), time.perf_counter()
        train_step(model, opts, x, y, rows)
        if i:  # the first step fills the caches
            cpu += time.process_time() - c0
            wall += time.perf_counter() - w0
    return cpu / steps, wall / steps


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--root", default=None, help="subtree (default: all nouns)")
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--k", type=int, default=32)
    p.add_argument("--threads", type=int, default=0)
    p.add_argument("--minilm", action="store_true", help="embed with MiniLM (cached) instead of hashing")
    args = p.parse_args(argv)
    import torch

    from hypermem.embed import HashingEmbedder
    from hypermem.train.rag_data import build_rag_data

    if args.threads:
        torch.set_num_threads(args.threads)
    t0 = time.perf_counter()
    data = build_rag_data(args.root, n_test=2000 if args.root is None else 100, seed=0, cache=args.minilm,
                          embedder=None if args.minilm else HashingEmbedder(dim=384))
    print(f"{data} built in {time.perf_counter() - t0:.0f}s; torch threads {torch.get_num_threads()}, "
          f"batch {args.batch}, k {args.k}, {args.steps} timed steps")
    print("| selection and key cache | keys | CPU s / step | wall s / step |")
    print("|---|---|---:|---:|")
    for fast in (False, True):
        for learn in (True, False):
            cpu, wall = step_seconds(data, fast, learn, args.steps, args.batch, args.k)
            name = "cosine matmul + topk, moved rows refreshed" if fast else "memory.select (chunked), full refresh"
            print(f"| {name} | {'trained' if learn else 'frozen'} | {cpu:.2f} | {wall:.2f} |", flush=True)


if __name__ == "__main__":
    main()
