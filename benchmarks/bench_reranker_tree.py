"""The placement reranker on a user's own hierarchy: trained by the library, measured on held-out texts.

The user's path of docs/store.md ("A placement reranker") on any ``edges.tsv`` / ``names.tsv``
hierarchy (``benchmarks/pyclass_hierarchy.py`` builds one from installed Python packages):
``fraction`` of the entities are held out with every edge that touches them (the
unseen-entity split of :func:`hypermem.data.hierarchy_tasks.unseen_entity_task`); the rest go
into a store, each filed under its first known parent, with pre-trained MiniLM vectors; then
``parent="auto"``'s choice for every held-out text, with the store's rule and with a
:class:`~hypermem.embed.PlacementReranker` that :func:`~hypermem.hierarchy.fit_placement_reranker`
trains on the filed tree at its defaults (nothing chosen on these texts, so the validation
and test halves are both reported), and paired 95% intervals of the differences:

    python benchmarks/bench_reranker_tree.py --edges runs/pyc/edges.tsv --names runs/pyc/names.tsv \\
        --minutes 20 --threads 2 -o runs/reranker-pyc
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import torch  # noqa: E402
from bench_encoder import paired_interval  # noqa: E402
from bench_placement import known_store, outcomes, summary  # noqa: E402

from hypermem.data.hierarchy_files import read_hierarchy  # noqa: E402
from hypermem.data.hierarchy_tasks import unseen_entity_task  # noqa: E402
from hypermem.embed import SentenceTransformerEmbedder  # noqa: E402
from hypermem.hierarchy import fit_placement_reranker  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--edges", required=True)
    ap.add_argument("--names", required=True)
    ap.add_argument("--holdout", type=float, default=0.1, help="fraction of the entities held out")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--minutes", type=float, default=20, help="the reranker's max_minutes")
    ap.add_argument("--epochs", type=float, default=1.0, help="the reranker's epochs")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("-o", "--out", default="runs/reranker-tree")
    ap.add_argument("--pool", action="store_true", help="only print the intervals pooled over the seeds run in -o")
    args = ap.parse_args(argv)
    if args.pool:
        pooled(Path(args.out))
        return 0
    torch.set_num_threads(args.threads)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    task = unseen_entity_task(read_hierarchy(args.edges, args.names), seed=args.seed, fraction=args.holdout)
    mem, _ = known_store(SentenceTransformerEmbedder(), task, out / f"points-s{args.seed}.pt", filed=True)
    ids = mem.ids   # from here on, the recipe of docs/store.md
    edges = [(i, mem.parent(i)) for i in ids if mem.parent(i) is not None]
    print(f"{len(mem)} memories filed ({len(edges)} under a parent); held out {len(task.val_entities)} "
          f"validation and {len(task.test_entities)} test texts", flush=True)
    splits = {"val": task.val_entities, "test": task.test_entities}
    rule = {s: outcomes(mem, task, ents, None)["rows"] for s, ents in splits.items()}
    t0 = time.monotonic()
    rr = fit_placement_reranker(edges, {i: mem.get(i).text for i in ids}, dict(zip(ids, mem.embeddings)),
                                epochs=args.epochs, max_minutes=args.minutes, seed=args.seed,
                                out=str(out / f"reranker-s{args.seed}"))
    train_s = time.monotonic() - t0
    mem.reranker = rr
    reranked = {s: outcomes(mem, task, ents, None)["rows"] for s, ents in splits.items()}
    rec = {"edges": args.edges, "seed": args.seed, "holdout": args.holdout, "memories": len(mem),
           "reranker": rr.config, "train_s": round(train_s, 1), "splits": {}}
    for s in splits:
        a, b = reranked[s], rule[s]
        r = rec["splits"][s] = {
            "rule": summary(b), "reranked": summary(a),
            "within2_diff": paired_interval([r["within2"] for r in a], [r["within2"] for r in b]),
            "parent_diff": paired_interval([r["parent"] for r in a], [r["parent"] for r in b]),
            "rows": [{"entity": x["entity"], "rule": [y["parent"], y["within2"]], "reranked": [x["parent"], x["within2"]]}
                     for x, y in zip(a, b)]}
        print(f"{s} ({r['rule']['n']} texts): rule parent {r['rule']['parent']:.3f} within 2 {r['rule']['within2']:.3f}"
              f" | reranked {r['reranked']['parent']:.3f} / {r['reranked']['within2']:.3f}"
              f" | diff parent {r['parent_diff']} within 2 {r['within2_diff']}", flush=True)
    (out / f"reranker-tree-s{args.seed}.json").write_text(json.dumps(rec, indent=1))
    print(f"trained {rr.config['steps']} steps on {rr.config['lists']} lists in {train_s:.0f} s; "
          f"results in {out}", flush=True)
    return 0


def pooled(out: Path) -> None:
    """The paired intervals over every seed's texts in ``out`` (``--pool``)."""
    if not any(out.glob("reranker-tree-s*.json")):
        raise SystemExit(f"--pool: no reranker-tree-s*.json results in {out}: run the seeds first (-o {out})")
    for s in ("val", "test"):
        rows = [r for f in sorted(out.glob("reranker-tree-s*.json"))
                for r in json.loads(f.read_text())["splits"][s]["rows"]]
        for j, what in enumerate(("parent", "within2")):
            a, b = [r["reranked"][j] for r in rows], [r["rule"][j] for r in rows]
            print(f"{s}, {len(rows)} texts, {what}: rule {sum(b) / len(b):.3f}, reranked {sum(a) / len(a):.3f}, "
                  f"difference {paired_interval(a, b)}")


if __name__ == "__main__":
    raise SystemExit(main())
