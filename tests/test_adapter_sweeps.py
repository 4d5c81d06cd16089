"""The adapter calls that used to read every record in Python -- LlamaIndex ``delete(ref_doc_id)``,
LangGraph ``sweep_ttl`` and the pruning of empty namespaces after a delete -- answer from the
store's columns (:meth:`Memory.select`) exactly as the record-by-record code they replace, on random
stores, and read no record for it."""

from __future__ import annotations

import random
import types
from datetime import timedelta

import pytest
from test_record_filters import EDGES, SPACES, _langgraph_pair, _store

from hypermem import HashingEmbedder, Memory
from hypermem.integrations import _common as C

REFS = ["d1", "d2", "None", "", "D1", True, False, 1, 0, 1.0, None, ["d1"], {"a": 1}]


# ---------------------------------------------------------------------------- LlamaIndex
def _old_delete(self, ref_doc_id, **delete_kwargs):
    """HypermemVectorStore.delete before Memory.select (the reference): Python ``==`` per record."""
    self._memory.refresh()
    ids = [r.id for r in self._memory if r.meta.get("ref_doc_id") == ref_doc_id]
    C.remove(self._memory, ids, cascade=bool(delete_kwargs.get("cascade", False)))


def _state(mem: Memory) -> list:
    return [(r.id, r.parent_id, r.meta.get("ref_doc_id", "<missing>")) for r in mem]


@pytest.mark.parametrize("seed", range(4))
def test_llama_index_delete_as_the_record_by_record_equality(seed):
    pytest.importorskip("llama_index.core")
    from llama_index.core.schema import NodeRelationship, RelatedNodeInfo, TextNode

    from hypermem.integrations.llama_index import HypermemVectorStore

    rng = random.Random(seed)
    base = _store(rng, 70)
    for i in rng.sample(range(70), 45):   # memories written without LlamaIndex: any JSON ref_doc_id, or none
        base.update(f"m{i}", meta={"ref_doc_id": rng.choice(REFS), "kind": "x"})
    nodes = []
    for j in range(30):   # and nodes as LlamaIndex stores them (ref_doc_id "d1", "d2" or "None")
        n = TextNode(text=f"node {j}", id_=f"n{j}", embedding=[rng.random() + 0.01 for _ in range(32)])
        src = rng.choice(["d1", "d2", None])
        if src is not None:
            n.relationships[NodeRelationship.SOURCE] = RelatedNodeInfo(node_id=src)
        if rng.random() < 0.5:
            n.relationships[NodeRelationship.PARENT] = RelatedNodeInfo(node_id=f"m{rng.randrange(70)}")
        nodes.append(n)
    HypermemVectorStore(base).add(nodes)
    assert {r.meta.get("ref_doc_id") for r in base if r.id.startswith("n")} <= {"d1", "d2", "None"}
    removed = {}
    for ref in REFS + ["zz", ("d1",)]:
        cascade = rng.random() < 0.3
        new, old = (HypermemVectorStore(Memory.from_json(base.to_json(), embedder=HashingEmbedder(dim=32)))
                    for _ in range(2))
        new.delete(ref, cascade=cascade)
        _old_delete(old, ref, cascade=cascade)
        assert _state(new.memory) == _state(old.memory), ref
        removed[repr(ref)] = len(base) - len(new.memory)
    assert removed["'d1'"] > 0 and removed["'None'"] > 0 and removed["True"] > 0 and removed["None"] > 0


def test_llama_index_delete_of_a_str_reads_no_record(monkeypatch):
    pytest.importorskip("llama_index.core")
    from hypermem.integrations.llama_index import HypermemVectorStore

    mem = Memory(embedder=HashingEmbedder(dim=16))
    mem.add_many([{"text": f"m{i}", "id": f"m{i}", "meta": {"ref_doc_id": f"d{i % 4}"}} for i in range(200)])
    monkeypatch.setattr(Memory, "__iter__", lambda self: pytest.fail("a pass over every record"))
    HypermemVectorStore(mem).delete("d1")
    assert mem.ids == [f"m{i}" for i in range(200) if i % 4 != 1]


# ---------------------------------------------------------------------------- LangGraph
def _old_prune(self, removed):
    """HypermemStore._prune before Memory.select (the reference)."""
    if not removed:
        return
    mem = self.memory
    for r in [r for r in mem if r.meta.get("langgraph") == "namespace"][::-1]:
        if r.id in mem and not mem.children(r.id):
            mem.remove(r.id)


def _old_sweep(self):
    """HypermemStore.sweep_ttl before Memory.select (the reference)."""
    from hypermem.integrations.langgraph import _is_item

    with self._lock:
        self.memory.refresh()
        now = C.to_time(self.memory.clock())
        dead = [r.id for r in self.memory if _is_item(r) and not self._live(r, now)]
        C.remove(self.memory, dead)
        self._prune(set(dead))
        return len(dead)


def _graph(mem: Memory) -> list:
    return [(r.id, r.parent_id, r.valid_until, r.meta.get("langgraph")) for r in mem]


@pytest.mark.parametrize("seed", range(4))
def test_langgraph_sweep_and_prune_as_the_record_by_record_code(seed):
    pytest.importorskip("langgraph.store.base")
    from langgraph.store.base import PutOp

    rng = random.Random(seed)
    clock, (new, old) = _langgraph_pair(rng, "nearest")
    old._prune = types.MethodType(_old_prune, old)
    old.sweep_ttl = types.MethodType(_old_sweep, old)
    items = [r.id for r in new.memory if r.meta.get("langgraph") == "item"]
    for i in rng.sample(items, min(6, len(items))):   # windows at the edges of the time columns
        until = rng.choice(EDGES + [clock.now, clock.now + timedelta(microseconds=rng.choice([-1, 1]))])
        for s in (new, old):
            s.memory.update(i, valid_until=until)
    assert _graph(new.memory) == _graph(old.memory)
    swept = 0
    for step in range(6):
        ops = [PutOp(rng.choice(SPACES), f"k{rng.randrange(25)}", None) for _ in range(rng.randint(0, 4))]
        ops += [PutOp(rng.choice(SPACES + [("z", str(step))]), f"k{rng.randrange(25)}", {"text": f"v{step}"},
                      ttl=rng.choice([None, 10, 30])) for _ in range(rng.randint(0, 3))]
        for s in (new, old):
            s.batch(ops)   # deletes prune the namespaces they empty
        assert _graph(new.memory) == _graph(old.memory), step
        n = new.sweep_ttl()
        assert n == old.sweep_ttl() and _graph(new.memory) == _graph(old.memory), step
        swept += n
        clock.now += timedelta(minutes=rng.choice([0, 15, 25, 60]))
    assert swept > 0


def test_langgraph_sweep_reads_no_record(monkeypatch):
    pytest.importorskip("langgraph.store.base")
    from langgraph.store.base import PutOp

    from hypermem.integrations.langgraph import HypermemStore

    clock = types.SimpleNamespace(now=EDGES[0].replace(year=2026))
    store = HypermemStore(embedder=HashingEmbedder(dim=16), clock=lambda: clock.now)
    store.batch([PutOp(("users", f"u{i % 7}"), f"k{i}", {"text": f"n{i}"}, ttl=10 if i % 3 else None)
                 for i in range(100)])
    store.batch([PutOp(("solo",), "k", {"text": "gone soon"}, ttl=5)])
    clock.now += timedelta(minutes=20)
    monkeypatch.setattr(Memory, "__iter__", lambda self: pytest.fail("a pass over every record"))
    assert store.sweep_ttl() == 67
    assert store.list_namespaces() == [("users", f"u{i}") for i in range(7)]
    assert "ns:solo" not in store.memory
