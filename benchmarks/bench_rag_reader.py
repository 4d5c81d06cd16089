#!/usr/bin/env python
"""The WordNet reader task (experiments/rag/reader_task.py) over several seeds: test accuracy,
macro-F1 and NLL as mean and 95% t-interval, and the paired differences of the systems.

A retriever trained through a reader with no retrieval labels (REALM / RAG): predict a held-out
synset's lexicographer class from its MiniLM embedding and the top-k slots it reads from a memory
of the other synsets (values = their embeddings, not their labels).  Systems: the reader alone,
with a Euclidean memory, with the hyperbolic memory; same steps, batch, reader and optimizer.
Each seed draws its own validation/test split of the same noun sample; choices (the step kept)
are made on validation, test is scored once.

    .venv/bin/python benchmarks/bench_rag_reader.py --seeds 0 1 2
    .venv/bin/python benchmarks/bench_rag_reader.py --systems hyperbolic --metric hyperbolic --query-depth learned
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

METRICS = (("accuracy", 100, "acc"), ("macro_f1", 100, "macro-F1"), ("nll", 1, "NLL"))


def main(argv=None) -> None:
    import torch
    from bench_rag import interval

    from experiments.rag.reader_task import SYSTEMS, build_reader_data, run_reader_task

    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--n-sample", type=int, default=2000, help="nouns drawn (with all their ancestors)")
    p.add_argument("--n-test", type=int, default=400)
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--k", type=int, default=8)
    p.add_argument("--hidden", type=int, default=128)
    p.add_argument("--metric", default="shell", choices=["hyperbolic", "shell"], help="shell: chosen on validation")
    p.add_argument("--query-depth", default=None, help="hyperbolic query radius: a number or 'learned'")
    p.add_argument("--systems", nargs="+", default=None, help="a subset of the systems (default all)")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--out", default="runs/bench_rag_reader/results.json", help="every run's metrics ('' for none)")
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    depth = args.query_depth if args.query_depth in (None, "learned") else float(args.query_depth)
    systems = [n for n in SYSTEMS if args.systems is None or n.split()[0] in args.systems]
    cfg = {"reader": {"hidden": args.hidden}, "memory": {"k": args.k, "metric": args.metric, "query_depth": depth},
           "train": {"steps": args.steps, "batch": args.batch}, "systems": systems}
    runs, t0 = [], time.perf_counter()
    for seed in args.seeds:
        data = build_reader_data(args.n_sample, 0, seed, args.n_test, args.n_test)
        out = run_reader_task(cfg, seed=seed, data=data, log=None)
        runs.append(out)
        r = out["results"]
        print(f"seed {seed}: " + ", ".join(f"{n} {100 * r[n]['test']['accuracy']:.1f}" for n in systems)
              + f" (test majority class {100 * out['test_majority']:.1f})", flush=True)
    print(f"\n{runs[0]['data']}, {runs[0]['classes_in_memory']} classes in memory, x {len(runs)} seeds "
          f"{args.seeds}; k {args.k}, steps {args.steps}, batch {args.batch}, reader hidden {args.hidden}, "
          f"metric {args.metric}, query depth {depth}; test, mean ± 95% interval")
    print("| system | accuracy | macro-F1 | NLL | val accuracy | steps chosen (mean) | train CPU s (mean) "
          "| trained params |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for n in systems:
        cells = []
        for m, f, _ in METRICS:
            mean, half = interval([f * run["results"][n]["test"][m] for run in runs])
            cells.append(f"{mean:.1f} ± {half:.1f}" if f == 100 else f"{mean:.3f} ± {half:.3f}")
        val, half = interval([100 * run["results"][n]["val"]["accuracy"] for run in runs])
        cells.append(f"{val:.1f} ± {half:.1f}")
        steps = sum(run["results"][n]["best_step"] for run in runs) / len(runs)
        cpu = sum(run["results"][n]["train_cpu_seconds"] for run in runs) / len(runs)
        print(f"| {n} | {' | '.join(cells)} | {steps:.0f} | {cpu:.0f} | "
              f"{runs[0]['results'][n]['trainable_params']:,} |")
    for a, b in ((SYSTEMS[2], SYSTEMS[1]), (SYSTEMS[2], SYSTEMS[0]), (SYSTEMS[1], SYSTEMS[0])):
        if a not in systems or b not in systems:
            continue
        cells = []
        for m, f, _ in METRICS:
            mean, half = interval([f * (run["results"][a]["test"][m] - run["results"][b]["test"][m]) for run in runs])
            cells.append(f"{mean:+.1f} [{mean - half:+.1f}, {mean + half:+.1f}]" if f == 100 else
                         f"{mean:+.3f} [{mean - half:+.3f}, {mean + half:+.3f}]")
        print(f"| paired {a} - {b} | {' | '.join(cells)} | | | | |")
    print(f"whole run {time.perf_counter() - t0:.0f} s wall, {time.process_time():.0f} CPU s")
    if args.out:
        keep = [{k: v for k, v in run.items() if k != "models"} for run in runs]
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps({"seeds": args.seeds, "runs": keep}, indent=2, default=str))


if __name__ == "__main__":
    main()
