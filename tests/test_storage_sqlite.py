"""Durable SQLite storage: parity with the in-process store, crash safety, concurrency."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time

import pytest
import torch
from storage_parity import assert_same, check_script_and_reopen, script, settings

from hypermem import HashingEmbedder, Memory
from hypermem.store.backends import StorageError

pytestmark = pytest.mark.usefixtures("one_thread")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture
def path(tmp_path):
    return str(tmp_path / "mem.db")


def test_every_method_matches_the_in_process_store(path):
    ref, again = check_script_and_reopen(path)
    again.close()


def test_float32_store_and_float32_vectors(path, tmp_path):
    ref = Memory(**settings(dtype=torch.float32))
    mem = Memory.open(path, **settings(dtype=torch.float32))
    script(ref)
    script(mem)
    assert_same(ref, mem)
    mem.close()
    assert_same(ref, Memory.open(path, embedder=HashingEmbedder(dim=32)))
    p32 = str(tmp_path / "f32.db")
    small = Memory.open(p32, vector_dtype="float32", **settings())
    script(small)
    small_embeddings = small.embeddings  # read from the file: the bound store holds no second copy
    small_points = small.points
    small.close()
    with pytest.raises(StorageError, match="closed"):
        small.embeddings  # noqa: B018
    with pytest.raises(StorageError, match="closed"):
        small.points  # noqa: B018  (a closed store answers no read)
    back = Memory.open(p32, embedder=HashingEmbedder(dim=32))
    assert back.ids == ref.ids and back.storage.vector_dtype == "float32"
    assert float((back.embeddings - small_embeddings).abs().max()) < 1e-6
    assert float((back.points - small_points).abs().max()) < 1e-5


def test_each_call_writes_only_what_it_changed(path):
    mem = Memory.open(path, embedder=HashingEmbedder(dim=16))
    mem.add_many([{"text": f"memory {i}", "id": f"m{i}"} for i in range(200)])
    con = mem.storage.con

    def rows_written(fn):
        before = con.total_changes
        fn()
        return con.total_changes - before - 1  # less the version counter

    assert rows_written(lambda: mem.add("one more", id="x", parent="m3")) == 1
    assert rows_written(lambda: mem.update("m7", meta={"a": 1})) == 1
    assert rows_written(lambda: mem.search("memory 5", k=3)) == 3
    assert rows_written(lambda: mem.link("x", "m4")) == 1
    assert rows_written(lambda: mem.remove("m4", cascade=True)) == 3  # 2 rows and their removal-log entry
    assert rows_written(lambda: mem.add_many([{"text": "a"}, {"text": "b"}])) == 2


def test_disk_per_memory_at_dim_256(path):
    mem = Memory.open(path, synchronous="NORMAL")
    texts = [f"note {i}: the agent met user {i % 97} about project {i % 13}" for i in range(3000)]
    mem.add_many([{"text": t, "meta": {"user": i % 97}} for i, t in enumerate(texts)])
    mem.add_many([{"text": f"follow-up {i}", "parent": mem.ids[i]} for i in range(1000)])
    mem.close()
    per = os.path.getsize(path) / 4000
    assert per <= 2500, per
    with sqlite3.connect(path) as con:  # derived directions are not stored
        assert con.execute("SELECT count(*) FROM hm_memories WHERE direction IS NOT NULL").fetchone()[0] == 0


def test_read_only_reader_sees_commits_and_refuses_writes(path):
    writer = Memory.open(path, embedder=HashingEmbedder(dim=16))
    writer.add("first", id="a")
    reader = Memory.open(path, read_only=True)
    assert reader.ids == ["a"]
    writer.add_many([{"text": "second", "id": "b", "parent": "a"}])
    assert [r.id for r in reader.search("second", k=2)] == ["b", "a"]  # a search refreshes
    assert reader.get("b").parent_id == "a"
    assert reader.get("b").access_count == 0  # a read-only search records no access
    with pytest.raises(StorageError, match="read_only"):
        reader.add("nope")
    with pytest.raises(StorageError, match="read_only"):
        reader.remove("a", cascade=True)
    writer.remove("b")
    assert reader.refresh() and reader.ids == ["a"]
    assert not reader.refresh()


def test_open_errors(path, tmp_path):
    with pytest.raises(FileNotFoundError):
        Memory.open(str(tmp_path / "missing.db"), read_only=True)
    Memory.open(path, embedder=HashingEmbedder(dim=16), depth_step=0.7).close()
    with pytest.raises(ValueError, match="depth_step"):
        Memory.open(path, depth_step=0.2)
    with pytest.raises(ValueError, match="dimension mismatch"):
        Memory.open(path, embedder=HashingEmbedder(dim=8))
    saved = str(tmp_path / "saved.db")
    Memory().save(saved)
    with pytest.raises(StorageError, match="Memory.load"):
        Memory.open(saved)
    with pytest.raises(ValueError, match="postgresql"):
        Memory.open("mysql://x/y")
    with pytest.raises(ValueError, match="synchronous"):
        Memory.open(str(tmp_path / "s.db"), synchronous="SOMETIMES")
    mem = Memory.open(path)
    mem.close()
    with pytest.raises(StorageError, match="closed"):
        mem.add("after close")


def test_a_failed_write_leaves_no_trace(path, monkeypatch):
    mem = Memory.open(path, embedder=HashingEmbedder(dim=16))
    mem.add("kept", id="k")
    st = mem.storage

    def broken(rows):
        raise sqlite3.OperationalError("disk I/O error (simulated)")

    monkeypatch.setattr(st, "upsert", broken)
    with pytest.raises(StorageError, match="simulated"):
        mem.add_many([{"text": "lost", "id": "x"}, {"text": "lost too", "id": "y", "parent": "k"}])
    with pytest.raises(StorageError, match="simulated"):
        mem.update("k", text="changed")
    assert mem.ids == ["k"] and mem.get("k").text == "kept" and mem.children("k") == []
    monkeypatch.undo()
    with pytest.raises(KeyError):  # validation errors stay what they are
        mem.add("orphan", parent="nobody")
    mem.add("fine", id="f")
    assert Memory.open(path).ids == ["k", "f"]


def test_framework_adapters_open_durable_targets(path, tmp_path):
    from hypermem.integrations import _common as C

    Memory.open(path, embedder=HashingEmbedder(dim=16)).add("durable", id="d")
    mem = C.open_memory(path)
    assert mem.storage is not None and mem.get("d").text == "durable"
    mem.add("written through", id="w")
    C.save_memory(mem, None, path)  # nothing to do: already committed
    assert Memory.open(path).ids == ["d", "w"]
    copy = str(tmp_path / "copy.db")
    C.save_memory(mem, copy, path)  # another path: an ordinary snapshot
    assert Memory.load(copy).ids == ["d", "w"]
    with pytest.raises(StorageError, match="PostgreSQL"):
        C.open_memory("postgresql://nobody@127.0.0.1:1/none?connect_timeout=2")


# ---------------------------------------------------------------------------- processes
_WRITER = """
import sys
sys.path.insert(0, {root!r})
from hypermem import HashingEmbedder, Memory
mem = Memory.open({path!r}, embedder=HashingEmbedder(dim=16))
{body}
"""


def _spawn(path, body):
    code = _WRITER.format(root=ROOT, path=path, body=textwrap.dedent(body))
    return subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True,
                            env=dict(os.environ, OMP_NUM_THREADS="1"))


def _kill_after(proc, acks: int, delay: float) -> list[str]:
    lines = []
    while len(lines) < acks:
        line = proc.stdout.readline()
        assert line, "the child process ended early"
        lines.append(line.strip())
    time.sleep(delay)
    proc.send_signal(signal.SIGKILL)
    rest, _ = proc.communicate()
    return lines + rest.split()


@pytest.mark.parametrize("delay", [0.0, 0.021])
def test_sigkill_during_add_many_is_all_or_nothing(path, delay):
    Memory.open(path, embedder=HashingEmbedder(dim=16)).close()
    proc = _spawn(path, """
        for b in range(100000):
            mem.add_many([{"text": f"batch {b} item {j}", "id": f"{b}-{j}"} for j in range(40)])
            print(b, flush=True)
    """)
    acked = [int(x) for x in _kill_after(proc, 3, delay)]
    ids = Memory.open(path).ids
    batches = {}
    for i in ids:
        b, _ = i.split("-")
        batches[int(b)] = batches.get(int(b), 0) + 1
    assert set(batches.values()) == {40}  # no half batch
    assert sorted(batches) == list(range(len(batches)))
    assert max(acked) <= max(batches) <= max(acked) + 1  # nothing that returned is lost


@pytest.mark.parametrize("delay", [0.0, 0.017])
def test_sigkill_during_a_search_touch(path, delay):
    mem = Memory.open(path, embedder=HashingEmbedder(dim=16))
    mem.add_many([{"text": f"memory number {i}"} for i in range(300)])
    mem.close()
    proc = _spawn(path, """
        for s in range(100000):
            assert len(mem.search(f"number {s % 300}", k=5)) == 5
            print(s, flush=True)
    """)
    done = len(_kill_after(proc, 5, delay))
    total = sum(r.access_count for r in Memory.open(path))
    assert total % 5 == 0  # whole searches only
    assert done <= total // 5 <= done + 1


def test_two_processes_write_and_search_at_once(path):
    first = Memory.open(path, embedder=HashingEmbedder(dim=16))
    first.add("shared root", id="root")
    first.add_many([{"text": f"other note {i}"} for i in range(5)])  # every search finds 3
    body = """
        for i in range(40):
            mem.add(f"{tag} note {{i}}", id=f"{tag}{{i}}", parent="root")
            mem.search("note", k=3)
        mem.refresh()
        print(len(mem), flush=True)
    """
    procs = [_spawn(path, body.format(tag=tag)) for tag in ("a", "b")]
    outs = [p.communicate(timeout=120)[0] for p in procs]
    assert all(p.returncode == 0 for p in procs)
    mem = Memory.open(path)
    assert len(mem) == 86 and len(mem.children("root")) == 80
    assert max(int(o) for o in outs) == 86
    assert sum(r.access_count for r in mem) == 2 * 40 * 3


@pytest.mark.parametrize("name", ["mem.json", "mem.CSV", "page.html"])
def test_open_refuses_another_formats_name_and_writes_nothing(tmp_path, name):
    with pytest.raises(ValueError, match=r"Memory.open\(\) writes a SQLite file"):
        Memory.open(tmp_path / name)
    assert list(tmp_path.iterdir()) == []
