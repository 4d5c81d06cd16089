"""A user's own files on the walk from a hierarchy to a store: ``out=`` refused before any
training, ``--embedder`` given a run folder or a checkpoint answered with the loader's message,
``Memory.save`` refusing a file it did not write, ``read_hierarchy`` given a folder."""

from __future__ import annotations

import sqlite3

import pytest
import torch
from encoder_helpers import EDGES, NAMES

from hypermem import Memory
from hypermem.cli import main


def _trained(*args, **kwargs):
    raise AssertionError("the training started")


@pytest.fixture
def user_folder(tmp_path):
    exp = tmp_path / "exp"
    exp.mkdir()
    (exp / "config.yaml").write_text("lr: 0.1\n")
    (exp / "pairs.jsonl").write_text('{"a": 1}\n')
    return exp


@pytest.mark.parametrize("target", ["folder", "file"])
def test_fit_hierarchy_encoder_refuses_out_before_training(monkeypatch, tmp_path, user_folder, target):
    import hypermem.hierarchy.encoder_training as training

    monkeypatch.setattr(training.HierarchyEncoder, "from_pretrained", _trained)
    out = user_folder if target == "folder" else user_folder / "pairs.jsonl"
    with pytest.raises(FileExistsError, match="cannot save the hypermem encoder to .*(other files|a file)"):
        training.fit_hierarchy_encoder(EDGES, NAMES, max_minutes=0.3, out=str(out), negatives=2)
    assert sorted(p.name for p in user_folder.iterdir()) == ["config.yaml", "pairs.jsonl"]


@pytest.mark.parametrize("target", ["folder", "file"])
def test_fit_placement_reranker_refuses_out_before_training(monkeypatch, user_folder, target):
    import hypermem.hierarchy.reranker_training as training

    monkeypatch.setattr(training, "PlacementReranker", _trained)
    gen = torch.Generator().manual_seed(0)
    vectors = {e: torch.randn(8, generator=gen) for e in NAMES}
    out = user_folder if target == "folder" else user_folder / "config.yaml"
    with pytest.raises(FileExistsError, match="cannot save the placement reranker to .*(other files|a file)"):
        training.fit_placement_reranker(EDGES, NAMES, vectors, max_minutes=0.2, out=str(out))
    assert (user_folder / "config.yaml").read_text() == "lr: 0.1\n"


@pytest.fixture
def store(tmp_path):
    (mem := Memory()).add("network problem", id="n")
    mem.save(tmp_path / "tree.db")
    return tmp_path / "tree.db"


def _cli(capsys, *argv):
    """The exit status and standard error of the command line (a refusal returns, it does not exit)."""
    return main([str(a) for a in argv]), capsys.readouterr().err


def _search(capsys, store, embedder):
    return _cli(capsys, "search", store, "vpn", "--embedder", embedder)


def test_cli_embedder_run_folder_gets_the_loaders_message(capsys, tmp_path, store):
    runs = tmp_path / "runs" / "my"
    ckpt = runs / "version_0" / "checkpoints" / "last.ckpt"
    ckpt.parent.mkdir(parents=True)
    ckpt.write_bytes(b"\x80\x04not really a pickle")
    (runs / "version_1" / "encoder").mkdir(parents=True)
    (runs / "version_1" / "encoder" / "hypermem_encoder.json").write_text("{}")
    code, err = _search(capsys, store, runs)
    assert code != 0
    assert "a folder of training runs" in err and str(runs / "version_1" / "encoder") in err
    assert "remove the file" not in err
    assert ckpt.is_file()
    code, err = _search(capsys, store, ckpt)
    assert code != 0
    assert "a Lightning checkpoint, not an encoder folder" in err and "unknown embedder" not in err


def test_save_refuses_a_file_that_is_not_a_memory_file(tmp_path):
    mem = Memory()
    mem.add("network problem", id="n")
    edges = tmp_path / "edges.tsv"
    edges.write_text("dog\tanimal\n")
    with pytest.raises(FileExistsError, match=r"edges\.tsv.*not a hypermem memory file"):
        mem.save(edges)
    assert edges.read_text() == "dog\tanimal\n"
    with pytest.raises(IsADirectoryError, match="is a folder"):
        mem.save(tmp_path)
    # its own snapshot and an empty file are replaced, as before
    db = tmp_path / "m.db"
    mem.save(db)
    mem.add("vpn down", id="v")
    mem.save(db)
    assert len(Memory.load(db)) == 2
    empty = tmp_path / "empty.db"
    empty.write_bytes(b"")
    mem.save(empty)
    assert len(Memory.load(empty)) == 2
    other = tmp_path / "other.db"
    with sqlite3.connect(other) as con:
        con.execute("CREATE TABLE t (x)")
    with pytest.raises(FileExistsError, match="another SQLite database"):
        mem.save(other)


def test_cli_import_force_still_replaces_a_non_memory_file(capsys, tmp_path):
    src = tmp_path / "items.jsonl"
    src.write_text('{"text": "network problem"}\n')
    out = tmp_path / "notes.db"
    out.write_text("user notes\n")
    code, err = _cli(capsys, "import", src, out)
    assert code != 0 and "--force" in err
    assert out.read_text() == "user notes\n"
    code, err = _cli(capsys, "import", src, out, "--force")
    assert code == 0, err
    assert len(Memory.load(out)) == 1


def test_read_hierarchy_of_a_folder_says_so(tmp_path):
    from hypermem.data.hierarchy_files import read_hierarchy

    with pytest.raises(IsADirectoryError, match="is a folder, not a file"):
        read_hierarchy(str(tmp_path), "n.tsv")
