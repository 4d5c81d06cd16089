"""fit_hierarchy_encoder's inputs as a user passes them: bad ones are refused up front (before
the base model loads: these tests pass a base that does not exist), with the argument and the
item named; integer ids, arrays and tiny hierarchies train; a budget too short for a step
still takes one and warns; the progress bar raises no warning; the docs' signature is whole."""

from __future__ import annotations

import inspect
import re
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch

pytest.importorskip("sentence_transformers")

from encoder_helpers import EDGES, NAMES, tiny_model_folder  # noqa: E402

from hypermem.data.hierarchy_tasks import EntityHierarchy, NegativeSampler  # noqa: E402
from hypermem.hierarchy import fit_hierarchy_encoder  # noqa: E402
from hypermem.hierarchy.encoder_eval import pair_terms  # noqa: E402

torch.set_num_threads(1)
NO_MODEL = "/nonexistent/hypermem-test-base"   # loading it would fail: the checks come first
DOC_EDGES = [("dog", "animal"), ("cat", "animal"), ("oak", "tree"), ("tree", "plant")]
DOC_NAMES = {e: e for pair in DOC_EDGES for e in pair}
INT_EDGES = [(i, (i - 1) // 3) for i in range(1, 20)]
INT_NAMES = {i: f"thing {i}" for i in range(20)}


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return str(tiny_model_folder(tmp_path_factory.mktemp("tiny")))


def _refused(exc, match, edges=EDGES, names=NAMES, **kw):
    with pytest.raises(exc, match=match):
        fit_hierarchy_encoder(edges, names, base=NO_MODEL, epochs=1, **kw)


def test_the_docstring_example_runs_and_too_many_negatives_say_how_to_fix_it(tiny):
    _refused(ValueError, r"too few entities for 10 negatives of '\w+': only \d of its 6 entities.*"
                         r"lower the negatives= setting to at most \d", DOC_EDGES, DOC_NAMES)
    enc = fit_hierarchy_encoder(DOC_EDGES, DOC_NAMES, base=tiny, epochs=2, negatives=2)
    assert enc.config["steps"] == 2 and enc.threshold is not None
    assert enc.subsumption_scores(["dog"], ["animal"]).shape == (1,)


def test_the_sampler_names_the_setting_and_the_entities():
    sampler = NegativeSampler(EntityHierarchy(dict(DOC_NAMES), list(DOC_EDGES)), 5, 0)
    with pytest.raises(ValueError, match=r"'oak': only 3 of its 6 entities .*at most 3$"):
        sampler.random("oak")
    with pytest.raises(ValueError, match=r"nor held out; add entities$"):
        sampler.random("oak", exclude={"dog", "cat", "animal"})


def test_integer_ids_train_as_their_text(tiny):
    enc = fit_hierarchy_encoder(INT_EDGES, INT_NAMES, base=tiny, epochs=1, batch_size=8)
    assert enc.config["steps"] >= 1 and enc.config["train_edges"] == 18
    arr = fit_hierarchy_encoder(np.array(INT_EDGES), INT_NAMES, base=tiny, epochs=1, batch_size=8,
                                validation_edges=torch.tensor(INT_EDGES[:2]))
    assert arr.config["train_edges"] == 19      # array rows and tensor rows are pairs of ids too
    lists = fit_hierarchy_encoder([list(e) for e in EDGES], NAMES, base=tiny, max_steps=1, batch_size=8)
    assert lists.config["steps"] == 1


def test_ids_that_collide_as_text_are_refused():
    _refused(ValueError, r"names has two keys for the id '1': 1 and '1'", INT_EDGES, {**INT_NAMES, "1": "one"})


def test_names_must_be_a_mapping():
    _refused(TypeError, r"names must be a mapping id -> text .*got list", names=list(NAMES.items()))
    _refused(TypeError, r"names must be a mapping id -> text .*got list", names=sorted(NAMES))


def test_each_edge_is_a_child_parent_pair():
    _refused(TypeError, r"edges must be a sequence of \(child, parent\) pairs, got dict .*list\(d.items\(\)\)",
             dict(EDGES))
    _refused(TypeError, r"edges must be a sequence .*got str", "dog")
    three = [EDGES[0], ("cat", "mammal", "animal"), *EDGES[2:]]
    _refused(ValueError, r"edges\[1\] = \('cat', 'mammal', 'animal'\) has 3 items: each edge is a \(child, parent\) "
                         r"pair", three)
    _refused(TypeError, r"edges\[0\] = 'dog' is not a \(child, parent\) pair", ["dog", "cat"])
    _refused(TypeError, r"edges\[0\] = (np\.int64\()?0\)? is not a \(child, parent\) pair", np.arange(4))
    _refused(ValueError, r"edges\[0\] = array\(\[1, 0, 0\]\) has 3 items", np.array([(1, 0, 0), (2, 0, 0)]),
             INT_NAMES)
    _refused(ValueError, r"validation_edges\[0\] = \('dog',\) has 1 items", validation_edges=[("dog",)])


def test_unnamed_ids_name_the_argument():
    _refused(ValueError, r"1 entities of edges have no name in names, e.g. \['unicorn'\]",
             [*EDGES, ("unicorn", "animal")])
    _refused(ValueError, r"1 entities of validation_edges have no name in names, e.g. \['unicorn'\]",
             validation_edges=[("unicorn", "animal")])


def test_a_name_must_be_a_non_blank_string():
    _refused(TypeError, r"the name of id 'cat' in names must be a string, got int 7", names={**NAMES, "cat": 7})
    _refused(TypeError, r"the name of id 'cat' in names must be a string, got NoneType", names={**NAMES, "cat": None})
    _refused(ValueError, r"the name of id 'cat' in names is blank", names={**NAMES, "cat": "  "})
    _refused(ValueError, r"the name of id 3 in names is blank", INT_EDGES, {**INT_NAMES, 3: ""})


def test_empty_edges_and_validation_edges_are_refused():
    _refused(ValueError, r"edges is empty: there are no training edges", [])
    _refused(ValueError, r"edges is empty", np.zeros((0, 2), dtype=int), INT_NAMES)
    _refused(ValueError, r"validation_edges is empty: pass at least one \(child, parent\) pair, or None",
             validation_edges=[])
    _refused(ValueError, r"edges has 1 edge\(s\): one is held out for validation, which leaves no training edge",
             EDGES[:1])
    with pytest.raises(ValueError, match="no pairs to score"):
        pair_terms(None, {}, [], [])


def test_bad_settings_are_refused_up_front():
    _refused(ValueError, r"max_steps must be a positive integer, got 0", max_steps=0)
    _refused(ValueError, r"geometry must be 'poincare' or 'euclidean', got 'hyperbolic'", geometry="hyperbolic")
    _refused(ValueError, r"batch_size must be at least 2", batch_size=1)
    _refused(ValueError, r"curvature= is the Poincaré ball's; geometry='euclidean' has none",
             geometry="euclidean", curvature=0.1)
    for bad in (0, -1.0, float("nan"), float("inf"), True, "0.1"):
        _refused(ValueError, r"curvature must be a finite number > 0", curvature=bad)


def test_a_chosen_curvature_trains_saves_and_loads(tiny, tmp_path):
    from hypermem.embed import HierarchyEncoder
    enc = fit_hierarchy_encoder(EDGES, NAMES, base=tiny, max_steps=2, batch_size=8, curvature=0.5,
                                out=str(tmp_path / "enc"))
    default = fit_hierarchy_encoder(EDGES, NAMES, base=tiny, max_steps=2, batch_size=8)
    assert enc.curvature == 0.5 and default.curvature == pytest.approx(1 / default.dim)
    back = HierarchyEncoder.load(tmp_path / "enc")
    assert back.curvature == 0.5
    pytest.importorskip("lightning")
    from hypermem.train.encoder_module import EncoderModule
    assert EncoderModule(base=tiny, curvature=0.5, log_images=False).encoder.curvature == 0.5   # --model.curvature
    with pytest.raises(ValueError, match="curvature= is the Poincaré ball's"):
        EncoderModule(base=tiny, geometry="euclidean", curvature=0.5)
    x = back.encode(["dog", "animal"])
    from hypermem.geometry.subsumption import geometry_distance
    assert torch.allclose(back.subsumption_scores(x[:1], x[1:]),   # the score reads the saved ball
                          -(geometry_distance(x[:1], x[1:], 0.5) + back.centripetal_weight
                            * (back.norms(x[1:]) - back.norms(x[:1]))), atol=1e-5)


def test_a_budget_too_short_for_a_step_takes_one_and_warns(tiny):
    with pytest.warns(UserWarning, match=r"max_minutes=1e-06 stopped the training after 1 step\(s\), before one "
                                         r"pass over the 31 training edges"):
        enc = fit_hierarchy_encoder(EDGES, NAMES, base=tiny, max_minutes=1e-6, batch_size=8)
    assert enc.config["steps"] == 1 and enc.config["history"] and enc.threshold is not None
    with warnings.catch_warnings():   # a run that ends its passes in time does not warn
        warnings.simplefilter("error", UserWarning)
        fit_hierarchy_encoder(EDGES, NAMES, base=tiny, epochs=1, max_minutes=10, batch_size=8,
                              validation_edges=EDGES[:20])   # 20 pairs: no warning of a small validation


def test_the_progress_bar_reads_a_detached_loss(tiny, capsys):
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message=".*requires_grad.*")
        enc = fit_hierarchy_encoder(EDGES, NAMES, base=tiny, max_steps=2, batch_size=8, progress=True)
    assert enc.config["steps"] == 2 and "loss=" in capsys.readouterr().err


def test_the_docs_list_every_parameter():
    text = (Path(__file__).resolve().parents[1] / "docs" / "encoder.md").read_text()
    documented = re.search(r"`fit_hierarchy_encoder\((.*?)\)`", text, re.S).group(1)
    got = [p.strip().lstrip("*").split("=")[0] for p in documented.split(",") if p.strip() != "*"]
    want = list(inspect.signature(fit_hierarchy_encoder).parameters)
    assert got == want and "progress=None" in documented
