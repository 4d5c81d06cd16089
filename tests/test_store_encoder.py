"""The store with a hierarchy encoder (issue 31): the encoder's points, suggested parents,
add(parent="auto"), ancestors without a root, the encoder's record and the refusal of
another encoder on load/open, the adapters' keyword and the CLI."""

from __future__ import annotations

import math
from datetime import datetime, timedelta, timezone

import pytest
import torch

pytest.importorskip("sentence_transformers")

from encoder_helpers import EDGES, NAMES, inspected_panel, tiny_model_folder  # noqa: E402

from hypermem import HalfLife, Memory  # noqa: E402
from hypermem.embed import HierarchyEncoder  # noqa: E402
from hypermem.geometry import poincare as P  # noqa: E402
from hypermem.hierarchy.encoder_training import fit_hierarchy_encoder  # noqa: E402
from hypermem.store.encoder_points import encoder_checksum  # noqa: E402

torch.set_num_threads(1)
WORDS = ["entity", "animal", "mammal", "bird", "dog", "cat", "plant", "tree", "oak", "tool", "hammer", "vehicle"]
T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return tiny_model_folder(tmp_path_factory.mktemp("tiny"))


@pytest.fixture(scope="module")
def enc_dir(tiny, tmp_path_factory):
    """A tiny ball encoder trained here (a few seconds), with its validated threshold, saved."""
    out = tmp_path_factory.mktemp("enc") / "ball"
    val = [("beagle", "dog"), ("tulip", "flower")]
    fit_hierarchy_encoder([e for e in EDGES if e not in val], NAMES, base=str(tiny), geometry="poincare", epochs=3,
                          batch_size=8, lr=2e-3, validate_every=4, validation_edges=val, out=str(out), seed=1)
    return out


@pytest.fixture(scope="module")
def enc(enc_dir):
    return HierarchyEncoder.load(enc_dir)


@pytest.fixture
def mem(enc):
    m = Memory(embedder=enc, clock=lambda: T0)
    m.add_many([{"text": w, "id": w} for w in WORDS])
    return m


def brute(enc, text, names):
    """The encoder's own pairwise score of "text is-a name" for each name."""
    return enc.subsumption_scores([text] * len(names), list(names)).tolist()


# ---------------------------------------------------------------------------- points
def test_a_ball_encoders_store_keeps_the_encoders_points(enc, mem):
    assert enc.threshold is not None and enc.geometry == "poincare"
    assert mem.curvature == pytest.approx(enc.curvature) and mem.metric == "hyperbolic"
    assert "placed_by='hierarchy encoder'" in repr(mem)
    assert mem.state.embedding.dtype == torch.float64  # its parent scan multiplies by it: kept wide
    x = enc.encode(WORDS).double()
    got = torch.stack([mem.point(w) for w in WORDS])
    assert torch.allclose(got, x, atol=1e-9)
    assert [mem.depth(w) for w in WORDS] == pytest.approx(P.distance_to_origin(x, enc.curvature).tolist())
    # a declared parent links the memories but moves no point; a new text moves its own
    kid = mem.add("poodle", parent="dog")
    assert mem.parent(kid) == "dog" and mem.level(kid) == 1
    assert torch.allclose(mem.point(kid), enc.encode(["poodle"])[0].double(), atol=1e-9)
    mem.link("cat", "dog")
    assert torch.allclose(mem.point("cat"), x[WORDS.index("cat")], atol=1e-9)
    mem.update("cat", text="tabby")
    assert torch.allclose(mem.point("cat"), enc.encode(["tabby"])[0].double(), atol=1e-9)
    with pytest.raises(ValueError, match="lives in the encoder's ball"):
        Memory(embedder=enc, curvature=1.0)


def test_a_small_ball_encoder_stores_a_few_coordinates_a_memory(tiny, tmp_path):
    # dim=4: the store holds the encoder's 4-coordinate points, suggests parents, saves and
    # reloads them with that encoder
    folder = tmp_path / "small"
    small = fit_hierarchy_encoder(EDGES, NAMES, base=str(tiny), geometry="poincare", max_steps=4, batch_size=8,
                                  validate_every=2, val_size=10, dim=4, out=str(folder), seed=0)
    m = Memory(embedder=small, clock=lambda: T0)
    m.add_many([{"text": w, "id": w} for w in WORDS])
    assert m.points.shape == (len(WORDS), 4) and m.curvature == pytest.approx(0.25)
    assert torch.allclose(m.point("dog"), small.encode(["dog"])[0].double(), atol=1e-9)
    hits = m.suggest_parents("poodle", k=3)
    assert len(hits) == 3 and hits[0].score >= hits[-1].score
    m.save(tmp_path / "small.db")
    back = Memory.load(tmp_path / "small.db", embedder=HierarchyEncoder.load(folder))
    assert torch.allclose(back.points, m.points, atol=1e-12)


def test_the_time_term_is_calibrated_on_the_balls_own_distances(enc):
    """The spread that scales recency_weight is that of the distances the search ranks by: the
    ball's between the stored points, not the shell's between their directions."""
    from hypermem.store.calibration import distance_spread

    m = Memory(embedder=enc, decay=HalfLife(hours=24))
    m.add_many([{"text": w, "id": w} for w in WORDS])
    X = m.points
    i, j = torch.triu_indices(len(X), len(X), offset=1)
    want = float(P.pairwise_distance(X, X, m.curvature)[i, j].std())
    assert m.metric == "hyperbolic" and m.spread.of(m) == pytest.approx(want, rel=1e-12)
    assert want > 5 * distance_spread(m.state, m.curvature, m.base_depth, "shell")


def test_a_text_query_sits_at_its_own_point(enc, mem):
    q = enc.encode(["poodle"])[0].double()
    d = P.distance(q[None], torch.stack([mem.point(w) for w in WORDS]), enc.curvature)
    hits = mem.search("poodle", k=3, hybrid=0.0)
    assert [h.id for h in hits] == [WORDS[i] for i in torch.argsort(d).tolist()[:3]]
    assert hits[0].distance == pytest.approx(float(d.min()), rel=1e-9)


def test_the_euclidean_twin_is_an_ordinary_embedder(tiny):
    twin = HierarchyEncoder.from_pretrained(str(tiny), "euclidean")
    m = Memory(embedder=twin)
    assert m.curvature == 1.0 and m.metric == "shell" and "placed_by" not in repr(m)
    a = m.add("animal")
    d = m.add("dog", parent=a)
    assert m.depth(a) == pytest.approx(m.base_depth) and m.depth(d) == pytest.approx(m.base_depth + m.depth_step)
    twin.threshold = -math.inf  # every suggestion passes
    assert m.suggest_parents("cat", k=2)[0].id in (a, d)


# ---------------------------------------------------------------------------- suggestions
def test_suggest_parents_ranks_by_the_encoders_score_exactly(enc, mem):
    want = brute(enc, "poodle", WORDS)
    order = sorted(range(len(WORDS)), key=lambda i: -want[i])
    got = mem.suggest_parents("poodle", k=5)
    assert [h.id for h in got] == [WORDS[i] for i in order[:5]]
    assert [h.score for h in got] == pytest.approx([want[i] for i in order[:5]], abs=1e-5)
    assert all(h.distance == pytest.approx(-h.score) and h.time_weight == 1.0 for h in got)
    assert [h.id for h in mem.search("poodle", k=5, mode="ancestors")] == [h.id for h in got]
    # batched, by the encoder's vector, with filters and the store's time rules
    by_vec = mem.suggest_parents(enc.encode(["poodle"])[0], k=5)
    assert [h.id for h in by_vec] == [h.id for h in got]
    only = mem.suggest_parents("poodle", k=5, filters=lambda r: r.id in ("oak", "hammer"))
    assert {h.id for h in only} == {"oak", "hammer"}
    late = mem.add("a late animal", t=T0 + timedelta(days=2))
    assert late not in {h.id for h in mem.suggest_parents("poodle", k=20, at_time=T0 + timedelta(days=1))}
    assert late in {h.id for h in mem.suggest_parents("poodle", k=20)}
    with pytest.raises(ValueError, match="k must be"):
        mem.suggest_parents("poodle", k=0)
    with pytest.raises(TypeError, match="one text or one vector, got a list of texts"):
        mem.suggest_parents(["poodle", "oak"])


def test_suggestions_rank_by_the_ranking_lambda(enc):
    """The encoder's ranking lambda (chosen for ranking parents), not its F1 one, orders the
    suggestions; without one the centripetal weight does."""
    mem = Memory(embedder=enc)
    mem.add_many([{"text": w, "id": w} for w in WORDS])
    before = (enc.centripetal_weight, enc.ranking_weight)
    try:
        enc.centripetal_weight, enc.ranking_weight = 0.0, 3.0
        want = enc.subsumption_scores(["poodle"] * len(WORDS), list(WORDS), centripetal_weight=3.0).tolist()
        got = mem.suggest_parents("poodle", k=len(WORDS))
        assert [h.score for h in got] == pytest.approx(sorted(want, reverse=True), abs=1e-5)
        flat = enc.subsumption_scores(["poodle"] * len(WORDS), list(WORDS), centripetal_weight=0.0).tolist()
        assert sorted(want) != pytest.approx(sorted(flat), abs=1e-3)  # the two lambdas score differently
        thr = enc.threshold
        try:  # "auto" takes the best-ranked parent and decides on the score the threshold was chosen on
            enc.threshold = -1e9
            new = mem.add("poodle", parent="auto")
        finally:
            enc.threshold = thr
        rec = mem.get(new).meta["auto_parent"]
        top = got[0].id
        assert rec["parent"] == top == mem.parent(new) and rec["suggested"][0]["id"] == top
        assert rec["suggested"][0]["score"] == pytest.approx(got[0].score, abs=1e-5)
        assert rec["score"] == pytest.approx(flat[WORDS.index(top)], abs=1e-5)
    finally:
        enc.centripetal_weight, enc.ranking_weight = before


def test_the_index_variant_rescores_the_nearest_memories(mem):
    exact = mem.suggest_parents("poodle", k=3)
    near = {h.id for h in mem.search("poodle", k=6, metric="shell", hybrid=0.0, touch=False)}
    approx = mem.suggest_parents("poodle", k=3, use_index=True, oversample=2)
    assert {h.id for h in approx} <= near
    assert [h.id for h in approx] == [h.id for h in exact if h.id in near][:3]


def test_suggestions_need_a_hierarchy_encoder():
    m = Memory()
    m.add("animals")
    with pytest.raises(ValueError, match="needs a hierarchy encoder"):
        m.suggest_parents("dog")
    with pytest.raises(ValueError, match="needs root"):
        m.search("dog", mode="ancestors")
    with pytest.raises(ValueError, match="needs a hierarchy encoder"):
        m.add("dog", parent="auto")
    m.add("an id called auto", id="auto")
    assert m.parent(m.add("dog", parent="auto")) == "auto"   # an existing id is still an id


# ---------------------------------------------------------------------------- parent="auto"
def test_auto_parent_takes_the_best_suggestion_above_the_threshold(enc, mem):
    best = mem.suggest_parents("poodle", k=3)
    saved = enc.threshold
    try:
        enc.threshold = best[0].score - 1e-6
        i = mem.add("poodle", parent="auto")
        info = mem.get(i).meta["auto_parent"]
        assert mem.parent(i) == best[0].id == info["parent"]
        assert info["score"] == pytest.approx(best[0].score) and info["threshold"] == enc.threshold
        assert [s["id"] for s in info["suggested"]] == [h.id for h in best]
        mem.remove(i)
        enc.threshold = best[0].score + 1e-6       # nothing is above: a root, and why
        j = mem.add("poodle", parent="auto", meta={"kind": "pet"})
        assert mem.parent(j) is None and mem.get(j).meta["kind"] == "pet"
        assert mem.get(j).meta["auto_parent"]["parent"] is None
        enc.threshold = None
        with pytest.raises(ValueError, match="threshold"):
            mem.add("poodle", parent="auto")
    finally:
        enc.threshold = saved
    with pytest.raises(ValueError, match="auto_parent"):
        mem.add("poodle", parent="auto", meta={"auto_parent": 1})


def test_add_many_auto_sees_the_earlier_items_as_one_add_at_a_time_does(enc):
    saved, enc.threshold = enc.threshold, -math.inf
    try:
        texts = ["entity", "animal", "dog", "poodle", "plant", "oak"]
        many = Memory(embedder=enc)
        ids = many.add_many([{"text": t, "parent": "auto"} for t in texts])
        one = Memory(embedder=enc)
        ids1 = [one.add(t, parent="auto") for t in texts]
        assert many.parent(ids[0]) is None and many.get(ids[0]).meta["auto_parent"]["score"] is None
        name = dict(zip(ids, texts))
        name1 = dict(zip(ids1, texts))
        assert [name.get(many.parent(i)) for i in ids] == [name1.get(one.parent(i)) for i in ids1]
        # the first attached item under the earlier item the encoder scores best; once the store
        # holds a tree, an item whose neighbours were filed is placed by their vote, the same in both
        by = [many.get(i).meta["auto_parent"]["by"] for i in ids[1:]]
        assert by[0] == "subsumption" and by == [one.get(i).meta["auto_parent"]["by"] for i in ids1[1:]]
        assert name[many.parent(ids[1])] == "entity"
    finally:
        enc.threshold = saved


# ---------------------------------------------------------------------------- the record
def test_save_load_and_json_record_the_encoder_and_refuse_another(enc, enc_dir, tiny, mem, tmp_path):
    path = tmp_path / "m.db"
    mem.save(path)
    back = Memory.load(path, embedder=enc)
    assert torch.allclose(back.points, mem.points, atol=1e-12) and back.metric == "hyperbolic"
    assert [h.id for h in back.suggest_parents("poodle")] == [h.id for h in mem.suggest_parents("poodle")]
    doc = mem.to_json()
    assert encoder_checksum(enc) in doc and str(enc_dir.resolve()) in doc
    assert len(Memory.from_json(doc, embedder=HierarchyEncoder.load(enc_dir))) == len(mem)
    with pytest.raises(ValueError, match=r"placed by the poincare hierarchy encoder at .*HierarchyEncoder.load"):
        Memory.load(path)
    other = HierarchyEncoder.from_pretrained(str(tiny), "poincare")
    with pytest.raises(ValueError, match="its points would not match"):
        Memory.load(path, embedder=other)
    with pytest.raises(ValueError, match="its points would not match"):
        Memory.from_json(doc, embedder=other)
    from hypermem import HashingEmbedder

    with pytest.raises(ValueError, match="not a hierarchy encoder"):
        Memory.load(path, embedder=HashingEmbedder(dim=enc.dim))
    plain = Memory(embedder=HashingEmbedder(dim=enc.dim))
    plain.add("x")
    plain.save(tmp_path / "plain.db")
    with pytest.raises(ValueError, match="not placed by a hierarchy encoder"):
        Memory.load(tmp_path / "plain.db", embedder=enc)


def test_open_records_the_encoder_and_refuses_another(enc, tiny, tmp_path):
    path = tmp_path / "d.db"
    with Memory.open(path, embedder=enc) as m:
        m.add("animal", id="a")
        m.add("dog", parent="auto", id="d")
    with Memory.open(path, embedder=enc) as m:
        assert m.metric == "hyperbolic" and m.curvature == pytest.approx(enc.curvature)
        assert "auto_parent" in m.get("d").meta
        assert torch.allclose(m.point("d"), enc.encode(["dog"])[0].double(), atol=1e-9)
    with pytest.raises(ValueError, match="its points would not match"):
        Memory.open(path, embedder=HierarchyEncoder.from_pretrained(str(tiny), "poincare"))
    with pytest.raises(ValueError, match="HierarchyEncoder.load"):
        Memory.open(path)
    with pytest.raises(ValueError, match="with its mirror"):
        Memory.open("postgresql://nobody@127.0.0.1:1/none", mirror=False, embedder=enc)


# ---------------------------------------------------------------------------- adapters, CLI
def test_langchain_and_llama_index_take_mode_ancestors_without_root(enc, mem):
    want = [h.id for h in mem.suggest_parents("poodle", k=3)]
    lc = pytest.importorskip("hypermem.integrations.langchain")
    store = lc.HypermemVectorStore(memory=mem)
    docs = store.as_retriever(search_kwargs={"k": 3, "mode": "ancestors"}).invoke("poodle")
    assert [d.id for d in docs] == want
    li = pytest.importorskip("hypermem.integrations.llama_index")
    from llama_index.core.vector_stores.types import VectorStoreQuery

    vs = li.HypermemVectorStore(mem)
    res = vs.query(VectorStoreQuery(query_embedding=enc.encode(["poodle"])[0].tolist(), similarity_top_k=3),
                   mode="ancestors")
    assert res.ids == want
    res = vs.query(VectorStoreQuery(query_str="poodle", similarity_top_k=3), mode="ancestors")
    assert res.ids == want


def test_langgraph_search_mode_ancestors(enc):
    lg = pytest.importorskip("hypermem.integrations.langgraph")
    store = lg.HypermemStore(embedder=enc, search_mode="ancestors")
    for w in ("animal", "dog", "oak", "hammer"):
        store.put(("notes",), w, {"text": w})
    got = [it.key for it in store.search(("notes",), query="poodle", limit=4)]
    mem = store.memory
    want = [mem.get(h.id).meta["key"] for h in mem.suggest_parents("poodle", k=10, filters=lambda r: "key" in r.meta)]
    assert got == want[:4]
    with pytest.raises(ValueError, match="search_mode"):
        lg.HypermemStore(search_mode="cone")


def test_cli_search_mode_ancestors_without_root(enc, enc_dir, mem, tmp_path, capsys):
    from hypermem.cli import main

    path = tmp_path / "m.db"
    mem.save(path)
    want = [h.id for h in mem.suggest_parents("poodle", k=3)]
    assert main(["search", str(path), "poodle", "--mode", "ancestors", "-k", "3", "--embedder", str(enc_dir)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert [line.rsplit("[", 1)[1].rstrip("]") for line in out] == want
    assert main(["search", str(path), "--mode", "ancestors", "--embedder", str(enc_dir)]) == 1
    assert "needs --root ID (or a query)" in capsys.readouterr().err
    assert main(["search", str(path), "poodle", "--mode", "ancestors"]) == 1   # no --embedder: which one to pass
    err = capsys.readouterr().err
    assert "pass --embedder" in err and f"placed by the poincare hierarchy encoder at {enc_dir}" in err
    assert "they were trained" not in err   # an encoder's points are what a query locates, not a trained layout


def test_mcp_remember_auto_uses_the_stores_encoder(enc, tmp_path):
    mcp = pytest.importorskip("hypermem.integrations.mcp_server")
    import asyncio

    m = Memory(embedder=enc)
    m.add("animal", id="animal")
    app = mcp.build_server(m)
    saved, enc.threshold = enc.threshold, -math.inf
    try:
        out = asyncio.run(app.call_tool("remember", {"text": "dog", "parent": "auto"}))
    finally:
        enc.threshold = saved
    text = str(out)
    assert '"parent": "animal"' in text or "'parent': 'animal'" in text
    hits = asyncio.run(app.call_tool("recall", {"query": "dog", "mode": "ancestors"}))
    assert "animal" in str(hits)


# ---------------------------------------------------------------------------- inspector
def test_the_inspector_shows_encoder_depths_and_suggested_parents(enc, mem):
    import base64

    import numpy as np

    from hypermem.viz.payload import pack

    saved, enc.threshold = enc.threshold, -math.inf
    try:
        i = mem.add("poodle", parent="auto")
    finally:
        enc.threshold = saved
    d = pack(mem, layout="projection")
    assert d["config"]["placed_by"] == "hierarchy encoder"
    ids = mem.ids
    sug = mem.get(i).meta["auto_parent"]["suggested"]
    assert d["suggested"] == {str(ids.index(i)): [[ids.index(s["id"]), s["score"]] for s in sug]}
    radius = np.frombuffer(base64.b64decode(d["radius"]), dtype="<f4")
    want = math.sqrt(enc.curvature) * P.distance_to_origin(enc.encode(WORDS).double(), enc.curvature)
    assert radius[: len(WORDS)] == pytest.approx(want.numpy(), rel=1e-5)   # the encoder's depths, drawn
    assert "suggested parents" in mem.inspect()
    plain = pack(Memory())
    assert plain["config"]["placed_by"] is None and plain["suggested"] == {}


def test_postgres_records_the_encoder_and_refuses_another(enc, tiny, pg_url):
    with Memory.open(pg_url, embedder=enc) as m:
        m.add("animal", id="a")
        m.add("dog", id="d", parent="auto")
    with Memory.open(pg_url, embedder=enc) as m:
        assert m.metric == "hyperbolic" and "auto_parent" in m.get("d").meta
        assert torch.allclose(m.point("d"), enc.encode(["dog"])[0].double(), atol=1e-9)
        assert [h.id for h in m.search("dog", mode="ancestors", k=1)] in (["a"], ["d"])
    with pytest.raises(ValueError, match="its points would not match"):
        Memory.open(pg_url, embedder=HierarchyEncoder.from_pretrained(str(tiny), "poincare"))
    with pytest.raises(ValueError, match="with its mirror"):
        Memory.open(pg_url, mirror=False, embedder=enc)


# ---------------------------------------------------------------------------- the example
def test_the_household_example_places_every_note_itself(enc_dir, tmp_path, capsys):
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "examples" / "household_notes.py"
    spec = importlib.util.spec_from_file_location("household_notes", path)
    ex = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ex)
    ex.main(["--encoder", str(enc_dir), "--dir", str(tmp_path)])
    out = dict(line.split(" -> ", 1) for line in capsys.readouterr().out.splitlines())
    assert int(out["notes"]) == len(ex.notes()) >= 300
    back = Memory.load(tmp_path / "household.db", embedder=HierarchyEncoder.load(enc_dir))
    assert all(r.parent_id is None for r in back if r.meta["auto_parent"]["parent"] is None)
    assert int(out["placed under a memory"]) == sum(r.parent_id is not None for r in back)
    assert all(r.parent_id == r.meta["auto_parent"]["parent"] for r in back)   # no note declared a parent
    assert out["reloaded with its encoder"].startswith(f"{len(back)} memories")
    assert out["reloaded without it"].startswith("refused")
    assert "suggested parents" in (tmp_path / "household.html").read_text(encoding="utf-8")


def test_the_page_lists_an_auto_placed_memorys_suggested_parents(enc, mem, tmp_path):
    saved, enc.threshold = enc.threshold, -math.inf
    try:
        i = mem.add("poodle", parent="auto", id="poodle")
    finally:
        enc.threshold = saved
    panel, links, summary = inspected_panel(mem, tmp_path / "page.html", "poodle")
    assert "suggested parents" in panel and "depth (encoder)" in panel
    assert [t.rsplit(" (", 1)[0] for t in links] == [s["id"] for s in mem.get(i).meta["auto_parent"]["suggested"]]
    assert "placed by the hierarchy encoder" in summary


def test_the_page_shows_the_pair_score_that_decided_an_auto_placement(enc, mem, tmp_path):
    """The listed suggestions rank by the ranking lambda; the choice is decided on the pair
    score at the threshold's.  The page showed the suggestions and the threshold only, so a
    memory attached on a passing score looked as if nothing had passed."""
    saved, enc.threshold = enc.threshold, -1e9
    try:
        i = mem.add("poodle", parent="auto", id="poodle")
    finally:
        enc.threshold = saved
    info = mem.get(i).meta["auto_parent"]
    assert info["by"] == "subsumption" and info["parent"] is not None
    panel, _, _ = inspected_panel(mem, tmp_path / "page.html", "poodle")
    assert f"decided on its pair score {info['score']:.3f} > threshold" in panel


def test_open_store_without_the_encoder_names_its_folder(enc, enc_dir, tmp_path):
    """`hypermem mcp --store` / `open_store` on a store an encoder placed: the error names the
    recorded folder and says what to pass from Python and from the command line."""
    mcp = pytest.importorskip("hypermem.integrations.mcp_server")
    path = tmp_path / "placed.db"
    with Memory.open(path, embedder=enc) as m:
        m.add("animal", id="animal")
    with pytest.raises(ValueError) as err:
        mcp.choose_embedder(str(path))
    text = str(err.value)
    assert str(enc_dir) in text and "--embedder PATH" in text and "open_store(target, HierarchyEncoder.load(PATH))" in text
