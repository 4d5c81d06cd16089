"""A user's walk through ``hypermem train`` with files from Windows editors and mistakes in them:
byte-order marks, CRLF, spaces around names, and one-line errors naming the file and line."""

import gzip
import json
import signal

import pytest
from train_helpers import CONFIG, EDGES, run_train

pytest.importorskip("lightning")
from lightning.pytorch.callbacks import ModelCheckpoint  # noqa: E402

BOM = "\ufeff"


def tsv(edges, sep="\n") -> str:
    return "".join(f"{c}\t{p}{sep}" for c, p in edges)


@pytest.mark.parametrize("name", ["bom.tsv", "bomcrlf.tsv", "bom.tsv.gz", "bom.jsonl"])
def test_a_leading_bom_is_not_part_of_the_first_name(tmp_path, name):
    from hypermem.data.hierarchy_files import read_hierarchy
    from hypermem.train.hierarchy_data import load_tsv

    edges = [("Électronique", "Produits"), ("Cuisine", "Produits"), ("Four", "Électronique")]
    if name.endswith(".jsonl"):
        text = "\r\n".join(json.dumps({"child": c, "parent": p}) for c, p in edges)
    else:
        text = tsv(edges, "\r\n" if "crlf" in name else "\n")
    data = (BOM + text).encode()
    (tmp_path / name).write_bytes(gzip.compress(data) if name.endswith(".gz") else data)
    nodes = {"Électronique", "Produits", "Cuisine", "Four"}
    if not name.endswith(".jsonl"):
        closure, _, tree = load_tsv(tmp_path / name)
        assert {x for pair in closure for x in pair} == nodes
        assert ("Four", "Produits") in closure   # the subtree under the first name hangs on
    assert set(read_hierarchy(tmp_path / name).names) == nodes


def test_spaces_around_a_name_are_stripped_to_one_node(tmp_path):
    from hypermem.train.hierarchy_data import load_tsv

    (tmp_path / "spaces.tsv").write_text("dog \tanimal\n cat\t animal \nkitten\tcat\n")
    closure, _, _ = load_tsv(tmp_path / "spaces.tsv")
    assert {x for pair in closure for x in pair} == {"dog", "cat", "animal", "kitten"}
    assert ("kitten", "animal") in closure


@pytest.mark.parametrize(("text", "line", "why"), [
    ("b\ta\nlonely\nc\ta\n", 2, "every line needs two tab-separated names (neither blank), got 'lonely'"),
    ("b\ta\nc\t\n", 2, "every line needs two tab-separated names (neither blank), got 'c\\t': 'c' has a blank "
                        "parent, this looks like a root row (pandas writes a NaN parent as an empty cell); drop it, "
                        "e.g. df.dropna(subset=['parent']): a root needs no line"),
    (b"b\ta\nc\ta\ncaf\xe9\ta\n", 3, "not UTF-8 text (byte 0xe9 at column 4); save the file as UTF-8"),
    ("b\ta\nc\tc\n", 2, "'c' is its own parent (a self-loop)"),
    ("b\ta\nc\tb\na\tc\n", 3, "the hierarchy has a cycle (each node a child of the next): 'a' -> 'c' -> 'b' -> 'a'"),
])
def test_a_bad_dataset_is_one_error_line_with_the_file_and_line(tmp_path, capsys, text, line, why):
    (tmp_path / "bad.tsv").write_bytes(text if isinstance(text, bytes) else text.encode())
    (tmp_path / "tiny.yaml").write_text(CONFIG)
    capsys.readouterr()
    with pytest.raises(SystemExit) as stop:
        run_train(tmp_path, ["fit", "--config", "tiny.yaml", "--data.dataset=bad.tsv"])
    err = capsys.readouterr().err.strip().splitlines()
    assert stop.value.code == 2
    assert err == [f"error: data.dataset file {tmp_path / 'bad.tsv'}:{line}: {why}"]


def test_a_jsonl_error_names_its_line(tmp_path):
    from hypermem.data.hierarchy_files import HierarchyFileError, read_hierarchy

    (tmp_path / "e.jsonl").write_text(BOM + '{"child": "b", "parent": "a"}\n{"child": "c"\n')
    with pytest.raises(HierarchyFileError, match=rf"^edges file {tmp_path / 'e.jsonl'}:2: not valid JSON"):
        read_hierarchy(tmp_path / "e.jsonl")


def test_the_tiny_tree_still_trains(tmp_path):
    (tmp_path / "edges.tsv").write_text(BOM + tsv(EDGES, "\r\n"))
    (tmp_path / "tiny.yaml").write_text(CONFIG)
    cli = run_train(tmp_path, ["fit", "--config", "tiny.yaml", "--trainer.max_epochs=1"])
    assert sorted(cli.model.nodes) == list("abcdefg")


@pytest.mark.parametrize("overrides", [["--model.burn_in=2"], ["--data.burn_in=2", "--model.seed=7"],
                                       ["--seed_everything=5"]])
def test_the_printed_config_runs_again_as_the_run_it_prints(tmp_path, capsys, overrides):
    """A key both modules take (burn_in, seed; the seed also Lightning's) is printed with its one
    value in every place, so the printed YAML is accepted and gives the same settings."""
    import yaml

    (tmp_path / "edges.tsv").write_text(tsv(EDGES))
    (tmp_path / "tiny.yaml").write_text(CONFIG)
    argv = ["fit", "--config", "tiny.yaml", "--trainer.max_epochs=3", *overrides]
    with pytest.raises(SystemExit) as stop:
        run_train(tmp_path, [*argv, "--print_config"])
    assert stop.value.code in (0, None)
    printed = capsys.readouterr().out
    cfg = yaml.safe_load(printed)
    (tmp_path / "printed.yaml").write_text(printed)
    again = run_train(tmp_path, ["fit", "--config", "printed.yaml"])
    direct = run_train(tmp_path, argv)
    for cli in (again, direct):
        for key in ("burn_in", "seed"):
            assert cli.model.hparams[key] == cli.datamodule.hparams[key] == cfg["model"][key] == cfg["data"][key]
        assert cfg["seed_everything"] == cfg["model"]["seed"] == cli.config.fit.seed_everything
    assert again.config.fit.trainer.max_epochs == direct.config.fit.trainer.max_epochs == 3


class SigintAfterLastSave(ModelCheckpoint):
    """The run's ``last.ckpt`` checkpoint; after its save at the end of epoch ``at`` it sends the
    process a SIGINT, as a Ctrl-C landing during the epoch-end checkpoint write does."""

    def __init__(self, at: int = 1, **kwargs):
        super().__init__(**kwargs)
        self.at = at

    def on_train_epoch_end(self, trainer, pl_module):
        super().on_train_epoch_end(trainer, pl_module)
        if trainer.current_epoch == self.at:
            signal.raise_signal(signal.SIGINT)


def test_a_ctrl_c_at_an_epochs_end_keeps_every_epochs_loss_point(tmp_path, capsys):
    """Interrupted right after the epoch-end ``last.ckpt`` (epoch 2 of 4), then resumed: one
    ``train/loss_epoch`` point per epoch (the stop waits for Lightning to log the epoch)."""
    from train_helpers import scalars

    (tmp_path / "edges.tsv").write_text(tsv(EDGES))
    last = ("class_path: lightning.pytorch.callbacks.ModelCheckpoint\n"
            "      init_args: {filename: last, every_n_epochs: 1, save_on_train_epoch_end: true, "
            "enable_version_counter: false}")
    assert last in CONFIG
    (tmp_path / "tiny.yaml").write_text(CONFIG.replace(last, last.replace(
        "lightning.pytorch.callbacks.ModelCheckpoint", f"{__name__}.SigintAfterLastSave")))
    with pytest.raises(SystemExit) as stop:
        run_train(tmp_path, ["fit", "--config", "tiny.yaml", "--trainer.max_epochs=4"])
    assert stop.value.code == 130
    out = capsys.readouterr()
    assert "Ctrl-C: stopping once this epoch's end has saved its checkpoint" in out.err
    logdir = tmp_path / "runs" / "tiny" / "version_0"
    first = [s for s, _ in scalars(logdir, "train/loss_epoch")]
    assert len(first) == 2, first
    (tmp_path / "tiny.yaml").write_text(CONFIG)
    cli = run_train(tmp_path, ["fit", "--config", "tiny.yaml", "--trainer.max_epochs=4", "--ckpt_path=last"])
    assert cli.trainer.current_epoch == 4
    steps = [s for s, _ in scalars(logdir, "train/loss_epoch")]
    assert len(steps) == len(set(steps)) == 4 and steps[:2] == first, steps


def test_a_fit_resumed_from_a_file_of_the_run_goes_on_in_its_version(tmp_path, capsys):
    """``--ckpt_path=runs/NAME/version_0/checkpoints/best-...ckpt`` continues version_0, as
    ``last`` does, without Lightning's ``dirpath has changed`` warning."""
    (tmp_path / "edges.tsv").write_text(tsv(EDGES))
    (tmp_path / "tiny.yaml").write_text(CONFIG)
    base = ["fit", "--config", "tiny.yaml", "--model.schedule_epochs=4"]
    run_train(tmp_path, [*base, "--trainer.max_epochs=2"])
    best = next((tmp_path / "runs/tiny/version_0/checkpoints").glob("best-*.ckpt"))
    capsys.readouterr()
    cli = run_train(tmp_path, [*base, "--trainer.max_epochs=3", f"--ckpt_path={best.relative_to(tmp_path)}"])
    assert cli.trainer.log_dir == "runs/tiny/version_0"
    out = capsys.readouterr()
    assert "dirpath has changed" not in out.out + out.err


def test_the_epoch_lines_mark_the_burn_in_and_its_end():
    """The loss jumps where the burn-in's lr x0.1 ends: the epoch lines say so (the demo's log)."""
    import types

    from hypermem.train.hierarchy_callbacks import _burn_note

    module = types.SimpleNamespace(hparams={"burn_in": 2, "burn_in_lr_factor": 0.1})
    assert [_burn_note(module, e) for e in (1, 2, 3, 4)] == [
        "  (burn-in: lr x0.1)", "  (burn-in: lr x0.1)", "  (burn-in over: the full lr from here)", ""]
    assert _burn_note(types.SimpleNamespace(hparams={}), 1) == ""   # an encoder: no burn-in
