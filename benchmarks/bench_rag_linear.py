#!/usr/bin/env python
"""The learned linear map (c) of the WordNet RAG comparison with a longer step budget than a
``bench_rag.py --compare`` run gave it, on the same splits, paired against that run's (e).

Checks whether (c) was trained to convergence: early stopping on validation MRR (the same
``_fit`` as the comparison), at most ``--epochs`` epochs; test scored once at the end.  Reads
``<compare-out>/seed<k>/results.json`` for the split settings and (e)'s test metrics.

    .venv/bin/python benchmarks/bench_rag_linear.py --compare-out runs/bench_rag_nouns --seeds 0 1 2 --epochs 2
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("HF_HUB_OFFLINE", "1")


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--compare-out", required=True, help="the out folder of a bench_rag.py --compare run")
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--epochs", type=float, default=2.0)
    p.add_argument("--threads", type=int, default=1)
    args = p.parse_args(argv)

    import torch

    from benchmarks.bench_rag import interval
    from experiments.rag.baselines import LinearCosine
    from experiments.rag.comparison import SYSTEMS, RAGModule, _fit, evaluate
    from experiments.rag.data import RAGDataModule, build_rag_data

    torch.set_num_threads(args.threads)
    rows = []
    for seed in args.seeds:
        run = json.loads((Path(args.compare_out) / f"seed{seed}" / "results.json").read_text())
        cfg = run["config"]
        dc, tc = cfg["data"], cfg["train"]
        data = build_rag_data(dc["root"], n_test=dc["n_test"], n_val=dc["n_val"], seed=dc["seed"], cache=dc["cache"])
        dm = RAGDataModule(data, batch_size=tc["batch_size"], eval_batch=cfg["eval"]["batch_size"], seed=tc["seed"])
        steps = max(1, int(args.epochs * len(data.train_slots) / tc["batch_size"]))
        model = LinearCosine(data.slot_emb, cfg["linear"]["temperature"])
        module = RAGModule(model, tc["lr"], eval_batch=cfg["eval"]["batch_size"], patience=tc["patience"])
        c0 = time.process_time()
        info = _fit(module, dm, steps, Path(args.compare_out) / f"seed{seed}" / "tb_linear_long", "linear",
                    tc["seed"], tc["val_every"])
        Xt, yt = dm.test_queries()
        test = evaluate(model.answer_scores, Xt, yt, cfg["eval"]["batch_size"])
        e = run["results"][SYSTEMS[4]]["test"]
        rows.append({"seed": seed, "test": test, "e": e, "best_step": info["best_step"], "steps_run": info["steps_run"],
                     "budget": steps, "cpu": time.process_time() - c0})
        print(f"seed {seed}: (c) {info['best_step']} / {info['steps_run']} of {steps} steps, test Hits@10 "
              f"{100 * test['hits@10']:.1f} MRR {test['mrr']:.3f}; (e) {100 * e['hits@10']:.1f} / {e['mrr']:.3f}",
              flush=True)
    print(f"\n(c) with at most {args.epochs:g} epochs, {len(rows)} seeds, test mean ± 95% interval")
    print("| | Hits@1 | Hits@10 | MRR | steps chosen / run / budget | CPU s |")
    print("|---|---:|---:|---:|---:|---:|")

    def cell(values, scale):
        m, h = interval([scale * v for v in values])
        return f"{m:.1f} ± {h:.1f}" if scale == 100 else f"{m:.3f} ± {h:.3f}"

    ms = ("hits@1", "hits@10", "mrr")
    c = [cell([r["test"][m] for r in rows], 100 if m != "mrr" else 1) for m in ms]
    steps = " ; ".join(f"{r['best_step']} / {r['steps_run']} / {r['budget']}" for r in rows)
    print(f"| (c) learned linear, longer budget | {' | '.join(c)} | {steps} | {sum(r['cpu'] for r in rows) / len(rows):.0f} |")
    diffs = []
    for m in ms:
        scale = 100 if m != "mrr" else 1
        mean, h = interval([scale * (r["e"][m] - r["test"][m]) for r in rows])
        diffs.append(f"{mean:+.1f} [{mean - h:+.1f}, {mean + h:+.1f}]" if scale == 100
                     else f"{mean:+.3f} [{mean - h:+.3f}, {mean + h:+.3f}]")
    print(f"| paired (e) - (c, longer) | {' | '.join(diffs)} | | |")


if __name__ == "__main__":
    main()
