"""``HierarchyModule.load_from_checkpoint`` refuses a checkpoint whose fields disagree (with its
hyper_parameters, the weight's rows, the ball), naming the field; a resume on other data too."""

import re

import pytest
import torch
from train_helpers import EDGES, train_tiny

pytest.importorskip("lightning")


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("ckpt")
    cli = train_tiny(tmp, "--trainer.max_epochs=1")
    path = tmp / cli.trainer.log_dir / "checkpoints" / "last.ckpt"
    return tmp, path, torch.load(path, map_location="cpu", weights_only=True)


def _weight(state, value):
    return lambda c: c["state_dict"].__setitem__("embedding.weight", value(state["state_dict"]["embedding.weight"]))


CASES = {
    "dim": (lambda c: c["hyper_parameters"].update(dim=3), "has shape (7, 2) but hyper_parameters dim is 3"),
    "dtype": (lambda c: c["state_dict"].__setitem__("embedding.weight", c["state_dict"]["embedding.weight"].half()),
              "is float16 but hyper_parameters dtype is 'float64'"),
    "curvature": (lambda c: c["hyper_parameters"].update(curvature=2.0),
                  "state_dict['ball.isp_c'] gives the curvature 1 but hyper_parameters curvature is 2.0"),
    "nodes_str": (lambda c: c.__setitem__("hypermem_nodes", "abc"), "hypermem_nodes is a str"),
    "nodes_short": (lambda c: c.__setitem__("hypermem_nodes", ["a", "b", "c"]), "hypermem_nodes has 3 names but"),
    "nodes_ints": (lambda c: c.__setitem__("hypermem_nodes", list(range(7))), "hypermem_nodes is a list holding"),
    "nodes_twice": (lambda c: c.__setitem__("hypermem_nodes", ["a"] * 7), "hypermem_nodes repeats 6 names"),
    "tree_str": (lambda c: c.__setitem__("hypermem_tree", "xy"), "hypermem_tree is a str"),
    "tree_names": (lambda c: c.__setitem__("hypermem_tree", [("nope", "a")]), "hypermem_tree[0] names 'nope'"),
    "tree_triple": (lambda c: c.__setitem__("hypermem_tree", [("a", "b", "c")]), "hypermem_tree[0] is"),
    "glosses": (lambda c: c.__setitem__("hypermem_glosses", [("a", "b")]), "hypermem_glosses is a list"),
    "schedule": (lambda c: c.__setitem__("hypermem_schedule_epochs", "x"), "hypermem_schedule_epochs is 'x'"),
    "nan": (lambda c: c["state_dict"]["embedding.weight"].__setitem__((0, 0), float("nan")), "has 1 rows with NaN"),
    "outside": (lambda c: c["state_dict"]["embedding.weight"].__setitem__((1, 0), 5.0),
                "has 1 points on or outside the ball of curvature 1"),
    "missing": (lambda c: c["state_dict"].pop("embedding.weight"), "state_dict['embedding.weight'] is missing"),
    "1d": (lambda c: c["state_dict"].__setitem__("embedding.weight", torch.zeros(2, dtype=torch.float64)),
           "has shape (2,), not (nodes, dim)"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_an_inconsistent_checkpoint_is_refused_naming_the_field(saved, tmp_path, case):
    from hypermem.train.hierarchy_module import HierarchyModule

    _, _, state = saved
    crafted = {**state, "hyper_parameters": dict(state["hyper_parameters"]),
               "state_dict": {k: v.clone() for k, v in state["state_dict"].items()}}
    change, message = CASES[case]
    change(crafted)
    torch.save(crafted, tmp_path / "x.ckpt")
    with pytest.raises(ValueError, match="not a consistent HierarchyModule checkpoint: .*" + re.escape(message)):
        HierarchyModule.load_from_checkpoint(tmp_path / "x.ckpt", map_location="cpu")


def test_the_checkpoint_as_written_loads_and_never_trusts_a_file(saved, tmp_path):
    from hypermem.train.hierarchy_module import HierarchyModule

    _, path, state = saved
    module = HierarchyModule.load_from_checkpoint(path, map_location="cpu")
    assert module.nodes == state["hypermem_nodes"] and module.embedding.weight.shape == (7, 2)
    assert sorted(module.points_dict()) == sorted(state["hypermem_nodes"])
    crafted = {**state, "hyper_parameters": {**state["hyper_parameters"], "init_from_trusted": True}}
    torch.save(crafted, tmp_path / "trusting.ckpt")
    assert HierarchyModule.load_from_checkpoint(tmp_path / "trusting.ckpt").hparams.init_from_trusted is False


def test_a_resume_on_other_data_is_refused_in_one_line(saved, tmp_path, capsys):
    _, path, _ = saved
    other = [(c.upper(), p.upper()) for c, p in EDGES]  # the same shape, other names
    with pytest.raises(SystemExit) as exc:
        train_tiny(tmp_path, "--trainer.max_epochs=2", f"--ckpt_path={path}", edges=other)
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and re.search("error: .*hypermem_nodes .* are not this run's data's nodes", err[0])
    assert not list((tmp_path / "runs").rglob("version_*"))  # the failed start left no empty version folder


def test_a_resume_from_an_inconsistent_checkpoint_prints_one_line(saved, tmp_path, capsys):
    """`hypermem train --ckpt_path` on a checkpoint that fails its checks printed a traceback."""
    _, _, state = saved
    crafted = {**state, "hypermem_nodes": "abc"}
    torch.save(crafted, tmp_path / "bad.ckpt")
    with pytest.raises(SystemExit) as exc:
        train_tiny(tmp_path, "--trainer.max_epochs=2", f"--ckpt_path={tmp_path / 'bad.ckpt'}")
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "not a consistent HierarchyModule checkpoint: hypermem_nodes is a str" in err[0]
