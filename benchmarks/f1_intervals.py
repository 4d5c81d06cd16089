"""Paired 95% intervals of the test-F1 difference between two encoders run side by side with
``bench_encoder.py`` (same task and seeds), over every seed both ran.

    python benchmarks/f1_intervals.py runs/dim --a poincare-dim8 --b euclidean-dim8

Each run folder ``<task>-<system>-s<seed><tag>`` under the given folder holds ``results.json``
(with the lambda and threshold its validation chose) and ``encoder/``.  For each seed the task is
rebuilt as ``bench_encoder.py`` built it (same split), both encoders score the test pairs at
their own operating points, and the F1 difference is bootstrapped by resampling test
*positives* with their negatives (a positive and its 10 negatives stay together; both systems
see the same resample).  Pooled over seeds: the mean of the per-seed differences, with a
bootstrap that resamples within each seed (the seeds' splits differ).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
sys.path.insert(0, str(Path(__file__).resolve().parent))

import torch  # noqa: E402
from bench_encoder import TASKS  # noqa: E402

from hypermem.embed.hierarchy_encoder import HierarchyEncoder  # noqa: E402
from hypermem.hierarchy.encoder_eval import encode_entities, pair_terms  # noqa: E402

KINDS = ("random", "hard")


def hierarchy(name: str):
    from hypermem.data.wordnet import hit_noun_hierarchy

    if name not in ("wordnet-nouns", "wordnet-nouns-definitions"):
        raise SystemExit(f"only WordNet runs are rebuilt here, got hierarchy {name!r}")
    return hit_noun_hierarchy(text="definition" if name.endswith("definitions") else "lemma")


def outcomes(folder: Path, task) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
    """Per kind, per test pair: predicted related (at the run's own lambda and threshold for
    that kind), and the label."""
    res = json.loads((folder / "results.json").read_text())["f1"]
    enc = HierarchyEncoder.load(folder / "encoder")
    labelled = {kind: task.test.pairs(kind) for kind in KINDS}
    with torch.no_grad():
        pts = encode_entities(enc, task.hierarchy.names, [e for ps, _ in labelled.values() for p in ps for e in p])
        terms = {kind: pair_terms(enc, pts, ps, ls) for kind, (ps, ls) in labelled.items()}
    return {kind: (t.scores(res[kind]["lambda"]) >= res[kind]["threshold"], t.labels) for kind, t in terms.items()}


def group_counts(pred: torch.Tensor, label: torch.Tensor, sizes: list[int]) -> torch.Tensor:
    """``(groups, 3)``: true positives, false positives and false negatives of each group."""
    g = torch.repeat_interleave(torch.arange(len(sizes)), torch.tensor(sizes))
    out = torch.zeros(len(sizes), 3, dtype=torch.float64)
    out[:, 0].index_add_(0, g, (pred & label).double())
    out[:, 1].index_add_(0, g, (pred & ~label).double())
    out[:, 2].index_add_(0, g, (~pred & label).double())
    return out


def f1(c: torch.Tensor) -> torch.Tensor:
    """F1 of summed counts (last dimension: tp, fp, fn)."""
    return 2 * c[..., 0] / (2 * c[..., 0] + c[..., 1] + c[..., 2]).clamp_min(1)


def bootstrap(ca: torch.Tensor, cb: torch.Tensor, reps: int, gen: torch.Generator, block: int = 50) -> torch.Tensor:
    """``reps`` F1 differences of the same resamples of the groups (``block`` resamples at a time)."""
    out = []
    for s in range(0, reps, block):
        idx = torch.randint(ca.shape[0], (min(block, reps - s), ca.shape[0]), generator=gen)
        out.append(f1(ca[idx].sum(1)) - f1(cb[idx].sum(1)))
    return torch.cat(out)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("folder")
    ap.add_argument("--a", required=True, help="SYSTEM+TAG of the first system (e.g. poincare-dim8)")
    ap.add_argument("--b", required=True, help="SYSTEM+TAG of the second")
    ap.add_argument("--task", default="mixed", choices=sorted(TASKS))
    ap.add_argument("--reps", type=int, default=2000)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    root = Path(args.folder)

    def run(system_tag: str, seed: int) -> Path:
        system, _, tag = system_tag.partition("-")
        return root / f"{args.task}-{system}-s{seed}{'-' + tag if tag else ''}"

    def seed_of(p: Path, system_tag: str) -> int | None:
        system, _, tag = system_tag.partition("-")
        m = re.fullmatch(rf"{args.task}-{re.escape(system)}-s(\d+){re.escape('-' + tag if tag else '')}", p.name)
        return int(m.group(1)) if m else None

    seeds = sorted({s for p in root.iterdir() if (s := seed_of(p, args.a)) is not None})
    seeds = [s for s in seeds if (run(args.a, s) / "encoder").is_dir() and (run(args.b, s) / "encoder").is_dir()]
    if not seeds:
        raise SystemExit(f"no seed with both {args.a} and {args.b} under {root}")
    gen = torch.Generator().manual_seed(0)
    diffs = {kind: [] for kind in KINDS}
    boots = {kind: [] for kind in KINDS}
    for seed in seeds:
        name = json.loads((run(args.a, seed) / "results.json").read_text())["hierarchy"]
        task = TASKS[args.task](hierarchy(name), seed=seed)
        got_a, got_b = outcomes(run(args.a, seed), task), outcomes(run(args.b, seed), task)
        for kind in KINDS:
            negs = task.test.random_negatives if kind == "random" else task.test.hard_negatives
            sizes = [1 + len(n) for n in negs]
            ca, cb = group_counts(*got_a[kind], sizes), group_counts(*got_b[kind], sizes)
            boots[kind].append(bootstrap(ca, cb, args.reps, gen))
            diffs[kind].append(float(f1(ca.sum(0)) - f1(cb.sum(0))))
            print(f"{kind} seed {seed}: F1 {float(f1(ca.sum(0))):.3f} vs {float(f1(cb.sum(0))):.3f}, "
                  f"{args.a} - {args.b} {diffs[kind][-1]:+.3f} [{float(boots[kind][-1].quantile(0.025)):+.3f}, "
                  f"{float(boots[kind][-1].quantile(0.975)):+.3f}]", flush=True)
    report = {}
    for kind in KINDS:
        pooled = torch.stack(boots[kind]).mean(0)
        report[kind] = {"seeds": seeds, "per_seed": diffs[kind], "mean": sum(diffs[kind]) / len(seeds),
                        "low": float(pooled.quantile(0.025)), "high": float(pooled.quantile(0.975))}
        print(f"{kind}, pooled over seeds {seeds}: {args.a} - {args.b} {report[kind]['mean']:+.3f} "
              f"[{report[kind]['low']:+.3f}, {report[kind]['high']:+.3f}]", flush=True)
    (root / f"f1-intervals-{args.task}-{args.a}-vs-{args.b}.json").write_text(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
