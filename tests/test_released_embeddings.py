"""A bound store holds no second copy of its embeddings: the storage has them, and the state
reads the rows a re-placement, a save or a reader needs (``MemoryState.release_embeddings``)."""

from __future__ import annotations

import pytest
import torch
from storage_parity import assert_same, script, settings

from hypermem import HashingEmbedder, Memory
from hypermem.store.backends import StorageError

pytestmark = pytest.mark.usefixtures("one_thread")


def held(mem) -> bool:
    return mem.state.embedding is not None


def test_a_sqlite_store_reads_its_embeddings_from_the_file(tmp_path):
    ref = Memory(**settings())
    mem = Memory.open(tmp_path / "m.db", **settings())
    script(ref)
    script(mem)  # adds, links, re-texted memories, removals: every re-placement reads the file
    assert not held(mem) and mem.state.pending == {}  # committed: nothing waits in RAM
    assert_same(ref, mem)
    assert torch.equal(mem.embeddings, ref.embeddings)
    assert torch.equal(mem.embedding("dog3"), ref.embedding("dog3"))
    mem.save(tmp_path / "copy.hmem")
    back = Memory.load(tmp_path / "copy.hmem", embedder=HashingEmbedder(dim=32))
    assert torch.equal(back.embeddings, ref.embeddings) and torch.equal(back.points, ref.points)
    mem.link("dog2", "dog1")  # a subtree moved: its embeddings come from the file
    ref.link("dog2", "dog1")
    assert torch.equal(mem.points, ref.points) and not held(mem)
    reopened = Memory.open(tmp_path / "m.db", embedder=HashingEmbedder(dim=32))
    assert not held(reopened) and torch.equal(reopened.points, ref.points)


def test_the_vote_brings_the_column_back_and_keeps_it_in_step(tmp_path):
    ref = Memory(**settings())
    mem = Memory.open(tmp_path / "m.db", **settings())
    for m in (ref, mem):
        script(m)
    got = [(r.id, round(r.score, 12)) for r in mem.suggest_parents("dog breed number 9", k=3)]
    assert got == [(r.id, round(r.score, 12)) for r in ref.suggest_parents("dog breed number 9", k=3)]
    assert held(mem)  # the vote reads every stored embedding: the column stays from then on
    for m in (ref, mem):
        m.add("dog breed number 7", parent="auto", id="auto7")
        m.update("dog2", text="a small terrier")
    assert torch.equal(mem.embeddings, ref.embeddings) and mem.get("auto7").parent_id == ref.get("auto7").parent_id


def test_another_process_rows_are_not_held_and_a_closed_store_says_so(tmp_path):
    a = Memory.open(tmp_path / "m.db", embedder=HashingEmbedder(dim=32))
    b = Memory.open(tmp_path / "m.db", embedder=HashingEmbedder(dim=32))
    a.add_many([{"text": f"note {i}", "id": f"n{i}"} for i in range(5)])
    a.add("child note", parent="n1", id="c")
    assert b.refresh() and not held(b) and b.state.pending == {}
    assert torch.equal(b.embeddings, a.embeddings) and torch.equal(b.points, a.points)
    b.link("c", "n2")
    assert a.refresh() and torch.equal(a.points, b.points)
    a.close()
    with pytest.raises(StorageError, match="closed"):
        a.embedding("c")


def test_a_postgres_store_reads_its_embeddings_from_the_server(pg_url):
    ref = Memory(**settings())
    mem = Memory.open(pg_url, **settings())
    script(ref)
    script(mem)
    assert not held(mem)
    assert_same(ref, mem)
    assert torch.equal(mem.embeddings, ref.embeddings)
    mem.close()


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_a_streamed_batch_that_votes_reads_the_column_before_the_stream(backend, tmp_path, request):
    """More than 4,096 items go in parts (PostgreSQL: one COPY); ``parent="auto"`` votes over every
    stored embedding, read back before the stream starts, never from the storage mid-COPY."""
    target = tmp_path / "m.db" if backend == "sqlite" else request.getfixturevalue("pg_url")
    ref = Memory(embedder=HashingEmbedder(dim=32))
    mem = Memory.open(target, embedder=HashingEmbedder(dim=32))
    tree = [{"text": f"topic {i}", "id": f"t{i}"} for i in range(20)] + \
        [{"text": f"topic {i % 20} item {i}", "id": f"i{i}", "parent": f"t{i % 20}"} for i in range(40)]
    batch = [{"text": f"topic {i % 20} note {i}", "id": f"n{i}", **({"parent": "auto"} if i % 50 == 0 else {})}
             for i in range(4200)]
    for m in (ref, mem):
        m.add_many(tree)
        m.add_many(batch)
    assert held(mem)
    assert [mem.get(f"n{i}").parent_id for i in range(0, 4200, 50)] == \
        [ref.get(f"n{i}").parent_id for i in range(0, 4200, 50)]
    assert torch.equal(mem.points, ref.points)
    again = Memory.open(target, embedder=HashingEmbedder(dim=32))
    assert not held(again) and torch.equal(again.points, ref.points)
    for m in (mem, again):
        m.close()
