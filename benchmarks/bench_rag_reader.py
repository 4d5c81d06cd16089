#!/usr/bin/env python
"""The WordNet reader task (experiments/rag/reader_task.py) over several seeds: test accuracy,
macro-F1 and NLL as mean and 95% t-interval, and the paired differences of the systems.

A retriever trained through a reader with no retrieval labels (REALM / RAG): predict a held-out
synset's lexicographer class from its MiniLM embedding and the top-k slots it reads from a memory
of the other synsets (values = their embeddings, or a trainable value per slot; never their
labels).  Systems: the reader alone, with a Euclidean memory, with the hyperbolic memory; same
steps, batch and optimizer.  Each seed draws its own validation/test split of the same noun
sample; choices are made on validation, test is scored once.

``--sweep`` tunes every system with the same budget of validation trials (:data:`TRIALS` per
system, each one a configuration trained on every seed, scored by its mean validation accuracy):
a greedy search over the stages of :func:`stages` (a change is kept when it raises the mean
validation accuracy), then the chosen configuration of each system is trained again and scored
once on test.  Trials are cached in ``--trials`` (JSON lines), so a stopped sweep resumes.

    .venv/bin/python benchmarks/bench_rag_reader.py --seeds 0 1 2
    .venv/bin/python benchmarks/bench_rag_reader.py --sweep --threads 1
    .venv/bin/python benchmarks/bench_rag_reader.py --combine a.json b.json   # systems run apart
    .venv/bin/python benchmarks/bench_rag_reader.py --seeds 3 4 --chosen-from a.json b.json   # new splits
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
TRIALS = 10
"""Validation trials per system in ``--sweep`` (the first is the default configuration)."""


def stages(system: str, cfg: dict) -> list[list[dict]]:
    """The sweep's stages for ``system`` from the configuration kept so far (``cfg``): each a
    list of changes (nested dicts merged into ``cfg``), tried one by one; the best of the stage
    (or no change) is kept before the next stage.  :data:`TRIALS` trials for every system, the
    default included.  The reader alone has no memory lever: its trials are a grid of reader
    sizes and dropouts.  The memory systems: learned slot values (a key-value memory) and their
    learning rate; the geometry lever (hyperbolic: the full metric with a learned per-query
    depth; Euclidean: its twin, a learned per-query pull ``beta(q) level_j``); ``k``; frozen
    keys; twice the initial read temperature; a reader that sees the read weight."""
    if system == "reader alone":
        grid = [{"reader": {"hidden": h, "dropout": p}} for h in (128, 256, 512, 1024, 2048) for p in (0.1, 0.3)]
        return [[g] for g in grid[1:]]  # one stage per point: the best of the grid is kept
    mem = cfg["memory"]
    tkey = "hyp_temperature" if system.startswith("hyperbolic") else "euclid_temperature"
    geometry = ({"metric": "hyperbolic", "query_depth": "learned"} if system.startswith("hyperbolic")
                else {"depth_bias": True})
    values = mem["values"] or "copy"
    return [
        [{"memory": {"values": "copy"}, "train": {"value_lr": 0.03}},
         {"memory": {"values": "zero"}, "train": {"value_lr": 0.03}}],
        [{"memory": {"values": values}, "train": {"value_lr": 0.1}}],
        [{"memory": geometry}],
        [{"memory": {"k": k}} for k in (16, 32)],
        [{"memory": {"learn_keys": False}}],
        [{"memory": {tkey: 2 * mem[tkey]}}],
        [{"memory": {"see_score": True}}],
    ]


def trial(system: str, cfg: dict, args, datas, done: dict, path: Path) -> tuple[float, dict]:
    """Mean validation accuracy over the seeds of ``system`` with ``cfg`` (cached in ``done``
    and appended to ``path``)."""
    from experiments.rag.comparison import merge_config
    from experiments.rag.reader_task import DEFAULTS, run_reader_task

    cfg = merge_config(DEFAULTS, {**cfg, "systems": [system]})
    key = json.dumps({k: cfg[k] for k in ("reader", "memory", "train")}, sort_keys=True)
    if (system, key) not in done:
        runs = [run_reader_task(cfg, seed=s, data=datas[s], log=None, test=False)["results"][system]
                for s in args.seeds]
        row = {"system": system, "key": key, "seeds": args.seeds, "val": [r["val"]["accuracy"] for r in runs],
               "cpu": [r["train_cpu_seconds"] for r in runs], "steps": [r["best_step"] for r in runs],
               "params": runs[0]["trainable_params"]}
        done[(system, key)] = row
        with path.open("a") as f:
            f.write(json.dumps(row) + "\n")
    row = done[(system, key)]
    return sum(row["val"]) / len(row["val"]), row


def sweep(args, datas, base: dict, log=print) -> dict[str, dict]:
    """Greedy search of :func:`stages` per system on mean validation accuracy over the seeds;
    returns the chosen configuration of each system (test is not touched)."""
    from experiments.rag.comparison import merge_config
    from experiments.rag.reader_task import DEFAULTS

    path = Path(args.trials)
    path.parent.mkdir(parents=True, exist_ok=True)
    done = {}
    if path.is_file():
        for line in path.read_text().splitlines():
            row = json.loads(line)
            if row.get("seeds") == args.seeds:
                done[(row["system"], row["key"])] = row
    chosen = {}
    for system in args.systems_full:
        cfg = merge_config(DEFAULTS, base)
        best, row = trial(system, cfg, args, datas, done, path)
        n = 1
        log(f"{system}: default val {100 * best:.2f}", flush=True)
        for i in range(len(stages(system, cfg))):
            stage = stages(system, cfg)[i]  # from the configuration kept so far
            winner = None
            for change in stage:
                score, row = trial(system, merge_config(cfg, change), args, datas, done, path)
                n += 1
                log(f"  {json.dumps(change)}: val {100 * score:.2f} ({sum(row['cpu']) / len(row['cpu']):.0f} CPU s)",
                    flush=True)
                if score > best:
                    best, winner = score, change
            if winner is not None:
                cfg = merge_config(cfg, winner)
                log(f"  kept {json.dumps(winner)}", flush=True)
        assert n == TRIALS, (system, n)
        chosen[system] = {k: cfg[k] for k in ("reader", "memory", "train")}
        log(f"{system}: chosen val {100 * best:.2f} after {n} trials: {json.dumps(chosen[system])}", flush=True)
    return chosen


def table(runs, systems, interval) -> list[str]:
    """The Markdown table: test metrics mean ± 95% interval, validation, steps, CPU s, params,
    then the paired differences."""
    lines = ["| system | accuracy | macro-F1 | NLL | val accuracy | steps chosen (mean) | train CPU s (mean) "
             "| trained params |", "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for n in systems:
        cells = []
        for m, f, _ in METRICS:
            mean, half = interval([f * run[n]["test"][m] for run in runs])
            cells.append(f"{mean:.1f} ± {half:.1f}" if f == 100 else f"{mean:.3f} ± {half:.3f}")
        val, half = interval([100 * run[n]["val"]["accuracy"] for run in runs])
        cells.append(f"{val:.1f} ± {half:.1f}")
        steps = sum(run[n]["best_step"] for run in runs) / len(runs)
        cpu = sum(run[n]["train_cpu_seconds"] for run in runs) / len(runs)
        lines.append(f"| {n} | {' | '.join(cells)} | {steps:.0f} | {cpu:.0f} | {runs[0][n]['trainable_params']:,} |")
    names = ("reader alone", "Euclidean memory", "hyperbolic memory")
    for a, b in ((names[2], names[1]), (names[2], names[0]), (names[1], names[0])):
        if a not in systems or b not in systems:
            continue
        cells = []
        for m, f, _ in METRICS:
            mean, half = interval([f * (run[a]["test"][m] - run[b]["test"][m]) for run in runs])
            cells.append(f"{mean:+.1f} [{mean - half:+.1f}, {mean + half:+.1f}]" if f == 100 else
                         f"{mean:+.3f} [{mean - half:+.3f}, {mean + half:+.3f}]")
        lines.append(f"| paired {a} - {b} | {' | '.join(cells)} | | | | |")
    return lines


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
    p.add_argument("--values", default=None, choices=["copy", "zero"], help="trainable slot values (default frozen)")
    p.add_argument("--systems", nargs="+", default=None, help="a subset of the systems (default all)")
    p.add_argument("--sweep", action="store_true", help="tune every system on validation (same budget), then test")
    p.add_argument("--sweep-only", action="store_true", help="fill the trial cache, no test run (a shard of a sweep)")
    p.add_argument("--trials", default="runs/bench_rag_reader/sweep_trials.jsonl", help="the sweep's trial cache")
    p.add_argument("--combine", nargs="+", default=None,
                   help="print one table from several --out files (systems or seeds run apart)")
    p.add_argument("--chosen-from", nargs="+", default=None,
                   help="--out files of sweeps: train their chosen configurations (e.g. on new seeds)")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--out", default="runs/bench_rag_reader/results.json", help="every run's metrics ('' for none)")
    args = p.parse_args(argv)
    if args.combine:
        by_seed: dict[int, dict] = {}
        for f in (json.loads(Path(name).read_text()) for name in args.combine):
            for seed, run in zip(f["seeds"], f["runs"]):
                by_seed.setdefault(seed, {}).update(run)
        names = [n for n in SYSTEMS if all(n in run for run in by_seed.values())]
        print(f"seeds {sorted(by_seed)}")
        print("\n".join(table([by_seed[s] for s in sorted(by_seed)], names, interval)))
        return
    torch.set_num_threads(args.threads)
    depth = args.query_depth if args.query_depth in (None, "learned") else float(args.query_depth)
    args.systems_full = [n for n in SYSTEMS if args.systems is None or n.split()[0] in args.systems]
    systems = args.systems_full
    base = {"reader": {"hidden": args.hidden}, "memory": {"k": args.k, "metric": args.metric, "query_depth": depth,
                                                          "values": args.values},
            "train": {"steps": args.steps, "batch": args.batch}}
    t0 = time.perf_counter()
    datas = {s: build_reader_data(args.n_sample, 0, s, args.n_test, args.n_test) for s in args.seeds}
    chosen = sweep(args, datas, base) if args.sweep or args.sweep_only else {n: base for n in systems}
    for name in args.chosen_from or ():
        chosen.update({n: c for n, c in json.loads(Path(name).read_text())["chosen"].items() if n in systems})
    if args.sweep_only:
        return
    runs = []
    for seed in args.seeds:
        res = {}
        for n in systems:  # every choice is made: each system trained once more and scored on test
            out = run_reader_task({**chosen[n], "systems": [n]}, seed=seed, data=datas[seed], log=None)
            res[n] = out["results"][n]
        runs.append(res)
        print(f"seed {seed}: " + ", ".join(f"{n} {100 * res[n]['test']['accuracy']:.2f}" for n in systems)
              + f" (test majority class {100 * out['test_majority']:.1f})", flush=True)
    print(f"\n{out['data']}, {out['classes_in_memory']} classes in memory, x {len(runs)} seeds {args.seeds}; "
          f"test, mean ± 95% interval")
    for n in systems:
        print(f"{n}: {json.dumps(chosen[n])}")
    print("\n".join(table(runs, systems, interval)))
    print(f"whole run {time.perf_counter() - t0:.0f} s wall, {time.process_time():.0f} CPU s")
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps({"seeds": args.seeds, "chosen": chosen, "runs": runs}, indent=2,
                                             default=str))


if __name__ == "__main__":
    main()
