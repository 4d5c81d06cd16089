"""Atomic saves: a refused save, a full disk (simulated and real) and a SIGKILL in the middle
of a save all leave the old file loadable."""

import errno
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from persistence_helpers import assert_same, foreign_sqlite, rich_memory, temp_files

from hypermem import Memory
from hypermem.store import atomic, persistence

ROOT = Path(__file__).resolve().parents[1]


# ----------------------------------------------------------------------------- atomic saves
def test_non_json_meta_is_refused_and_the_old_file_survives(tmp_path):
    mem = rich_memory()
    path = tmp_path / "m.db"
    mem.save(path)
    jpath = tmp_path / "m.json"
    mem.to_json(jpath)
    before, jbefore = path.read_bytes(), jpath.read_bytes()
    assert mem.get("puppy").meta is not mem.get("puppy").meta   # a record's meta is a copy
    meta = mem.state.records.meta_at(mem.state.row["puppy"])   # the stored dict itself
    for bad in (object(), {1, 2}, ("a", "b"), float("nan")):
        meta["bad"] = bad  # changed in place, behind the store's back
        with pytest.raises(ValueError, match="meta of memory 'puppy'"):
            mem.save(path)
        with pytest.raises(ValueError, match="meta of memory 'puppy'"):
            mem.to_json(jpath)
        assert path.read_bytes() == before and jpath.read_bytes() == jbefore
    del meta["bad"]
    meta[1] = "int key"
    with pytest.raises(ValueError, match="would not load back equal"):
        mem.save(path)
    assert path.read_bytes() == before
    assert temp_files(tmp_path) == []
    del meta[1]
    assert_same(Memory.load(path, clock=mem.clock), Memory.from_json(jpath, clock=mem.clock))


def test_full_disk_in_the_middle_of_a_save_leaves_the_old_file(tmp_path, monkeypatch):
    mem = rich_memory()
    path, jpath = tmp_path / "m.db", tmp_path / "m.json"
    mem.save(path)
    mem.to_json(jpath)
    before, jbefore = path.read_bytes(), jpath.read_bytes()
    mem.add("new memory", id="new")
    real_blob, calls = persistence._blob, []

    def failing_blob(row):  # the disk fills up after a few rows have been written
        calls.append(1)
        if len(calls) > 3:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_blob(row)

    monkeypatch.setattr(persistence, "_blob", failing_blob)
    with pytest.raises(OSError, match="No space left"):
        mem.save(path)
    monkeypatch.setattr(persistence, "_blob", real_blob)

    def failing_fsync(fd):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(atomic.os, "fsync", failing_fsync)
    with pytest.raises(OSError, match="No space left"):
        mem.save(path)
    with pytest.raises(OSError, match="No space left"):
        mem.to_json(jpath)
    monkeypatch.undo()
    assert path.read_bytes() == before and jpath.read_bytes() == jbefore
    assert temp_files(tmp_path) == []
    old = Memory.load(path)
    assert "new" not in old and len(old) == len(mem) - 1


CHILD = textwrap.dedent(r"""
    import resource, signal, sys, warnings
    warnings.filterwarnings("ignore")
    import torch
    torch.set_num_threads(1)
    from hypermem import HashingEmbedder, Memory
    full, looped = sys.argv[1], sys.argv[2]
    mem = Memory(embedder=HashingEmbedder(dim=64))
    mem.add_many([{"text": f"memory number {i}", "meta": {"version": 0}} for i in range(1000)])
    # 1. A real full disk: the file-size limit makes the write fail half way.
    mem.save(full)  # the old, complete file
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (65536, hard))
    mem.add("one more", meta={"version": -1})
    try:
        mem.save(full)
    except Exception as exc:
        print("failed:", type(exc).__name__, exc, flush=True)
    else:
        print("saved", flush=True)
    resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
    mem.remove(mem.ids[-1])
    # 2. Save over and over; the fourth save stops half way through writing its rows and
    #    says so, and the parent kills us there with SIGKILL.
    import time
    from hypermem.store import persistence
    blob, state = persistence._blob, {"v": 0, "calls": 0}
    def slow_blob(row):
        state["calls"] += 1
        if state["v"] == 4 and state["calls"] == len(mem):  # half way through the records table
            print("mid-save", flush=True)
            time.sleep(60)
        return blob(row)
    persistence._blob = slow_blob
    while True:
        state["v"] += 1
        state["calls"] = 0
        mem.add(f"version {state['v']}", meta={"version": state["v"]})
        mem.save(looped)
        print(state["v"], flush=True)
""")
N_CHILD = 1000


@pytest.fixture(scope="module")
def crashed_child(tmp_path_factory):
    """Run CHILD: a save that hits a real file-size limit, then saves until one is killed
    with SIGKILL half way through writing its rows."""
    folder = tmp_path_factory.mktemp("crash")
    full, looped = folder / "full.db", folder / "looped.db"
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(full), str(looped)], stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL, text=True, env=env)
    try:
        first = child.stdout.readline()
        done = 0
        while True:
            line = child.stdout.readline().strip()
            assert line, "the child stopped early"
            if line == "mid-save":
                break
            done = int(line)
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=60)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    return {"folder": folder, "full": full, "looped": looped, "first": first, "done": done,
            "returncode": child.returncode}


def test_a_real_full_disk_leaves_the_old_file(crashed_child):
    assert crashed_child["first"].startswith("failed:"), crashed_child["first"]
    mem = Memory.load(crashed_child["full"])
    assert len(mem) == N_CHILD and {r.meta["version"] for r in mem} == {0}


def test_sigkill_in_the_middle_of_many_saves_leaves_a_loadable_file(crashed_child):
    assert crashed_child["returncode"] == -signal.SIGKILL
    assert crashed_child["done"] == 3
    mem = Memory.load(crashed_child["looped"])  # the third save, complete
    versions = [r.meta["version"] for r in mem]
    assert versions == [0] * N_CHILD + [1, 2, 3]
    assert mem.get(mem.ids[-1]).text == "version 3"
    # The kill came while the fourth save was writing: it left its temporary file (never a broken target).
    assert [n.startswith(".looped.db.") for n in temp_files(crashed_child["folder"])] == [True]


def test_save_into_a_missing_folder_or_onto_a_folder(tmp_path):
    mem = rich_memory()
    with pytest.raises(FileNotFoundError, match="does not exist"):
        mem.save(tmp_path / "nope" / "m.db")
    with pytest.raises(IsADirectoryError):
        mem.save(tmp_path)
    assert not (tmp_path / "nope").exists()


def test_save_replaces_a_snapshot_but_never_a_durable_store_or_another_database(tmp_path):

    from hypermem import Memory
    from hypermem.episodic import MemoryStorage

    durable = tmp_path / "agent.db"
    with Memory.open(durable) as db:
        db.add("kept")
    episodic = tmp_path / "ep.db"
    s = MemoryStorage()
    s.instantiate("((a p) ** E1)")
    s.save(episodic)
    other = foreign_sqlite(tmp_path / "app.db")
    before = {p: p.read_bytes() for p in (durable, episodic, other)}
    for path, what in ((durable, "durable store of Memory.open"), (episodic, "episodic memory file"),
                       (other, r"another SQLite database \(tables: \['t'\]\)")):
        with pytest.raises(FileExistsError, match=what):
            Memory().save(path)
        assert path.read_bytes() == before[path]
    with Memory.open(durable) as db:
        assert [r.text for r in db] == ["kept"]
    snap = tmp_path / "snap.db"
    Memory().save(snap)
    mem = Memory()
    mem.add("new")
    mem.save(snap)                    # a snapshot replaces a snapshot
    (tmp_path / "empty.db").touch()
    mem.save(tmp_path / "empty.db")   # and an empty file
    assert len(Memory.load(snap)) == len(Memory.load(tmp_path / "empty.db")) == 1
