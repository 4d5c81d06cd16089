"""Incremental refresh (issue 34, point 3): another client's writes and touches reach a mirrored
client as the rows that changed, never as a full re-read, on SQLite and on the embedded
PostgreSQL; a touch leaves the other client's state version (its index, its mirror) alone."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from datetime import timedelta

import pytest
import torch
from storage_parity import T0, assert_same, settings, stepping_clock

from hypermem import HashingEmbedder, Memory

pytestmark = pytest.mark.usefixtures("one_thread")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(params=["sqlite", "postgres"])
def target(request, tmp_path):
    if request.param == "sqlite":
        return str(tmp_path / "mem.db")
    return request.getfixturevalue("pg_url")


def _no_full_reads(mem, monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("a full re-read of the store")

    monkeypatch.setattr(mem.storage, "load_rows", refuse)


def _steps(mem):
    """Every kind of write, one call at a time (the mutations of storage_parity.script)."""
    yield lambda: mem.add("animals", id="animals", meta={"kind": "root"})
    yield lambda: mem.add("plants", id="plants", t=T0 - timedelta(days=2), valid_until=T0 + timedelta(days=30))
    yield lambda: mem.add_many([{"text": f"dog breed number {i}", "parent": "animals", "id": f"dog{i}",
                                 "meta": {"kind": "dog", "i": i}} for i in range(6)])
    yield lambda: mem.add_many([{"text": "puppy", "parent": "dog0", "id": "puppy"},
                                {"text": "explicit point", "id": "pt",
                                 "point": torch.full((mem.dim,), 0.05, dtype=torch.float64)},
                                {"text": "under the point", "id": "kid", "parent": "pt"}])
    yield lambda: mem.search("dog", k=3)
    yield lambda: mem.search_batch(["plants", "animals"], k=2)
    yield lambda: mem.update("dog0", text="a loyal hound", meta={"kind": "hound"})  # re-places puppy too
    yield lambda: mem.update("plants", valid_from=T0 - timedelta(days=1), t=T0 + timedelta(hours=1))
    yield lambda: mem.link("dog2", "plants")
    yield lambda: mem.link("pt", "animals")
    yield lambda: mem.link("dog3", None)
    yield lambda: mem.remove("dog4")
    yield lambda: mem.remove("dog0", cascade=True)
    yield lambda: mem.add("a late memory", parent="dog3", id="late", valid_from=T0 + timedelta(days=3))
    yield lambda: (mem.remove("late"), mem.add("late again", id="late", parent="dog5"))
    yield lambda: mem.touch(["dog5", "dog5", "pt"])


def test_every_write_reaches_a_mirrored_client_as_changed_rows(target, monkeypatch):
    writer = Memory.open(target, **settings())
    reader = Memory.open(target, embedder=HashingEmbedder(dim=32), clock=stepping_clock())
    _no_full_reads(reader, monkeypatch)
    for n, step in enumerate(_steps(writer)):
        step()
        assert reader.refresh(), n
        fresh = Memory.open(target, embedder=HashingEmbedder(dim=32), clock=stepping_clock())
        assert_same(fresh, reader)  # ids, records, hierarchy, points to 1e-9, search answers
        fresh.close()
        assert not reader.refresh()
    writer.close()
    reader.close()


def test_a_touch_changes_access_counts_only(target, monkeypatch):
    writer = Memory.open(target, embedder=HashingEmbedder(dim=32))
    writer.add_many([{"text": f"memory number {i}", "id": f"m{i}"} for i in range(50)])
    reader = Memory.open(target, embedder=HashingEmbedder(dim=32))
    _no_full_reads(reader, monkeypatch)
    version = reader.state.version
    hits = writer.search("memory number 7", k=4)
    writer.search("memory number 7", k=4)
    assert reader.refresh()
    assert reader.state.version == version  # nothing the index or the mirror depends on changed
    for h in hits:
        assert reader.get(h.id).access_count == 2
        assert reader.get(h.id).last_accessed == writer.get(h.id).last_accessed
    # the reader's own touching search, made while behind, is applied with the writer's
    writer.search("memory number 9", k=2)
    reader.search("memory number 7", k=4)
    reader.refresh()
    assert {h.id: reader.get(h.id).access_count for h in hits} == {h.id: 3 for h in hits}
    assert [r.access_count for r in reader] == [r.access_count for r in Memory.open(target)]


def test_removed_and_added_again_before_the_reader_looks(target, monkeypatch):
    writer = Memory.open(target, embedder=HashingEmbedder(dim=32))
    writer.add_many([{"text": "root", "id": "r"}, {"text": "child", "id": "c", "parent": "r"},
                     {"text": "other", "id": "o"}])
    reader = Memory.open(target, embedder=HashingEmbedder(dim=32))
    _no_full_reads(reader, monkeypatch)
    writer.remove("r", cascade=True)
    writer.add("root again", id="r", parent="o")
    writer.add("a new child", id="c", parent="r")
    assert reader.refresh()
    assert reader.ids == ["o", "r", "c"] and reader.children("o") == ["r"] and reader.level("c") == 2
    assert reader.get("r").text == "root again"
    fresh = Memory.open(target, embedder=HashingEmbedder(dim=32))
    assert float((fresh.points - reader.points).abs().max()) <= 1e-12


_SEARCHER = """
import sys, json
sys.path.insert(0, {root!r})
import torch
torch.set_num_threads(1)
from hypermem import HashingEmbedder, Memory
mem = Memory.open({target!r}, embedder=HashingEmbedder(dim=32))
for s in range({n}):
    mem.search(f"note {{s}}", k=5)
print(json.dumps(mem.state.version), flush=True)
"""


def test_another_process_touching_on_every_search(target, monkeypatch):
    mem = Memory.open(target, embedder=HashingEmbedder(dim=32))
    mem.add_many([{"text": f"note {i} about topic {i % 7}", "id": f"n{i}"} for i in range(200)])
    _no_full_reads(mem, monkeypatch)
    version = mem.state.version
    code = _SEARCHER.format(root=ROOT, target=target, n=30)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         env=dict(os.environ, OMP_NUM_THREADS="1"))
    assert out.returncode == 0, out.stderr[-2000:]
    mem.search("topic 3", k=5, touch=False)
    assert mem.state.version == version
    assert sum(r.access_count for r in mem) == 30 * 5
    mem.add("written here after", id="after")
    assert Memory.open(target).ids == mem.ids


def _downgrade_sqlite(path):
    con = sqlite3.connect(path)
    for sql in ("DROP INDEX hm_memories_changed", "DROP INDEX hm_memories_touched", "DROP TABLE hm_removed",
                "ALTER TABLE hm_memories DROP COLUMN changed_at", "ALTER TABLE hm_memories DROP COLUMN touched_at",
                "UPDATE hm_config SET value = '1' WHERE key = 'layout'"):
        con.execute(sql)
    con.commit()
    con.close()


def test_a_layout_1_file_is_upgraded_or_read_whole(tmp_path):
    path = str(tmp_path / "old.db")
    mem = Memory.open(path, embedder=HashingEmbedder(dim=16))
    mem.add_many([{"text": "a", "id": "a"}, {"text": "b", "id": "b", "parent": "a"}])
    mem.close()
    _downgrade_sqlite(path)
    old = Memory.open(path, read_only=True)  # read-only: left as it is, re-read whole when it changes
    assert not old.storage.incremental and old.ids == ["a", "b"]
    writer = Memory.open(path, embedder=HashingEmbedder(dim=16))  # writable: upgraded
    assert writer.storage.incremental
    with sqlite3.connect(path) as con:
        assert con.execute("SELECT value FROM hm_config WHERE key = 'layout'").fetchone()[0] == "2"
    writer.add("c", id="c", parent="b")
    writer.remove("a", cascade=True)
    writer.add("d", id="d")
    assert old.refresh() and old.ids == ["d"]
    reader = Memory.open(path, read_only=True)
    assert reader.storage.incremental and reader.ids == ["d"]


def test_a_mirrored_index_grows_with_another_clients_appends(tmp_path, monkeypatch):
    pytest.importorskip("faiss")
    path = str(tmp_path / "mem.db")
    writer = Memory.open(path, embedder=HashingEmbedder(dim=32))
    writer.add_many([{"text": f"note {i} about topic {i % 7}", "id": f"n{i}"} for i in range(300)])
    reader = Memory.open(path, embedder=HashingEmbedder(dim=32))
    _no_full_reads(reader, monkeypatch)
    index = reader.build_index("faiss")
    reader.search("topic 3", k=5, use_index=True, touch=False)
    rewrites = reader.state.rewrites
    writer.add_many([{"text": "a brand new remark about zebras", "id": "z"}])
    hits = reader.search("a brand new remark about zebras", k=1, use_index=True, touch=False)
    assert hits[0].id == "z" and len(index) == 301  # the same graph, grown by the appended row
    assert reader.state.rewrites == rewrites
    writer.update("n5", text="now about giraffes")
    assert reader.search("now about giraffes", k=1, use_index=True, touch=False)[0].id == "n5"


def _log_entries(mem) -> int:
    con = mem.storage.con
    prefix = "hm" if target_is_sqlite(mem) else "hypermem"
    n = int(con.execute(f"SELECT count(*) FROM {prefix}_removed").fetchone()[0])
    if not target_is_sqlite(mem):
        con.rollback()
    return n


def target_is_sqlite(mem) -> bool:
    return isinstance(mem.storage.con, sqlite3.Connection)


def test_the_removal_log_is_pruned_and_a_reader_behind_it_reads_the_store_whole(target, monkeypatch):
    writer = Memory.open(target, embedder=HashingEmbedder(dim=32))
    monkeypatch.setattr(writer.storage, "removal_log_versions", 6)
    writer.add_many([{"text": f"memory number {i}", "id": f"m{i}"} for i in range(40)])
    keeping_up = Memory.open(target, embedder=HashingEmbedder(dim=32))
    behind = Memory.open(target, embedder=HashingEmbedder(dim=32))
    full_reads = []
    monkeypatch.setattr(keeping_up.storage, "load_rows", lambda *a, **k: full_reads.append("keeping_up"))
    for i in range(30):
        writer.remove(f"m{i}")
        writer.add(f"a new memory {i}", id=f"new{i}")
        assert keeping_up.refresh() and keeping_up.ids == writer.ids, i  # incremental while it keeps up
        assert _log_entries(writer) <= 6
    assert full_reads == []
    assert behind.refresh() and behind.ids == writer.ids  # its removals were pruned: read whole
    assert sorted(behind.ids) == sorted([f"m{i}" for i in range(30, 40)] + [f"new{i}" for i in range(30)])
    fresh = Memory.open(target, embedder=HashingEmbedder(dim=32))
    assert_same(fresh, behind)
    for m in (writer, keeping_up, behind, fresh):
        m.close()
