"""A user's walk through ``hypermem train`` on their own small data: run names, resumes,
checkpoints to a Memory, messages and what a failed start leaves behind."""

import os
from pathlib import Path

import pytest
from train_helpers import CONFIG, EDGES

pytest.importorskip("lightning")


@pytest.fixture
def walk(tmp_path):
    """A folder with ``edges.tsv`` (a 7-node tree, hyponym<TAB>hypernym) and ``tiny.yaml``."""
    (tmp_path / "edges.tsv").write_text("".join(f"{c}\t{p}\n" for c, p in EDGES))
    (tmp_path / "tiny.yaml").write_text(CONFIG)
    return tmp_path


def train(folder: Path, *argv: str, cwd: Path | None = None):
    from hypermem.train.hierarchy_cli import main

    old = os.getcwd()
    os.chdir(cwd or folder)
    try:
        return main(["fit", "--config", str(folder / "tiny.yaml"), *argv])
    finally:
        os.chdir(old)


def test_run_name_ignores_the_order_and_spelling_of_overrides():
    from hypermem.train.hierarchy_cli import run_name

    a = run_name(["fit", "--config", "x/m.yaml", "--model.dim=5", "--model.lr=0.5"])
    b = run_name(["fit", "--config", "x/m.yaml", "--model.lr=0.50", "--model.dim", "5", "--ckpt_path=last"])
    assert a == b == "m-dim=5-lr=0.5"
    assert run_name(["--model.lr=1e-3", "--model.log_images=False"]) == "hierarchy-log_images=false-lr=0.001"
    # a key both groups take is one setting of the run, named once, whichever group gives it
    assert run_name(["--data.burn_in=1", "--model.burn_in=1", "--model.dim=5"]) \
        == run_name(["--model.dim=5", "--model.burn_in=1"]) == run_name(["--data.burn_in", "1", "--model.dim=5"]) \
        == "hierarchy-burn_in=1-dim=5"
    assert run_name(["--model.seed=7"]) == run_name(["--data.seed=7"]) == run_name(["--seed_everything=7"]) \
        == run_name(["--seed_everything=7", "--data.seed=7"]) == "hierarchy-seed=7"
    assert run_name(["--seed_everything=false", "--model.dim=2"]) == "hierarchy-dim=2"
    assert run_name(["--model.schedule_epochs=3", "--trainer.max_epochs=9", "--model.dim=5"]) == "hierarchy-dim=5"


def test_shared_keys_are_the_keys_both_classes_take():
    import inspect

    from hypermem.train.hierarchy_cli import SHARED_KEYS
    from hypermem.train.hierarchy_data import HierarchyDataModule
    from hypermem.train.hierarchy_module import HierarchyModule

    both = set(inspect.signature(HierarchyModule).parameters) & set(inspect.signature(HierarchyDataModule).parameters)
    assert set(SHARED_KEYS) == both


def test_resume_with_reordered_overrides_and_the_advised_schedule_epochs(walk):
    first = train(walk, "--model.dim=3", "--model.lr=0.5", "--trainer.max_epochs=2")
    log_dir = Path(first.trainer.log_dir)
    with pytest.warns(UserWarning, match="--model.schedule_epochs=2"):
        again = train(walk, "--model.lr=0.50", "--model.dim=3", "--trainer.max_epochs=3", "--ckpt_path=last")
    assert Path(again.trainer.log_dir) == log_dir and again.trainer.current_epoch == 3
    advised = train(walk, "--model.lr=0.5", "--model.dim=3", "--trainer.max_epochs=4", "--ckpt_path=last",
                    "--model.schedule_epochs=2")
    assert Path(advised.trainer.log_dir) == log_dir and advised.trainer.current_epoch == 4


def test_best_checkpoint_loads_with_load_from_checkpoint_and_becomes_a_memory(walk):
    from hypermem.embed import CallableEmbedder
    from hypermem.train.hierarchy_module import HierarchyModule

    cli = train(walk, "--trainer.max_epochs=2")
    ckpts = sorted((walk / cli.trainer.log_dir / "checkpoints").glob("best-*.ckpt"))
    assert ckpts
    module = HierarchyModule.load_from_checkpoint(str(ckpts[0]), map_location="cpu")
    assert sorted(module.nodes) == sorted({n for e in EDGES for n in e})
    assert module.points_dict().keys() == cli.model.points_dict().keys()
    mem = module.to_memory(embedder=CallableEmbedder(lambda texts: [[0.0, 1.0]] * len(texts), dim=2))
    assert len(mem) == 7
    last = HierarchyModule.load_from_checkpoint(str(walk / cli.trainer.log_dir / "checkpoints" / "last.ckpt"))
    for n, p in last.points_dict().items():
        assert (p == cli.model.points_dict()[n]).all()


def test_a_relative_dataset_of_a_config_is_read_beside_the_config(walk, tmp_path_factory):
    elsewhere = tmp_path_factory.mktemp("elsewhere")
    cli = train(walk, "--trainer.max_epochs=1", cwd=elsewhere)
    assert len(cli.model.nodes) == 7 and (elsewhere / "runs").is_dir()


def test_a_missing_dataset_file_says_where_it_was_looked_for(walk, tmp_path_factory, capsys):
    """The loader raises FileNotFoundError; the CLI makes it a one-line config error (status 2)
    naming the setting, where it looked and the file that set it."""
    from hypermem.train.hierarchy_data import load_closure

    with pytest.raises(FileNotFoundError, match="no such file: looked for .*nowhere.tsv"):
        load_closure(str(walk / "nowhere.tsv"))
    (walk / "tiny.yaml").write_text(CONFIG.replace("edges.tsv", "gone.tsv"))
    elsewhere = tmp_path_factory.mktemp("elsewhere")
    capsys.readouterr()
    with pytest.raises(SystemExit) as stop:
        train(walk, "--trainer.max_epochs=1", cwd=elsewhere)
    err = capsys.readouterr().err.strip().splitlines()
    assert stop.value.code == 2 and len(err) == 1
    assert err[0].startswith("error: data.dataset ") and f"looked for {walk / 'gone.tsv'}" in err[0]
    assert "(set in " in err[0] and "tiny.yaml" in err[0]


def test_a_tsv_is_closed_and_gives_a_tree(tmp_path):
    from hypermem.train.hierarchy_data import load_tsv

    (tmp_path / "direct.tsv").write_text("b\ta\nc\tb\nd\tc\n")
    closure, glosses, tree = load_tsv(tmp_path / "direct.tsv")
    assert closure[:3] == [("b", "a"), ("c", "b"), ("d", "c")]
    assert set(closure) == {("b", "a"), ("c", "b"), ("d", "c"), ("c", "a"), ("d", "a"), ("d", "b")}
    assert sorted(tree) == [("a", "b"), ("b", "c"), ("c", "d")] and glosses == {}


@pytest.mark.parametrize(("text", "message"), [
    ("a\tb\nb\tc\nc\ta\n", r":1: the hierarchy has a cycle .*'a' -> 'b' -> 'c' -> 'a'"),
    ("y\tz\nx\tx\n", r":2: 'x' is its own parent \(a self-loop\)"),
    ("\n\n", "no edges"),
    (b"ok\tfine\ncaf\xe9\tdrink\n", r":2: not UTF-8"),
    ("a\tb\nlonely\n", r":2: every line needs two tab-separated names"),
])
def test_a_bad_tsv_is_refused_naming_the_file(tmp_path, text, message):
    from hypermem.train.hierarchy_data import load_closure

    path = tmp_path / "bad.tsv"
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    with pytest.raises(ValueError, match=message) as exc:
        load_closure(str(path))
    assert str(path) in str(exc.value)


@pytest.mark.parametrize("bad", ["--model.dim=0", "--data.dataset=foo.tsv", "--ckpt_path=best"])
def test_a_failed_start_leaves_no_version_folder(walk, bad):
    with pytest.raises((ValueError, FileNotFoundError, SystemExit)):
        train(walk, "--trainer.max_epochs=1", bad)
    runs = walk / "runs"
    assert not runs.exists() or not list(runs.glob("*/version_*")), list(runs.rglob("*"))
    cli = train(walk, "--trainer.max_epochs=1")
    assert Path(cli.trainer.log_dir).name == "version_0"


def test_remove_failed_start_keeps_folders_with_results(tmp_path):
    from hypermem.train.hierarchy_cli import _watch, remove_failed_start

    (tmp_path / "run" / "version_0").mkdir(parents=True)
    watch = _watch(tmp_path, "run")
    for v, files in ((1, ["config.yaml", "events.out.tfevents.1.x"]), (2, ["config.yaml", "checkpoints/last.ckpt"])):
        for f in files:
            (tmp_path / "run" / f"version_{v}" / f).parent.mkdir(parents=True, exist_ok=True)
            (tmp_path / "run" / f"version_{v}" / f).write_text("x")
    assert remove_failed_start(watch) == [tmp_path / "run" / "version_1"]
    assert sorted(p.name for p in (tmp_path / "run").iterdir()) == ["version_0", "version_2"]


def test_messages_name_the_option(walk, capsys):
    from hypermem.train.hierarchy_module import HierarchyModule

    with pytest.raises(ValueError, match="--model.dim"):
        HierarchyModule(dim=0)
    with pytest.raises(SystemExit):
        train(walk, "--ckpt_path=best")
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--ckpt_path=best: fit resumes from --ckpt_path=last" in err[0]


def test_a_resumed_writer_keeps_the_earlier_projector_entries(tmp_path):
    import torch
    from torch.utils.tensorboard import SummaryWriter

    from hypermem.train.hierarchy_logging import add_projector_embedding

    meta = [["a", ""], ["b", ""]]
    first = SummaryWriter(str(tmp_path))
    add_projector_embedding(first, torch.zeros(2, 2), meta, 309)
    first.close()
    resumed = SummaryWriter(str(tmp_path))  # a resume opens a new writer on the same folder
    add_projector_embedding(resumed, torch.ones(2, 2), meta, 412)
    add_projector_embedding(resumed, torch.ones(2, 2), meta, 412)  # the same step again: not repeated
    resumed.close()
    text = (tmp_path / "projector_config.pbtxt").read_text()
    assert text.count("tensor_path") == 2
    assert "00309/hierarchy/tensors.tsv" in text and "00412/hierarchy/tensors.tsv" in text
