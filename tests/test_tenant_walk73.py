"""Walk 73 (multi-tenant SaaS): a store closed while another thread is inside a call on it, a
tenant's files removed or replaced under open handles, and a process at its descriptor limit."""

from __future__ import annotations

import contextlib
import os
import sys
import threading

import pytest

from hypermem import HashingEmbedder, Memory
from hypermem.store import backup
from hypermem.store.backends.durable import StorageError
from hypermem.store.backends.sqlite import SqliteStorage

EMB = HashingEmbedder(dim=16)


def _store(path, n: int = 3) -> None:
    with Memory.open(path, embedder=EMB) as m:
        m.add_many([{"text": f"plan {i}", "id": f"s{i}"} for i in range(n)])


def test_close_waits_for_the_call_in_flight_and_the_next_call_is_refused(tmp_path, monkeypatch):
    """close_while_search: the close freed the connection under the other thread's call (a
    segfault in C); it now waits for that call, whose next call raises StorageError (closed)."""
    path = tmp_path / "t.db"
    _store(path)
    m = Memory.open(path, embedder=EMB)
    inside, go = threading.Event(), threading.Event()
    real = SqliteStorage.changes_since

    def paused(self, *args, **kwargs):  # a refresh stopped in the middle of its call
        inside.set()
        assert go.wait(10)
        return real(self, *args, **kwargs)

    monkeypatch.setattr(SqliteStorage, "changes_since", paused)
    said: list[str] = []
    closed = threading.Event()

    def request():
        try:
            said.append(str([r.id for r in m.search("plan", k=1, touch=False)]))
            assert closed.wait(10)   # the next call comes after the close (a lock is not fair: it could win)
            m.search("plan", k=1)
            said.append("second search ran")
        except Exception as exc:  # noqa: BLE001 - the outcome is the assertion
            said.append(f"{type(exc).__name__}: {exc}")

    worker = threading.Thread(target=request)
    worker.start()
    assert inside.wait(10)
    def close():
        m.close()
        closed.set()

    closer = threading.Thread(target=close)
    closer.start()
    closer.join(0.3)
    waited = closer.is_alive()  # was: closed at once, the paused call then ran on a closed connection
    go.set()
    closer.join(10)
    worker.join(10)
    assert waited and not closer.is_alive() and not worker.is_alive()
    assert said[0] in ("['s0']", "['s1']", "['s2']"), said
    assert said[1].startswith("StorageError") and "closed" in said[1], said


def test_a_close_inside_a_call_of_the_same_thread_does_not_deadlock(tmp_path):
    path = tmp_path / "t.db"
    _store(path)
    m = Memory.open(path, embedder=EMB)
    m.search("plan", k=1)  # a pending-free store: close has nothing to flush
    with m.state.lock:  # as a callback run inside a call would
        m.close()
    with pytest.raises(StorageError, match="closed"):
        m.search("plan", k=1)


@pytest.mark.parametrize("how", ["removed", "replaced"])
@pytest.mark.parametrize("read_only", [False, True])
def test_reads_after_the_file_was_removed_or_replaced_are_refused(tmp_path, how, read_only):
    """delete_tenant: both handles went on answering the deleted tenant's data, and never saw
    the new store made at the same path."""
    path = tmp_path / "acme.db"
    _store(path)
    h = Memory.open(path, embedder=EMB, read_only=read_only)
    assert [r.id for r in h.search("plan 1", k=1, touch=False)] == ["s1"]
    for f in tmp_path.iterdir():
        f.unlink()
    if how == "replaced":
        with Memory.open(path, embedder=EMB) as new:
            new.add("the new tenant", id="n1")
    for read in (lambda: h.search("plan", k=1), lambda: h.get("s1"), h.refresh):
        with pytest.raises(StorageError, match="removed or replaced"):
            read()
    h.close()
    if how == "replaced":
        with Memory.open(path, embedder=EMB, read_only=True) as new:
            assert new.ids == ["n1"]


@contextlib.contextmanager
def _descriptors_left(k: int):
    """This process with exactly ``k`` descriptors free under a lowered ``RLIMIT_NOFILE``."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    top = max(int(fd) for fd in os.listdir("/proc/self/fd"))
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(top + 16 + k, hard), hard))
    held: list[int] = []
    try:
        with contextlib.suppress(OSError):
            while True:
                held.append(os.open(os.devnull, os.O_RDONLY))
        for _ in range(k):
            os.close(held.pop())
        yield
    finally:
        for fd in held:
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


linux = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc/self/fd, RLIMIT_NOFILE")


@linux
@pytest.mark.parametrize("free", [0, 1, 2])
def test_at_the_descriptor_limit_a_new_store_says_so_and_leaves_no_file(tmp_path, free):
    """fd_limit_new: 'unable to open database file', and new.db (no tables) plus an empty -wal
    were left, which a read-only open then called a store that 'holds no memory yet'."""
    path = tmp_path / "new.db"
    with _descriptors_left(free), pytest.raises(StorageError) as caught:
        Memory.open(path, embedder=EMB)
    assert "too many open files" in str(caught.value) and "RLIMIT_NOFILE is" in str(caught.value)
    assert str(path) in str(caught.value)
    assert sorted(os.listdir(tmp_path)) == []
    with Memory.open(path, embedder=EMB) as m:  # below the limit: created as usual
        m.add("hello", id="h")
    with Memory.open(path, embedder=EMB, read_only=True) as m:
        assert m.ids == ["h"]


@linux
def test_at_the_descriptor_limit_a_file_that_existed_before_is_kept(tmp_path):
    path = tmp_path / "empty.db"
    path.write_bytes(b"")  # made by someone else: never this call's to remove
    with _descriptors_left(0), pytest.raises(StorageError, match="too many open files"):
        Memory.open(path, embedder=EMB)
    assert sorted(os.listdir(tmp_path)) == ["empty.db"]


@linux
def test_at_the_descriptor_limit_an_existing_store_and_a_backup_say_so(tmp_path):
    """fd_limit / fd_limit_save: the open said only 'unable to open database file'; backup()
    raised a bare sqlite3.OperationalError naming no file."""
    path = tmp_path / "t.db"
    _store(path)
    for free in (0, 1, 2, 4):
        with _descriptors_left(free), pytest.raises(StorageError) as caught:
            backup(path, tmp_path / f"bk{free}.db")
        assert str(path) in str(caught.value) and "too many open files" in str(caught.value), (free, caught.value)
    with _descriptors_left(1), pytest.raises(StorageError, match="too many open files"):
        Memory.open(path, embedder=EMB)
    with Memory.open(path, embedder=EMB) as m:  # the store as it was (its -wal / -shm are SQLite's to manage)
        assert m.ids == ["s0", "s1", "s2"]
