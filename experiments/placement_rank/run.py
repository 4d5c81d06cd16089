"""Which of the voted and named candidates is the parent? A learned choice (issue 31, an experiment)

In a filed store, ``parent="auto"`` ranks candidates by ``share + mu [named]`` (the neighbours'
vote, :mod:`hypermem.store.vote`, and the mention term, :mod:`hypermem.store.mentions`).  On the
validation nouns of WordNet's unseen-entity split, a true ancestor within 2 hops is among those
candidates for 94% of the nouns, but the rule picks one for under half: the choice among the
candidates, not their recall, is what is missing.  Here every candidate of a text gets generic
features (nothing WordNet-specific: the vote, the cosine, the encoder's pair score, the names,
the filed tree around the candidate) and a logistic regression on "a true ancestor within 2
hops" scores them; the text's parent is the best-scored candidate.  Features and the L2 weight
are chosen by 5-fold cross-validation over the validation nouns (folds by noun); the test nouns
are scored once, with the model fitted on all validation nouns.

    python experiments/placement_rank/run.py dump --encoder cosine --text definition --cache runs/placement-def \\
        --save runs/rank/cosine-def.json
    python experiments/placement_rank/run.py fit runs/rank/cosine-def.json [--test]
    python experiments/placement_rank/run.py hedge runs/rank/{cosine-def,poincare-def,cosine-lemma}.json
    python experiments/placement_rank/run.py path runs/rank/cosine-def.json --cache runs/placement-def

``hedge``: where the store's misses lie, and whether climbing the filed tree when the
candidates' mass is spread would help; ``path``: the cosine of the text and each candidate's
filed parent, grandparent and children as more features.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import torch  # noqa: E402
from bench_placement import ALL_VOTED, embedder_for, filed_parents, known_store, load_task  # noqa: E402

from hypermem.data.hierarchy_tasks import hop_distances  # noqa: E402
from hypermem.embed.encoder_kind import is_hierarchy_encoder  # noqa: E402
from hypermem.retrieval.bm25 import tokenize  # noqa: E402
from hypermem.store.mentions import MENTION_SHARE, title_terms  # noqa: E402
from hypermem.store.parent_choice import CHILDREN_SHARE, COSINE_SHARE, FIRST_SHARE  # noqa: E402
from hypermem.store.vote import VOTE_K  # noqa: E402

FEATURES = ("share", "named", "cos", "pair", "vote_rank", "cos_rank", "pair_rank", "children", "depth",
            "neighbour", "n_voters", "named_first", "title_len", "named_longest", "passes", "vote_first", "sense_best", "first_sense", "first")


def first_run(terms: list[str], title: tuple[str, ...], start: int = 0) -> int:
    """Where ``title`` first occurs as a run of ``terms`` at or after ``start`` (-1: nowhere)."""
    n = len(title)
    for s in range(start, len(terms) - n + 1):
        if tuple(terms[s:s + n]) == title:
            return s
    return -1


def dump(args) -> None:
    task = load_task(args.seed, args.text)
    h = task.hierarchy
    name, emb = embedder_for(args.encoder)
    suffix = "" if args.text == "lemma" else f"-{args.text}"
    Path(args.cache).mkdir(parents=True, exist_ok=True)
    mem, known = known_store(emb, task, Path(args.cache) / f"points-{name}-s{args.seed}{suffix}.pt", filed=True)
    _, par = filed_parents(task, known)
    kids: dict[str, int] = {}
    for p in par.values():
        kids[p] = kids.get(p, 0) + 1
    depth: dict[str, int] = {}
    for e in known:
        d, a = 0, par.get(e)
        while a is not None and d < 50:
            d, a = d + 1, par.get(a)
        depth[e] = d
    hier = is_hierarchy_encoder(emb)
    thr = getattr(emb, "threshold", None)
    sug = mem.suggester
    E = torch.stack([mem.embedding(i) for i in known]).to(torch.float64)
    at = {k: j for j, k in enumerate(known)}
    En = E / E.norm(dim=1, keepdim=True).clamp_min(1e-300)
    from hypermem.store.suggest import decision_scores
    out = {"encoder": args.encoder, "text": args.text, "threshold": thr}
    for split in ("val", "test"):
        ents = task.val_entities if split == "val" else task.test_entities
        anc = hop_distances(h, ents)
        texts = [h.names[e] for e in ents]
        hits = mem.search_batch(texts, k=ALL_VOTED, mode="ancestors", touch=False)
        X = (emb.encode(texts) if hier else emb.embed(texts)).to(torch.float64)
        cosn, rows_n = sug.neighbours(X, None, VOTE_K)
        rows = []
        for j, e in enumerate(ents):
            true = {p: d for p, d in anc[e].items() if p in mem}
            share = {r.id: r.score for r in hits[j]}
            vrank = {r.id: i for i, r in enumerate(hits[j])}
            men = sug.mentions.find(mem.state, texts[j])
            firsts = set(sug.mentions.find_first(mem.state, texts[j]))   # the store's own rule
            cands = list(dict.fromkeys([r.id for r in hits[j]] + men))
            if not cands:
                rows.append({"entity": e, "cands": []})
                continue
            neigh = [known[r] for r in rows_n[j].tolist()]
            voters: dict[str, int] = {}
            for nb in neigh:
                a, s = par.get(nb), 0
                while a is not None and s < 3:
                    voters[a] = voters.get(a, 0) + 1
                    a, s = par.get(a), s + 1
            x = X[j]
            idx = [at[c] for c in cands]
            cos = (En[idx] @ (x / x.norm())).tolist()
            pair = decision_scores(emb, X[j], E[idx], sug.scan).tolist() if hier else cos
            terms = tokenize(texts[j])
            own = title_terms(texts[j])
            own_end = len(own) if own and tuple(terms[:len(own)]) == own else 0
            ttl = {c: title_terms(mem.get(c).text) or () for c in men}
            pos = {c: first_run(terms, ttl[c], own_end) for c in men}
            best_sense = {}
            for i, c in enumerate(cands):
                if c in men and cos[i] > best_sense.get(ttl[c], (-2.0, None))[0]:
                    best_sense[ttl[c]] = (cos[i], c)
            after = [p for c, p in pos.items() if p >= own_end]
            first = min(after) if after else -1
            tl = {c: len(title_terms(mem.get(c).text) or ()) for c in men}
            cos_order = sorted(range(len(cands)), key=lambda i: -cos[i])
            pair_order = sorted(range(len(cands)), key=lambda i: -pair[i])
            crank = {cands[i]: r for r, i in enumerate(cos_order)}
            prank = {cands[i]: r for r, i in enumerate(pair_order)}

            def covered(c, pos=pos, tl=tl, men=men):   # a longer named title that contains this one's run
                p, n = pos[c], tl[c]
                return any(d != c and tl[d] > n and pos[d] >= 0 and pos[d] <= p and p + n <= pos[d] + tl[d] for d in men)
            feats = []
            for i, c in enumerate(cands):
                named = c in men
                feats.append({
                    "id": c, "hop": true.get(c, 99),
                    "share": share.get(c, 0.0), "named": float(named), "cos": cos[i], "pair": pair[i],
                    "vote_rank": math.log1p(vrank.get(c, len(hits[j]))), "cos_rank": math.log1p(crank[c]),
                    "pair_rank": math.log1p(prank[c]), "children": math.log1p(kids.get(c, 0)),
                    "depth": float(depth.get(c, 0)), "neighbour": float(c in neigh),
                    "n_voters": voters.get(c, 0) / VOTE_K,
                    "named_first": float(named and pos[c] == first and first >= 0),
                    "title_len": float(tl[c]) if named else 0.0,
                    "named_longest": float(named and not covered(c)),
                    "passes": float(thr is not None and pair[i] > thr) if hier else 1.0,
                    "vote_first": float(vrank.get(c, -1) == 0), "first": float(c in firsts),
                    "sense_best": float(named and best_sense[ttl[c]][1] == c),
                    "first_sense": float(named and pos[c] == first and first >= 0 and best_sense[ttl[c]][1] == c)})
            rows.append({"entity": e, "store_first": hits[j][0].id if hits[j] else None, "cands": feats})
        out[split] = rows
        print(split, len(rows), "texts; a true ancestor within 2 among the candidates:",
              sum(any(c["hop"] <= 2 for c in r["cands"]) for r in rows) / len(rows), flush=True)
    Path(args.save).parent.mkdir(parents=True, exist_ok=True)
    Path(args.save).write_text(json.dumps(out))


def tensors(rows, feats):
    Xs, ys, groups = [], [], []
    for g, r in enumerate(rows):
        for c in r["cands"]:
            Xs.append([c[f] for f in feats])
            ys.append(float(c["hop"] <= 2))
            groups.append(g)
    return torch.tensor(Xs, dtype=torch.float64), torch.tensor(ys, dtype=torch.float64), torch.tensor(groups)


def fit(X, y, l2: float, groups=None):
    """Logistic regression on the candidates (``groups`` None), or listwise: per text, minus the
    log of the softmax mass on its true candidates (texts without one skipped)."""
    mu, sd = X.mean(0), X.std(0).clamp_min(1e-9)
    Z = (X - mu) / sd
    w = torch.zeros(Z.shape[1], dtype=torch.float64, requires_grad=True)
    b = torch.zeros((), dtype=torch.float64, requires_grad=True)
    opt = torch.optim.LBFGS([w, b], max_iter=200, line_search_fn="strong_wolfe")
    if groups is not None:
        G = int(groups.max()) + 1
        has = torch.zeros(G, dtype=torch.float64).index_add_(0, groups, y) > 0
        keep = has[groups]
        Z, y, groups = Z[keep], y[keep], groups[keep]

    def closure():
        opt.zero_grad()
        s = Z @ w + b
        if groups is None:
            loss = torch.nn.functional.binary_cross_entropy_with_logits(s, y)
        else:
            m = torch.full((G,), -1e300, dtype=torch.float64).scatter_reduce(0, groups, s, "amax").detach()
            e = (s - m[groups]).exp()
            tot = torch.zeros(G, dtype=torch.float64).index_add(0, groups, e)
            pos = torch.zeros(G, dtype=torch.float64).index_add(0, groups, e * y)
            ok = tot > 0
            loss = -(pos[ok].clamp_min(1e-300).log() - tot[ok].log()).mean()
        loss = loss + l2 * (w * w).sum()
        loss.backward()
        return loss
    opt.step(closure)
    return (w.detach() / sd), (b.detach() - (w.detach() * mu / sd).sum())


def within2(rows, feats, w, b) -> float:
    hit = 0
    for r in rows:
        if not r["cands"]:
            continue
        s = [sum(c[f] * float(wi) for f, wi in zip(feats, w)) + float(b) for c in r["cands"]]
        best = max(range(len(s)), key=lambda i: s[i])
        hit += r["cands"][best]["hop"] <= 2
    return hit / len(rows)


def cv(rows, feats, l2, folds=5) -> float:
    got = []
    for f in range(folds):
        tr = [r for i, r in enumerate(rows) if i % folds != f]
        te = [r for i, r in enumerate(rows) if i % folds == f]
        w, b = fit(*tensors(tr, feats)[:2], l2, tensors(tr, feats)[2] if LISTWISE else None)
        got.append(within2(te, feats, w, b) * len(te))
    return sum(got) / len(rows)


LISTWISE = False


def run_fit(args) -> None:
    global LISTWISE
    LISTWISE = args.listwise
    data = json.loads(Path(args.dump).read_text())
    val = data["val"]
    base = {"vote (share)": ("share",), "vote + mu names": None}
    for k, fs in base.items():
        if fs:
            print(f"{k:40s} {within2(val, fs, [1.0], 0.0):.3f}")
    mu = sum(1 for r in val if r["cands"] and max(r["cands"], key=lambda c: c["share"] + 0.1 * c["named"])["hop"] <= 2)
    print(f"{'share + 0.1 named':40s} {mu / len(val):.3f}")
    print(f"{'oracle':40s} {sum(any(c['hop'] <= 2 for c in r['cands']) for r in val) / len(val):.3f}")
    feats = list(args.features or FEATURES)
    best = None
    for l2 in args.l2:
        s = cv(val, feats, l2)
        print(f"all features, l2 {l2:g}: cv within2 {s:.3f}", flush=True)
        best = max(best or (s, l2), (s, l2))
    l2 = best[1]
    # backward elimination by cross-validation
    cur = best[0]
    while args.select and len(feats) > 1:
        trials = [(cv(val, [g for g in feats if g != f], l2), f) for f in feats]
        s, f = max(trials)
        if s < cur - 1e-9:
            break
        cur, feats = s, [g for g in feats if g != f]
        print(f"  drop {f}: cv {s:.3f}", flush=True)
    w, b = fit(*tensors(val, feats)[:2], l2, tensors(val, feats)[2] if LISTWISE else None)
    print("chosen:", feats, "l2", l2, "cv", round(cur, 3))
    print("weights:", {f: round(float(x), 4) for f, x in zip(feats, w)}, "bias", round(float(b), 4))
    print(f"val (fitted on itself) {within2(val, feats, w, b):.3f}")
    if args.test:
        print(f"TEST within2 {within2(data['test'], feats, w, b):.3f}")


def rule_within2(rows, weights: dict[str, float]) -> float:
    """Within 2 hops under the store's rule with candidates ordered by ``sum_f weights[f] * f``:
    the first candidate if the text names it, else the first whose pair score passes the
    encoder's threshold (``passes``; always for an embedder without one), else a root (a miss)."""
    hit = 0
    for r in rows:
        if not r["cands"]:
            continue
        pick = store_pick(r["cands"], weights)[0]
        hit += pick is not None and pick["hop"] <= 2
    return hit / len(rows)


def run_grid(args) -> None:
    import itertools
    dumps = {Path(d).stem: json.loads(Path(d).read_text())[args.split] for d in args.dumps}
    grid = {"named": args.mu, args.first: args.nu, "cos": args.cos, "children": args.children}
    res = []
    for combo in itertools.product(*grid.values()):
        w = {"share": 1.0, **dict(zip(grid, combo))}
        got = {k: rule_within2(rows, w) for k, rows in dumps.items()}
        res.append((sum(got.values()) / len(got), combo, got))
    res.sort(key=lambda t: -t[0])
    print("mu nu cos children:", "  ".join(dumps))
    base = next(t for t in res if t[1] == (0.1, 0.0, 0.0, 0.0)) if (0.1, 0.0, 0.0, 0.0) in [t[1] for t in res] else None
    for t in ([base] if base else []) + res[:args.top]:
        print(f"{t[1]}: mean {t[0]:.3f}  " + "  ".join(f"{v:.3f}" for v in t[2].values()))


def tree_and_truth(text: str, split: str, seed: int = 1):
    """The filed tree (each known entity's first known parent), the held-out nouns' true
    ancestors with their hop distances, and the known entities in the cache's order."""
    task = load_task(seed, text)
    h = task.hierarchy
    held = set(task.val_entities) | set(task.test_entities)
    known = sorted(e for e in h.names if e not in held)
    _, par = filed_parents(task, known)
    ents = task.val_entities if split == "val" else task.test_entities
    return par, hop_distances(h, ents), known, task


STORE_RULE = {"share": 1.0, "named": MENTION_SHARE, "first": FIRST_SHARE, "cos": COSINE_SHARE,
              "children": CHILDREN_SHARE}   # the store's own weights (store.parent_choice)


def rule_score(c, weights=STORE_RULE) -> float:
    """A candidate's ranking value under the rule ``sum_f weights[f] * f`` (the store's by default)."""
    return sum(w * c[f] for f, w in weights.items())


def store_pick(cands, weights=STORE_RULE):
    """The store's choice with candidates ordered by ``sum_f weights[f] * f``: the first if the
    text names it, else the first whose pair score passes the threshold; and the order."""
    cs = sorted(cands, key=lambda c: -rule_score(c, weights))
    return (cs[0] if cs[0]["named"] else next((c for c in cs if c["passes"]), None)), cs


def hedged(rows, par, anc, temp: float, tau: float, levels: int) -> tuple[float, float]:
    """True-parent and within-2-hops rates when the pick climbs the filed tree until the
    softmax(score / temp) mass of the candidates under it reaches ``tau`` (at most ``levels``
    steps; Deng et al., "Hedging your bets", CVPR 2012); ``tau`` 0: the store's pick."""
    hit1 = hit2 = 0
    for r in rows:
        top, cs = store_pick(r["cands"]) if r["cands"] else (None, [])
        if top is None:
            continue
        node = top["id"]
        if tau > 0:
            s = [rule_score(c) for c in cs]
            e = [math.exp((x - max(s)) / temp) for x in s]
            z = sum(e)
            mass: dict[str, float] = {}
            for c, p in zip(cs, e):
                a, k = c["id"], 0
                while a is not None and k <= levels:
                    mass[a] = mass.get(a, 0.0) + p / z
                    a, k = par.get(a), k + 1
            a, k = node, 0
            while a is not None and k < levels and mass.get(a, 0.0) < tau:
                a, k = par.get(a), k + 1
            node = a if a is not None and mass.get(a, 0.0) >= tau else node
        d = anc[r["entity"]].get(node, 99)
        hit1 += d == 1
        hit2 += d <= 2
    return hit1 / len(rows), hit2 / len(rows)


def run_hedge(args) -> None:
    """Does backing off up the filed tree when unsure help?  And where do the misses lie?"""
    import itertools
    from collections import Counter
    sets = []
    for d in args.dumps:
        data = json.loads(Path(d).read_text())
        par, anc, _, _ = tree_and_truth(data["text"], args.split)
        sets.append((Path(d).stem, data[args.split], par, anc))
    for name, rows, par, anc in sets:
        miss = Counter()
        for r in rows:
            top = store_pick(r["cands"])[0] if r["cands"] else None
            d = anc[r["entity"]].get(top["id"], 99) if top else 99
            if top is None or d <= 2:
                miss["hit" if top else "no pick"] += 1
                continue
            a, k = top["id"], 0   # climb from the pick to its first true ancestor
            while a is not None and a not in anc[r["entity"]]:
                a, k = par.get(a), k + 1
            miss["true ancestor, too general" if d < 99 else
                 "a sibling or cousin (climbing 1-2 reaches hop <= 2)" if a and k <= 2 and anc[r["entity"]][a] <= 2
                 else "another branch"] += 1
        print(name, "store's pick:", hedged(rows, par, anc, 1.0, 0.0, 0), dict(miss))
    res = []
    for temp, tau, lv in itertools.product(args.temp, args.tau, (1, 2)):
        got = [hedged(rows, par, anc, temp, tau, lv) for _, rows, par, anc in sets]
        res.append((sum(g[1] for g in got) / len(got), (temp, tau, lv), got))
    for m, setting, got in sorted(res, key=lambda t: -t[0])[:args.top]:
        print(f"temp {setting[0]} tau {setting[1]} levels {setting[2]}: mean within 2 {m:.3f} |",
              "  ".join(f"{a:.3f}/{b:.3f}" for a, b in got))


def run_path(args) -> None:
    """Listwise CV with the cosine of the text and each candidate's filed parent, grandparent
    and children added to the store's features (TEMP-style taxonomy paths, Liu et al. EMNLP 2021)."""
    global LISTWISE
    LISTWISE = True
    data = json.loads(Path(args.dump).read_text())
    name, emb = embedder_for(data["encoder"])
    par, _, known, task = tree_and_truth(data["text"], "val")
    suffix = "" if data["text"] == "lemma" else f"-{data['text']}"
    E = torch.load(Path(args.cache) / f"points-{name}-s1{suffix}.pt")
    E = E / E.norm(dim=1, keepdim=True)
    at = {e: i for i, e in enumerate(known)}
    kids: dict[str, list[int]] = {}
    for c, p in par.items():
        kids.setdefault(p, []).append(at[c])
    rows = data["val"]
    X = emb.embed([task.hierarchy.names[r["entity"]] for r in rows]).to(torch.float64)
    X = X / X.norm(dim=1, keepdim=True)
    for j, r in enumerate(rows):
        for c in r["cands"]:
            p = par.get(c["id"])
            g = par.get(p) if p else None
            ck = E[kids.get(c["id"], [])] @ X[j]
            c["cos_par"] = float(E[at[p]] @ X[j]) if p in at else 0.0
            c["cos_gpar"] = float(E[at[g]] @ X[j]) if g in at else 0.0
            c["cos_kids_max"] = float(ck.max()) if len(ck) else 0.0
            c["cos_kids_mean"] = float(ck.mean()) if len(ck) else 0.0
    base = list(STORE_RULE)
    for extra in ([], ["cos_par"], ["cos_par", "cos_gpar"], ["cos_kids_max", "cos_kids_mean"],
                  ["cos_par", "cos_gpar", "cos_kids_max", "cos_kids_mean"]):
        print(f"{' + '.join(['store terms'] + extra)}: cv within 2 {cv(rows, base + extra, 1e-3):.3f}", flush=True)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    d = sub.add_parser("dump")
    d.add_argument("--encoder", required=True, help="NAME=FOLDER or cosine")
    d.add_argument("--text", default="definition")
    d.add_argument("--seed", type=int, default=1)
    d.add_argument("--cache", default="runs/placement-def")
    d.add_argument("--save", required=True)
    f = sub.add_parser("fit")
    f.add_argument("dump")
    f.add_argument("--features", nargs="+")
    f.add_argument("--l2", type=float, nargs="+", default=[1e-4, 1e-3, 1e-2])
    f.add_argument("--select", action="store_true")
    f.add_argument("--test", action="store_true")
    f.add_argument("--listwise", action="store_true")
    g = sub.add_parser("grid")
    g.add_argument("dumps", nargs="+")
    g.add_argument("--split", default="val")
    g.add_argument("--mu", type=float, nargs="+", default=[0.0, 0.05, 0.1, 0.15])
    g.add_argument("--nu", type=float, nargs="+", default=[0.0, 0.05, 0.1, 0.15, 0.2, 0.3])
    g.add_argument("--cos", type=float, nargs="+", default=[0.0, 0.2, 0.4, 0.6])
    g.add_argument("--children", type=float, nargs="+", default=[0.0, 0.02, 0.05, 0.1])
    g.add_argument("--top", type=int, default=12)
    g.add_argument("--first", default="first", help="the first-named feature: the store's (first) or named_first")
    h = sub.add_parser("hedge")
    h.add_argument("dumps", nargs="+")
    h.add_argument("--split", default="val")
    h.add_argument("--temp", type=float, nargs="+", default=[0.02, 0.05, 0.1, 0.2])
    h.add_argument("--tau", type=float, nargs="+", default=[0.3, 0.4, 0.5, 0.6, 0.7, 0.8])
    h.add_argument("--top", type=int, default=8)
    pa = sub.add_parser("path")
    pa.add_argument("dump")
    pa.add_argument("--cache", default="runs/placement-def")
    args = ap.parse_args(argv)
    {"dump": dump, "fit": run_fit, "grid": run_grid, "hedge": run_hedge, "path": run_path}[args.cmd](args)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
