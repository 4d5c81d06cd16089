"""Several processes on one durable store: creating it at once, searches that do not queue
behind another process's write, touches of memories another process added, PostgreSQL
errors the connection survives, read-only folders and read-only handles that leave no files."""

from __future__ import annotations

import gc
import multiprocessing as mp
import os
import shutil
import sqlite3
import stat
import subprocess
import sys
import tempfile
import textwrap

import pytest

from hypermem import HashingEmbedder, Memory
from hypermem.cli.main import main as cli_main
from hypermem.store.backends import StorageError

pytestmark = pytest.mark.usefixtures("one_thread")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EMB = {"embedder": HashingEmbedder(dim=16)}


def _open_and_add(target, barrier, out, mirror):
    barrier.wait()
    try:
        mem = Memory.open(target, mirror=mirror, **EMB)
        mem.add("x")
        mem.close()
        out.put("ok")
    except Exception as exc:  # noqa: BLE001 - reported to the parent
        out.put(f"{type(exc).__name__}: {exc}")


def _race(target, n=4, mirror=True) -> list[str]:
    """``n`` forked processes open the same new store at one instant and add one memory each."""
    ctx = mp.get_context("fork")
    barrier, out = ctx.Barrier(n), ctx.Queue()
    procs = [ctx.Process(target=_open_and_add, args=(target, barrier, out, mirror)) for _ in range(n)]
    for p in procs:
        p.start()
    results = [out.get(timeout=120) for _ in procs]
    for p in procs:
        p.join(60)
    return results


# ---------------------------------------------------------------------- 1. creating at once
def test_processes_create_a_new_sqlite_store_at_once(tmp_path):
    for trial in range(2):
        path = str(tmp_path / f"race{trial}.db")
        assert _race(path) == ["ok"] * 4
        with Memory.open(path, read_only=True) as mem:
            assert len(mem) == 4


def test_clients_create_a_new_postgres_store_at_once(pg_url, pg_server):
    assert _race(pg_url) == ["ok"] * 4  # CREATE EXTENSION and CREATE TABLE raced: duplicate key
    with Memory.open(pg_url, read_only=True) as mem:
        assert len(mem) == 4
    bare = pg_server.create_database()
    assert _race(bare, mirror=False) == ["ok"] * 4  # the client indexes too
    with Memory.open(bare, read_only=True) as mem:
        assert len(mem) == 4


# ---------------------------------------------------------------------- 2. searches do not queue
def _stored_counts(target) -> dict[str, int]:
    with Memory.open(target, read_only=True) as mem:
        return {r.id: r.access_count for r in mem}


def test_a_search_does_not_wait_for_another_sqlite_writer(tmp_path):
    path = str(tmp_path / "s.db")
    mem = Memory.open(path, **EMB)
    a = mem.add("alpha note", id="a")
    writer = sqlite3.connect(path, isolation_level=None)
    writer.execute("BEGIN IMMEDIATE")  # another process's long (or stopped) write transaction
    res = mem.search("alpha note", k=1)  # waited 60 s, then 'database is locked'
    assert res[0].id == a and res[0].record.access_count == 1  # the in-process view counts it
    mem.touch([a])
    assert mem.get(a).access_count == 2
    assert _stored_counts(path) == {a: 0}  # pending: the lock is still held
    writer.execute("ROLLBACK")
    mem.add("beta", id="b")  # the next write writes the pending touches first
    assert _stored_counts(path) == {a: 2, "b": 0}
    assert mem.get(a).access_count == 2
    writer.execute("BEGIN IMMEDIATE")
    mem.search("alpha note", k=1)
    writer.execute("ROLLBACK")
    mem.close()  # close writes what is still pending
    assert _stored_counts(path) == {a: 3, "b": 0}
    writer.close()


def test_pending_touches_are_written_when_the_process_exits(tmp_path):
    path = str(tmp_path / "s.db")
    with Memory.open(path, **EMB) as mem:
        mem.add("alpha note", id="a")
    code = textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {ROOT!r})
        from hypermem import Memory, HashingEmbedder
        mem = Memory.open({path!r}, embedder=HashingEmbedder(dim=16))
        mem.search("alpha", k=1)
        print("searched", flush=True)
        sys.stdin.readline()  # exits without close()
    """)
    writer = sqlite3.connect(path, isolation_level=None)
    writer.execute("BEGIN IMMEDIATE")
    proc = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                            env=dict(os.environ, OMP_NUM_THREADS="1"))
    assert proc.stdout.readline().strip() == "searched"
    writer.execute("ROLLBACK")
    writer.close()
    proc.communicate("\n", timeout=60)
    assert proc.returncode == 0
    assert _stored_counts(path) == {"a": 1}


def test_a_writer_that_finds_the_lock_taken_says_who_holds_it(tmp_path):
    path = str(tmp_path / "s.db")
    mem = Memory.open(path, **EMB)
    writer = sqlite3.connect(path, isolation_level=None)
    writer.execute("BEGIN IMMEDIATE")
    impatient = sqlite3.connect(path, isolation_level=None, timeout=0)
    with pytest.raises(sqlite3.OperationalError) as caught:
        impatient.execute("BEGIN IMMEDIATE")
    message = str(mem.storage.error(caught.value))
    assert "another process holds this store's write lock" in message and "retry" in message
    writer.execute("ROLLBACK")
    for con in (writer, impatient):
        con.close()
    mem.close()


def _lock_version_row(url):
    import psycopg

    con = psycopg.connect(url)
    con.execute("SELECT value FROM hypermem_state WHERE key = 'version' FOR UPDATE")  # a writer mid-transaction
    return con


def test_a_search_does_not_wait_for_another_postgres_writer(pg_url):
    bounded = pg_url + ("&" if "?" in pg_url else "?") + "options=-c%20lock_timeout%3D5000"  # else: it hung
    mem = Memory.open(bounded, **EMB)
    srv = Memory.open(bounded, mirror=False, **EMB)
    a = mem.add("alpha note", id="a")
    writer = _lock_version_row(pg_url)
    assert mem.search("alpha note", k=1)[0].record.access_count == 1
    hit = srv.search("alpha note", k=1)[0]
    assert hit.id == a and hit.record.access_count == 1
    srv.touch([a])
    assert _stored_counts(pg_url) == {a: 0}
    writer.rollback()
    mem.add("beta", id="b")
    assert _stored_counts(pg_url) == {a: 1, "b": 0}
    srv.close()  # writes its two pending touches
    assert _stored_counts(pg_url) == {a: 3, "b": 0}
    writer.close()
    mem.close()


# ---------------------------------------------------------------------- 3. PostgreSQL errors
def test_a_postgres_lock_timeout_keeps_the_connection(pg_url):
    mem = Memory.open(pg_url + ("&" if "?" in pg_url else "?") + "options=-c%20lock_timeout%3D200", **EMB)
    mem.add("alpha")
    con = mem.storage.con
    writer = _lock_version_row(pg_url)
    with pytest.raises(StorageError) as caught:
        mem.add("beta")
    writer.rollback()
    writer.close()
    message = str(caught.value)
    assert "lock another client holds" in message and "connection lost" not in message
    assert mem.storage.con is con and not con.closed  # kept, rolled back
    mem.add("gamma")
    assert len(mem) == 2
    mem.close()


def test_postgres_errors_the_connection_survives_are_named(pg_url):
    import psycopg.errors as E

    mem = Memory.open(pg_url, **EMB)
    con = mem.storage.con
    for exc, words in ((E.QueryCanceled("canceling statement due to statement timeout"), "statement_timeout"),
                       (E.DeadlockDetected("deadlock detected"), "deadlock"),
                       (E.SerializationFailure("could not serialize"), "serialization"),
                       (E.DiskFull("could not extend file"), "disk is full")):
        message = str(mem.storage.error(exc))
        assert words in message and "connection lost" not in message, message
        assert mem.storage.con is con
    mem.close()


# ---------------------------------------------------------------------- 5. touch after another's add
def test_touch_of_a_memory_another_handle_added(tmp_path, pg_url):
    for target in (str(tmp_path / "t.db"), pg_url):
        first, second = Memory.open(target, **EMB), Memory.open(target, **EMB)
        p = first.add("written by the first")
        second.touch([p])  # KeyError: unknown memory id
        assert second.get(p).access_count == 1
        assert _stored_counts(target) == {p: 1}
        with pytest.raises(KeyError, match="unknown memory id"):
            second.touch(["nowhere"])
        first.close()
        second.close()


# ---------------------------------------------------------------------- 4. read-only folders and handles
def test_read_only_handles_leave_no_files_beside_the_store(tmp_path, capsys):
    path = str(tmp_path / "s.db")
    with Memory.open(path, **EMB) as mem:
        mem.add("hello world")
    assert os.listdir(tmp_path) == ["s.db"]
    with Memory.open(path, read_only=True, **EMB) as ro:
        assert ro.search("hello world", k=1)[0].record.text == "hello world"
    assert os.listdir(tmp_path) == ["s.db"]
    assert cli_main(["stats", path]) == 0
    assert cli_main(["search", path, "hello", "--embedder", "hashing"]) == 0
    capsys.readouterr()
    gc.collect()  # the commands' memories (a process ending closes them too)
    with pytest.raises(FileExistsError, match="durable store"):
        Memory(**EMB).save(path)
    assert os.listdir(tmp_path) == ["s.db"]


def test_a_read_only_handle_of_an_unwritable_store_reads_it_as_it_is(tmp_path, monkeypatch):
    """Simulated (root ignores file modes): the file and folder are not writable here."""
    path = str(tmp_path / "s.db")
    with Memory.open(path, **EMB) as mem:
        mem.add("hello world")
    real = os.access
    monkeypatch.setattr(os, "access", lambda p, mode, **kw: False if mode == os.W_OK else real(p, mode, **kw))
    with Memory.open(path, read_only=True, **EMB) as ro:
        assert ro.storage.immutable
        assert ro.search("hello world", k=1)[0].record.text == "hello world"
    assert os.listdir(tmp_path) == ["s.db"]


READ_ONLY_FOLDER = """
import os, sys
sys.path.insert(0, {root!r})
from hypermem import Memory, HashingEmbedder
from hypermem.cli.main import main
emb = HashingEmbedder(dim=16)
with Memory.open("ro/s.db", read_only=True, embedder=emb) as mem:
    print("read:", mem.search("hello world", k=1)[0].record.text)
for target in ("ro/s.db", "ro/new.db"):
    try:
        Memory.open(target, embedder=emb)
    except Exception as exc:
        print("refused:", exc)
print("cli:", main(["stats", "ro/s.db"]))
print("files:", sorted(os.listdir("ro")))
"""


def test_a_store_in_a_read_only_folder(tmp_path):
    """Run as an unprivileged user (setpriv, when the tests run as root: root ignores modes)."""
    as_user = []
    if os.getuid() == 0:
        if shutil.which("setpriv") is None:
            pytest.skip("running as root without setpriv: a folder's mode binds no root process")
        as_user = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
    top = tempfile.mkdtemp(prefix="hypermem-ro-")  # /tmp/pytest-of-root is closed to other users
    try:
        os.chmod(top, 0o755)
        folder = os.path.join(top, "ro")
        os.mkdir(folder)
        with Memory.open(os.path.join(folder, "s.db"), **EMB) as mem:
            mem.add("hello world")
        os.chmod(os.path.join(folder, "s.db"), 0o666)
        os.chmod(folder, stat.S_IRUSR | stat.S_IXUSR | stat.S_IRGRP | stat.S_IXGRP | stat.S_IROTH | stat.S_IXOTH)
        run = subprocess.run([*as_user, sys.executable, "-c", READ_ONLY_FOLDER.format(root=ROOT)], cwd=top,
                             capture_output=True, text=True, timeout=120, env=dict(os.environ, OMP_NUM_THREADS="1"))
        out = run.stdout
        assert run.returncode == 0, run.stderr[-2000:]
        assert "read: hello world" in out  # 'attempt to write a readonly database'
        refusals = [line for line in out.splitlines() if line.startswith("refused:")]
        assert len(refusals) == 2 and all("is not writable (permission denied)" in r for r in refusals)
        assert "read_only=True" in refusals[0] and "created" in refusals[1]
        assert "cli: 0" in out  # was 'bad memory file'
        assert "files: ['s.db']" in out
    finally:
        os.chmod(os.path.join(top, "ro"), 0o755)
        shutil.rmtree(top)


def test_navigation_finds_an_id_another_handle_just_added(tmp_path):
    """`B.children(p)` for a memory another process had just added raised KeyError 'unknown memory
    id' until some search or refresh(); navigation now catches up once for an id it does not know."""
    emb = HashingEmbedder(dim=16)
    with Memory.open(tmp_path / "s.db", embedder=emb) as a, Memory.open(tmp_path / "s.db", embedder=emb) as b:
        a.add("a topic", id="p")
        a.add("a note under it", id="c", parent="p")
        assert b.children("p") == ["c"] and b.parent("c") == "p" and b.ancestors("c") == ["p"]
        assert b.level("c") == 1 and b.point("c").shape == (16,)
        with pytest.raises(KeyError, match="unknown memory id 'nope'"):
            b.children("nope")
