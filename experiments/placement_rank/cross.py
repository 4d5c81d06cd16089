"""A cross-encoder that reads a text and a candidate parent together (issue 31, an experiment)

The store's choice among the voted candidates (``experiments/placement_rank/run.py``) sees the
text only through vectors and the titles it names; most misses are a candidate of another topic
the text also names ("bakery: a workplace where baked goods are produced" -> baked goods).  A
cross-encoder (Nogueira & Cho, "Passage re-ranking with BERT", 2019) reads ``text [SEP] candidate``
and can learn which named thing is the text's kind.  It is trained on the store's *own* tree (the
filed known nouns: each child with its filed parent against candidates like the vote's -- the
filed parents and grandparents of the child's nearest neighbours -- a listwise softmax loss),
nothing WordNet-specific; then it re-scores the validation nouns' candidates of a dump:

    score(c) = rule(c) + w * ce(t, c)

with ``rule`` the store's weights (:func:`run.rule_score`), over the rule's best ``--rerank``
candidates; the pick is the best-scored candidate (the store's gate on the encoder's threshold
does not apply to MiniLM's dumps, whose candidates all pass).  `--grid` chooses the rule's weights
beside the model on validation; `--test` reads the test nouns once.  The library's version of
this training is :func:`hypermem.hierarchy.fit_placement_reranker` (ids, any tree); this script
keeps its own lists (texts, WordNet's split, the order of the recorded runs) so that those runs
can be repeated and continued (``--init``, ``--offset``).

    python experiments/placement_rank/cross.py --dump runs/rank/cosine-def.json \\
        --points runs/placement-def/points-cosine-s1-definition.pt --minutes 25 --save runs/cross
    python experiments/placement_rank/cross.py ... --save runs/cross --grid   # the rule beside it
    python experiments/placement_rank/cross.py ... --save runs/cross --test   # the test nouns, once
"""

from __future__ import annotations

import argparse
import json
import math
import random
import re
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import torch  # noqa: E402
from run import rule_score, tree_and_truth  # noqa: E402

from hypermem.embed.sentence_transformer import local_minilm_path  # noqa: E402


def head(text: str) -> str:
    """A text's title as this experiment reads it: the text up to its first ``": "``."""
    return text.split(": ", 1)[0]


def path_names(par, names, levels: int) -> dict:
    """Each entity's text with the titles of its ``levels`` nearest filed ancestors before it,
    root-most first (``"bird > kingfisher > kookaburra: Australian kingfisher ..."``): the
    candidate's place in the store's tree, as TEMP reads a taxonomy path (Liu et al.,
    "TEMP: Taxonomy Expansion with Dynamic Margin Loss through Taxonomy-Paths", EMNLP 2021).
    A title is a text up to its first ``": "``."""
    out = {}
    for e, text in names.items():
        path, a = [], par.get(e)
        while a is not None and len(path) < levels:
            path.append(head(names[a]))
            a = par.get(a)
        out[e] = " > ".join([*reversed(path), text])
    return out


def query_names(par, known, names, ents, k: int, exact: bool = False) -> dict:
    """The texts of ``ents`` with what the store knows of the memories they name: up to ``k``
    of the titles the text mentions (:mod:`hypermem.store.mentions`), the deepest in the filed
    tree first (the most specific), each with its memories' filed parents after the text
    (``"Callionymidae: dragonets [dragonet: percoid fish]"``, ``"... [world: class /
    experience / part]"`` for a title of three senses): the store's own knowledge of a word
    the encoder may not know.  ``exact``: only titles of one memory, named as written."""
    from hypermem.store.mentions import add_title, mentioned
    titles: dict = {}
    for e in known:
        add_title(titles, e, names[e])

    depth: dict = {}

    def level(e):
        if e not in depth:
            chain, a = [], e
            while a is not None and a not in depth:
                chain.append(a)
                a = par.get(a)
            d = -1 if a is None else depth[a]
            for x in reversed(chain):
                d += 1
                depth[x] = d
        return depth[e]

    out = {}
    for e in ents:
        groups: dict = {}
        for x in mentioned(names[e], titles):
            if x != e:
                groups.setdefault(head(names[x]).lower(), []).append(x)
        if exact:   # one sense only, named as written (a plural allowed), not through a stem
            low = names[e].lower()
            groups = {t: xs for t, xs in groups.items() if len(xs) == 1
                      and re.search(r"\b" + re.escape(t) + r"(s|es)?\b", low)}
        ranked = sorted(groups.values(), key=lambda xs: -max(level(x) for x in xs))[:k]
        parts = []
        for xs in ranked:
            ps = list(dict.fromkeys(head(names[par[x]]) for x in xs if x in par))[:3]
            parts.append(f"{head(names[xs[0]])}: {' / '.join(ps)}" if ps else head(names[xs[0]]))
        out[e] = f"{names[e]} [{'; '.join(parts)}]" if parts else names[e]
    return out


def training_lists(par, known, names, X, n_children: int, n_neg: int, k: int, seed: int, n_named: int = 0,
                   n_senses: int = 0, cnames=None, with_gp: bool = False):
    """``(child, parent, negatives)`` for ``n_children`` filed children: the negatives are the
    filed parents and grandparents of the child's ``k`` nearest known neighbours (cosine of
    ``X``, rows in ``known``'s order) other than its own parent and grandparent; with
    ``n_named``, first up to that many of the known nouns the child's text names (the store's
    mention term, :mod:`hypermem.store.mentions`: the candidates most of the rule's misses
    pick), the same ones left out; with ``n_senses``, up to that many known nouns titled like
    the parent (its other senses: the definition, not the title, must decide).  ``cnames``:
    the candidates' texts (default ``names``; :func:`path_names` for the path).  With
    ``with_gp`` the grandparent, when filed, follows the parent as a second positive: the
    list is ``(child, [parent, grandparent], negatives)``."""
    cnames = cnames or names
    titles: dict = {}
    if n_named:
        from hypermem.store.mentions import add_title
        for e in known:
            add_title(titles, e, names[e])
    rng = random.Random(seed)
    senses: dict = {}
    if n_senses:
        for e in known:
            senses.setdefault(head(names[e]).lower(), []).append(e)
    at = {e: i for i, e in enumerate(known)}
    kids = [e for e in known if e in par]
    pick = rng.sample(kids, min(n_children, len(kids)))
    Xn = torch.nn.functional.normalize(X.to(torch.float32), dim=1)
    out, with_named = [], 0
    for s in range(0, len(pick), 512):
        chunk = pick[s:s + 512]
        sims = Xn[[at[c] for c in chunk]] @ Xn.T
        top = sims.topk(k + 1, dim=1).indices.tolist()
        for c, row in zip(chunk, top):
            p = par[c]
            near = {p, par.get(p), c}
            cands = []
            for j in row:
                nb = known[j]
                a, d = par.get(nb), 0
                while a is not None and d < 2:
                    if a not in near and a not in cands:
                        cands.append(a)
                    a, d = par.get(a), d + 1
            named = []
            if n_named:
                from hypermem.store.mentions import mentioned
                named = [x for x in mentioned(names[c], titles) if x not in near][:n_named]
                cands = [x for x in cands if x not in named]
            first = named   # the negatives every list keeps: named nouns, then the parent's other senses
            if n_senses:
                same = [x for x in senses.get(head(names[p]).lower(), ()) if x not in near]
                first = named + [x for x in rng.sample(same, min(n_senses, len(same))) if x not in named]
                cands = [x for x in cands if x not in first]
            negs = first + rng.sample(cands, max(0, min(n_neg - len(first), len(cands))))
            with_named += bool(first)
            if negs:
                pos = [p] + ([par[p]] if with_gp and par.get(p) is not None else [])
                out.append((names[c], [cnames[x] for x in pos] if with_gp else cnames[p], [cnames[x] for x in negs]))
    if n_named or n_senses:
        print(f"{with_named} of {len(out)} lists hold a named noun or another sense", flush=True)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--dump", required=True)
    ap.add_argument("--points", required=True, help="cached MiniLM points of the known nouns")
    ap.add_argument("--text", default="definition")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--children", type=int, default=20000)
    ap.add_argument("--negatives", type=int, default=7)
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--named", type=int, default=0, help="negatives the child's text names, first (0: none)")
    ap.add_argument("--senses", type=int, default=0,
                    help="negatives titled like the parent (its other senses), first (0: none)")
    ap.add_argument("--lists", type=int, default=0, help="stop after this many lists (0: --minutes only)")
    ap.add_argument("--group", type=int, default=8, help="children a step")
    ap.add_argument("--lr", type=float, default=4e-5)
    ap.add_argument("--max-length", type=int, default=96)
    ap.add_argument("--minutes", type=float, default=25)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--rerank", type=int, default=20, help="the rule's best candidates re-scored")
    ap.add_argument("--init", help="a saved cross-encoder to train on (with --offset: the lists it saw)")
    ap.add_argument("--offset", type=int, default=0, help="training lists to skip")
    ap.add_argument("--order-seed", type=int, default=None,
                    help="shuffle the lists with this seed (a further pass over them)")
    ap.add_argument("--decay", action="store_true", help="the learning rate falls linearly to 0 over the lists")
    ap.add_argument("--path", type=int, default=0,
                    help="a candidate's text comes after the titles of this many filed ancestors (0: none)")
    ap.add_argument("--qctx", type=int, default=0,
                    help="a text comes with up to this many memories it names and their parents (0: none)")
    ap.add_argument("--qctx-exact", action="store_true",
                    help="--qctx names only titles of one memory, as written (no stems)")
    ap.add_argument("--gp-positive", action="store_true",
                    help="the grandparent is a second positive (loss: -log of the two's softmax mass), "
                         "as the within-2-hops target counts it")
    ap.add_argument("--save", required=True)
    ap.add_argument("--grid", action="store_true",
                    help="the rule's mu, nu, a with w beside the saved model's val_scores.json (validation only)")
    ap.add_argument("--test", action="store_true",
                    help="score the test nouns once with the model saved in --save: w chosen on its val_scores.json")
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    from sentence_transformers.cross_encoder import CrossEncoder

    par, anc, known, task = tree_and_truth(args.text, "val", args.seed)
    names = task.hierarchy.names
    cnames = path_names(par, names, args.path) if args.path else names
    if args.qctx:
        held = [*task.val_entities, *task.test_entities]
        t_q = time.time()
        names = query_names(par, known, names, [*known, *held], args.qctx, args.qctx_exact)   # the texts: with what they name
        print(f"texts with what they name, in {time.time() - t_q:.0f}s; e.g. {names[held[0]]!r}", flush=True)
    if args.test:
        return test_once(args, names, CrossEncoder, cnames)
    if args.grid:
        return rule_grid(args)
    X = torch.load(args.points)
    assert X.shape[0] == len(known), (X.shape, len(known))
    lists = training_lists(par, known, names, X, args.children, args.negatives, args.k, args.seed, args.named,
                           args.senses, cnames, args.gp_positive)
    if args.order_seed is not None:
        random.Random(args.order_seed).shuffle(lists)
    print(f"{len(lists)} training lists", flush=True)
    ce = CrossEncoder(args.init or local_minilm_path(), num_labels=1, device="cpu", max_length=args.max_length)
    model, tok = ce.model, ce.tokenizer
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01)
    model.train()
    t0, step, seen, losses = time.time(), 0, args.offset, []
    end = len(lists) if not args.lists else min(len(lists), args.offset + args.lists)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda i: max(0.0, 1 - i * args.group / max(1, end - args.offset)) if args.decay else 1.0)
    while time.time() - t0 < args.minutes * 60 and seen < end:
        group = lists[seen:seen + args.group]
        seen += len(group)
        a, b, sizes, n_pos = [], [], [], []
        for child, parent, negs in group:
            pos = parent if isinstance(parent, list) else [parent]
            for c in [*pos, *negs]:
                a.append(child)
                b.append(c)
            sizes.append(len(pos) + len(negs))
            n_pos.append(len(pos))
        enc = tok(a, b, truncation=True, max_length=args.max_length, padding=True, return_tensors="pt")
        logits = model(**enc).logits.squeeze(-1)
        loss = torch.stack([-torch.log_softmax(x, 0)[:k].logsumexp(0)
                            for x, k in zip(logits.split(sizes), n_pos)]).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        step += 1
        losses.append(loss.item())
        if step % 50 == 0:
            print(f"step {step} children {seen} loss {sum(losses[-50:]) / 50:.3f} {time.time() - t0:.0f}s", flush=True)
    print(f"trained {step} steps on {seen} children in {time.time() - t0:.0f}s", flush=True)
    model.eval()
    Path(args.save).mkdir(parents=True, exist_ok=True)
    ce.save(str(Path(args.save) / "model"))

    rows = candidate_rows(args.dump, "val", args.rerank)
    scores = score_rows(rows, names, model, tok, args.max_length, cnames)
    (Path(args.save) / "val_scores.json").write_text(json.dumps(scores))
    report(rows, scores)
    return 0


def candidate_rows(dump: str, split: str, rerank: int) -> list[dict]:
    """The dump's nouns of ``split`` with the rule's best ``rerank`` candidates each."""
    rows = json.loads(Path(dump).read_text())[split]
    for r in rows:
        r["cands"] = sorted(r["cands"], key=lambda c: -rule_score(c))[:rerank]
    return rows


def score_rows(rows, names, model, tok, max_length: int, cnames=None) -> list[list[float]]:
    """The cross-encoder's logit of each noun's text with each of its candidates' texts
    (``cnames``, default ``names``)."""
    cnames = cnames or names
    scores = []
    t1 = time.time()
    with torch.inference_mode():
        for r in rows:
            cands = [cnames[c["id"]] for c in r["cands"]]
            if not cands:
                scores.append([])
                continue
            enc = tok([names[r["entity"]]] * len(cands), cands, truncation=True, max_length=max_length,
                      padding=True, return_tensors="pt")
            scores.append(model(**enc).logits.squeeze(-1).tolist())
    print(f"scored {sum(len(s) for s in scores)} candidate pairs in {time.time() - t1:.0f}s", flush=True)
    return scores


def rule_grid(args, folds: int = 5) -> int:
    """The rule's ``mu`` (named), ``nu`` (first named) and ``a`` (cosine) chosen with ``w``
    beside the cross-encoder (its validation scores of the rule's best candidates): the best
    on all validation nouns, and the within-2-hops rate of a ``folds``-fold cross-validation."""
    import itertools

    from run import STORE_RULE

    rows = candidate_rows(args.dump, "val", args.rerank)
    scores = json.loads((Path(args.save) / "val_scores.json").read_text())
    grid = list(itertools.product((0.0, 0.05, 0.1), (0.0, 0.05, 0.1, 0.15), (0.1, 0.2, 0.4),
                                  (0.025, 0.05, 0.075, 0.1, 0.15)))

    def hit(idx, mu, nu, a, w):
        wt = dict(STORE_RULE, named=mu, first=nu, cos=a)
        h = 0
        for i in idx:
            if rows[i]["cands"]:
                v = [rule_score(c, wt) + w * x for c, x in zip(rows[i]["cands"], scores[i])]
                h += rows[i]["cands"][max(range(len(v)), key=v.__getitem__)]["hop"] <= 2
        return h

    n = len(rows)
    store = (STORE_RULE["named"], STORE_RULE["first"], STORE_RULE["cos"], 0.05)
    print(f"the store's mu, nu, a with w 0.05: within 2 hops {hit(range(n), *store) / n:.3f}")
    for v, g in sorted(((hit(range(n), *g) / n, g) for g in grid), reverse=True)[:8]:
        print(f"mu, nu, a, w = {g}: within 2 hops {v:.3f}")
    order, got = random.Random(0).sample(range(n), n), 0
    for f in range(folds):
        held = set(order[f::folds])
        g = max(grid, key=lambda g: hit([i for i in range(n) if i not in held], *g))
        got += hit(sorted(held), *g)
        print(f"fold {f}: {g}")
    print(f"{folds}-fold CV: within 2 hops {got / n:.3f}")
    return 0


def test_once(args, names, CrossEncoder, cnames=None) -> int:
    """The test nouns, once: ``w`` is the best within-2-hops weight on all validation nouns
    (the saved ``val_scores.json``), applied to the test nouns' candidates."""
    save = Path(args.save)
    val = candidate_rows(args.dump, "val", args.rerank)
    vs = json.loads((save / "val_scores.json").read_text())
    w = max(WEIGHTS, key=lambda w: hits(val, vs, w)[1])
    ce = CrossEncoder(str(save / "model"), num_labels=1, device="cpu", max_length=args.max_length)
    ce.model.eval()
    rows = candidate_rows(args.dump, "test", args.rerank)
    scores = score_rows(rows, names, ce.model, ce.tokenizer, args.max_length, cnames)
    (save / "test_scores.json").write_text(json.dumps(scores))
    n = len(rows)
    for name, ww in (("the store's rule", 0.0), (f"rule + {w} * ce (w from validation)", w)):
        h1, h2 = hits(rows, scores, ww)
        print(f"test, {name}: true parent {h1 / n:.3f}  within 2 hops {h2 / n:.3f}")
    from run import STORE_RULE

    from hypermem.embed.reranker import RULE, WEIGHT
    wt = dict(STORE_RULE, first=RULE["first"], cos=RULE["cos"])
    h1 = h2 = 0
    for r, s in zip(rows, scores):
        if r["cands"]:
            v = [rule_score(c, wt) + WEIGHT * x for c, x in zip(r["cands"], s)]
            best = r["cands"][max(range(len(v)), key=v.__getitem__)]
            h1, h2 = h1 + (best["hop"] == 1), h2 + (best["hop"] <= 2)
    print(f"test, the reranker's rule {RULE} + {WEIGHT} * ce: true parent {h1 / n:.3f}  within 2 hops {h2 / n:.3f}")
    return 0


WEIGHTS = (0.0, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.5, 1.0)


def hits(rows, scores, w: float) -> tuple[int, int]:
    """Texts whose pick under ``rule + w * ce`` (``w`` inf: ``ce`` alone) is the true parent,
    and within 2 hops of it."""
    hit1 = hit2 = 0
    for r, s in zip(rows, scores):
        if not r["cands"]:
            continue
        vals = s if w == math.inf else [rule_score(c) + w * x for c, x in zip(r["cands"], s)]
        best = r["cands"][max(range(len(s)), key=vals.__getitem__)]
        hit1 += best["hop"] == 1
        hit2 += best["hop"] <= 2
    return hit1, hit2


def report(rows, scores, folds: int = 5) -> None:
    """The rates for each weight, and ``w`` chosen by ``folds``-fold cross-validation by text
    (the best within-2-hops rate on the other folds)."""
    n = len(rows)
    for w in (*WEIGHTS, math.inf):
        h1, h2 = hits(rows, scores, w)
        print(f"w {w}: true parent {h1 / n:.3f}  within 2 hops {h2 / n:.3f}")
    order = random.Random(0).sample(range(n), n)
    c1 = c2 = 0
    for f in range(folds):
        held = set(order[f::folds])
        tr = [i for i in range(n) if i not in held]
        w = max(WEIGHTS, key=lambda w: hits([rows[i] for i in tr], [scores[i] for i in tr], w)[1])
        h1, h2 = hits([rows[i] for i in held], [scores[i] for i in held], w)
        c1, c2 = c1 + h1, c2 + h2
        print(f"fold {f}: w {w}")
    print(f"{folds}-fold CV: true parent {c1 / n:.3f}  within 2 hops {c2 / n:.3f}")


if __name__ == "__main__":
    raise SystemExit(main())
