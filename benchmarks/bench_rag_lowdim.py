#!/usr/bin/env python
"""The low-dimensional memory of the WordNet hypernym task (experiments/rag/lowdim.py): keys of
dimension d in the Poincaré ball against the Euclidean twin in R^d, the same query map, readout,
loss, data, batches, step budget and tuning grid, over --dims and --seeds.

Each (seed, dim) writes runs/bench_rag_lowdim/<root>/seed<seed>_d<dim>.json as soon as it is done;
the Markdown table (test metrics, mean and 95% t-interval over the seeds, paired differences
hyperbolic - Euclidean) is printed at the end, or from the JSON files alone with --table.

    .venv/bin/python benchmarks/bench_rag_lowdim.py --root mammal.n.01 --dims 2 5 10 20 --seeds 0 1 2
    .venv/bin/python benchmarks/bench_rag_lowdim.py --root mammal.n.01 --table
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

from bench_rag import interval  # noqa: E402

METRICS = (("hits@1", 100, 1), ("hits@10", 100, 1), ("mrr", 1, 3))
NAMES = {"poincare": "hyperbolic (ball)", "euclidean": "Euclidean twin"}


def fmt(values, scale, digits) -> str:
    m, h = interval([scale * v for v in values])
    return f"{m:.{digits}f} ± {h:.{digits}f}"


def fmt_diff(values, scale, digits) -> str:
    m, h = interval([scale * v for v in values])
    return f"{m:+.{digits}f} [{m - h:+.{digits}f}, {m + h:+.{digits}f}]"


def table(results: list[dict]) -> str:
    """Markdown: per dim and variant, each geometry's test metrics and the paired difference."""
    out = ["| d | keys | system | Hits@1 | Hits@10 | MRR | keys MAP / mean rank (fitted) | chosen (readout, metric, "
           "key lr) | trained params | train CPU s (chosen) | tuning CPU s (grid) |",
           "|---:|---|---|---:|---:|---:|---:|---|---:|---:|---:|"]
    dims = sorted({r["dim"] for r in results})
    for d in dims:
        rs = sorted((r for r in results if r["dim"] == d), key=lambda r: r["seed"])
        geos = list(rs[0]["geometries"])
        for g in geos:
            ridge = [r["geometries"][g]["ridge_only"]["test"] for r in rs]
            q = [r["geometries"][g]["keys"] for r in rs]
            cells = " | ".join(fmt([x[k] for x in ridge], s, n) for k, s, n in METRICS)
            out.append(f"| {d} | fitted, no training | {NAMES[g]}: ridge map, plain scores | {cells} | "
                       f"{sum(x['map'] for x in q) / len(q):.3f} / {sum(x['mean_rank'] for x in q) / len(q):.1f} | | "
                       "0 | | |")
        for variant in ("frozen", "trained"):
            for g in geos:
                ch = [r["chosen"][variant][g] for r in rs]
                cells = " | ".join(fmt([c["test"][k] for c in ch], s, n) for k, s, n in METRICS)
                picks = ", ".join(sorted({f"{c['readout']}/{c['metric']}/{c['key_lr']}" for c in ch}))
                keyq = ""
                if variant == "trained":
                    tq = [c["trained_keys"] for c in ch]
                    keyq = f"after: {sum(x['map'] for x in tq) / len(tq):.3f} / " \
                           f"{sum(x['mean_rank'] for x in tq) / len(tq):.1f}"
                cpu = sum(c["train_cpu_seconds"] for c in ch) / len(ch)
                tune = sum(r["tuning_cpu_seconds"][g] for r in rs) / len(rs)
                out.append(f"| {d} | {variant} | {NAMES[g]} | {cells} | {keyq} | {picks} | "
                           f"{ch[0]['trainable_params']:,} | {cpu:.1f} | {tune:.0f} |")
            if len(geos) == 2:
                a, b = ([r["chosen"][variant][g]["test"] for r in rs] for g in geos)
                cells = " | ".join(fmt_diff([x[k] - y[k] for x, y in zip(a, b)], s, n) for k, s, n in METRICS)
                out.append(f"| {d} | {variant} | **paired hyperbolic - Euclidean** | {cells} | | | | | |")
    seeds = sorted({r["seed"] for r in results})
    out.append("")
    out.append(f"Test metrics, mean ± 95% t-interval over seeds {seeds} ({len(seeds)} seeds); paired "
               "differences with their interval in brackets. Trained params: the query map (d x 384 + d), "
               "tau, the depth offset beta, (the vote's two offsets), and N x d keys when trained.")
    return "\n".join(out) + "\n"


def oracle(args, folder: Path) -> None:
    """The placement diagnostic per seed and dim; prints a Markdown table, writes oracle.json."""
    import torch

    from experiments.rag.data import build_rag_data
    from experiments.rag.lowdim import GEOMETRIES, oracle_placement

    torch.set_num_threads(args.threads)
    folder.mkdir(parents=True, exist_ok=True)
    rows = []
    for seed in args.seeds:
        data = build_rag_data(args.root, n_test=args.n_test, n_val=args.n_val, seed=seed)
        for d in args.dims:
            for g in GEOMETRIES:
                c0 = time.process_time()
                rows.append({"seed": seed, "dim": d, "geometry": g, **oracle_placement(data, g, d, seed, args.fit_epochs),
                             "cpu_seconds": time.process_time() - c0})
                print(rows[-1], flush=True)
    (folder / "oracle.json").write_text(json.dumps(rows, indent=1))
    print("| d | geometry | beta = 0: Hits@1 | Hits@10 | MRR | beta (val) | Hits@1 | Hits@10 | MRR |")
    print("|---:|---|---:|---:|---:|---:|---:|---:|---:|")
    for d in args.dims:
        for g in GEOMETRIES:
            rs = [r for r in rows if r["dim"] == d and r["geometry"] == g]
            cells = [fmt([r[k][m] for r in rs], s, n) for k in ("beta0", "chosen") for m, s, n in METRICS]
            betas = "/".join(f"{r['beta']:g}" for r in rs)
            print(f"| {d} | {NAMES[g]} | {' | '.join(cells[:3])} | {betas} | {' | '.join(cells[3:])} |")
    print(f"results: {(folder / 'oracle.json').resolve()}", flush=True)


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--root", default="mammal.n.01")
    p.add_argument("--n-test", type=int, default=200)
    p.add_argument("--n-val", type=int, default=None)
    p.add_argument("--dims", type=int, nargs="+", default=[2, 5, 10, 20])
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--epochs", type=float, default=30)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--val-every", type=int, default=8)
    p.add_argument("--patience", type=int, default=3)
    p.add_argument("--readouts", nargs="+", default=["plain", "vote"])
    p.add_argument("--metrics", nargs="+", default=["dist", "sq"])
    p.add_argument("--lrs", type=float, nargs="+", default=[0.03])
    p.add_argument("--key-lrs", type=float, nargs="+", default=[0.03, 0.3])
    p.add_argument("--fit-epochs", type=int, default=200)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--out", default="runs/bench_rag_lowdim")
    p.add_argument("--table", action="store_true", help="only print the table of the JSON files already written")
    p.add_argument("--oracle", action="store_true",
                   help="instead: the placement diagnostic (held-out leaves fitted with the tree, lowdim.oracle_placement)")
    args = p.parse_args(argv)
    folder = Path(args.out) / (args.root or "all")
    if args.oracle:
        return oracle(args, folder)
    if not args.table:
        import torch

        from experiments.rag.data import build_rag_data
        from experiments.rag.lowdim import run_lowdim

        torch.set_num_threads(args.threads)
        folder.mkdir(parents=True, exist_ok=True)
        for seed in args.seeds:
            data = build_rag_data(args.root, n_test=args.n_test, n_val=args.n_val, seed=seed)
            for d in args.dims:
                t0, c0 = time.perf_counter(), time.process_time()
                res = run_lowdim(data, d, seed=seed, metrics=args.metrics, readouts=args.readouts, lrs=args.lrs,
                                 key_lrs=args.key_lrs, epochs=args.epochs, batch_size=args.batch,
                                 val_every=args.val_every, patience=args.patience, fit_epochs=args.fit_epochs,
                                 out=str(folder))
                res.update(wall_seconds=time.perf_counter() - t0, cpu_seconds=time.process_time() - c0,
                           args=vars(args))
                (folder / f"seed{seed}_d{d}.json").write_text(json.dumps(res, indent=1, default=str))
                print(f"seed {seed} d {d}: {res['wall_seconds']:.0f} s wall, {res['cpu_seconds']:.0f} CPU s", flush=True)
    results = [json.loads(f.read_text()) for f in sorted(folder.glob("seed*_d*.json"))]
    results = [r for r in results if r["dim"] in args.dims and r["seed"] in args.seeds] if not args.table else results
    print(table(results))
    if not args.table:
        print(f"results: {folder.resolve()}/seed*_d*.json", flush=True)


if __name__ == "__main__":
    main()
