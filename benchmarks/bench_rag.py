#!/usr/bin/env python
"""CPU seconds of one training step of the RAG model (hypermem.nn.HyperbolicRAG).

The step cost depends on the sizes (slots, dim, batch, k), not on what the embeddings say, so
the texts are embedded by the fast HashingEmbedder (dim 384, like MiniLM) unless
--minilm is given.  Each configuration: one warm-up step, then --steps timed steps;
time.process_time (CPU seconds of this process, all threads) and wall seconds per step.

    .venv/bin/python benchmarks/bench_rag.py                 # all nouns
    .venv/bin/python benchmarks/bench_rag.py --root mammal.n.01

--compare runs the whole comparison (experiments/rag/comparison.py run_comparison, every baseline,
MiniLM embeddings from the cache) once per --seeds (data split and training seed) and
prints test metrics as mean and 95% t-interval over the seeds, and the paired differences
(e) - (g) (hyperbolic minus its Euclidean twin), (e) - (c) and (e) - (h) (the linear map with
the same readout):

    .venv/bin/python benchmarks/bench_rag.py --compare --root mammal.n.01 --seeds 0 1 2

--only-run writes each seed's <out>/seed<k>/results.json without the table (one process per
seed, for instance), --aggregate prints the table of those files without running.
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
    """CPU and wall seconds of one training step (RAGModule's optimizers: geoopt's
    SparseRiemannianAdam for trainable keys)."""
    import torch

    from experiments.rag.comparison import RAGModule, build_store, train_step
    from hypermem.nn import HyperbolicRAG

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


def interval(values) -> tuple[float, float]:
    """Mean and half-width of the 95% Student-t interval of ``values`` (0 for one value)."""
    import numpy as np
    from scipy import stats

    v = np.asarray(values, dtype=float)
    if len(v) < 2:
        return float(v.mean()), 0.0
    return float(v.mean()), float(stats.t.ppf(0.975, len(v) - 1) * v.std(ddof=1) / np.sqrt(len(v)))


def compare(args) -> None:
    import json

    from experiments.rag.comparison import run_comparison

    runs = []
    for seed in args.seeds:
        if args.aggregate:  # the seeds' results.json of earlier runs (for instance one process per seed)
            runs.append(json.loads(Path(f"{args.out}/seed{seed}/results.json").read_text()))
            continue
        cfg = {"data": {"root": args.root, "n_test": args.n_test, "n_val": args.n_val, "seed": seed},
               "train": {"seed": seed, "batch_size": args.batch, "epochs": args.epochs, "val_every": args.val_every,
                         "patience": args.patience, "threads": args.threads},
               "linear": {"epochs": args.linear_epochs},
               "model": {"k": args.k}, "out": f"{args.out}/seed{seed}"}
        runs.append(run_comparison(cfg, log=print if args.only_run else None))
        r = runs[-1]["results"]
        print(f"seed {seed}: " + ", ".join(f"{n.split(')')[0]})  {100 * r[n]['test']['hits@10']:.1f}"
                                           for n in r), flush=True)
    if not args.only_run:
        table(runs, args.seeds)
    if not args.aggregate:
        seeds = ",".join(map(str, args.seeds))
        print(f"results: {Path(args.out).resolve()}/seed{seeds if len(args.seeds) == 1 else '{' + seeds + '}'}"
              "/results.json", flush=True)


def table(runs, seeds) -> None:
    """The Markdown tables of the seeds' summaries: mean ± 95% interval, paired differences."""
    from experiments.rag.comparison import SYSTEMS

    names = list(runs[0]["results"])
    print(f"\n{runs[0]['data']} x {len(runs)} seeds {seeds}; test metrics, mean ± 95% interval")
    print("| system | Hits@1 | Hits@10 | MRR | steps chosen / run (mean) | train CPU s (mean) | trained params |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for n in names:
        cells = []
        for m, f in (("hits@1", 100), ("hits@10", 100), ("mrr", 1)):
            mean, half = interval([f * run["results"][n]["test"][m] for run in runs])
            cells.append(f"{mean:.1f} ± {half:.1f}" if f == 100 else f"{mean:.3f} ± {half:.3f}")
        r0 = runs[0]["results"][n]
        steps = (f"{sum(run['results'][n]['best_step'] for run in runs) / len(runs):.0f} / "
                 f"{sum(run['results'][n]['steps_run'] for run in runs) / len(runs):.0f}" if "best_step" in r0 else "")
        cpu = (f"{sum(run['results'][n]['train_cpu_seconds'] for run in runs) / len(runs):.0f}"
               if "best_step" in r0 else "")
        params = f"{r0['trainable_params']:,}" if "trainable_params" in r0 else ""
        print(f"| {n} | {' | '.join(cells)} | {steps} | {cpu} | {params} |")
    for other in (SYSTEMS[6], SYSTEMS[2], SYSTEMS[7]):
        cells = []
        for m, f in (("hits@1", 100), ("hits@10", 100), ("mrr", 1)):
            d = [f * (run["results"][SYSTEMS[4]]["test"][m] - run["results"][other]["test"][m]) for run in runs]
            mean, half = interval(d)
            cells.append(f"{mean:+.1f} [{mean - half:+.1f}, {mean + half:+.1f}]" if f == 100 else
                         f"{mean:+.3f} [{mean - half:+.3f}, {mean + half:+.3f}]")
        print(f"| paired (e) - {other} | {' | '.join(cells)} | | | |")
    print(f"whole run {sum(run['seconds'] for run in runs):.0f} s wall, "
          f"{sum(run['cpu_seconds'] for run in runs):.0f} CPU s; per seed: "
          + ", ".join(f"{run['steps']} steps ((c) {run['linear_steps']})" for run in runs))


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--root", default=None, help="subtree (default: all nouns)")
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--k", type=int, default=32)
    p.add_argument("--threads", type=int, default=0)
    p.add_argument("--minilm", action="store_true", help="embed with MiniLM (cached) instead of hashing")
    p.add_argument("--compare", action="store_true", help="the whole comparison over --seeds")
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--n-test", type=int, default=200)
    p.add_argument("--epochs", type=float, default=10)
    p.add_argument("--val-every", type=int, default=8)
    p.add_argument("--n-val", type=int, default=None, help="validation leaves (default: --n-test)")
    p.add_argument("--patience", type=int, default=3)
    p.add_argument("--linear-epochs", type=float, default=None, help="(c)'s own budget (default: --epochs)")
    p.add_argument("--out", default="runs/bench_rag")
    p.add_argument("--only-run", action="store_true", help="run the seeds, write <out>/seed*/results.json, no table")
    p.add_argument("--aggregate", action="store_true", help="the table of <out>/seed*/results.json, no run")
    args = p.parse_args(argv)
    if args.compare:
        compare(args)
        return
    import torch

    from experiments.rag.data import build_rag_data
    from hypermem.embed import HashingEmbedder

    if args.threads:
        torch.set_num_threads(args.threads)
    t0 = time.perf_counter()
    data = build_rag_data(args.root, n_test=2000 if args.root is None else 100, seed=0, cache=args.minilm,
                          embedder=None if args.minilm else HashingEmbedder(dim=384))
    print(f"{data} built in {time.perf_counter() - t0:.0f}s; torch threads {torch.get_num_threads()}, "
          f"batch {args.batch}, k {args.k}, {args.steps} timed steps")
    print("| selection and key cache | keys (optimizer) | CPU s / step | wall s / step |")
    print("|---|---|---:|---:|")
    for fast, learn in ((False, True), (True, True), (True, False)):
        cpu, wall = step_seconds(data, fast, learn, args.steps, args.batch, args.k)
        name = "cosine matmul + topk, moved rows refreshed" if fast else "memory.select (chunked), full refresh"
        keys = "trained (geoopt SparseRiemannianAdam)" if learn else "frozen"
        print(f"| {name} | {keys} | {cpu:.2f} | {wall:.2f} |", flush=True)


if __name__ == "__main__":
    main()
