"""Walk 69: ``parent="auto"`` and the root-free ancestors search on every hierarchy at hand.

A walker filed 2,858 manual pages and gcloud commands (``"name - description"`` texts, one root)
and found the ancestors search ranking a huge group first (the plain vote share) and
``parent="auto"`` choosing a farther ancestor.  This script measures, per hierarchy, the
held-out texts' ``parent="auto"`` (one real add each, removed again): true parent, a true
ancestor within 2 hops, attached, a farther ancestor (2+ hops) chosen; and
``search(text, mode="ancestors")`` without a root: precision of the top 5 (true ancestors among
the results, pooled over texts), recall of the top 10 (the share of a text's stored ancestors
among its 10 results, averaged) and ``near5``: the parent or the grandparent among the top 5.  Nothing is trained here.

* ``walker``: ``/tmp/wk4`` (edges.tsv, names.tsv, heldout.json, the encoder ``enc_py``);
* ``pyc-sS`` / ``std-sS``: Python's class tree and the standard library, split and encoders of
  ``experiments/placement_vote/walk.py`` (``runs/walk/enc-{pyc,std}-sS``), as ``foreign.py``;
* ``wn-def`` / ``wn-lemma``: WordNet's unseen-entity split (seed 1), its **validation** nouns
  only, MiniLM vectors, the filed store of ``benchmarks/bench_placement.py`` (``known_store``).

``--set MODULE.NAME=VALUE`` (repeatable) sets a constant of ``hypermem.store`` first, e.g.
``--set 'suggest.ANCESTORS_VOTE={"chance": 1}'`` (less chance) or ``'{"decay": 1}'`` (no decay).

    python experiments/placement_walk69/measure.py walker pyc-s0 std-s0 wn-def --set 'mentions.SEPARATORS=[": "]'
    python experiments/placement_walk69/measure.py walker pyc-s0 std-s0 wn-def --no-auto --chain
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
import time
import warnings
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parents[1] / "benchmarks"), str(HERE.parent / "placement_vote")]

import torch  # noqa: E402
from chance import ancestors, read, split  # noqa: E402

from hypermem import Memory, SentenceTransformerEmbedder  # noqa: E402
from hypermem.embed import HierarchyEncoder  # noqa: E402
from hypermem.store import AddManyHint  # noqa: E402

CACHE = Path("runs/walk69")
WALKER = Path("/tmp/wk4")


def vectors(emb, texts: list[str], name: str) -> torch.Tensor:
    """``emb.embed(texts)``, cached under :data:`CACHE`."""
    path = CACHE / f"vec-{name}.pt"
    if path.is_file():
        x = torch.load(path)
        if x.shape[0] == len(texts):
            return x
    x = torch.cat([emb.embed(texts[s:s + 512]) for s in range(0, len(texts), 512)]).to(torch.float32)
    CACHE.mkdir(parents=True, exist_ok=True)
    torch.save(x, path)
    return x


def filed(emb, order: list[str], text: dict[str, str], parent: dict[str, str | None], name: str) -> Memory:
    """A store of ``order`` (parents first) filed under ``parent``."""
    x = vectors(emb, [text[i] for i in order], name)
    mem = Memory(embedder=emb, hybrid=0.0)
    mem.add_many([{"id": i, "text": text[i], "embedding": x[j], "parent": parent.get(i)} for j, i in enumerate(order)])
    return mem


def walker(enc_dir: str = "enc_py"):
    parent, text = read(str(WALKER / "edges.tsv"), str(WALKER / "names.tsv"), False)
    order, seen = [], set()
    for start in sorted(text):
        for i in reversed([start] + list(ancestors(parent, start))):
            if i not in seen:
                seen.add(i)
                order.append(i)
    enc = HierarchyEncoder.load(str(WALKER / enc_dir))
    mem = filed(enc, order, text, parent, f"walker-{enc_dir}")
    queries = []
    for h in json.loads((WALKER / "heldout.json").read_text()):
        chain = [h["parent"], *ancestors(parent, h["parent"])]
        queries.append((h["text"], {a: d + 1 for d, a in enumerate(chain)}))
    return mem, queries


def tree(kind: str, seed: int):
    edges = "runs/pyc" if kind == "pyc" else "runs/walk/stdlib"
    parent, text = read(f"{edges}/edges.tsv", f"{edges}/names.tsv", False)
    held, keep = split(parent, text, seed)
    kept = set(keep)
    enc = HierarchyEncoder.load(f"runs/walk/enc-{kind}-s{seed}")
    mem = filed(enc, keep, text, {i: p for i, p in parent.items() if p in kept}, f"{kind}-s{seed}")
    queries = [(text[i], {a: d + 1 for d, a in enumerate(ancestors(parent, i))}) for i in sorted(held)]
    return mem, queries


def wordnet(kind: str):
    from bench_placement import filed_parents, load_task

    from hypermem.data.hierarchy_tasks import hop_distances
    task = load_task(1, kind)
    h = task.hierarchy
    held = set(task.val_entities) | set(task.test_entities)
    ids = sorted(h.names)
    if kind == "lemma":   # every noun's lemma, sorted (experiments/placement_vote/run.py's cache)
        allx = torch.load("runs/placement_vote/vectors-minilm.pt")
    else:   # the known nouns' definitions, sorted (bench_placement.encoded's cache of known_store)
        ids = [e for e in ids if e not in held]
        allx = torch.load(os.environ.get("WN_DEF_VECTORS", "/tmp/exp/wn/known.pt"))
    at = {e: j for j, e in enumerate(ids)}
    known, par = filed_parents(task, [e for e in ids if e not in held])
    mem = Memory(embedder=SentenceTransformerEmbedder(), hybrid=0.0)
    mem.add_many([{"text": h.names[e], "id": e, "embedding": allx[at[e]], "parent": par.get(e)} for e in known])
    anc = hop_distances(h, task.val_entities)   # validation nouns only
    return mem, [(h.names[e], anc[e]) for e in task.val_entities]


def load(name: str):
    if name.startswith("walker"):
        return walker(*name.split(":")[1:])
    if name.startswith("wn-"):
        return wordnet({"wn-def": "definition", "wn-lemma": "lemma"}[name])
    kind, s = name.split("-s")
    return tree(kind, int(s))


def measure(mem: Memory, queries, auto: bool = True, chain: bool = False) -> dict:
    out = {}
    stored = set(mem.ids)
    if auto:
        hops = []
        for t, anc in queries:
            j = mem.add(t, parent="auto")
            p = mem.parent(j)
            mem.remove(j)
            hops.append(None if p is None else anc.get(p, 99))
        n = len(hops)
        out.update(parent=sum(h == 1 for h in hops) / n, within2=sum(h is not None and h <= 2 for h in hops) / n,
                   attached=sum(h is not None for h in hops) / n,
                   farther=sum(h is not None and 2 <= h < 99 for h in hops) / n)
    hits = mem.search_batch([t for t, _ in queries], mode="ancestors", k=20 if chain else 10, touch=False)
    got = tot = near = 0
    rec = []
    for (t, anc), res in zip(queries, hits):
        ids = [r.id for r in res]
        if chain:   # the chain of the parent's choice first (nearest first), then the ranking
            c = mem.suggest_parents(t, k=1)
            up = [c[0].id, *mem.ancestors(c[0].id)] if c else []
            ids = (up + [i for i in ids if i not in up])[:10]
        near += any(anc.get(i, 99) <= 2 for i in ids[:5])   # the parent or grandparent among the top 5
        got += sum(i in anc for i in ids[:5])
        tot += len(ids[:5])
        true = [a for a in anc if a in stored]
        if true:
            rec.append(sum(i in anc for i in ids) / len(true))
    out.update(p5=got / max(tot, 1), r10=sum(rec) / max(len(rec), 1), near5=near / len(queries))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("names", nargs="+", help="walker[:enc_dir], pyc-sS, std-sS, wn-def, wn-lemma")
    ap.add_argument("--set", action="append", default=[], help="MODULE.NAME=VALUE of hypermem.store")
    ap.add_argument("--no-auto", action="store_true", help="the ancestors search only")
    ap.add_argument("--chain", action="store_true", help="rank the ancestors as the chain of the parent's choice "
                                                         "(suggest_parents' first), then the store's ranking")
    args = ap.parse_args()
    torch.set_num_threads(1)
    warnings.filterwarnings("ignore", category=AddManyHint)
    for s in args.set:
        key, val = s.split("=")
        mod, attr = key.rsplit(".", 1)
        setattr(importlib.import_module(f"hypermem.store.{mod}"), attr, json.loads(val))
    for name in args.names:
        t0 = time.time()
        mem, queries = load(name)
        r = measure(mem, queries, not args.no_auto, args.chain)
        print(json.dumps({"h": name, "n": len(queries), "set": args.set, **{k: round(v, 3) for k, v in r.items()},
                          "s": round(time.time() - t0)}), flush=True)


if __name__ == "__main__":
    main()
