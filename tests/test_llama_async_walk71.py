"""LlamaIndex and upsert walk 71 (an asyncio service): ``HypermemVectorStore``'s async methods
and ``HypermemEmbedding``'s async batches run off the event loop (the loop runs other tasks
meanwhile; one embedder call per batch); re-adding a node with an embedding replaces it in place
(never missing, its children never parentless); concurrent upserts of the same ids apply one call
after the other, never a mix."""

from __future__ import annotations

import asyncio
import threading

import pytest

pytest.importorskip("llama_index.core", reason="the llama-index extra is not installed (pip install '.[llama-index]')")

from llama_index.core.schema import NodeRelationship, RelatedNodeInfo, TextNode  # noqa: E402
from llama_index.core.vector_stores.types import VectorStoreQuery  # noqa: E402

from hypermem import HashingEmbedder, Memory  # noqa: E402
from hypermem.integrations._upserts import upsert  # noqa: E402
from hypermem.integrations.llama_index import HypermemEmbedding, HypermemVectorStore  # noqa: E402

WAIT = 3.0   # seconds a gated call waits for the loop: a bound on a failing run, never a measurement


class Gated:
    """A hypermem embedder whose ``embed`` first waits for ``gate`` (which a coroutine on the
    caller's loop sets): it goes through only when the loop runs while the embedder does.
    Records whether each call went through and the sizes of the batches."""

    def __init__(self):
        self.inner, self.gate, self.passed, self.sizes = HashingEmbedder(dim=64), threading.Event(), [], []

    @property
    def dim(self) -> int:
        return self.inner.dim

    def embed(self, texts):
        self.passed.append(self.gate.wait(WAIT))
        self.sizes.append(len(texts))
        return self.inner.embed(texts)


def _while_loop_runs(gate: threading.Event, coro):
    """Run ``coro`` beside a ticker coroutine that sets ``gate`` once the loop gets to run it."""
    async def ticker():
        await asyncio.sleep(0)
        gate.set()

    async def main():
        gate.clear()
        tick = asyncio.create_task(ticker())
        try:
            return await coro
        finally:
            await tick
    return asyncio.run(main())


def _gate_method(monkeypatch, obj, name: str, gate: threading.Event, passed: list) -> None:
    real = getattr(obj, name)

    def gated(*a, **k):
        passed.append(gate.wait(WAIT))
        return real(*a, **k)
    monkeypatch.setattr(obj, name, gated)


def _nodes(n: int, prefix: str = "n") -> list[TextNode]:
    return [TextNode(text=f"note {i} about topic {i % 7}", id_=f"{prefix}{i}", metadata={"k": i % 3})
            for i in range(n)]


def test_async_add_and_aquery_embed_off_the_loop():
    emb = Gated()
    vs = HypermemVectorStore(Memory(embedder=emb))
    ids = _while_loop_runs(emb.gate, vs.async_add(_nodes(20)))
    assert ids == [f"n{i}" for i in range(20)] and len(vs.memory) == 20
    assert emb.passed == [True]   # the embedder ran while the loop ran the ticker
    emb.passed.clear()
    q = VectorStoreQuery(query_str="topic 3", similarity_top_k=4)
    got = _while_loop_runs(emb.gate, vs.aquery(q))
    assert emb.passed == [True]
    emb.gate.set()
    assert got.ids == vs.query(q).ids and len(got.ids) == 4


@pytest.mark.parametrize("call", ["aget_nodes", "adelete", "adelete_nodes", "aclear"])
def test_reads_and_deletes_run_off_the_loop(monkeypatch, call):
    vs = HypermemVectorStore(Memory(embedder=HashingEmbedder(dim=64)))
    nodes = _nodes(6)
    for n in nodes:
        n.relationships[NodeRelationship.SOURCE] = RelatedNodeInfo(node_id="doc1" if int(n.node_id[1:]) < 3 else "d2")
    vs.add(nodes)
    gate, passed = threading.Event(), []
    _gate_method(monkeypatch, vs.memory, "remove_many" if call in ("adelete", "aclear") else "select", gate, passed)
    if call == "aget_nodes":
        got = _while_loop_runs(gate, vs.aget_nodes(["n1", "n4"]))
        assert [n.node_id for n in got] == ["n1", "n4"]
    elif call == "adelete":
        _while_loop_runs(gate, vs.adelete("doc1"))
        assert sorted(r.id for r in vs.memory) == ["n3", "n4", "n5"]
    elif call == "adelete_nodes":
        vs.memory.link("n2", "n1")
        _while_loop_runs(gate, vs.adelete_nodes(["n1"], cascade=True))   # delete_kwargs reach delete_nodes
        assert "n1" not in vs.memory and "n2" not in vs.memory
    else:
        _while_loop_runs(gate, vs.aclear())
        assert len(vs.memory) == 0
    assert passed and all(passed)


def test_embedding_async_batch_is_batched_and_off_the_loop():
    emb = Gated()
    he = HypermemEmbedding(emb, embed_batch_size=10)
    texts = [f"text number {i}" for i in range(25)]
    emb.gate.set()
    sync = he.get_text_embedding_batch(texts)
    sync_sizes = list(emb.sizes)
    emb.sizes.clear()
    emb.passed.clear()
    got = _while_loop_runs(emb.gate, he.aget_text_embedding_batch(texts))
    assert sorted(emb.sizes) == sorted(sync_sizes) == [5, 10, 10]   # one embedder call per batch
    assert emb.passed and all(emb.passed)
    assert got == sync
    emb.passed.clear()
    q = _while_loop_runs(emb.gate, he.aget_query_embedding("a query"))
    assert emb.passed == [True] and q == he.get_query_embedding("a query")


def _watch(monkeypatch, mem, seen: list) -> None:
    """After every write call of ``mem``: whether P is stored and c0 is still P's child."""
    for name in ("update", "link", "remove", "remove_many", "add_many", "add"):
        real = getattr(mem, name)

        def after(*a, _real=real, **k):
            out = _real(*a, **k)
            seen.append(("P" in mem, mem.get("c0").parent_id if "c0" in mem else None))
            return out
        monkeypatch.setattr(mem, name, after)


@pytest.mark.parametrize("durable", [False, True])
def test_readd_with_embedding_replaces_in_place(monkeypatch, tmp_path, durable):
    mem = Memory.open(str(tmp_path / "li.db"), embedder=HashingEmbedder(dim=32)) if durable \
        else Memory(embedder=HashingEmbedder(dim=32))
    vs = HypermemVectorStore(mem)
    vec = [float(i % 5 + 1) for i in range(32)]
    vs.add([TextNode(text="parent doc", id_="P", embedding=vec)])
    vs.add([TextNode(text=f"child {i}", id_=f"c{i}", embedding=vec[::-1],
                     relationships={NodeRelationship.PARENT: RelatedNodeInfo(node_id="P")}) for i in range(2)])
    t0 = mem.get("P").t
    seen: list = []
    _watch(monkeypatch, mem, seen)
    new = [float((i * 7) % 11 + 1) for i in range(32)]
    vs.add([TextNode(text="parent doc, revised", id_="P", embedding=new)])
    assert seen and all(s == (True, "P") for s in seen)   # never missing, the child never parentless
    rec = mem.get("P")
    assert rec.text == "parent doc, revised" and rec.t == t0 and sorted(mem.children("P")) == ["c0", "c1"]
    assert vs.query(VectorStoreQuery(query_embedding=new, similarity_top_k=1)).ids == ["P"]   # the new vector
    assert [n.get_content() for n in vs.get_nodes(["P"])] == ["parent doc, revised"]


def test_readd_moves_to_a_new_parent(monkeypatch):
    vs = HypermemVectorStore(Memory(embedder=HashingEmbedder(dim=32)))
    vec = [float(i % 3 + 1) for i in range(32)]
    vs.add([TextNode(text="root a", id_="A", embedding=vec), TextNode(text="root b", id_="B", embedding=vec[::-1])])
    vs.add([TextNode(text="leaf", id_="L", embedding=vec,
                     relationships={NodeRelationship.PARENT: RelatedNodeInfo(node_id="A")})])
    vs.add([TextNode(text="leaf 2", id_="L", embedding=vec[::-1],
                     relationships={NodeRelationship.PARENT: RelatedNodeInfo(node_id="B")})])
    assert vs.memory.get("L").parent_id == "B" and vs.memory.get("L").text == "leaf 2"
    vs.add([TextNode(text="leaf 3", id_="L", embedding=vec)])
    assert vs.memory.get("L").parent_id is None


class Paused(HashingEmbedder):
    """Embeds as a HashingEmbedder; embedding ``pause_on`` signals ``reached`` and waits (at most
    WAIT) for ``resume``."""

    def __init__(self, pause_on: str):
        super().__init__(dim=32)
        self.pause_on, self.reached, self.resume = pause_on, threading.Event(), threading.Event()

    def embed(self, texts):
        if self.pause_on in texts:
            self.reached.set()
            self.resume.wait(WAIT)
        return super().embed(texts)


def test_concurrent_upserts_of_the_same_ids_never_mix():
    emb = Paused("B from call 1")
    mem = Memory(embedder=emb)
    mem.add_many([{"id": "A", "text": "A at first"}, {"id": "B", "text": "B at first"}])
    first = threading.Thread(target=upsert, args=(mem, [{"id": "A", "text": "A from call 1"},
                                                       {"id": "B", "text": "B from call 1"}]))
    first.start()
    assert emb.reached.wait(WAIT)   # call 1 replaced A and embeds B's text
    second = threading.Thread(target=lambda: (upsert(mem, [{"id": "A", "text": "A from call 2"},
                                                           {"id": "B", "text": "B from call 2"}]), emb.resume.set()))
    second.start()
    second.join(WAIT / 3)
    emb.resume.set()
    first.join()
    second.join()
    a, b = mem.get("A").text, mem.get("B").text
    assert a[-6:] == b[-6:], (a, b)   # both from one call
