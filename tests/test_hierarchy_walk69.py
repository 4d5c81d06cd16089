"""Walk 69 (a class-inheritance DAG): layouts into a memory, mixed id types, float32's radius
limit, a burn-in as long as the run, DAG and forest refusals of the layouts, isolated roots."""

import re
import warnings

import pytest
import torch
from train_helpers import train_tiny

from hypermem.hierarchy import Relations, fit_poincare_embeddings, reconstruction, sarkar_layout
from hypermem.hierarchy.model import HierarchyEmbedding
from hypermem.hierarchy.shadows import shadow_layout
from hypermem.hierarchy.spanning import add_virtual_root, ancestor_tree
from hypermem.hierarchy.training import radius_limit_message
from hypermem.store import Memory
from hypermem.train.export import embedding_to_memory, origin_direction
from hypermem.train.hierarchy_data import load_tsv

TREE = [("animal", "dog"), ("animal", "cat"), ("dog", "puppy"), ("cat", "kitten"), ("animal", "bird")]
CLOSURE = [("dog", "animal"), ("cat", "animal"), ("bird", "animal"), ("puppy", "dog"), ("puppy", "animal"),
           ("kitten", "cat"), ("kitten", "animal")]


@pytest.mark.parametrize("layout", [lambda: sarkar_layout(TREE, dim=8, tau=None),
                                    lambda: shadow_layout(TREE, dim=8),
                                    lambda: sarkar_layout(TREE, dim=8, edge_length="isa")])
def test_a_layout_with_its_root_at_the_origin_becomes_a_memory(layout):
    lay = layout()
    assert float(lay["animal"].norm()) == 0.0
    mem = embedding_to_memory(lay, TREE)
    assert len(mem) == 6 and mem.ancestors("puppy") == ["dog", "animal"]
    assert float(mem.point("animal").norm()) < 1e-100   # the origin (the store keeps a tiny radius)
    assert torch.allclose(mem.point("kitten"), lay["kitten"].double(), atol=1e-12)
    emb = mem.embedding("animal")
    assert float(emb.norm()) > 0 and bool(torch.isfinite(emb).all())
    assert mem.search(mem.point("dog"), k=1)[0].id == "dog"


def test_the_origin_takes_the_mean_direction_of_its_children_or_the_first_axis():
    vectors = {"r": torch.zeros(3, dtype=torch.float64), "a": torch.tensor([2.0, 0, 0], dtype=torch.float64),
               "b": torch.tensor([0, 0.1, 0], dtype=torch.float64), "z": torch.zeros(3, dtype=torch.float64)}
    assert torch.allclose(origin_direction(vectors, ["a", "b", "z"]),
                          torch.tensor([1.0, 1.0, 0], dtype=torch.float64) / 2 ** 0.5)
    vectors["b"] = torch.tensor([-0.1, 0, 0], dtype=torch.float64)  # opposite children: no mean direction
    assert origin_direction(vectors, ["a", "b"]).tolist() == [1.0, 0.0, 0.0]
    assert origin_direction(vectors, []).tolist() == [1.0, 0.0, 0.0]


def test_a_zero_embedding_is_named_with_a_whole_shortened_text():
    mem = Memory()
    text = "any warm-blooded vertebrate having the skin more or less covered with hair; young are born alive"
    with pytest.raises(ValueError) as info:
        mem.add_many([{"text": text, "embedding": torch.zeros(mem.embedder.dim)}])
    quoted = re.search(r"\(text ('.*?')\)", str(info.value))
    assert quoted and quoted.group(1).endswith("alive'") and "..." in quoted.group(1)


def test_ids_that_print_alike_but_differ_in_type_are_refused():
    with pytest.raises(ValueError, match=r"'1' \(str\) and 1 \(int\)"):
        Relations([(1, 0), (2, 0), ("3", "1"), (3, 1)])
    with pytest.raises(ValueError, match="same name"):
        fit_poincare_embeddings([(1, 0), (2, 0), ("3", "1"), (3, 1)], dim=2, epochs=1, burn_in=0)
    with pytest.raises(ValueError, match="same name"):
        Relations([(1, 0)], nodes=[0, 1, "1"])
    rel = Relations([(1, "a"), (("t", 2), "a")])  # several types, no clash: still one node each
    assert rel.n == 3 and len(rel) == 2


def test_float32_at_its_radius_limit_warns_once_naming_float64():
    edges = CLOSURE
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fit_poincare_embeddings(edges, dim=2, epochs=30, burn_in=0, lr=20, negatives=3, batch_size=4,
                                dtype=torch.float32)
    limit = [w for w in caught if "largest radius" in str(w.message)]
    assert len(limit) == 1 and "float64" in str(limit[0].message) and limit[0].filename == __file__
    model = HierarchyEmbedding(4, 2, dtype=torch.float32)
    with torch.no_grad():
        model.weight.copy_(torch.tensor([[0.999, 0], [0, 0.999], [0.1, 0], [0, 0.2]]))
    assert "2 of 4 points" in radius_limit_message(model)
    assert radius_limit_message(model, share=0.6) is None
    model64 = HierarchyEmbedding(4, 2, dtype=torch.float64)
    with torch.no_grad():
        model64.weight.copy_(torch.tensor([[1 - 1e-10, 0], [0, 1 - 1e-10], [0.1, 0], [0, 0.2]]))
    assert radius_limit_message(model64) is None


def test_lightning_float32_at_its_radius_limit_warns(tmp_path):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        train_tiny(tmp_path, "--model.dtype=float32", "--model.lr=20", "--trainer.max_epochs=20",
                   "--model.burn_in=0", "--data.burn_in=0")
    assert any("largest radius" in str(w.message) and "--model.dtype=float64" in str(w.message) for w in caught)


def test_a_burn_in_as_long_as_the_run_warns_in_python_too():
    with pytest.warns(UserWarning, match=r"burn-in lasts 20 epochs but training lasts 5") as caught:
        fit_poincare_embeddings(CLOSURE, dim=2, epochs=5)
    assert caught[0].filename == __file__   # the caller's line
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fit_poincare_embeddings(CLOSURE, dim=2, epochs=5, burn_in=0)


def test_sarkar_layout_of_a_dag_or_a_forest_points_to_the_way_out():
    dag = TREE + [("dog", "kitten")]
    for kw in ({}, {"edge_length": "isa"}):
        with pytest.raises(ValueError, match=r"two parents.*ancestor_tree\(closure"):
            sarkar_layout(dag, dim=3, **kw)
        with pytest.raises(ValueError, match=r"forest.*add_virtual_root"):
            sarkar_layout(TREE + [("x", "y")], dim=3, **kw)


def test_isolated_roots_stay_in_the_tree_of_a_layout(tmp_path):
    # "r" is a root whose only child "c" prefers its deeper parent "p": no tree edge names "r"
    (tmp_path / "dag.tsv").write_text("c\tr\nc\tp\np\tq\nd\tq\n")
    closure, _, tree = load_tsv(tmp_path / "dag.tsv")
    nodes = sorted({x for pair in closure for x in pair})
    assert "r" not in {x for e in tree for x in e}
    whole = add_virtual_root(tree, "<root>", nodes)
    assert ("<root>", "r") in whole and {x for e in whole for x in e} == set(nodes) | {"<root>"}
    assert {x for e in ancestor_tree(closure, root="<root>") for x in e} == set(nodes) | {"<root>"}
    lay = sarkar_layout(whole, dim=3, edge_length="isa")
    assert reconstruction({n: p for n, p in lay.items() if n != "<root>"}, closure).map > 0.5
    with pytest.raises(ValueError, match="already a node"):
        add_virtual_root(tree, "q", nodes)
