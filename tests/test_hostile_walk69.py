"""Walk 69, hostile inputs: a config file cannot grant a checkpoint trust (nothing unpickles from
it), a --ckpt_path torch.load(weights_only=True) cannot read is refused in one line, encoder folders
refuse pipes and huge files and compare config.json's sizes with the weights before building,
edge files are read bounded (a .gz inflating to one huge line, a deep chain's closure), JSON
numbers too long to read and raw U+2028 lines, a malformed encoder record, header rows."""

from __future__ import annotations

import gzip
import json
import os
import shutil
import threading
import tracemalloc
from pathlib import Path

import pytest
import torch
from train_helpers import run_train, train_tiny

from hypermem import Memory
from hypermem.cli import main
from hypermem.data import dag
from hypermem.data.hierarchy_files import HierarchyFileError, read_checked_edges, read_edges, read_hierarchy
from hypermem.store import MemoryFileError

torch.set_num_threads(1)


class _Touch:
    """Unpickling it touches ``path`` (a harmless stand-in for a payload)."""

    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return (Path.touch, (Path(self.path),))


def _crafted(tmp: Path) -> tuple[Path, Path]:
    marker, ckpt = tmp / "MARKER", tmp / "evil.ckpt"
    torch.save({"state_dict": {}, "epoch": 0, "global_step": 0, "x": _Touch(marker)}, ckpt)
    return ckpt, marker


def _one_error(capsys, run) -> str:
    with pytest.raises(SystemExit) as exc:
        run()
    err = capsys.readouterr().err.strip().splitlines()
    assert exc.value.code == 2 and len(err) == 1, err
    return err[0]


# -- 1, 8: trust is said on the command line; an unreadable --ckpt_path is one line ----------------

def test_a_config_file_cannot_set_weights_only_false(tmp_path, capsys):
    pytest.importorskip("lightning")
    ckpt, marker = _crafted(tmp_path)
    (tmp_path / "evil.yaml").write_text(f"weights_only: false\nckpt_path: {ckpt}\n")
    line = _one_error(capsys, lambda: train_tiny(tmp_path, "--config", "evil.yaml"))
    assert "weights_only: false in evil.yaml is refused" in line and "--weights_only=false" in line
    assert not marker.exists()


def test_a_config_file_cannot_trust_init_from(tmp_path, capsys):
    pytest.importorskip("lightning")
    ckpt, marker = _crafted(tmp_path)
    (tmp_path / "evil.yaml").write_text(f"model: {{kind: cones, init_from: {ckpt}, init_from_trusted: true}}\n")
    line = _one_error(capsys, lambda: train_tiny(tmp_path, "--config", "evil.yaml"))
    assert "model.init_from_trusted: true in evil.yaml is refused" in line
    assert "--model.init_from_trusted=true" in line and not marker.exists()


def test_init_from_trusted_on_the_command_line_still_loads_ones_own_file(tmp_path):
    pytest.importorskip("lightning")
    first = train_tiny(tmp_path, "--trainer.max_epochs=1", "--trainer.logger.init_args.name=mine")
    own = Path(first.trainer.checkpoint_callback.dirpath) / "last.ckpt"
    cli = run_train(tmp_path, ["fit", "--config", "tiny.yaml", "--model.kind=cones", "--trainer.max_epochs=1",
                               "--data.negatives_kind=both_ends", f"--model.init_from={own}",
                               "--model.init_from_trusted=true"])
    assert cli.model.hparams.init_from_trusted is True and cli.trainer.current_epoch == 1


def test_a_pickle_checkpoint_is_refused_in_one_line_before_lightning(tmp_path, capsys):
    pytest.importorskip("lightning")
    ckpt, marker = _crafted(tmp_path)
    line = _one_error(capsys, lambda: train_tiny(tmp_path, f"--ckpt_path={ckpt}"))
    assert "holds objects that torch.load(weights_only=True) refuses (Unsupported global: GLOBAL" in line
    assert "pass --weights_only=false on the command line" in line and not marker.exists()
    plain = tmp_path / "plain.ckpt"
    torch.save({"state_dict": {}, "epoch": 0, "global_step": 0}, plain)
    line = _one_error(capsys, lambda: train_tiny(tmp_path, f"--ckpt_path={plain}"))
    assert "is not a Lightning checkpoint (has no 'pytorch-lightning_version'" in line


# -- 2, 3: encoder folders ----------------------------------------------------------------------------

@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    pytest.importorskip("sentence_transformers")
    from encoder_helpers import tiny_model_folder

    from hypermem.embed.hierarchy_encoder import HierarchyEncoder
    from hypermem.embed.reranker import PlacementReranker

    root = tmp_path_factory.mktemp("saved")
    tiny = tiny_model_folder(root)
    HierarchyEncoder.from_pretrained(str(tiny), "poincare", max_length=16).save(root / "ball")
    PlacementReranker(str(tiny), max_length=32).save(root / "rr")
    return {"st": tiny, "ball": root / "ball", "rr": root / "rr"}


def _loaders():
    from hypermem.embed.choice import embedder_named
    from hypermem.embed.hierarchy_encoder import HierarchyEncoder
    from hypermem.embed.reranker import PlacementReranker

    return {"ball": HierarchyEncoder.load, "rr": PlacementReranker.load, "st": lambda p: embedder_named(str(p))}


def _fifo_feeder(fifo: Path, stop: threading.Event) -> threading.Thread:
    """Opens ``fifo`` for writing whenever a reader waits, then closes it (the reader gets an empty
    file), so a load that opens the pipe ends instead of hanging."""
    def feed():
        while not stop.wait(0.05):
            try:
                os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
            except OSError:
                pass
    thread = threading.Thread(target=feed, daemon=True)
    thread.start()
    return thread


@pytest.mark.parametrize("kind", ["ball", "rr", "st"])
def test_a_pipe_in_a_folder_is_refused_before_anything_reads_it(saved, tmp_path, kind):
    from hypermem.embed.folder_files import EncoderFolderError

    folder = shutil.copytree(saved[kind], tmp_path / "received")
    (folder / "README.md").unlink(missing_ok=True)
    os.mkfifo(folder / "README.md")
    stop = threading.Event()
    _fifo_feeder(folder / "README.md", stop)
    try:
        with pytest.raises(EncoderFolderError, match=r"README.md: not a regular file"):
            _loaders()[kind](folder)
    finally:
        stop.set()


@pytest.mark.parametrize("kind", ["ball", "rr", "st"])
def test_a_huge_file_in_a_folder_is_refused_by_its_size(saved, tmp_path, kind, monkeypatch):
    from hypermem.embed import folder_files

    monkeypatch.setattr(folder_files, "MAX_FILE_BYTES", 1 << 20, raising=False)   # tokenizer.json: 0.7 MB
    folder = shutil.copytree(saved[kind], tmp_path / "received")
    with open(folder / "README.md", "wb") as fh:
        fh.truncate(2 << 20)   # sparse: no disk
    with pytest.raises(folder_files.EncoderFolderError, match=r"README.md: 2097152 bytes, larger than 1048576"):
        _loaders()[kind](folder)


@pytest.mark.parametrize("field,value,tensor", [("vocab_size", 1 << 20, "embeddings.word_embeddings.weight"),
                                                ("intermediate_size", 4096, "intermediate.dense.weight"),
                                                ("max_position_embeddings", 512, "embeddings.position_embeddings"),
                                                ("type_vocab_size", 100, "token_type_embeddings"),
                                                ("hidden_size", 64, "embeddings.word_embeddings.weight")])
@pytest.mark.parametrize("kind", ["ball", "rr"])
def test_config_sizes_are_compared_with_the_weights_before_building(saved, tmp_path, kind, field, value, tensor):
    from hypermem.embed.folder_files import EncoderFolderError

    folder = shutil.copytree(saved[kind], tmp_path / "received")
    cfg = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**cfg, field: value}))
    with pytest.raises(EncoderFolderError, match=rf"config.json: field '{field}' is {value} but model.safetensors's "
                                                 rf"'[\w.]*{tensor}"):
        _loaders()[kind](folder)


# -- 4, 5, 10: edges files ----------------------------------------------------------------------------

def test_a_gz_line_is_read_bounded(tmp_path):
    path = tmp_path / "bomb.tsv.gz"
    with gzip.open(path, "wb") as fh:
        fh.write(b"a" * (8 << 20))   # 8 MiB of one line from ~8 kB of gzip
    tracemalloc.start()
    try:
        with pytest.raises(HierarchyFileError, match=r"bomb.tsv.gz:1: line longer than 65536 characters"):
            read_hierarchy(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 2 << 20, peak


def test_a_deep_chains_closure_is_refused_past_the_limit(tmp_path, monkeypatch):
    monkeypatch.setattr(dag, "MAX_CLOSURE", 1000, raising=False)
    path = tmp_path / "chain.tsv"
    path.write_text("".join(f"n{i}\tn{i + 1}\n" for i in range(100)))   # 100 * 101 / 2 = 5050 pairs
    with pytest.raises(HierarchyFileError, match=r"chain.tsv \(100 edges\): the hierarchy's transitive closure holds "
                                                 r"more than 1,000 \(node, ancestor\) pairs"):
        read_hierarchy(path)
    path.write_text("".join(f"n{i}\tn{i + 1}\n" for i in range(40)))    # 820 pairs
    assert sum(map(len, read_checked_edges(path)[1].values())) == 820


@pytest.mark.parametrize("header", ["hyponym\thypernym", "Child\tParent", "ID\tparent", "HYPONYM\tHYPERNYM"])
def test_common_header_rows_are_skipped(tmp_path, header):
    path = tmp_path / "e.tsv"
    path.write_text(f"{header}\ndog\tmammal\ncat\tmammal\nmammal\tanimal\n")
    assert read_edges(path) == [("dog", "mammal"), ("cat", "mammal"), ("mammal", "animal")]


def test_an_unknown_header_row_warns(tmp_path):
    path = tmp_path / "e.tsv"
    path.write_text("Kind\tBroader\ndog\tmammal\nmammal\tanimal\n")
    with pytest.warns(UserWarning, match=r"e.tsv:1: 'Kind'<TAB>'Broader' is read as an edge, but neither name"):
        assert read_edges(path)[0] == ("Kind", "Broader")


# -- 6, 7: JSON numbers too long to read, raw line separators -----------------------------------------

def test_a_5000_digit_number_names_file_and_line(tmp_path, capsys):
    edges = tmp_path / "edges.jsonl"
    edges.write_text('{"child": "b", "parent": "a"}\n{"child": ' + "9" * 5000 + ', "parent": "a"}\n')
    with pytest.raises(HierarchyFileError, match=r"edges.jsonl:2: not a readable JSON line \(Exceeds the limit"):
        read_hierarchy(edges)
    items = tmp_path / "items.jsonl"
    items.write_text('{"text": "a"}\n{"text": "b", "meta": {"n": ' + "9" * 5000 + "}}\n")
    assert main(["import", str(items), str(tmp_path / "o.db")]) == 1
    err = capsys.readouterr().err
    assert "items.jsonl: line 2: Exceeds the limit (4300 digits)" in err and "Traceback" not in err
    assert not (tmp_path / "o.db").exists()


def test_raw_line_separators_inside_json_strings_import(tmp_path, capsys):
    items = tmp_path / "items.jsonl"
    texts = ["first\u2028second", "a\u2029b", "c\x85d", "plain"]
    items.write_bytes("\r\n".join(json.dumps({"text": t}, ensure_ascii=False) for t in texts).encode() + b"\n")
    assert main(["import", str(items), str(tmp_path / "o.db")]) == 0
    assert sorted(r["text"] for r in Memory.load(tmp_path / "o.db").table()) == sorted(texts)


# -- 9: a malformed encoder record -------------------------------------------------------------------

@pytest.mark.parametrize("record,field", [({"checksum": 5}, "encoder.checksum"), ([1], "encoder"),
                                          ({"checksum": "sha256v2:00", "folder": 3}, "encoder.folder")])
def test_a_malformed_encoder_record_is_a_memory_file_error(record, field):
    mem = Memory()
    mem.add("a")
    doc = json.loads(mem.to_json())
    doc["config"]["encoder"] = record
    with pytest.raises(MemoryFileError, match=rf"config field '{field}'"):
        Memory.from_json(json.dumps(doc))

