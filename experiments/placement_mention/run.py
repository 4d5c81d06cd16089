"""Does a text that *names* a stored memory place better under it? (issue 31, an experiment)

A noun's definition usually names its genus ("kookaburra: Australian kingfisher having a loud
cackling cry"), a compound's head word is often its hypernym ("absolute ceiling" -> "ceiling",
the substring-inclusion baseline of taxonomy induction), and an agent's note names the thing it
is about ("the dishwasher filter needs rinsing" -> "the dishwasher").  Here a stored memory's
*title* is its text up to the first ": " (its whole text when it has none) if that is at most
four terms; a new text *mentions* a memory when the title occurs as a run of its terms, its own
title excluded (:func:`hypermem.store.mentions.mentioned`).  The store's filed vote
(``mode="ancestors"``, every voted candidate with its share) and the mentions combine as::

    score(c) = share(c) + mu * [c is mentioned]

(ties: the higher cosine of the text and the candidate), gated by the encoder's threshold as the
store's ``parent="auto"`` is (the first candidate in that order whose pair score passes).  The
store now adds this term itself (:mod:`hypermem.store.mentions`, ``MENTION_SHARE``); here it is
turned off in the store and added with each ``mu`` of the grid.  (The first runs matched
lower-cased words; titles and texts are now the library's BM25 terms: stems, no stop words.)
``within2_named_first`` is the rule the store kept besides: the vote's first choice whatever its
pair score when the text names it.  Settings on the validation nouns; the test nouns once with
``--split test``.

    python experiments/placement_mention/run.py --encoder poincare=runs/unseen-def/unseen-poincare-s1-def/encoder \\
        --text definition --cache runs/placement-def --save runs/mention/val-poincare-def.json
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import torch  # noqa: E402
from bench_placement import ALL_VOTED, auto_choice, embedder_for, known_store, load_task  # noqa: E402

from hypermem.data.hierarchy_tasks import hop_distances  # noqa: E402
from hypermem.embed.encoder_kind import is_hierarchy_encoder  # noqa: E402
from hypermem.store.mentions import title_terms  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--encoder", required=True, help="NAME=FOLDER or cosine")
    ap.add_argument("--text", default="definition")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--split", default="val", choices=("val", "test"))
    ap.add_argument("--cache", default="runs/placement-def")
    ap.add_argument("--save", required=True, help="a JSON file for every candidate's features")
    ap.add_argument("--mu", type=float, nargs="+", default=[0.0, 0.05, 0.1, 0.2, 0.5, 1.0])
    args = ap.parse_args(argv)
    import functools

    import hypermem.store.suggest as suggest
    from hypermem.store.vote import neighbour_vote
    suggest.neighbour_vote = functools.partial(neighbour_vote, mention=0.0)   # the vote alone; mu added here
    task = load_task(args.seed, args.text)
    h = task.hierarchy
    name, emb = embedder_for(args.encoder)
    suffix = "" if args.text == "lemma" else f"-{args.text}"
    mem, known = known_store(emb, task, Path(args.cache) / f"points-{name}-s{args.seed}{suffix}.pt", filed=True)
    ents = task.val_entities if args.split == "val" else task.test_entities
    anc = hop_distances(h, ents)
    texts = [h.names[e] for e in ents]
    hits = mem.search_batch(texts, k=ALL_VOTED, mode="ancestors", touch=False)
    hier = is_hierarchy_encoder(emb)
    X = emb.encode(texts) if hier else emb.embed(texts)
    thr = getattr(emb, "threshold", None)
    named = mem.suggester.mentions   # the store's own title index
    E = torch.stack([mem.embedding(i) for i in known]).to(torch.float64)
    at = {k: j for j, k in enumerate(known)}
    En = E / E.norm(dim=1, keepdim=True).clamp_min(1e-300)
    from hypermem.store.suggest import decision_scores
    rows = []
    for j, e in enumerate(ents):
        true = {p: d for p, d in anc[e].items() if p in mem}
        share = {r.id: r.score for r in hits[j]}
        men = named.find(mem.state, texts[j])
        cands = list(dict.fromkeys([r.id for r in hits[j]] + men))
        x = X[j].to(torch.float64)
        P = E[[at[c] for c in cands]]
        cos = (En[[at[c] for c in cands]] @ (x / x.norm())).tolist()
        pair = decision_scores(emb, X[j], P, mem.suggester.scan).tolist() if hier else cos
        low = texts[j].lower()
        rows.append({"entity": e, "filed": choose(mem, X[j] if hier else None, [r.id for r in hits[j]][:1], None) is not None,
                     "store": choose(mem, X[j] if hier else None, [r.id for r in hits[j]], thr),
                     "cands": [{"id": c, "share": share.get(c, 0.0), "men": c in men, "cos": cos[i], "pair": pair[i],
                                "pos": low.find(mem.get(c).text.split(": ", 1)[0].lower()) if c in men else -1,
                                "senses": len(named.titles.get(title_terms(mem.get(c).text), [])) if c in men else 0,
                                "hop": true.get(c, 99)} for i, c in enumerate(cands)]})
    Path(args.save).write_text(json.dumps({"threshold": thr, "rows": rows}))
    res = {mu: [] for mu in args.mu}
    named_first = {mu: [] for mu in args.mu}   # the vote's first choice when the text names it, else the gate
    for j, r in enumerate(rows):
        for mu in args.mu:
            cs = sorted(r["cands"], key=lambda c: (-(c["share"] + mu * c["men"]), -c["cos"]))
            chosen = choose(mem, X[j] if hier else None, [c["id"] for c in cs], thr)
            res[mu].append(float(chosen is not None and next(c["hop"] for c in cs if c["id"] == chosen) <= 2))
            named_first[mu].append(float(cs[0]["hop"] <= 2) if cs and cs[0]["men"] else res[mu][-1])
    mentioned_any = sum(any(c["men"] for c in r["cands"]) for r in rows)
    named_true = sum(any(c["men"] and c["hop"] <= 2 for c in r["cands"]) for r in rows)
    n = len(ents)
    out = {"encoder": args.encoder, "split": args.split, "n": n, "mentions_any": mentioned_any / n,
           "a_true_ancestor_within2_mentioned": named_true / n,
           "within2": {str(mu): sum(v) / n for mu, v in res.items()},
           "within2_named_first": {str(mu): sum(v) / n for mu, v in named_first.items()}}
    print(json.dumps(out), flush=True)
    return 0


def choose(mem, x, ids: list[str], thr):
    """The store's gate on an ordered list of candidate ids (bench_placement.auto_choice)."""
    class R:  # auto_choice reads .id
        def __init__(self, i):
            self.id = i
    return auto_choice(mem, x, [R(i) for i in ids], thr)


if __name__ == "__main__":
    raise SystemExit(main())
