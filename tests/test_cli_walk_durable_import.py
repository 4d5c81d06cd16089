"""`hypermem import ... --durable` writes the store `hypermem mcp --store` serves: an export of an
agent's store imported back is served again, and the server's refusal of a snapshot names that
command (a walker met `export agent.db ex.json && import ex.json copy.db && mcp --store copy.db`
failing with a Python one-liner as the only way out)."""

from __future__ import annotations

import shlex
from datetime import datetime, timezone

import pytest
import torch
from test_cli_walk_outputs import run

from hypermem import HashingEmbedder, Memory
from hypermem.embed import StandIn
from hypermem.store.backends.opening import is_durable_file, is_snapshot_file

MINILM = {"type": "SentenceTransformerEmbedder", "dim": 384, "model": "sentence-transformers/all-MiniLM-L6-v2"}


@pytest.fixture
def agent(tmp_path):
    """agent.db: a durable hashing store, pets with Rex under it (one memory expires)."""
    path = tmp_path / "agent.db"
    with Memory.open(path, embedder=HashingEmbedder(dim=64)) as mem:
        mem.add("pets", id="pets", meta={"kind": "topic"})
        mem.add("Rex, a dog", id="rex", parent="pets", valid_until=datetime(2030, 1, 1, tzinfo=timezone.utc))
    return path


def test_export_then_import_durable_is_served_again(capsys, agent, tmp_path):
    ex, copy = tmp_path / "ex.json", tmp_path / "copy.db"
    assert run(capsys, "export", agent, ex)[0] == 0
    code, out, err = run(capsys, "import", ex, copy, "--durable")
    assert code == 0, err
    assert "durable store" in out and f"hypermem mcp --store {copy}" in out
    assert is_durable_file(copy) and not [p for p in tmp_path.iterdir() if p.name.startswith((".copy", "copy.db-"))]
    with Memory.open(copy) as mem:   # writable, the hashing embedder rebuilt from the file
        assert mem.ids == ["pets", "rex"] and mem.parent("rex") == "pets"
        assert mem.get("pets").meta == {"kind": "topic"} and mem.get("rex").valid_until is not None
        assert mem.search("Rex dog", k=1)[0].id == "rex"
        mem.add("Mimi, a cat", parent="pets")
    pytest.importorskip("mcp")
    from hypermem.integrations.mcp_server import open_store

    with open_store(str(copy)) as mem:
        assert len(mem) == 3


def test_a_snapshot_file_imports_as_a_durable_store_and_the_server_says_how(capsys, tmp_path):
    snap, new = tmp_path / "my snap.db", tmp_path / "my snap-durable.db"
    mem = Memory(embedder=StandIn(MINILM))
    mem.add_many([{"text": "tea", "id": "tea", "embedding": torch.ones(384, dtype=torch.float64)}])
    mem.save(snap)
    assert is_snapshot_file(snap)
    pytest.importorskip("mcp")
    from hypermem.integrations.mcp_server import open_store
    from hypermem.store.backends.durable import StorageError

    with pytest.raises(StorageError) as err:
        open_store(str(snap))
    command = f"hypermem import {shlex.quote(str(snap))} {shlex.quote(str(new))} --durable"
    assert command in str(err.value)
    code, _, err_text = run(capsys, *shlex.split(command)[1:])   # the command it gives, run as given
    assert code == 0, err_text
    with Memory.open(new, read_only=True, embedder=StandIn()) as copy:
        assert copy.ids == ["tea"] and copy.embedder.spec["type"] == MINILM["type"]


def test_an_existing_durable_store_is_never_replaced(capsys, agent, tmp_path):
    ex = tmp_path / "ex.json"
    run(capsys, "export", agent, ex)
    code, _, err = run(capsys, "import", ex, agent, "--durable", "--force")
    assert code == 1 and "is a durable store" in err
    with Memory.open(agent, read_only=True) as mem:
        assert len(mem) == 2
    other = tmp_path / "notes.txt"
    other.write_text("x")
    assert run(capsys, "import", ex, other, "--durable")[0] == 1           # exists: needs --force
    code, _, err = run(capsys, "import", ex, tmp_path / "copy.json", "--durable")
    assert code == 1 and "json" in err.lower()
