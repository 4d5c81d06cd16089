"""Hierarchy encoders on WordNet nouns (or any hierarchy in TSV files): HiT's F1 protocol and
parent ranking for unseen entities, for the ball encoder, its Euclidean twin, pre-trained
MiniLM (cosine, and HiT's untrained ball) -- every choice on validation, test once.

    python benchmarks/bench_encoder.py --task unseen --system poincare --minutes 30 --seed 0 -o runs/enc
    python benchmarks/bench_encoder.py --task mixed --system cosine -o runs/enc          # no training
    python benchmarks/bench_encoder.py --task unseen --system euclidean --eval FOLDER -o runs/enc
    python benchmarks/bench_encoder.py --edges e.tsv --names n.tsv --task unseen ...     # another hierarchy

Systems: ``poincare`` / ``euclidean`` (trained by ``fit_hierarchy_encoder``), ``hit`` (HiT trained
by the ``hierarchy-transformers`` package for ``--cpu-budget`` CPU seconds: ``hit_baseline.py``), ``cosine``
(pre-trained all-MiniLM-L6-v2, normalised, cosine score), ``pretrained-ball`` (the same model,
mean pooling unnormalised, read in HiT's ball with lambda chosen on validation: HiT's
"pre-trained" row).  Each run writes ``<out>/<task>-<system>-s<seed>/results.json`` and
prints one line; ``--table`` prints the table of every results.json under ``-o``.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")

import torch  # noqa: E402
from optional_deps import HIERARCHY_TRANSFORMERS, require  # noqa: E402

from hypermem.data.hierarchy_files import read_hierarchy  # noqa: E402
from hypermem.data.hierarchy_tasks import hop_distances, mixed_hop_task, multi_hop_task, unseen_entity_task  # noqa: E402
from hypermem.data.wordnet import HIT_TEXTS  # noqa: E402
from hypermem.embed import SentenceTransformerEmbedder  # noqa: E402
from hypermem.embed.hierarchy_encoder import HierarchyEncoder  # noqa: E402
from hypermem.hierarchy.encoder_eval import (  # noqa: E402
    LAMBDAS,
    CosineScorer,
    choose_operating_point,
    encode_entities,
    f1_report,
    pair_terms,
    rank_parents,
)
from hypermem.hierarchy.encoder_training import fit_hierarchy_encoder  # noqa: E402

TASKS = {"multi": multi_hop_task, "mixed": mixed_hop_task, "unseen": unseen_entity_task}


def load_hierarchy(args):
    if args.edges:
        return read_hierarchy(args.edges, args.names)
    from hypermem.data.wordnet import hit_noun_hierarchy

    return hit_noun_hierarchy(text=args.text)


def scorer_for(args, task, out: Path):
    sysname = args.system
    if sysname == "cosine":
        return CosineScorer(SentenceTransformerEmbedder()), {}
    if sysname == "pretrained-ball":
        return HierarchyEncoder.from_pretrained("all-MiniLM-L6-v2", "poincare"), {}
    if args.eval:
        return HierarchyEncoder.load(args.eval), {}
    if sysname == "hit":
        from hit_baseline import train_hit

        t0 = time.monotonic()
        enc, rec = train_hit(task, cpu_budget_s=args.cpu_budget, seed=args.seed)
        enc.save(out / "encoder")
        return enc, {"train_wall_s": time.monotonic() - t0, **rec}
    cfg = json.loads(args.config) if args.config else {}
    aliases = None
    if args.aliases:   # WordNet's other lemmas of the training entities (fit_hierarchy_encoder drops the rest)
        from hypermem.data.wordnet import hit_noun_aliases

        aliases = hit_noun_aliases()
    t0, c0 = time.monotonic(), time.process_time()
    enc = fit_hierarchy_encoder(task.train_edges, task.hierarchy.names, geometry=sysname, aliases=aliases,
                                max_minutes=args.minutes, epochs=args.epochs, seed=args.seed,
                                validation_edges=task.val.positives, out=str(out / "encoder"),
                                threads=args.threads, **cfg)
    return enc, {"train_wall_s": time.monotonic() - t0, "train_cpu_s": time.process_time() - c0,
                 "steps": enc.config["steps"], "history": enc.config["history"], "config": cfg}


def f1_protocol(scorer, task) -> dict:
    names = task.hierarchy.names
    ids = [e for ps in (task.val, task.test)
           for pos, r, h in zip(ps.positives, ps.random_negatives, ps.hard_negatives) for e in (*pos, *r, *h)]
    pts = encode_entities(scorer, names, ids)
    lambdas = LAMBDAS if isinstance(scorer, HierarchyEncoder) else (0.0,)
    out = {}
    for kind in ("random", "hard"):
        vp, vl = task.val.pairs(kind)
        tp, tl = task.test.pairs(kind)
        op = choose_operating_point(pair_terms(scorer, pts, vp, vl), lambdas)
        rep = f1_report(pair_terms(scorer, pts, tp, tl), op)
        out[kind] = {"val_f1": op.f1, "lambda": op.centripetal_weight, "threshold": op.threshold,
                     "test_f1": rep.f1, "test_precision": rep.precision, "test_recall": rep.recall}
    return out


def ranking(scorer, task) -> dict:
    h = task.hierarchy
    held = set(task.val_entities) | set(task.test_entities)
    known = sorted(e for e in h.names if e not in held)
    par = h.parents()
    anc = hop_distances(h, task.val_entities + task.test_entities)
    cand_pts = scorer.encode([h.names[c] for c in known])
    lambdas = (0.0, 0.25, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0) if isinstance(scorer, HierarchyEncoder) else (0.0,)
    val = rank_parents(scorer, h.names, task.val_entities, known, par, anc, lambdas, candidate_points=cand_pts)
    lam = max(val, key=lambda x: val[x]["mrr"])
    test = rank_parents(scorer, h.names, task.test_entities, known, par, anc, (lam,), candidate_points=cand_pts)
    return {"lambda": lam, "val": val[lam], "test": test[lam]}, (known, cand_pts)


def per_query_rr(scorer, task, lam: float, candidates) -> list[float]:
    """Reciprocal rank of each test entity's best true parent (for paired intervals); the
    candidates encoded by :func:`ranking` are reused."""
    h = task.hierarchy
    known, cand = candidates
    index = {c: i for i, c in enumerate(known)}
    q = scorer.encode([h.names[e] for e in task.test_entities])
    from hypermem.geometry.subsumption import score_from_terms

    par, out = h.parents(), []
    for s in range(0, len(q), 64):
        sc = score_from_terms(*scorer.score_terms(q[s:s + 64].unsqueeze(1), cand.unsqueeze(0)), lam)
        for row, e in enumerate(task.test_entities[s:s + 64]):
            true = [index[p] for p in par.get(e, ()) if p in index]
            if true:
                out.append(1.0 / (int((sc[row] > sc[row, true].max()).sum()) + 1))
    return out


def paired_interval(a: list[float], b: list[float], reps: int = 2000, seed: int = 0) -> tuple[float, float, float]:
    """Mean of ``a - b`` over paired queries and its 95% bootstrap interval."""
    import random

    d = [x - y for x, y in zip(a, b)]
    rng = random.Random(seed)
    means = sorted(sum(rng.choice(d) for _ in d) / len(d) for _ in range(reps))
    return sum(d) / len(d), means[int(0.025 * reps)], means[int(0.975 * reps) - 1]


def table(out: Path) -> str:
    """A markdown table of every results.json under ``out`` and the paired MRR differences."""
    rows = [json.loads(p.read_text()) for p in sorted(out.glob("*/results.json"))]
    lines = ["| task | system | seed | F1 random | F1 hard | parent MRR | Hits@1 | Hits@10 | anc@10 hop 1 / 2 / 3-4 / 5+ "
             "| train steps | train CPU s |", "|---|---|---:|---:|---:|---:|---:|---:|---|---:|---:|"]
    for r in rows:
        t = r.get("ranking", {}).get("test", {})
        anc = " / ".join(f"{t.get(f'anc@10/hop={b}', float('nan')):.3f}" for b in ("1", "2", "3-4", "5+"))
        lines.append(f"| {r['task']} | {r['system']}{r.get('tag', '')} | {r['seed']} | {r['f1']['random']['test_f1']:.3f} "
                     f"| {r['f1']['hard']['test_f1']:.3f} | {t.get('mrr', float('nan')):.3f} "
                     f"| {t.get('hits@1', float('nan')):.3f} | {t.get('hits@10', float('nan')):.3f} | {anc} "
                     f"| {r.get('steps', '')} | {r.get('train_cpu_s', 0):.0f} |")
    with_rr = [r for r in rows if r.get("test_rr")]
    for i, a in enumerate(with_rr):
        for b in with_rr[i + 1:]:
            if (a["task"], a["seed"]) == (b["task"], b["seed"]) and len(a["test_rr"]) == len(b["test_rr"]):
                m, lo, hi = paired_interval(a["test_rr"], b["test_rr"])
                lines.append(f"\n{a['system']}{a.get('tag', '')} - {b['system']}{b.get('tag', '')} (seed {a['seed']}), "
                             f"parent MRR: {m:+.3f} [{lo:+.3f}, {hi:+.3f}]")
    lines += pooled_differences(with_rr)
    return "\n".join(lines)


def pooled_differences(rows: list[dict], reps: int = 2000, seed: int = 0) -> list[str]:
    """Paired parent-MRR differences of two systems pooled over the seeds both ran: the mean
    of the per-seed means, its 95% interval by a bootstrap that resamples the test entities
    within each seed (the seeds' splits differ), and the per-seed means."""
    import random

    by = {}
    for r in rows:
        by.setdefault((r["task"], r.get("hierarchy", ""), r["system"] + r.get("tag", "")), {})[r["seed"]] = r["test_rr"]
    out, keys = [], sorted(by)
    rng = random.Random(seed)
    for i, a in enumerate(keys):
        for b in keys[i + 1:]:
            if a[:2] != b[:2]:
                continue
            seeds = sorted(s for s in set(by[a]) & set(by[b]) if len(by[a][s]) == len(by[b][s]))
            if len(seeds) < 2:
                continue
            d = {s: [x - y for x, y in zip(by[a][s], by[b][s])] for s in seeds}
            per = [sum(v) / len(v) for v in d.values()]
            boot = sorted(sum(sum(rng.choice(v) for _ in v) / len(v) for v in d.values()) / len(d) for _ in range(reps))
            out.append(f"\n{a[2]} - {b[2]} ({a[0]}, seeds {seeds}), parent MRR: {sum(per) / len(per):+.3f} "
                       f"[{boot[int(0.025 * reps)]:+.3f}, {boot[int(0.975 * reps) - 1]:+.3f}]; per seed "
                       + ", ".join(f"{x:+.3f}" for x in per))
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--task", choices=sorted(TASKS), default="unseen")
    ap.add_argument("--system", choices=["poincare", "euclidean", "cosine", "pretrained-ball", "hit"], default="poincare")
    ap.add_argument("--minutes", type=float, default=None, help="training budget (wall minutes)")
    ap.add_argument("--epochs", type=int, default=None)
    ap.add_argument("--cpu-budget", type=float, default=1000.0, help="CPU seconds of training (--system hit)")
    ap.add_argument("--seed", type=int, default=0, help="seeds the split and the training")
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--config", default="", help="JSON of EncoderTrainConfig fields")
    ap.add_argument("--eval", default="", help="evaluate a saved encoder folder instead of training")
    ap.add_argument("--edges", default="", help="TSV/JSONL edges (child, parent) of another hierarchy")
    ap.add_argument("--names", default="", help="TSV/JSONL names (id, text) of another hierarchy")
    ap.add_argument("--text", choices=HIT_TEXTS, default="lemma",
                    help="WordNet entities named by their lemma (HiT's data) or 'lemma: definition'")
    ap.add_argument("--holdout", type=float, default=0.02, help="fraction of entities held out (--task unseen)")
    ap.add_argument("--aliases", action="store_true",
                    help="train with WordNet's other lemmas as text variants (--text lemma; alias_rate in --config)")
    ap.add_argument("--tag", default="", help="suffix of the run folder")
    ap.add_argument("-o", "--out", default="runs/bench_encoder")
    ap.add_argument("--table", action="store_true", help="print the table of the results under -o and stop")
    args = ap.parse_args(argv)
    if args.aliases and (args.edges or args.text != "lemma"):
        ap.error("--aliases holds WordNet's lemmas: use it with WordNet nouns named by their lemma")
    if args.table:
        print(table(Path(args.out)))
        return 0
    if args.system == "hit" and not args.eval:   # before the task is built and the run folder made
        require("hierarchy_transformers", HIERARCHY_TRANSFORMERS, script="bench_encoder.py --system hit")
    if args.threads:
        torch.set_num_threads(args.threads)
    out = Path(args.out) / f"{args.task}-{args.system}-s{args.seed}{args.tag}"
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    h = load_hierarchy(args)
    task = (TASKS[args.task](h, seed=args.seed, fraction=args.holdout) if args.task == "unseen"
            else TASKS[args.task](h, seed=args.seed))
    print(f"{task} ({time.monotonic() - t0:.1f} s)", flush=True)
    scorer, train = scorer_for(args, task, out)
    res = {"task": args.task, "system": args.system, "tag": args.tag, "seed": args.seed, "hierarchy": h.name, **train,
           "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "load": os.getloadavg()}
    t1 = time.monotonic()
    with torch.no_grad():
        res["f1"] = f1_protocol(scorer, task)
        if args.task == "unseen":
            res["ranking"], cands = ranking(scorer, task)
            res["test_rr"] = per_query_rr(scorer, task, res["ranking"]["lambda"], cands)
    res["eval_wall_s"] = time.monotonic() - t1
    res["max_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    (out / "results.json").write_text(json.dumps(res, indent=1))
    line = " ".join(f"{k}: F1 {v['test_f1']:.3f} (val {v['val_f1']:.3f}, lambda {v['lambda']})"
                    for k, v in res["f1"].items())
    if "ranking" in res:
        r = res["ranking"]["test"]
        line += f" | MRR {r['mrr']:.3f} H@1 {r['hits@1']:.3f} H@10 {r['hits@10']:.3f}"
    print(f"{args.task} {args.system} seed {args.seed}: {line}\nresults: {out / 'results.json'}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
