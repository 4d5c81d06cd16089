"""Durable storage under an operator's walk: Ctrl-C in the middle of a write (the transaction
and the in-process state), a backup of an open store, saving over a read-only file, a full
disk during save()."""

from __future__ import annotations

import errno
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile

import pytest

from hypermem import HashingEmbedder, Memory
from hypermem.store import atomic, backup
from hypermem.store.backends.sqlite import SqliteStorage

pytestmark = pytest.mark.usefixtures("one_thread")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _open(path, **kw):
    return Memory.open(path, embedder=HashingEmbedder(dim=16), **kw)


def _stored(path) -> list[str]:
    con = sqlite3.connect(path)
    try:
        return sorted(r[0] for r in con.execute("SELECT id FROM hm_memories"))
    finally:
        con.close()


def _lock_is_free(path) -> bool:
    """Whether another connection takes the write lock at once."""
    con = sqlite3.connect(path, timeout=0.2)
    try:
        con.execute("BEGIN IMMEDIATE")
        con.execute("ROLLBACK")
        return True
    except sqlite3.OperationalError:
        return False
    finally:
        con.close()


def _interrupting(monkeypatch, cls, name, exc):
    """Make ``cls.name`` write half its rows (for a list argument) and then raise ``exc``."""
    real = getattr(cls, name)

    def half_then_raise(self, rows, *args):
        real(self, rows[: len(rows) // 2], *args)
        raise exc

    monkeypatch.setattr(cls, name, half_then_raise)


def _assert_unharmed(mem, path, ids):
    """Nothing of the interrupted call anywhere: the file, the process (len, search), the lock."""
    assert _lock_is_free(path)  # was: another process got "database is locked"
    assert not mem.storage.con.in_transaction
    assert _stored(path) == sorted(ids)
    assert sorted(mem.ids) == sorted(ids) and len(mem) == len(ids)  # was 20 where 10 are stored
    assert {r.id for r in mem.search("new 3", k=len(ids), touch=False)} <= set(ids)


@pytest.mark.parametrize("interrupt", [KeyboardInterrupt, SystemExit])
def test_an_interrupt_mid_add_many_is_rolled_back_and_undone(tmp_path, monkeypatch, interrupt):
    path = str(tmp_path / "agent.db")
    mem = _open(path)
    old = [f"a{i}" for i in range(10)]
    mem.add_many([{"id": i, "text": f"old {i}"} for i in old])
    with monkeypatch.context() as m:
        _interrupting(m, SqliteStorage, "upsert", interrupt())
        with pytest.raises(interrupt):  # raised unchanged: Ctrl-C still stops the program
            mem.add_many([{"id": f"b{i}", "text": f"new {i}"} for i in range(10)])
    _assert_unharmed(mem, path, old)
    mem.add("next", id="n")  # was "cannot start a transaction within a transaction"
    with pytest.raises(KeyError, match="b9"):  # was: update wrote the phantom row
        mem.update("b9", text="edited")
    mem.close()
    with _open(path, read_only=True) as again:
        assert sorted(again.ids) == sorted([*old, "n"]) == _stored(path)


def test_an_interrupt_mid_update_and_remove_leaves_the_old_rows(tmp_path, monkeypatch):
    path = str(tmp_path / "agent.db")
    mem = _open(path)
    ids = [f"a{i}" for i in range(10)]
    mem.add_many([{"id": i, "text": f"old {i}"} for i in ids])
    mem.add_many([{"id": f"c{i}", "text": f"child {i}", "parent": "a0"} for i in range(4)])
    ids += [f"c{i}" for i in range(4)]
    with monkeypatch.context() as m:
        _interrupting(m, SqliteStorage, "upsert", KeyboardInterrupt())
        with pytest.raises(KeyboardInterrupt):
            mem.update("a0", text="a new text for the root")  # re-places its subtree: 5 rows
    assert mem.get("a0").text == "old a0"
    with monkeypatch.context() as m:
        _interrupting(m, SqliteStorage, "delete", KeyboardInterrupt())
        with pytest.raises(KeyboardInterrupt):
            mem.remove("a0", cascade=True)
    _assert_unharmed(mem, path, ids)
    assert mem.children("a0") == [f"c{i}" for i in range(4)]
    mem.update("a1", text="edited")
    mem.close()
    with _open(path) as again:
        assert sorted(again.ids) == sorted(ids) and again.get("a1").text == "edited"
        assert again.get("a0").text == "old a0"


def test_an_interrupt_while_catching_up_frees_the_write_lock(tmp_path, monkeypatch):
    """The begin branch: Ctrl-C while a writer applies another process's rows under the lock."""
    path = str(tmp_path / "agent.db")
    a, b = _open(path), _open(path)
    a.add_many([{"id": f"a{i}", "text": f"first {i}"} for i in range(5)])
    with monkeypatch.context() as m:
        m.setattr(SqliteStorage, "changes_since", lambda self, *args, **kw: (_ for _ in ()).throw(KeyboardInterrupt))
        with pytest.raises(KeyboardInterrupt):
            b.add("mine", id="m")
    assert _lock_is_free(path) and not b.storage.con.in_transaction  # was: the lock held
    a.add("more", id="a5")
    b.add("mine", id="m")
    assert sorted(b.ids) == _stored(path) == sorted([*(f"a{i}" for i in range(6)), "m"])
    a.close()
    b.close()


@pytest.mark.parametrize("mirror", [True, False])
def test_an_interrupt_mid_write_on_postgresql_releases_the_lock(pg_url, monkeypatch, mirror):
    psycopg = pytest.importorskip("psycopg")
    from hypermem.store.backends.postgres import PostgresStorage

    mem = Memory.open(pg_url, embedder=HashingEmbedder(dim=16), mirror=mirror)
    old = [f"a{i}" for i in range(10)]
    mem.add_many([{"id": i, "text": f"old {i}"} for i in old])
    with monkeypatch.context() as m:
        m.setattr(PostgresStorage, "insert", lambda self, rows: (_ for _ in ()).throw(KeyboardInterrupt))
        with pytest.raises(KeyboardInterrupt):
            mem.add_many([{"id": f"b{i}", "text": f"new {i}"} for i in range(10)])
    with psycopg.connect(pg_url) as con:  # another client takes the write lock at once
        con.execute("SET lock_timeout = '2s'")
        con.execute("SELECT value FROM hypermem_state WHERE key = 'version' FOR UPDATE")
        assert sorted(r[0] for r in con.execute("SELECT id FROM hypermem_memories")) == old
    assert sorted(mem.ids) == old and len(mem) == 10
    mem.add("next", id="n")
    mem.close()
    with Memory.open(pg_url, embedder=HashingEmbedder(dim=16), read_only=True) as again:
        assert sorted(again.ids) == sorted([*old, "n"])


# ---------------------------------------------------------------------------- backup
WRITER = """
import sys
sys.path.insert(0, {root!r})
from hypermem import HashingEmbedder, Memory
mem = Memory.open({path!r}, embedder=HashingEmbedder(dim=16))
print("ready", flush=True)
for b in range(40):
    mem.add_many([{{"id": f"w{{b}}_{{i}}", "text": f"batch {{b}} item {{i}}"}} for i in range(50)])
mem.close()
"""


def test_backup_of_an_open_store_holds_its_recent_writes(tmp_path):
    path = str(tmp_path / "agent.db")
    mem = _open(path)
    mem.add_many([{"id": f"a{i}", "text": f"fact {i}"} for i in range(300)])
    shutil.copy(path, tmp_path / "cp.db")  # the commits are in the -wal: the copy misses them
    cp = sqlite3.connect(tmp_path / "cp.db")
    tables = {r[0] for r in cp.execute("SELECT name FROM sqlite_master")}
    assert "hm_memories" not in tables or cp.execute("SELECT count(*) FROM hm_memories").fetchone()[0] < 300
    cp.close()
    backup(mem, tmp_path / "b1.db")
    backup(path, str(tmp_path / "b2.db"))
    for name in ("b1.db", "b2.db"):
        with _open(str(tmp_path / name)) as copy:
            assert sorted(copy.ids) == sorted(mem.ids)
            copy.add("the backup is a store of its own")
    assert len(mem) == 300
    mem.close()


def test_backup_while_another_process_writes_is_one_committed_state(tmp_path):
    path = str(tmp_path / "agent.db")
    _open(path).close()
    proc = subprocess.Popen([sys.executable, "-c", WRITER.format(root=ROOT, path=path)], stdout=subprocess.PIPE,
                            text=True, env=dict(os.environ, OMP_NUM_THREADS="1"))
    try:
        assert proc.stdout.readline().strip() == "ready"
        sizes = []
        for k in range(6):
            backup(path, tmp_path / f"b{k}.db")
            with _open(str(tmp_path / f"b{k}.db"), read_only=True) as copy:
                sizes.append(len(copy))
                assert len(copy) % 50 == 0  # whole transactions only
        assert proc.wait(timeout=300) == 0
    finally:
        proc.kill()
    backup(path, tmp_path / "last.db")
    assert len(_open(str(tmp_path / "last.db"), read_only=True)) == 2000
    assert sizes == sorted(sizes)


def test_backup_refusals_name_the_problem(tmp_path):
    path = str(tmp_path / "agent.db")
    mem = _open(path)
    mem.add("hello", id="h")
    (tmp_path / "taken.db").write_bytes(b"mine")
    with pytest.raises(FileExistsError, match="never replaces"):
        backup(mem, tmp_path / "taken.db")
    assert (tmp_path / "taken.db").read_bytes() == b"mine"
    for same in (path, path + "-wal", str(tmp_path / "." / "agent.db")):
        with pytest.raises(ValueError, match="the store .* itself"):
            backup(path, same)
    with pytest.raises(FileNotFoundError, match="no such SQLite store"):
        backup(tmp_path / "missing.db", tmp_path / "out.db")
    with pytest.raises(ValueError, match="save"):
        backup(Memory(embedder=HashingEmbedder(dim=16)), tmp_path / "out.db")
    (tmp_path / "notes.txt").write_text("not a database " * 100)
    with pytest.raises(ValueError, match="is it a SQLite store"):
        backup(tmp_path / "notes.txt", tmp_path / "out.db")
    assert not (tmp_path / "out.db").exists() and _stored(path) == ["h"]
    mem.close()


# ---------------------------------------------------------------------------- read-only target, full disk
def _snapshot() -> Memory:
    m = Memory(embedder=HashingEmbedder(dim=16))
    m.add_many([{"text": f"x{i}"} for i in range(20)])
    return m


def test_the_mode_is_applied_after_the_content_is_written(tmp_path, monkeypatch):
    """A 0o444 target: its mode on the temporary file before the write refused the write."""
    m = _snapshot()
    targets = [tmp_path / "snap.db", tmp_path / "snap.json"]
    m.save(targets[0])
    m.to_json(targets[1])
    for t in targets:
        t.chmod(0o444)
    seen = []
    real = os.chmod

    def chmod(p, mode, *a, **kw):
        seen.append((os.path.getsize(p), mode))
        return real(p, mode, *a, **kw)

    monkeypatch.setattr(atomic.os, "chmod", chmod)
    m.save(targets[0])
    m.to_json(targets[1])
    assert len(seen) == 2 and all(size > 0 and mode == 0o444 for size, mode in seen)
    assert all(t.stat().st_mode & 0o777 == 0o444 for t in targets)


READ_ONLY_TARGETS = """
import os, sys
sys.path.insert(0, {root!r})
from hypermem import HashingEmbedder, Memory
m = Memory(embedder=HashingEmbedder(dim=16)); m.add_many([{{"text": f"x{{i}}"}} for i in range(20)])
for name, write in (("snap.db", m.save), ("snap.json", m.to_json)):
    write(os.path.join("ro", name))
    print(name, oct(os.stat(os.path.join("ro", name)).st_mode & 0o777))
print(len(Memory.load("ro/snap.db")), len(Memory.from_json("ro/snap.json")), sorted(os.listdir("ro")))
"""


def test_a_read_only_snapshot_is_replaced_by_its_owner():
    """As a user whose files are 0o444 (setpriv when the tests run as root: root ignores modes)."""
    as_user, uid = [], os.getuid()
    if uid == 0:
        if shutil.which("setpriv") is None:
            pytest.skip("running as root without setpriv: a file's mode binds no root process")
        as_user, uid = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"], 65534
    top = tempfile.mkdtemp(prefix="hypermem-ro-")  # /tmp/pytest-of-root is closed to other users
    try:
        os.chmod(top, 0o755)
        folder = os.path.join(top, "ro")
        os.mkdir(folder)
        _snapshot().save(os.path.join(folder, "snap.db"))
        _snapshot().to_json(os.path.join(folder, "snap.json"))
        for p in (folder, *(os.path.join(folder, n) for n in os.listdir(folder))):
            if uid != os.getuid():
                os.chown(p, uid, -1)
            os.chmod(p, 0o755 if p == folder else 0o444)
        run = subprocess.run([*as_user, sys.executable, "-c", READ_ONLY_TARGETS.format(root=ROOT)], cwd=top,
                             capture_output=True, text=True, timeout=120, env=dict(os.environ, OMP_NUM_THREADS="1"))
        assert run.returncode == 0, run.stderr[-2000:]  # was: 'attempt to write a readonly database'
        assert run.stdout.splitlines() == ["snap.db 0o444", "snap.json 0o444", "20 20 ['snap.db', 'snap.json']"]
    finally:
        shutil.rmtree(top)


def test_a_full_disk_during_save_names_the_file(tmp_path, monkeypatch):
    """SQLite's SQLITE_FULL (a page limit stands in for the full disk): an OSError naming the target."""
    m = _snapshot()
    target = tmp_path / "snap.db"
    _snapshot().save(target)
    before = target.read_bytes()
    real = sqlite3.connect

    def small(*a, **kw):
        con = real(*a, **kw)
        con.execute("PRAGMA max_page_count = 3")
        return con

    monkeypatch.setattr(atomic.sqlite3, "connect", small)
    with pytest.raises(OSError, match="database or disk is full") as info:  # was a bare sqlite3.OperationalError
        m.save(target)
    assert info.value.errno == errno.ENOSPC and info.value.filename == str(target)
    assert target.read_bytes() == before and os.listdir(tmp_path) == ["snap.db"]


def test_a_failed_fsync_of_to_json_names_the_file(tmp_path, monkeypatch):
    m = _snapshot()
    target = tmp_path / "snap.json"

    def full(fd):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(atomic.os, "fsync", full)
    with pytest.raises(OSError, match="No space left") as info:
        m.to_json(target)
    assert info.value.errno == errno.ENOSPC and info.value.filename == str(target)
    assert os.listdir(tmp_path) == []
