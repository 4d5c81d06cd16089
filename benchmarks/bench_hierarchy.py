#!/usr/bin/env python
"""Hierarchy-embedding benchmark: hypermem side by side with the NumPy reference.

Runs, on the same WordNet closures in the same process, and prints a table:

* ``mammals``   — Poincaré embeddings (dims 2, 5, 10): hypermem's ``fit_poincare_embeddings``
  and ``poincare_memory.hierarchy.fit_poincare_embeddings`` with the same settings and
  epochs; reconstruction MAP / mean rank of both with hypermem's evaluator (the
  reference's evaluator is run once to check they agree), time per epoch;
  ``fit_poincare_embeddings(closure, dim=10)`` with defaults; the Euclidean baseline.
* ``sarkar``    — Sarkar layouts of the mammal tree (and the noun tree with ``--nouns``):
  hypermem (``tau=None`` with uniform and decaying edge lengths, and ``edge_length="isa"``,
  the shadow layout) and the reference (``tau=1``), MAP of the tree closure in both
  orientations (``isa``: every node ranks its ancestors, the protocol of the reference
  figures 0.04 in 2-D and 0.36 in 10-D; ``desc``: every node ranks its descendants), time.
* ``cones``     — entailment cones vs. the Poincaré baseline: link-prediction F1 on the same
  split (basic edges + 50% of the non-basic ones); shadow cones (the shadow layout of the
  training pairs' ancestor tree, ``shadow_isa_score``) on mammals and, with ``--nouns``, nouns.
* ``nouns``     — (``--nouns``) Poincaré dim 10 on all 82,115 nouns; long, run it with nohup.
  ``--nouns-polish-seconds`` spends the end of the time budget on ``polish_ranks`` (exact
  mean-rank coordinate descent, hypermem.hierarchy.rank_polish) after the training.

Usage::

    .venv/bin/python benchmarks/bench_hierarchy.py                    # mammals, sarkar, cones
    .venv/bin/python benchmarks/bench_hierarchy.py --only sarkar --nouns
    nohup .venv/bin/python benchmarks/bench_hierarchy.py --only nouns --nouns > nouns.log 2>&1 &

Timings are wall clock with ``torch.set_num_threads(--threads)``; the machine is shared,
so they are noisy.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import sys
import time
import warnings

import numpy as np
import torch

warnings.filterwarnings("ignore", category=DeprecationWarning)
warnings.filterwarnings("ignore", category=RuntimeWarning, message=".*sarkar_layout.*")

from hypermem.data import wordnet  # noqa: E402
from hypermem.hierarchy import Relations, children_map, polish_ranks, reconstruction, transitive_closure  # noqa: E402
from hypermem.hierarchy.cones import cone_score, poincare_isa_score  # noqa: E402
from hypermem.hierarchy.evaluation import link_prediction  # noqa: E402
from hypermem.hierarchy.sarkar import decaying_edge_lengths, sarkar_layout  # noqa: E402
from hypermem.hierarchy.shadows import DEFAULT_MAX_SHRINK, DEFAULT_SHRINK, shadow_isa_score, shadow_layout  # noqa: E402
from hypermem.hierarchy.spanning import ancestor_tree  # noqa: E402
from hypermem.hierarchy.splits import link_prediction_split  # noqa: E402
from hypermem.hierarchy.training import (  # noqa: E402
    fit_entailment_cones,
    fit_euclidean_embeddings,
    fit_poincare_embeddings,
)

ROWS: list[dict] = []
JSON_OUT: list[str] = []
"""--json's path (when given): the rows are written there after each one, so a run stopped
early (its time budget, a kill) keeps the rows it has."""


def row(**kw) -> None:
    ROWS.append(kw)
    print("  " + "  ".join(f"{k}={_fmt(v)}" for k, v in kw.items()), flush=True)
    _write_json()


def _write_json() -> None:
    """All rows so far to --json (a whole file each time: written beside it, then renamed)."""
    for path in JSON_OUT:
        with open(path + ".part", "w") as fh:
            json.dump(ROWS, fh, indent=1)
        os.replace(path + ".part", path)


def _fmt(v):
    return f"{v:.4g}" if isinstance(v, float) else str(v)


def _ref():
    try:
        import poincare_memory.hierarchy as ref
        return ref
    except ImportError:
        print("  (poincare-memory not installed: reference columns skipped; pip install poincare-memory==0.1.4)")
        return None


def stack(points: dict, nodes: list) -> torch.Tensor:
    return torch.stack([torch.as_tensor(np.asarray(points[n]), dtype=torch.float64) for n in nodes])


def bench_mammals(args) -> None:
    print("== mammals closure: Poincaré embeddings (hypermem vs reference, same settings and epochs)")
    m = wordnet.load_mammals()
    rel = Relations(m.closure)
    ref = _ref()
    settings = dict(lr=0.3, negatives=50, burn_in=20, burn_in_lr_factor=0.1, batch_size=32)
    for dim in args.dims:
        t = time.perf_counter()
        pts, rep = fit_poincare_embeddings(rel, dim=dim, epochs=args.epochs, seed=0, **settings)
        el = time.perf_counter() - t
        r = reconstruction(stack(pts, rel.nodes), rel, "poincare")
        row(task="mammals", impl="hypermem", dim=dim, epochs=args.epochs, map=r.map, mean_rank=r.mean_rank,
            s_per_epoch=el / args.epochs, seconds=el)
        if ref is not None:
            t = time.perf_counter()
            rpts, _ = ref.fit_poincare_embeddings(m.closure, dim=dim, epochs=args.ref_epochs, seed=0, **settings)
            el_ref = time.perf_counter() - t
            rr = reconstruction(stack(rpts, rel.nodes), rel, "poincare")
            row(task="mammals", impl="reference", dim=dim, epochs=args.ref_epochs, map=rr.map,
                mean_rank=rr.mean_rank, s_per_epoch=el_ref / args.ref_epochs, seconds=el_ref,
                speedup_per_epoch=(el_ref / args.ref_epochs) / (el / args.epochs))
    print("== mammals: time per epoch at identical settings (dim 10); wall and CPU (process) seconds")
    for bs, k in [(32, 50), (64, 10), (128, 50), (1024, 50)]:
        same = dict(lr=0.3, negatives=k, burn_in=0, batch_size=bs)
        t, c = time.perf_counter(), time.process_time()
        fit_poincare_embeddings(rel, dim=10, epochs=args.speed_epochs, **same)
        ours = (time.perf_counter() - t) / args.speed_epochs
        ours_cpu = (time.process_time() - c) / args.speed_epochs
        theirs = theirs_cpu = float("nan")
        if ref is not None:
            t, c = time.perf_counter(), time.process_time()
            ref.fit_poincare_embeddings(m.closure, dim=10, epochs=args.speed_epochs, **same)
            theirs = (time.perf_counter() - t) / args.speed_epochs
            theirs_cpu = (time.process_time() - c) / args.speed_epochs
        row(task="mammals-speed", batch_size=bs, negatives=k, hypermem_s_per_epoch=ours,
            reference_s_per_epoch=theirs, speedup=theirs / ours, hypermem_cpu_s_per_epoch=ours_cpu,
            reference_cpu_s_per_epoch=theirs_cpu, speedup_cpu=theirs_cpu / ours_cpu)
    print("== mammals: defaults")
    t = time.perf_counter()
    pts, rep = fit_poincare_embeddings(m.closure, dim=10)
    el = time.perf_counter() - t
    r = reconstruction(pts, m.closure, "poincare")
    row(task="mammals-defaults", impl="hypermem", dim=10, epochs=rep.epochs, map=r.map, mean_rank=r.mean_rank,
        seconds=el)
    if ref is not None:
        t = time.perf_counter()
        rpts, rrep = ref.fit_poincare_embeddings(m.closure, dim=10)
        el = time.perf_counter() - t
        rr = reconstruction(stack(rpts, rel.nodes), rel, "poincare")
        row(task="mammals-defaults", impl="reference", dim=10, epochs=rrep.epochs, map=rr.map,
            mean_rank=rr.mean_rank, seconds=el)
        # the two evaluators agree on the same points
        from poincare_memory.geometry import PoincareBall as RefBall
        ball = RefBall()
        theirs = ref.reconstruction(rpts, m.closure, ball.distance)
        row(task="evaluator-check", impl="reference-eval", map=theirs.mean_average_precision,
            mean_rank=theirs.mean_rank, hypermem_eval_map=rr.map)
    print("== mammals: Euclidean baseline")
    for dim in args.dims:
        t = time.perf_counter()
        pts, rep = fit_euclidean_embeddings(rel, dim=dim, epochs=args.epochs)
        r = reconstruction(stack(pts, rel.nodes), rel, "euclidean")
        row(task="mammals-euclidean", impl="hypermem", dim=dim, epochs=args.epochs, map=r.map,
            mean_rank=r.mean_rank, seconds=time.perf_counter() - t)


def _sarkar_one(name: str, tree, dims, ref, nouns: bool, schemes=("uniform", "decay0.5", "isa")) -> None:
    ch, roots = children_map(tree)
    desc = transitive_closure(ch, roots[0])  # (ancestor, descendant)
    isa = [(v, u) for u, v in desc]  # (hyponym, hypernym)
    rel_desc, rel_isa = Relations(desc), Relations(isa)
    for dim in dims:
        for lengths in schemes:
            t = time.perf_counter()
            el = {"uniform": None, "decay0.5": decaying_edge_lengths(tree, 0.5), "isa": "isa"}[lengths]
            lay = sarkar_layout(tree, dim=dim, tau=None, edge_length=el)
            secs = time.perf_counter() - t
            pos = {n: i for i, n in enumerate(lay.nodes)}
            X = lay.points[torch.tensor([pos[n] for n in rel_desc.nodes])]
            t = time.perf_counter()
            ri = reconstruction(X, rel_isa, "poincare")
            eval_s = time.perf_counter() - t
            rd = reconstruction(X, rel_desc, "poincare") if not nouns else None  # nouns: the isa protocol only
            row(task=f"sarkar-{name}", impl="hypermem", dim=dim, lengths=lengths, tau=lay.tau, seconds=secs,
                radius=float(2.0 * torch.atanh(lay.points.norm(dim=1).max().clamp(max=1.0 - 1e-16))),
                map_desc=rd.map if rd else float("nan"),
                mean_rank_desc=rd.mean_rank if rd else float("nan"), map_isa=ri.map, mean_rank_isa=ri.mean_rank,
                eval_seconds=eval_s)
        if ref is not None and not nouns:
            t = time.perf_counter()
            rl = ref.sarkar_layout(tree, dim=dim, tau=1.0)
            secs = time.perf_counter() - t
            X = stack(rl, rel_desc.nodes)
            rd = reconstruction(X, rel_desc, "poincare")
            ri = reconstruction(X, rel_isa, "poincare")
            row(task=f"sarkar-{name}", impl="reference", dim=dim, lengths="uniform", tau=1.0, seconds=secs,
                map_desc=rd.map, mean_rank_desc=rd.mean_rank, map_isa=ri.map, mean_rank_isa=ri.mean_rank)


def bench_sarkar(args) -> None:
    print("== Sarkar construction (float64): tree closure, desc = ancestors query descendants, "
          "isa = nodes query ancestors")
    ref = _ref()
    _sarkar_one("mammals", wordnet.load_mammals().tree, args.sarkar_dims, ref, False)
    if args.nouns:
        if not wordnet.available():
            print("  nouns skipped: /usr/share/wordnet missing (apt-get install -y wordnet-base)")
            return
        _sarkar_one("nouns", wordnet.noun_tree(), args.nouns_sarkar_dims, None, True, schemes=("isa",))


def bench_cones(args) -> None:
    print("== entailment cones vs Poincaré: link prediction F1 (basic edges + 50% non-basic in training)")
    m = wordnet.load_mammals()
    sp = link_prediction_split(m.closure, non_basic_fraction=0.5, seed=0)
    nodes = sp.train.nodes
    t = time.perf_counter()
    pts, _ = fit_poincare_embeddings(sp.train, dim=args.cone_dim, epochs=100)
    P = stack(pts, nodes)
    # The baseline's is-a score (Nickel & Kiela: (1 + alpha (|v| - |u|)) d(u, v)) with alpha
    # chosen on the validation pairs, so the cones are compared with its best version.
    fits = {alpha: link_prediction(poincare_isa_score(P, sp.val_pairs, alpha=alpha), sp.val_labels,
                                   poincare_isa_score(P, sp.test_pairs, alpha=alpha), sp.test_labels)
            for alpha in (0.0, 1.0, 10.0, 100.0, 1000.0)}
    alpha = max(fits, key=lambda a: fits[a].validation_f1)
    lp = fits[alpha]
    row(task="cones-mammals", impl="poincare-baseline", dim=args.cone_dim, alpha=alpha, f1=lp.f1,
        val_f1=lp.validation_f1, f1_alpha1000=fits[1000.0].f1, seconds=time.perf_counter() - t)
    t = time.perf_counter()
    cp, _ = fit_entailment_cones(sp.train, dim=args.cone_dim, epochs=args.cone_epochs, init=P)
    C = stack(cp, nodes)
    lc = link_prediction(cone_score(C, sp.val_pairs), sp.val_labels, cone_score(C, sp.test_pairs), sp.test_labels)
    row(task="cones-mammals", impl="cones", dim=args.cone_dim, f1=lc.f1, val_f1=lc.validation_f1,
        seconds=time.perf_counter() - t)
    _shadow_cones("mammals", m.closure, args.cone_dim)
    if args.nouns:
        if not wordnet.available():
            print("  nouns skipped: /usr/share/wordnet missing (apt-get install -y wordnet-base)")
            return
        _shadow_cones("nouns", wordnet.noun_closure(), args.cone_dim)


def _shadow_cones(name: str, closure, dim: int) -> None:
    """Shadow cones: the shadow layout of the training pairs' ancestor tree, scored by
    hierarchy.shadows.shadow_isa_score, on Ganea et al.'s split (basic + 50% non-basic)."""
    t = time.perf_counter()
    sp = link_prediction_split(Relations(closure), non_basic_fraction=0.5, seed=0)
    split_s = time.perf_counter() - t
    t = time.perf_counter()
    tree = ancestor_tree(sp.train)
    lay = sarkar_layout(tree, dim=dim, edge_length="isa")
    pos = {n: i for i, n in enumerate(lay.nodes)}
    order = torch.tensor([pos[n] for n in sp.train.nodes])
    C, R = lay.shadow_centres[order], lay.shadow_radii[order]
    lp = link_prediction(shadow_isa_score(C, R, sp.val_pairs), sp.val_labels,
                         shadow_isa_score(C, R, sp.test_pairs), sp.test_labels)
    test_pos = sp.test_pairs[sp.test_labels]
    closed = Relations(_tree_closure_pairs(tree), nodes=sp.train.nodes)
    covered = float(closed.contains(test_pos[:, 0], test_pos[:, 1]).double().mean())
    row(task=f"cones-{name}", impl="shadow-cones", dim=dim, f1=lp.f1, val_f1=lp.validation_f1,
        test_positives_in_tree=covered, tree_edges=len(tree), seconds=time.perf_counter() - t,
        split_seconds=split_s)


def _tree_closure_pairs(tree) -> list:
    ch, roots = children_map(tree)
    return [(d, a) for root in roots for a, d in transitive_closure(ch, root)]


def _train_seconds(args) -> float:
    """The SGD part of --nouns-max-seconds: all of it but --nouns-polish-seconds (0: no limit)."""
    return args.nouns_max_seconds - args.nouns_polish_seconds if args.nouns_max_seconds else 0.0


def _chunk_lr(args, epoch_progress: float, seconds: float) -> float:
    """The lr of a nouns training chunk: from --nouns-lr to lr * --nouns-final-lr-factor,
    linearly or exponentially (--nouns-decay) in the progress, which is the epochs done
    (``epoch_progress``, at the chunk's middle), or the training time spent (``seconds``, the
    chunk's middle if it takes as long as the last one) over the SGD budget
    (:func:`_train_seconds`) when that is further along; with --nouns-decay-after the lr stays
    constant for that many seconds and decays over the rest of the budget."""
    mid = epoch_progress
    budget = _train_seconds(args)
    if budget and args.nouns_decay_after:
        mid = (seconds - args.nouns_decay_after) / (budget - args.nouns_decay_after)
    elif budget:
        mid = max(mid, seconds / budget)
    mid = min(1.0, max(0.0, mid))
    f = args.nouns_final_lr_factor
    return args.nouns_lr * (f ** mid if args.nouns_decay == "exponential" else 1.0 + (f - 1.0) * mid)


def bench_nouns(args) -> None:
    print(f"== nouns closure: Poincaré dim 10, {args.nouns_init} start (long)")
    if not wordnet.available():
        print("  skipped: /usr/share/wordnet missing (apt-get install -y wordnet-base)")
        return
    t = time.perf_counter()
    rel = Relations(wordnet.noun_closure())
    print(f"  loaded {rel} in {time.perf_counter() - t:.1f}s", flush=True)
    # evaluation on every node takes minutes; --nouns-eval-queries evaluates a random subset
    eval_rel = rel
    if args.nouns_eval_queries:
        g = torch.Generator().manual_seed(0)
        keep = torch.zeros(rel.n, dtype=torch.bool)
        keep[torch.randperm(rel.n, generator=g)[:args.nouns_eval_queries]] = True
        eval_rel = Relations(rel.pairs[keep[rel.pairs[:, 0]]], nodes=rel.nodes)

    def evaluate(X, **kw) -> None:
        t = time.perf_counter()
        r = reconstruction(X, eval_rel, "poincare")
        row(task="nouns", impl="hypermem", dim=10, init=args.nouns_init, map=r.map, mean_rank=r.mean_rank,
            eval_queries=args.nouns_eval_queries or rel.n, eval_seconds=time.perf_counter() - t, **kw)

    init, layout_s = None, 0.0
    if args.nouns_init == "shadow":
        t = time.perf_counter()
        lay = shadow_layout(ancestor_tree(rel), dim=10, shrink=args.nouns_layout_shrink,
                            max_shrink=args.nouns_layout_max_shrink)
        pos = {n: i for i, n in enumerate(lay.nodes)}
        init = lay.points[torch.tensor([pos[n] for n in rel.nodes])]
        layout_s = time.perf_counter() - t
        evaluate(init, epochs=0, train_seconds=layout_s)
    # train in chunks of --nouns-eval-every epochs (one lr a chunk, see _chunk_lr), evaluating
    # after each: the MAP against the training time (layout included), within the issue's
    # 60 minutes; the SGD budget (_train_seconds) stops before a chunk that would pass it
    every = args.nouns_eval_every or args.nouns_epochs
    train_s, done, X, last = layout_s, 0, init, 0.0
    budget = _train_seconds(args)
    while done < args.nouns_epochs:
        if budget and train_s + last > budget:
            break
        warm = done < args.nouns_warmup
        todo = min(args.nouns_warmup - done if warm else every, args.nouns_epochs - done)
        burn = min(args.nouns_burn_in, todo) if (init is None and done == 0) else 0
        lr = _chunk_lr(args, (done + todo / 2) / args.nouns_epochs, train_s + last / 2) * (0.1 if warm else 1.0)
        t = time.perf_counter()
        pts, rep = fit_poincare_embeddings(rel, dim=10, epochs=todo, lr=lr, batch_size=args.nouns_batch,
                                           negatives=args.nouns_negatives, workers=args.nouns_workers, burn_in=burn,
                                           final_lr_factor=1.0, init=X, seed=done,
                                           log=lambda s, t0=t: print("  " + s, f"({time.perf_counter() - t0:.0f}s)",
                                                               flush=True))
        last = time.perf_counter() - t
        train_s += last
        done += todo
        X = stack(pts, rel.nodes)
        evaluate(X, epochs=done, lr=lr, batch=args.nouns_batch, train_seconds=train_s)
        if args.save:
            torch.save({"nodes": rel.nodes, "points": X, "epochs": done}, args.save)
    if args.nouns_polish_seconds:
        threads = torch.get_num_threads()
        torch.set_num_threads(max(threads, args.nouns_workers))
        t = time.perf_counter()
        limit = args.nouns_max_seconds - train_s if args.nouns_max_seconds else args.nouns_polish_seconds
        X, rep = polish_ranks(X, rel, max_seconds=limit, min_rank=args.nouns_polish_min_rank,
                              passes=args.nouns_polish_passes,
                              log=lambda s, t0=t: print("  " + s, flush=True))
        train_s += time.perf_counter() - t
        print(f"  polish: {rep.visited} nodes visited, {rep.moved} moved, mean rank {rep.mean_rank_before:.3f} -> "
              f"{rep.mean_rank_after:.3f} (all pairs, exact) in {rep.seconds:.0f}s; {rep.ranked_pairs} of "
              f"{rep.pairs} pairs ranked, {rep.lists} visit list(s)", flush=True)
        evaluate(X, epochs=done, polished=rep.moved, polish_ranked_pairs=rep.ranked_pairs, polish_lists=rep.lists,
                 train_seconds=train_s)
        torch.set_num_threads(threads)
        if args.save:
            torch.save({"nodes": rel.nodes, "points": X, "epochs": done, "polished": rep.moved}, args.save)
    if args.nouns_full_eval and args.nouns_eval_queries:
        t = time.perf_counter()
        r = reconstruction(X, rel, "poincare")
        row(task="nouns", impl="hypermem", dim=10, init=args.nouns_init, map=r.map, mean_rank=r.mean_rank,
            eval_queries=rel.n, eval_seconds=time.perf_counter() - t, epochs=done, train_seconds=train_s)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--only", nargs="*", default=["mammals", "sarkar", "cones"],
                   choices=["mammals", "sarkar", "cones", "nouns"])
    p.add_argument("--nouns", action="store_true", help="include the noun hierarchy (needs wordnet-base)")
    p.add_argument("--dims", type=int, nargs="*", default=[2, 5, 10])
    p.add_argument("--epochs", type=int, default=200)
    p.add_argument("--ref-epochs", type=int, default=20, help="reference epochs (its time per epoch is compared)")
    p.add_argument("--speed-epochs", type=int, default=3)
    p.add_argument("--sarkar-dims", type=int, nargs="*", default=[2, 5, 10])
    p.add_argument("--nouns-sarkar-dims", type=int, nargs="*", default=[10])
    p.add_argument("--cone-dim", type=int, default=5)
    p.add_argument("--cone-epochs", type=int, default=100)
    p.add_argument("--nouns-epochs", type=int, default=20)
    p.add_argument("--nouns-lr", type=float, default=0.3)
    p.add_argument("--nouns-batch", type=int, default=512)
    p.add_argument("--nouns-init", choices=["random", "shadow"], default="random",
                   help="start from Nickel & Kiela's small random points or the shadow layout of the ancestor tree")
    p.add_argument("--nouns-layout-shrink", type=float, default=DEFAULT_SHRINK,
                   help="shadow layout's shrink (larger: shallower layout, see hierarchy.shadows)")
    p.add_argument("--nouns-layout-max-shrink", type=float, default=DEFAULT_MAX_SHRINK,
                   help="shadow layout's max_shrink")
    p.add_argument("--nouns-eval-every", type=int, default=0, help="evaluate every this many epochs")
    p.add_argument("--nouns-negatives", type=int, default=50, help="negatives per pair (nouns)")
    p.add_argument("--nouns-workers", type=int, default=1, help="Hogwild threads for the nouns training")
    p.add_argument("--nouns-warmup", type=int, default=0, help="first epochs at lr / 10 (e.g. from the layout)")
    p.add_argument("--nouns-max-seconds", type=float, default=0, help="stop before passing this training time")
    p.add_argument("--nouns-burn-in", type=int, default=1, help="burn-in epochs (random start)")
    p.add_argument("--nouns-decay", choices=["linear", "exponential"], default="linear",
                   help="how the lr goes to lr * --nouns-final-lr-factor")
    p.add_argument("--nouns-decay-after", type=float, default=0,
                   help="seconds of constant lr before the decay (with --nouns-max-seconds)")
    p.add_argument("--nouns-final-lr-factor", type=float, default=1.0,
                   help="lr falls to lr * this (see --nouns-decay; constant within an evaluation chunk)")
    p.add_argument("--nouns-eval-queries", type=int, default=0,
                   help="evaluate on this many random query nodes (0: all 82,115; takes minutes)")
    p.add_argument("--nouns-polish-seconds", type=float, default=0,
                   help="the last this many seconds of --nouns-max-seconds polish the mean rank (polish_ranks)")
    p.add_argument("--nouns-polish-min-rank", type=float, default=100.0,
                   help="polish_ranks(min_rank=...): the nodes with pairs ranked above it are visited, worst first")
    p.add_argument("--nouns-polish-passes", type=int, default=1,
                   help="polish_ranks(passes=...): list the nodes afresh when a list is done within the time")
    p.add_argument("--nouns-full-eval", action="store_true",
                   help="with --nouns-eval-queries: evaluate on all nouns at the end too (not counted in the time)")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--json", help="write the rows to this JSON file")
    p.add_argument("--save", help="save the trained noun embedding here (torch.save)")
    args = p.parse_args()
    if args.nouns_polish_seconds and args.nouns_max_seconds and args.nouns_polish_seconds >= args.nouns_max_seconds:
        p.error("--nouns-polish-seconds must be below --nouns-max-seconds")
    if args.nouns_decay_after and not 0 < args.nouns_decay_after < _train_seconds(args):
        p.error("--nouns-decay-after needs --nouns-max-seconds - --nouns-polish-seconds larger than it")
    torch.set_num_threads(args.threads)
    print(f"# bench_hierarchy {datetime.date.today()} | {platform.processor() or platform.machine()}, "
          f"{os.cpu_count()} CPUs, torch {torch.__version__}, threads {args.threads} | {' '.join(sys.argv[1:])}")
    if args.json:
        JSON_OUT.append(args.json)
    for part in args.only:
        {"mammals": bench_mammals, "sarkar": bench_sarkar, "cones": bench_cones, "nouns": bench_nouns}[part](args)
    _write_json()   # also when no row came
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
