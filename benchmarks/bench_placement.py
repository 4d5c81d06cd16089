"""The store places held-out WordNet nouns itself (issue 31): ``add(text, parent="auto")`` and
``search(text, mode="ancestors")`` without a root, for a ball hierarchy encoder, its Euclidean
twin and pre-trained MiniLM cosine, on the unseen-entity split of the encoder benchmark.

    python benchmarks/bench_placement.py --encoder poincare=runs/enc/unseen-poincare-s1-con/encoder \\
        --encoder euclidean=runs/enc/unseen-euclidean-s1-con/encoder --cosine --seed 1 -o runs/placement
    python benchmarks/bench_placement.py --filed --encoder poincare=FOLDER --encoder euclidean=FOLDER --seed 1 --cache
    python benchmarks/bench_placement.py --cost --encoder poincare=FOLDER --sizes 10000 100000 -o runs/placement

**Quality.**  The split is ``unseen_entity_task(hit_noun_hierarchy(), seed)`` (as
``bench_encoder.py --task unseen`` builds it): the store holds every known entity's name (no
declared parents), and each held-out *test* noun is placed against it as ``add(name,
parent="auto")`` decides (the best ``suggest_parents`` score above the encoder's validated
threshold, else a root; checked against real ``add`` calls on a sample), and ranked by
``search(name, mode="ancestors", k=10)``.  Reported per system: *attach to parent* (the chosen
parent is one of the noun's direct parents), *within 2 hops* (a true ancestor at most 2 hops
up), *attached* (not left a root), ancestors recall@10 by hop distance, and paired bootstrap
intervals of the per-noun differences between systems.  MiniLM cosine is the store's own
nearest search (``Memory(embedder=SentenceTransformerEmbedder())``, shell metric = cosine
order, ``hybrid=0``); it has no threshold, so it always attaches its nearest memory.  The ball's
ranking is also scored by entailment-cone energy on the *validation* nouns (which ranking the
store uses is chosen there).

**A filed store.**  ``--filed``: the store holds the known entities *with their tree* (each its
first known parent from the split's training edges, declared), the case of a user who filed
memories before; then ``add(parent="auto")`` and ``mode="ancestors"`` rank by the neighbours'
vote (:mod:`hypermem.store.vote`), and the subsumption ranking's recall is reported beside it.
*within 2, ungated* counts the vote's choice before the encoder's threshold decides.  The
cosine system votes too (a filed store votes with any embedder) and always attaches.

**Cost.**  ``--cost``: the store filled with ``N`` encoder points (``--pool`` encoded known
names, repeated), then the wall time per ``add(name, parent="auto")`` (the encoder call
included) and per ``search(name, mode="ancestors", k=10)``, exact and with
``use_index=True`` over a faiss HNSW index (``build_index("faiss")``).

Each run writes ``<out>/placement-<system>-s<seed>.json`` (and ``cost-<system>.json``) and
prints a table; ``--table`` prints the table of what is under ``-o``.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
sys.path.insert(0, str(Path(__file__).resolve().parent))

import torch  # noqa: E402
from bench_encoder import paired_interval  # noqa: E402

from hypermem import Memory  # noqa: E402
from hypermem.data.hierarchy_tasks import hop_distances, unseen_entity_task  # noqa: E402
from hypermem.data.wordnet import HIT_TEXTS  # noqa: E402
from hypermem.embed import PlacementReranker, SentenceTransformerEmbedder  # noqa: E402
from hypermem.embed.encoder_kind import is_hierarchy_encoder  # noqa: E402
from hypermem.embed.hierarchy_encoder import HierarchyEncoder  # noqa: E402
from hypermem.geometry.cones import cone_energy  # noqa: E402
from hypermem.store.suggest import decision_scores  # noqa: E402
from hypermem.store.vote import FILED_MIN, VOTE_K, filed_share  # noqa: E402

HOPS = (1, 2, 3, 4)
"""Hop distances reported (4 means 4 or more)."""


def load_task(seed: int, text: str = "lemma"):
    """The unseen-entity split of WordNet nouns named by their lemma or by ``"lemma: definition"``."""
    from hypermem.data.wordnet import hit_noun_hierarchy

    return unseen_entity_task(hit_noun_hierarchy(text=text), seed=seed)


def embedder_for(spec: str):
    """``(name, embedder)`` of ``NAME=FOLDER`` (a saved hierarchy encoder) or ``cosine``."""
    if spec == "cosine":
        return "cosine", SentenceTransformerEmbedder()
    name, _, folder = spec.partition("=")
    return name, HierarchyEncoder.load(folder)


def encoded(emb, texts: list[str], cache: Path | None) -> torch.Tensor:
    """``emb.embed(texts)`` (float64), cached in ``cache`` when given."""
    if cache is not None and cache.is_file():
        x = torch.load(cache)
        if x.shape[0] == len(texts):
            return x
    x = torch.cat([emb.embed(texts[s:s + 4096]) for s in range(0, len(texts), 4096)])
    if cache is not None:
        torch.save(x, cache)
    return x


def filed_parents(task, known: list[str]) -> tuple[list[str], dict[str, str]]:
    """The known entities parents first, and each one's first known parent (the split's
    training edges; a store keeps one parent a memory): the tree a user would have filed."""
    par: dict[str, str] = {}
    for c, p in sorted(task.train_edges):
        par.setdefault(c, p)
    depth: dict[str, int] = {}
    for e in known:
        chain = []
        while e not in depth and e in par:
            chain.append(e)
            e = par[e]
        d = depth.setdefault(e, 0)   # a known depth, or a root
        for x in reversed(chain):
            d += 1
            depth[x] = d
    return sorted(known, key=lambda e: (depth[e], e)), par


def known_store(emb, task, cache: Path | None, filed: bool = False):
    """A store holding every known entity's name, and the ids in order; ``filed``: each with its
    first known parent declared (:func:`filed_parents`), else none."""
    h = task.hierarchy
    held = set(task.val_entities) | set(task.test_entities)
    known = sorted(e for e in h.names if e not in held)
    x = encoded(emb, [h.names[e] for e in known], cache)
    at = {e: i for i, e in enumerate(known)}
    par: dict[str, str] = {}
    if filed:
        known, par = filed_parents(task, known)
    mem = Memory(embedder=emb, hybrid=0.0)
    mem.add_many([{"text": h.names[e], "id": e, "embedding": x[at[e]], "parent": par.get(e)} for e in known])
    return mem, known


def outcomes(mem, task, entities: list[str], threshold: float | None) -> dict:
    """Per-noun outcomes of the ancestors ranking and of add(parent="auto")'s decision."""
    h = task.hierarchy
    par = h.parents()
    anc = hop_distances(h, entities)
    hierarchy = is_hierarchy_encoder(mem.embedder)
    texts = [h.names[e] for e in entities]
    if hierarchy:   # all of a voted list: add(parent="auto") takes the first candidate that passes
        hits = mem.suggester.rank(texts, ALL_VOTED)
    elif mem.suggester.holds_tree():   # a filed store votes with any embedder
        hits = mem.suggester.rank(texts, 10)
    else:
        hits = mem.search_batch(texts, k=10, touch=False, hybrid=0.0)
    # the ancestors search (no mention term: store.mentions) for the recall by hop
    ranked = mem.search_batch(texts, k=10, mode="ancestors", touch=False) if mem.suggester.places_text() else hits
    enc = mem.embedder
    qx = enc.encode(texts) if hierarchy else None
    sub = None   # a filed store ranks ancestors by the vote: the subsumption ranking beside it
    if hierarchy and mem.suggester.holds_tree():
        sub = mem.suggester.rank(texts, 10, by="subsumption")

    rows = []
    for j, (e, res, found) in enumerate(zip(entities, hits, ranked)):
        true = {p: d for p, d in anc[e].items() if p in mem}
        top = res[0] if res else None
        chosen = auto_choice(mem, qx[j] if hierarchy else None, res, threshold, texts[j])
        attached = chosen is not None
        got = [r.id for r in found[:10]]
        by_hop, by_hop_sub = {}, {}
        for hop in HOPS:
            want = {p for p, d in true.items() if (d >= hop if hop == HOPS[-1] else d == hop)}
            if want:
                by_hop[hop] = len(want & set(got)) / len(want)
                if sub is not None:
                    by_hop_sub[hop] = len(want & {r.id for r in sub[j]}) / len(want)
        rows.append({"entity": e, "parent": float(chosen in par.get(e, ())),
                     "within2": float(chosen is not None and true.get(chosen, 99) <= 2),
                     "within2_ungated": float(top is not None and true.get(top.id, 99) <= 2),
                     "attached": float(attached), "chosen": chosen, "recall": by_hop, "recall_sub": by_hop_sub,
                     "top": got})
    return {"rows": rows}


LOCOMO = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "locomo"
"""LoCoMo's conversations (``--foreign``)."""
ALL_VOTED = 4 * VOTE_K
"""More than a vote's candidates (each of the ``VOTE_K`` neighbours and 3 ancestors)."""


def auto_choice(mem, x, ranked: list, threshold: float | None, text: str | None = None) -> str | None:
    """The parent ``add(text, parent="auto")`` takes (``x``: the text's encoder point), from the
    ranking ``ranked`` (all of it): without a threshold its first; else, where the text's
    neighbourhood was filed (the store votes), the first candidate if ``text`` names it
    (store.mentions), or else the first candidate whose pair score passes, and otherwise the
    first, if it passes (the pair-score rule)."""
    if not ranked:
        return None
    if threshold is None or not is_hierarchy_encoder(mem.embedder):
        return ranked[0].id
    sug = mem.suggester
    voted = sug.holds_tree()
    if voted:
        cos, at = sug.neighbours(x[None].to(torch.float64), None, VOTE_K)
        voted = filed_share([(mem.ids[r], c, 1.0) for c, r in zip(cos[0].tolist(), at[0].tolist())],
                            sug.parent_of) >= FILED_MIN
    if voted and text is not None and ranked[0].id in sug.mentions.find(mem.state, text):
        return ranked[0].id
    cands = ranked if voted else ranked[:1]
    dec = decision_scores(mem.embedder, x, torch.stack([mem.embedding(r.id) for r in cands]), sug.scan)
    ok = (dec > threshold).nonzero()
    return cands[int(ok[0, 0])].id if ok.numel() else None


def foreign_texts(n: int, folder: Path = LOCOMO) -> list[str]:
    """``n`` utterances of LoCoMo's conversations (the first session of each, in file order):
    texts that belong nowhere in a tree of nouns."""
    out: list[str] = []
    for f in sorted(folder.glob("*.json")):
        conv = json.loads(f.read_text())
        out += [t["text"] for t in conv.get("session_1", []) if isinstance(t, dict) and t.get("text")]
    return out[:n]


def foreign_attach(mem, texts: list[str], threshold: float) -> dict:
    """How often ``parent="auto"`` attaches a text from elsewhere: by the store's rule (the
    vote's first choice if the text names it, else the first voted candidate that passes), by
    the vote's first choice alone, and with a named first choice gated too."""
    hits = mem.suggester.rank(texts, ALL_VOTED)
    X = mem.embedder.encode(texts)
    rule = [auto_choice(mem, X[j], res, threshold, texts[j]) is not None for j, res in enumerate(hits)]
    first = [auto_choice(mem, X[j], res[:1], threshold, texts[j]) is not None for j, res in enumerate(hits)]
    gated = [auto_choice(mem, X[j], res, threshold) is not None for j, res in enumerate(hits)]
    return {"n": len(texts), "attached": sum(rule) / len(texts), "attached_first_choice_only": sum(first) / len(texts),
            "attached_named_gated_too": sum(gated) / len(texts)}


def summary(rows: list[dict]) -> dict:
    n = len(rows)
    out = {k: sum(r[k] for r in rows) / n for k in ("parent", "within2", "within2_ungated", "attached")}
    for hop in HOPS:
        vals = [r["recall"][hop] for r in rows if hop in r["recall"]]
        out[f"recall@10_hop{hop}"] = sum(vals) / len(vals) if vals else float("nan")
        out[f"n_hop{hop}"] = len(vals)
        sub = [r["recall_sub"][hop] for r in rows if hop in r.get("recall_sub", {})]
        if sub:
            out[f"recall@10_subsumption_hop{hop}"] = sum(sub) / len(sub)
    out["n"] = n
    return out


def cone_vs_score(mem, task, enc, sample: int = 150, seed: int = 0) -> dict:
    """Validation recall@10 (every hop) of the ball's ancestors ranking by subsumption score and
    by entailment-cone energy ``max(0, Xi(p, x) - psi(p))`` (ties: hyperbolic distance), on
    ``sample`` validation nouns (the cone energy is a full pass over the store per noun)."""
    h = task.hierarchy
    val = sorted(random.Random(seed).sample(task.val_entities, min(sample, len(task.val_entities))))
    anc = hop_distances(h, val)
    ids = mem.ids
    P = mem.embeddings.to(torch.float64)
    X = enc.embed([h.names[e] for e in val])
    res = {"score": [], "cone": []}
    by_score = mem.search_batch([h.names[e] for e in val], k=10, mode="ancestors", touch=False)
    for j, e in enumerate(val):
        true = {p for p in anc[e] if p in mem}
        if not true:
            continue
        res["score"].append(len(true & {r.id for r in by_score[j]}) / len(true))
        energy = cone_energy(P, X[j][None], enc.curvature, mem.cone_k)
        by_dist = torch.argsort(enc.score_terms(X[j][None], P)[0])
        order = by_dist[torch.argsort(energy[by_dist], stable=True)[:10]]   # energy first, then distance
        res["cone"].append(len(true & {ids[i] for i in order.tolist()}) / len(true))
    return {k: sum(v) / len(v) for k, v in res.items()} | {"n": len(res["score"])}


def check_real_adds(mem, task, threshold, rows, sample: int = 50, seed: int = 0) -> dict:
    """Real ``add(name, parent="auto")`` calls on a sample of the test nouns (each removed after):
    how often the parent is :func:`auto_choice` of ``suggest_parents(name)`` and the threshold
    (the same single encoding), how often the decision of the batched ranking (a batch encodes with
    padding: float32 rounding can swap near-ties), and the time per call."""
    h = task.hierarchy
    rng = random.Random(seed)
    pick = rng.sample(range(len(rows)), min(sample, len(rows)))
    agree, same_batch, secs = 0, 0, []
    enc = mem.embedder
    for i in pick:
        r = rows[i]
        text = h.names[r["entity"]]
        x = enc.encode([text])[0] if is_hierarchy_encoder(enc) else None
        want = auto_choice(mem, x, mem.suggest_parents(text, k=ALL_VOTED), threshold, text)
        t0 = time.perf_counter()
        new = mem.add(text, parent="auto")
        secs.append(time.perf_counter() - t0)
        agree += int(mem.parent(new) == want)
        same_batch += int(mem.parent(new) == r["chosen"])
        mem.remove(new)
    return {"agree": agree, "agree_with_batched_ranking": same_batch, "n": len(pick),
            "add_auto_ms_median": 1000 * sorted(secs)[len(secs) // 2]}


def quality(args) -> int:
    task = load_task(args.seed, args.text)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    specs = list(args.encoder) + (["cosine"] if args.cosine else [])
    results = {}
    for spec in specs:
        name, emb = embedder_for(spec)
        base = name  # the points do not depend on lambda: one cache per encoder
        if args.lam is not None and hasattr(emb, "ranking_weight"):
            emb.ranking_weight, name = float(args.lam), f"{name}-l{args.lam:g}"  # ranking's lambda; F1's decides
        t0 = time.monotonic()
        texts = "" if args.text == "lemma" else f"-{args.text}"
        cache = out / f"points-{base}-s{args.seed}{texts}.pt" if args.cache else None
        mem, known = known_store(emb, task, cache, filed=args.filed)
        name = f"{name}-filed" if args.filed else name
        if args.reranker:   # the placement reranker re-scores the rule's best candidates (embed.reranker)
            mem.reranker = PlacementReranker.load(args.reranker)
            name = f"{name}-reranked"
        thr = getattr(emb, "threshold", None)
        res = outcomes(mem, task, task.test_entities, thr)
        rec = {"system": name, "seed": args.seed, "source": spec, "text": args.text, "threshold": thr, "memories": len(mem),
               "summary": summary(res["rows"]), "rows": [{k: r[k] for k in ("entity", "parent", "within2", "within2_ungated", "attached")}
                                                         for r in res["rows"]]}
        if thr is not None or args.filed:   # a filed store's plain embedder always attaches the vote's choice
            rec["real_adds"] = check_real_adds(mem, task, -math.inf if thr is None else thr, res["rows"],
                                               sample=args.sample)
        if args.foreign and thr is not None:
            rec["foreign"] = foreign_attach(mem, foreign_texts(args.foreign), thr)
            print(f"{name}: texts from elsewhere {json.dumps(rec['foreign'])}", flush=True)
        if getattr(emb, "geometry", None) == "poincare" and args.cone:
            rec["validation_ranking"] = cone_vs_score(mem, task, emb, sample=args.cone_sample)
        rec["wall_s"] = time.monotonic() - t0
        (out / f"placement-{name}-s{args.seed}.json").write_text(json.dumps(rec, indent=1))
        results[name] = rec
        print(f"{name}: {json.dumps(rec['summary'])} {json.dumps(rec.get('real_adds', {}))} "
              f"{json.dumps(rec.get('validation_ranking', {}))} ({rec['wall_s']:.0f} s)", flush=True)
        del mem
    print(table(out))
    print(f"results: {out.resolve()}/placement-*-s{args.seed}.json", flush=True)
    return 0


def cost(args) -> int:
    task = load_task(args.seed, args.text)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    h = task.hierarchy
    queries = [h.names[e] for e in task.test_entities[: args.queries]]
    for spec in args.encoder:
        name, enc = embedder_for(spec)
        known = sorted(e for e in h.names if e not in set(task.val_entities) | set(task.test_entities))
        pool = random.Random(args.seed).sample(known, min(args.pool, len(known)))
        base = encoded(enc, [h.names[e] for e in pool], None)   # the points repeat: the cost does not care
        name = f"{name}-filed" if args.filed else name
        rec = {"system": name, "threads": torch.get_num_threads(), "sizes": {}}
        for n in args.sizes:
            g = torch.Generator().manual_seed(n)
            rows = torch.randint(0, base.shape[0], (n,), generator=g)
            mem = Memory(embedder=enc, hybrid=0.0)
            mem.add_many([{"text": f"m{i}", "id": f"m{i}", "embedding": base[int(r)],
                           "parent": f"m{(i - 1) // 8}" if args.filed and i else None} for i, r in enumerate(rows)])
            enc.threshold = enc.threshold if enc.threshold is not None else -1e9
            t = {}
            secs = []
            for q in queries:
                t0 = time.perf_counter()
                i = mem.add(q, parent="auto")
                secs.append(time.perf_counter() - t0)
                mem.remove(i)
            t["add_auto_ms"] = 1000 * sorted(secs)[len(secs) // 2]
            exact: list[list[str]] = []
            for label, kw in (("ancestors_ms", {}), ("ancestors_index_ms", {"use_index": True})):
                if kw:
                    t0 = time.perf_counter()
                    mem.build_index("faiss")
                    t["index_build_s"] = time.perf_counter() - t0
                secs, hits = [], []
                for q in queries:
                    t0 = time.perf_counter()
                    hits.append([r.id for r in mem.search(q, k=10, mode="ancestors", touch=False, **kw)])
                    secs.append(time.perf_counter() - t0)
                t[label] = 1000 * sorted(secs)[len(secs) // 2]
                if kw:
                    t["index_overlap@10"] = sum(len(set(a) & set(b)) for a, b in zip(hits, exact)) / (10 * len(hits))
                else:
                    exact = list(hits)
            t0 = time.perf_counter()
            enc.embed(queries)
            t["encode_ms_per_text"] = 1000 * (time.perf_counter() - t0) / len(queries)
            rec["sizes"][str(n)] = t
            print(f"{name} n={n}: {json.dumps(t)}", flush=True)
            del mem
        (out / f"cost-{name}.json").write_text(json.dumps(rec, indent=1))
    print(f"results: {out.resolve()}/cost-*.json", flush=True)
    return 0


def table(out: Path) -> str:
    """Markdown table of every placement-*.json under ``out`` and paired differences."""
    recs = [json.loads(p.read_text()) for p in sorted(out.glob("placement-*.json"))]
    lines = ["| system | seed | attach to parent | within 2 hops | within 2, ungated | attached | R@10 hop1 | hop2 "
             "| hop3 | hop4+ |", "|---|---|---|---|---|---|---|---|---|---|"]
    for r in recs:
        s = r["summary"]
        ungated = s.get("within2_ungated", float("nan"))
        lines.append(f"| {r['system']} | {r['seed']} | {s['parent']:.3f} | {s['within2']:.3f} | {ungated:.3f} "
                     f"| {s['attached']:.3f} | "
                     + " | ".join(f"{s[f'recall@10_hop{h}']:.3f}" for h in HOPS) + " |")
    for a in recs:
        for b in recs:
            if a["system"] < b["system"] and a["seed"] == b["seed"] and len(a["rows"]) == len(b["rows"]):
                for k in ("parent", "within2", "within2_ungated"):
                    if k not in a["rows"][0] or k not in b["rows"][0]:
                        continue
                    m, lo, hi = paired_interval([x[k] for x in a["rows"]], [x[k] for x in b["rows"]])
                    lines.append(f"{a['system']} - {b['system']} (seed {a['seed']}) {k}: {m:+.3f} [{lo:+.3f}, {hi:+.3f}]")
    return "\n".join(lines)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--encoder", action="append", default=[], metavar="NAME=FOLDER", help="a saved hierarchy encoder")
    p.add_argument("--filed", action="store_true", help="the store holds the known entities' tree (declared "
                   "parents): placement by the neighbours' vote")
    p.add_argument("--foreign", type=int, default=0, metavar="N",
                   help="also place N LoCoMo utterances (texts from elsewhere) and report how many attach")
    p.add_argument("--cosine", action="store_true", help="also pre-trained MiniLM cosine (the store's nearest search)")
    p.add_argument("--text", choices=HIT_TEXTS, default="lemma",
                   help="nouns named by their lemma (HiT's data) or by 'lemma: definition'")
    p.add_argument("--seed", type=int, default=1, help="the unseen-entity split's seed (default 1)")
    p.add_argument("--sample", type=int, default=50, help="real add(parent='auto') calls checked per system")
    p.add_argument("--no-cone", dest="cone", action="store_false", help="skip the cone-vs-score validation")
    p.add_argument("--cone-sample", type=int, default=150, help="validation nouns of the cone-vs-score check")
    p.add_argument("--lambda", dest="lam", type=float, help="rank with this lambda (the encoder's ranking_weight) "
                   "instead of the saved one; the attach decision keeps the F1 lambda and threshold")
    p.add_argument("--cost", action="store_true", help="time add(parent='auto') and ancestors search at --sizes")
    p.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    p.add_argument("--queries", type=int, default=50, help="timed calls per size (--cost)")
    p.add_argument("--pool", type=int, default=4000, help="distinct encoded names the --cost stores repeat")
    p.add_argument("--cache", action="store_true", help="cache the encoded names under -o")
    p.add_argument("--reranker", metavar="FOLDER", help="a saved placement reranker for the filed store (mem.reranker)")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--table", action="store_true", help="print the table of the results under -o")
    p.add_argument("-o", "--out", default="runs/placement")
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    if args.table:
        print(table(Path(args.out)))
        return 0
    return cost(args) if args.cost else quality(args)


if __name__ == "__main__":
    sys.exit(main())
