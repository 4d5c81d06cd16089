"""The placement reranker (hypermem.embed.reranker), its training on a store's own tree
(hypermem.hierarchy.reranker_training) and the store's use of it (issue 31)."""

from __future__ import annotations

import json
import shutil
import warnings

import pytest
import torch

pytest.importorskip("sentence_transformers")

from hypermem import Memory  # noqa: E402
from hypermem.embed import PlacementReranker, RerankerFolderError  # noqa: E402
from hypermem.hierarchy import fit_placement_reranker  # noqa: E402
from hypermem.hierarchy.reranker_training import training_lists  # noqa: E402
from hypermem.store.parent_choice import reranked  # noqa: E402

FILED = [("living thing", None), ("animal", "living thing"), ("plant", "living thing"), ("dog", "animal"),
         ("cat", "animal"), ("dog breed poodle", "dog"), ("dog breed beagle", "dog"), ("cat breed tabby", "cat"),
         ("tree oak", "plant"), ("tree pine", "plant")]


@pytest.fixture(scope="module")
def rr():
    torch.manual_seed(0)   # the new head's weights
    return PlacementReranker()


def filed_store():
    m = Memory()
    m.add_many([{"text": t, "id": t, "parent": p} for t, p in FILED])
    return m


def test_reranked_rescores_the_head_and_keeps_the_tail_below():
    order = [("a", 1.0), ("b", 0.9), ("c", 0.5), ("d", 0.4)]
    got = reranked(order, [0.0, 4.0, -2.0], 0.1)
    assert [c for c, _ in got] == ["b", "a", "c", "d"]
    assert [v for _, v in got] == pytest.approx([1.3, 1.0, 0.3, 0.4 - 0.2])
    assert [v for _, v in got] == sorted((v for _, v in got), reverse=True)
    assert reranked(order, [], 0.1) == order
    with pytest.raises(ValueError, match="one reranker score"):
        reranked(order[:1], [1.0, 2.0], 0.1)


def test_the_store_ranks_its_best_candidates_by_rule_plus_weighted_reranker(rr):
    from hypermem.store.parent_choice import COSINE_SHARE, FIRST_SHARE

    m = filed_store()
    text = "dog breed husky"
    rule = m.suggest_parents(text, k=10)
    assert m.reranker is None
    # with the store's own rule weights, the reranker re-scores the rule's list
    rr = PlacementReranker(rr.model, rule={"first": FIRST_SHARE, "cos": COSINE_SHARE})
    m.reranker = rr
    got = m.suggest_parents(text, k=10)
    ce = rr.scores(text, [h.record.text for h in rule[:rr.candidates]])
    want = reranked([(h.id, h.score) for h in rule], ce.tolist(), rr.weight)
    assert [h.id for h in got] == [c for c, _ in want] and [h.score for h in got] == pytest.approx([v for _, v in want])
    # the reranker's rule: without the cosine term each score loses a * cos(text, c) (the text is all
    # title: it names no first memory)
    m.reranker = PlacementReranker(rr.model, weight=0.0, rule={"first": 0.0, "cos": 0.0})
    q = m.embedder.embed([text])[0].double()
    cos = {h.id: float(torch.cosine_similarity(m.embedding(h.id).double(), q, dim=0)) for h in rule}
    want = sorted(((h.id, h.score - COSINE_SHARE * cos[h.id]) for h in rule), key=lambda t: -t[1])
    got = m.suggest_parents(text, k=10)
    assert [h.score for h in got] == pytest.approx([v for _, v in want])
    # a large weight: the reranker's own first choice among the rule's candidates
    heavy = PlacementReranker(rr.model, weight=1000.0, candidates=3, rule={"first": FIRST_SHARE, "cos": COSINE_SHARE})
    m.reranker = heavy
    top3 = [h.record.text for h in rule[:3]]
    best = top3[int(torch.argmax(heavy.scores(text, top3)))]
    assert m.suggest_parents(text, k=1)[0].id == best
    i = m.add(text, parent="auto")
    info = m.get(i).meta["auto_parent"]
    assert m.parent(i) == best == info["parent"] and info["by"] == "vote"
    assert info["reranker"] == {"weight": 1000.0, "rule": heavy.rule, "checksum": heavy.checksum}
    # a batch: an earlier item of the same batch is a candidate with its text
    a, b = m.add_many([{"text": "dog breed corgi", "parent": "auto"}, {"text": "dog breed corgi puppy",
                                                                        "parent": "auto"}])
    assert m.get(b).meta["auto_parent"]["reranker"]["checksum"] == heavy.checksum
    # the root-free ancestors search ranks by the vote alone, without the reranker
    m.reranker = None
    plain = [h.id for h in m.search("dog breed husky", mode="ancestors", k=3)]
    m.reranker = heavy
    assert [h.id for h in m.search("dog breed husky", mode="ancestors", k=3)] == plain
    m.reranker = None
    assert "reranker" not in m.get(m.add("cat breed siamese", parent="auto")).meta["auto_parent"]


def test_a_reranker_must_look_like_one():
    m = Memory()
    from types import SimpleNamespace

    def scores(text, cands):
        return torch.zeros(len(cands))

    for bad in (object(), SimpleNamespace(scores=scores, weight=float("nan"), candidates=5),
                SimpleNamespace(scores=scores, weight=0.1, candidates=0), SimpleNamespace(weight=0.1, candidates=5)):
        with pytest.raises(TypeError, match="PlacementReranker"):
            m.reranker = bad
    assert m.reranker is None
    with pytest.raises(ValueError, match="weight"):
        PlacementReranker(None, weight=float("nan"))


def test_save_load_round_trip_and_the_folder_checks(rr, tmp_path):
    folder = rr.save(tmp_path / "rr")
    files = sorted(p.name for p in folder.iterdir())
    back = PlacementReranker.load(folder)
    assert sorted(p.name for p in folder.iterdir()) == files          # loading writes nothing
    assert (back.weight, back.candidates, back.max_length, back.rule) == (rr.weight, rr.candidates, rr.max_length,
                                                                          rr.rule)
    texts = ["kingfisher", "cry of a bird"]
    assert torch.allclose(back.scores("kookaburra: a kingfisher", texts), rr.scores("kookaburra: a kingfisher", texts))
    assert back.checksum == rr.checksum and "PlacementReranker(weight=0.05" in repr(back)

    def broken(edit, name="hypermem_reranker.json"):
        bad = tmp_path / f"bad{len(list(tmp_path.iterdir()))}"
        shutil.copytree(folder, bad)
        path = bad / name
        raw = json.loads(path.read_text())
        edit(raw)
        path.write_text(json.dumps(raw))
        return bad

    cases = [(lambda r: r.update(weight="x"), "field 'weight'"),
             (lambda r: r.update(candidates=0), "field 'candidates'"),
             (lambda r: r.update(version=2), "'format'/'version'"),
             (lambda r: r.update(code="import os"), "unknown field"),
             (lambda r: r.update(max_length=10 ** 9), "field 'max_length'"),
             (lambda r: r.update(rule={"first": 0.1}), "field 'rule'"),
             (lambda r: r.update(rule={"first": 0.1, "cos": "x"}), "field 'rule.cos'")]
    for edit, msg in cases:
        with pytest.raises(RerankerFolderError, match=msg):
            PlacementReranker.load(broken(edit))
    bad = broken(lambda r: r.update(activation_fn="os.system"), "config_sentence_transformers.json")
    for load in (PlacementReranker.load, PlacementReranker):    # a folder given to the constructor is checked too
        with pytest.raises(RerankerFolderError, match="activation_fn"):
            load(bad)
    with pytest.raises(RerankerFolderError, match="exactly one"):
        PlacementReranker.load(broken(lambda r: r.append(dict(r[0], idx=1)), "modules.json"))
    bad = broken(lambda r: None)
    (bad / "model.safetensors").rename(bad / "pytorch_model.bin")
    with pytest.raises(RerankerFolderError, match="safetensors"):
        PlacementReranker.load(bad)
    (bad / "hypermem_reranker.json").unlink()
    with pytest.raises(RerankerFolderError, match="hypermem_reranker.json|safetensors"):
        PlacementReranker.load(bad)
    with pytest.raises(RerankerFolderError, match="not a folder"):
        PlacementReranker.load(tmp_path / "missing")


def test_training_lists_take_the_neighbours_filed_parents_not_its_own():
    edges = [("poodle", "dog"), ("beagle", "dog"), ("dog", "mammal"), ("tabby", "cat"), ("cat", "mammal"),
             ("oak", "tree"), ("tree", "plant")]
    vec = {"poodle": [1.0, 0.0], "beagle": [1.0, 0.1], "tabby": [0.9, 0.3], "oak": [0.0, 1.0], "dog": [0.7, 0.7],
           "cat": [0.6, 0.8], "tree": [0.1, 1.0], "mammal": [0.5, 0.5], "plant": [0.0, 0.9]}
    vectors = {k: torch.tensor(v) for k, v in vec.items()}
    lists = {c: (p, negs) for c, p, negs in training_lists(edges, vectors, negatives=7, neighbours=8)}
    p, negs = lists["poodle"]
    assert p == "dog" and "dog" not in negs and "mammal" not in negs and "poodle" not in negs
    assert set(negs) <= {"cat", "tree", "plant"} and "cat" in negs
    assert all(len(n) == len(set(n)) for _, n in lists.values())
    assert len(training_lists(edges, vectors, negatives=1, neighbours=8)[0][2]) == 1
    assert training_lists([], vectors) == []


def test_fit_learns_the_trees_parents_and_saves(tmp_path):
    kinds = {"dog": ["poodle", "beagle", "terrier", "collie", "husky"],
             "tree": ["oak", "pine", "birch", "maple", "willow"],
             "car": ["sedan", "hatchback", "coupe", "convertible", "minivan"]}
    edges = [(f"{k}:{c}", k) for k, cs in kinds.items() for c in cs] + [(k, "thing") for k in kinds]
    names = {"thing": "thing", **{k: k for k in kinds}, **{f"{k}:{c}": f"a {c}" for k, cs in kinds.items() for c in cs}}
    gen = torch.Generator().manual_seed(0)
    vectors = {i: torch.randn(8, generator=gen) for i in names}   # neighbours at random: every kind a negative
    lists = training_lists(edges, vectors, negatives=3, neighbours=6, seed=0)

    def right(r):
        return sum(int(torch.argmax(r.scores(names[c], [names[p]] + [names[x] for x in negs]))) == 0
                   for c, p, negs in lists)

    torch.manual_seed(0)
    before = right(PlacementReranker())
    got = fit_placement_reranker(edges, names, vectors, epochs=6, group=4, lr=2e-4, negatives=3, neighbours=6,
                                 weight=0.1, candidates=7, out=tmp_path / "rr", progress=False)
    assert got.config["last_loss"] < got.config["first_loss"] and got.config["lists"] == len(lists)
    after = right(got)
    assert after > before and after >= 0.8 * len(lists)
    back = PlacementReranker.load(tmp_path / "rr")
    assert (back.weight, back.candidates) == (0.1, 7) and back.config["steps"] == got.config["steps"]
    with pytest.raises(ValueError, match="needs a text"):
        fit_placement_reranker([("x", "y")], {"x": "x"}, vectors)
    with pytest.raises(ValueError, match="epochs"):
        fit_placement_reranker(edges, names, vectors, epochs=0)


def test_the_documented_recipe_trains_on_a_stores_tree_and_places_with_it(tmp_path):
    m = filed_store()
    ids = m.ids
    edges = [(i, m.parent(i)) for i in ids if m.parent(i) is not None]
    rr = fit_placement_reranker(edges, {i: m.get(i).text for i in ids}, dict(zip(ids, m.embeddings)),
                                max_minutes=1, epochs=1, group=4, out=tmp_path / "rr", progress=False)
    assert rr.config["lists"] >= 1 and rr.config["steps"] == -(-rr.config["lists"] // 4)
    m.reranker = PlacementReranker.load(tmp_path / "rr")
    i = m.add("dog breed husky", parent="auto")
    info = m.get(i).meta["auto_parent"]
    assert m.parent(i) == info["parent"] in ids and info["reranker"]["checksum"] == m.reranker.checksum


def test_a_time_limit_that_leaves_lists_unseen_warns_and_still_takes_one_step():
    m = filed_store()
    ids = m.ids
    edges = [(i, m.parent(i)) for i in ids if m.parent(i) is not None]
    args = (edges, {i: m.get(i).text for i in ids}, dict(zip(ids, m.embeddings)))
    with pytest.warns(UserWarning, match=r"stopped the training after 1 of \d+ steps.*give it more minutes"):
        rr = fit_placement_reranker(*args, max_minutes=1e-9, group=1, progress=False)
    assert rr.config["steps"] == 1 and rr.config["planned_steps"] == rr.config["lists"] > 1
    with warnings.catch_warnings():
        warnings.simplefilter("error")   # a pass that ends before the limit says nothing
        full = fit_placement_reranker(*args, max_minutes=30, group=4, progress=False)
    assert full.config["steps"] == full.config["planned_steps"]


def test_hypermem_mcp_serves_a_store_with_the_reranker_and_refuses_a_bad_folder(rr, tmp_path, monkeypatch, capsys):
    pytest.importorskip("mcp")
    from hypermem.cli.main import main
    from hypermem.integrations import mcp_server

    folder = rr.save(tmp_path / "rr")
    served = {}

    def serve(memory, http=None, auto_parent=None, **options):  # the real one also takes max_text=
        served["reranker"] = memory.reranker
    monkeypatch.setattr(mcp_server, "serve", serve)
    db = tmp_path / "notes.db"
    assert main(["mcp", "--store", str(db), "--embedder", "hashing", "--reranker", str(folder)]) == 0
    assert served["reranker"].checksum == rr.checksum
    (folder / "hypermem_reranker.json").write_text('{"format": "x"}')
    assert main(["mcp", "--store", str(db), "--embedder", "hashing", "--reranker", str(folder)]) == 1
    assert "hypermem_reranker.json" in capsys.readouterr().err


def test_hypermem_fit_reranker_trains_on_a_saved_stores_tree(tmp_path, capsys):
    from hypermem.cli.main import main

    m = filed_store()
    m.save(tmp_path / "notes.db")
    out = tmp_path / "rr"
    assert main(["fit-reranker", str(tmp_path / "notes.db"), "--out", str(out), "--epochs", "0.5",
                 "--no-progress"]) == 0
    said = capsys.readouterr().out
    assert str(out) in said and "hypermem mcp --reranker" in said
    rr = PlacementReranker.load(out)
    assert rr.config["steps"] == -(-rr.config["lists"] // 16) and rr.rule == {"first": 0.0, "cos": 0.1}
    wide = Memory()   # more children than a step's 8 lists: one step leaves some unseen
    wide.add_many([{"text": f"kind {k}", "id": f"k{k}"} for k in range(3)]
                  + [{"text": f"kind {k} thing {j}", "id": f"k{k}t{j}", "parent": f"k{k}"}
                     for k in range(3) for j in range(6)])
    wide.save(tmp_path / "wide.db")
    assert main(["fit-reranker", str(tmp_path / "wide.db"), "--out", str(tmp_path / "short"), "--minutes", "1e-9",
                 "--no-progress"]) == 0
    said = capsys.readouterr()
    assert "(1 step over" in said.out and said.err.startswith("warning: ") and "give it more minutes" in said.err
    flat = Memory()
    flat.add("just one note")
    flat.save(tmp_path / "flat.db")
    assert main(["fit-reranker", str(tmp_path / "flat.db"), "--out", str(tmp_path / "no")]) == 1
    assert "holds no tree" in capsys.readouterr().err and not (tmp_path / "no").exists()
