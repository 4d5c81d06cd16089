"""The WordNet mammals demo (``hypermem demo``, the default): a short training run through
the shipped Lightning config, its export into a Memory, the reported MAP, the inspector
page and the structural answers of the searches."""

import math

import pytest
import torch

from hypermem import Memory
from hypermem.demo import DEMO_SEARCHES, run_demo, synset_texts
from hypermem.embed import CallableEmbedder
from hypermem.hierarchy import reconstruction
from hypermem.retrieval.cones import cone_energy
from hypermem.train.export import embedding_to_memory

EPOCHS = 2
pytestmark = pytest.mark.filterwarnings("ignore::Warning:lightning.pytorch.cli")


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    out = tmp_path_factory.mktemp("mammals-demo")
    lines: list[str] = []
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        result = run_demo(out / "out", dataset="mammals", epochs=EPOCHS, runs_dir=out / "runs", progress=False,
                          echo=lines.append)
    finally:
        torch.set_num_threads(threads)
    return result, "\n".join(lines)


def _descendants(tree, root):
    children = {}
    for parent, child in tree:
        children.setdefault(parent, []).append(child)
    out, todo = set(), [root]
    while todo:
        for c in children.get(todo.pop(), []):
            out.add(c)
            todo.append(c)
    return out


def _ancestors(tree, node):
    parent = {c: p for p, c in tree}
    chain = []
    while node in parent:
        node = parent[node]
        chain.append(node)
    return chain


def test_memory_holds_the_trained_points_and_the_glosses(demo, mammals):
    result, _ = demo
    mem, trained = result["memory"], result["trained_points"]
    assert sorted(mem.ids) == sorted(mammals.nodes) and len(mem) == 1180
    assert mem.roots() == ["mammal.n.01"]
    for node in ("dog.n.01", "lion.n.01", "mammal.n.01", "aardvark.n.01"):
        torch.testing.assert_close(mem.point(node), trained[node].to(torch.float64), atol=1e-12, rtol=0)
        assert mem.get(node).text == mammals.glosses[node]
        assert mem.get(node).meta == {"synset": node, "lemma": node.split(".")[0]}
    assert {(mem.parent(c), c) for _, c in mammals.tree} == set(mammals.tree)


def test_reported_map_is_the_reconstruction_of_the_exported_points(demo, mammals):
    result, text = demo
    assert 0.0 <= result["map"] <= 1.0 and result["mean_rank"] >= 1.0
    saved = Memory.load(result["db"])  # the exported file, read back
    points = {id_: saved.point(id_) for id_ in saved.ids}
    again = reconstruction(points, mammals.closure, saved.ball)
    assert again.map == pytest.approx(result["map"], abs=1e-12)
    assert again.mean_rank == pytest.approx(result["mean_rank"], abs=1e-9)
    # Lightning validated the same embedding at the last epoch: the same MAP.
    assert result["val_map"] == pytest.approx(result["map"], abs=1e-6)
    assert f"MAP {result['map']:.4f}" in text and f"trained {EPOCHS} epochs" in text


def test_tensorboard_logs_and_the_inspector_are_written(demo):
    result, text = demo
    assert list(result["log_dir"].glob("events.out.tfevents.*"))
    page = result["html"].read_text(encoding="utf-8")
    assert page.startswith("<!DOCTYPE html>") and "hm-data" in page and "big_cat.n.01" in page
    assert result["html"].resolve().as_uri() in text


def test_searches_give_the_structural_answers(demo, mammals):
    result, text = demo
    mem = result["memory"]
    answers = dict(zip(map(repr, DEMO_SEARCHES["mammals"]), result["results"]))
    cone_shares = []
    for search in DEMO_SEARCHES["mammals"]:
        ids = answers[repr(search)]
        mode, root = search.get("mode", "nearest"), search.get("root")
        assert f"search near {search['near']}" in text
        if mode == "nearest":
            assert ids[0] == search["near"] and len(ids) == search["k"]
        elif mode == "subtree":
            assert ids[0] == search["near"] and len(ids) == search["k"]
            assert set(ids) <= {root} | _descendants(mammals.tree, root)
        elif mode == "ancestors":
            chain = _ancestors(mammals.tree, root)
            assert set(ids) == set(chain) and "mammal.n.01" in ids and "feline.n.01" in ids
            # ranked by hyperbolic distance from the query point
            d = [float(mem.ball.distance(mem.point(search["near"]), mem.point(i))) for i in ids]
            assert d == sorted(d)
        elif mode == "cone":
            # the cone, computed here from the exported points: the hits are its nearest members
            energy = cone_energy(mem.point(root).expand(len(mem), -1), mem.points, mem.ball, mem.cone_k)
            inside = {i for i, e in zip(mem.ids, energy.tolist()) if e <= 1e-9} - {root}
            assert set(ids) <= inside and len(ids) == min(search["k"], len(inside))
            hyponyms = {u for u, v in mammals.closure if v == root}
            share = len(inside & hyponyms) / len(inside) if inside else math.nan
            cone_shares.append(share)
            assert f"the cone of {root} holds {len(inside)} memories, {len(inside & hyponyms)} of them" in text
    assert len(result["cone_precision"]) == len(cone_shares) >= 1
    for got, want in zip(result["cone_precision"], cone_shares):
        assert got == pytest.approx(want, nan_ok=True)


def test_synset_texts_fall_back_to_lemma_names():
    said = []
    texts = synset_texts(["killer_whale.n.01", "dog.n.01"], {"dog.n.01": "a domestic canine"}, echo=said.append)
    assert texts == {"killer_whale.n.01": "killer whale", "dog.n.01": "a domestic canine"}
    assert len(said) == 1 and "wordnet-base" in said[0] and said[0].startswith("1 of 2")
    said.clear()
    assert synset_texts(["dog.n.01"], {"dog.n.01": "x"}, echo=said.append) == {"dog.n.01": "x"} and not said


def test_embedding_to_memory_small_tree_and_errors():
    def pad(*xy, dtype=torch.float64):  # 8-d points (the default hashing embedder's smallest dimension)
        return torch.tensor([*xy, 0.0, 0.0, 0.0, 0.0, 0.0, 0.01], dtype=dtype)

    pts = {"a": pad(0.0, 0.1), "b": pad(0.4, 0.2), "c": pad(-0.3, 0.5), "d": pad(0.5, 0.4, dtype=torch.float32)}
    mem = embedding_to_memory(pts, [("b", "d"), ("a", "b"), ("a", "c")], {"b": "bee"}, curvature=2.0)
    assert mem.ids == ["a", "b", "c", "d"]  # parents first, whatever the edge order
    assert mem.ancestors("d") == ["b", "a"] and mem.get("b").text == "bee" and mem.get("c").text == "c"
    assert mem.curvature == 2.0 and mem.metric == "hyperbolic"
    for k, p in pts.items():
        torch.testing.assert_close(mem.point(k), p.to(torch.float64), atol=1e-7, rtol=0)
    with pytest.raises(ValueError, match="two parents"):
        embedding_to_memory(pts, [("a", "d"), ("b", "d")])
    with pytest.raises(ValueError, match="has no point"):
        embedding_to_memory(pts, [("a", "zzz")])
    with pytest.raises(ValueError, match="cycle"):
        embedding_to_memory(pts, [("b", "c"), ("c", "b")])
    with pytest.raises(ValueError, match="empty"):
        embedding_to_memory({})
    with pytest.raises(ValueError, match="inside|ball|norm"):
        embedding_to_memory({"a": pad(1.0, 1.0)})
    flat = {"a": torch.tensor([0.1, 0.2]), "b": torch.tensor([0.3, -0.4])}
    with pytest.raises(ValueError, match="embedder="):
        embedding_to_memory(flat, [("a", "b")])
    two_d = embedding_to_memory(flat, [("a", "b")], embedder=CallableEmbedder(lambda ts: [[1.0, 0.0]] * len(ts), 2))
    assert two_d.search(torch.tensor([0.3, -0.39]), k=1)[0].id == "b"


def test_demo_options_are_checked(tmp_path):
    with pytest.raises(ValueError, match="epochs"):
        run_demo(tmp_path, dataset="mammals", epochs=0)
    with pytest.raises(FileNotFoundError, match="no such config"):
        run_demo(tmp_path, dataset="mammals", config=tmp_path / "nope.yaml")
    with pytest.raises(ValueError, match="mammals demo"):
        run_demo(tmp_path, dataset="events", epochs=3)


def test_low_dimensional_embeddings_get_a_text_query_embedder_and_save(tmp_path):
    from hypermem.demo import _save_and_check, _text_query_embedder

    embedder = _text_query_embedder(2)
    assert embedder.dim == 2 and embedder.embed(["a lion", "a tiger"]).shape == (2, 2)
    assert type(_text_query_embedder(10)).__name__ == "HashingEmbedder"
    pts = {"a": torch.tensor([0.1, 0.2]), "b": torch.tensor([0.3, -0.4])}
    mem = embedding_to_memory(pts, [("a", "b")], embedder=embedder)
    said = []
    db, js = _save_and_check(mem, tmp_path, "two_d", said.append)
    assert db.exists() and js.exists() and "loads back equal" in said[0]
    assert mem.search("anything", k=1)[0].id in pts


def test_a_shorter_demo_keeps_the_burn_in_share_of_the_run():
    """``hypermem demo --epochs 20`` was all burn-in (20 of the config's 200 epochs): MAP 0.22,
    and a warning to lower flags the demo does not have. The burn-in now scales with the run."""
    from hypermem.demo import _scaled_burn_in

    cfg = {"model": {"burn_in": 20}, "data": {"burn_in": 20}, "trainer": {"max_epochs": 200}}
    assert _scaled_burn_in(cfg, 20) == ["--model.burn_in=2", "--data.burn_in=2"]
    assert _scaled_burn_in(cfg, 2) == ["--model.burn_in=0", "--data.burn_in=0"]
    assert _scaled_burn_in(cfg, 200) == [] and _scaled_burn_in(cfg, 400) == []  # never longer than configured
    assert _scaled_burn_in({"model": {"burn_in": 0}, "trainer": {"max_epochs": 200}}, 20) == []
    assert _scaled_burn_in({"model": {"burn_in": 20}}, 20) == []  # no max_epochs to scale from


def test_the_demo_run_used_the_scaled_burn_in(demo):
    result, _ = demo
    assert "-burn_in=0" in str(result["log_dir"])  # model.burn_in and data.burn_in: one setting, one name
