"""Durable stores used across ``os.fork()`` (pre-forked web workers), and a refresh racing a removal (walk 71).

Each forked child reports through a pipe and ends with ``os._exit`` (no test machinery runs in it)."""

from __future__ import annotations

import os
import sqlite3

import pytest

from hypermem import HashingEmbedder, Memory
from hypermem.store.backends.sqlite_open import release_inherited

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")


class Child:
    """A forked child: ``first()`` at once, then, when the parent says go, ``body(what first returned)``;
    the result (or the error) comes back as text (:meth:`result`)."""

    def __init__(self, body, first=lambda: None):
        go_r, self._go = os.pipe()
        self._out, out_w = os.pipe()
        self._ready, ready_w = os.pipe()
        self.pid = os.fork()
        if self.pid == 0:  # the child: never returns into pytest
            text = "error: no result"
            try:
                try:
                    ctx = first()
                finally:
                    os.write(ready_w, b"r")
                os.read(go_r, 1)
                text = repr(body(ctx))
            except BaseException as exc:  # noqa: BLE001 - reported to the parent
                text = f"error {type(exc).__name__}: {exc}"
            finally:
                try:
                    os.write(out_w, text.encode())
                finally:
                    os._exit(0)
        for fd in (go_r, out_w, ready_w):
            os.close(fd)

    def ready(self) -> None:
        """Wait until ``first()`` ran in the child."""
        os.read(self._ready, 1)
        os.close(self._ready)

    def result(self) -> str:
        os.write(self._go, b"g")
        os.close(self._go)
        chunks = []
        while chunk := os.read(self._out, 65536):
            chunks.append(chunk)
        os.close(self._out)
        os.waitpid(self.pid, 0)
        return b"".join(chunks).decode()


def _rows(path, table="hm_memories") -> int:
    con = sqlite3.connect(path)
    try:
        return con.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
    finally:
        con.close()


def test_sqlite_writes_of_a_forked_worker_survive_the_parents_close(tmp_path):
    """fork_lost2: the parent closes (SQLite deletes the WAL it thinks no one else uses); the worker's
    acknowledged writes went into that deleted log and were lost (1 row of 101)."""
    path = tmp_path / "store.db"
    m = Memory.open(path, embedder=HashingEmbedder(dim=32))
    m.add(text="boot", id="boot")
    child = Child(lambda _: len(m.add_many([{"text": f"req {n}"} for n in range(50)])))
    m.close()
    assert child.result() == "50"
    assert _rows(path) == 51


def test_sqlite_a_child_opening_its_own_store_is_not_undone_by_the_inherited_one(tmp_path):
    """The advice "open it again after fork" failed as well while the inherited connection lived:
    SQLite's per-process lock record made the child's new connection take no lock of its own."""
    path = tmp_path / "store.db"
    m = Memory.open(path, embedder=HashingEmbedder(dim=32))
    m.add(text="boot", id="boot")

    def first():
        own = Memory.open(path, embedder=HashingEmbedder(dim=32))
        own.search("boot", k=1)          # opened and read while the parent still has the file open
        return own

    child = Child(lambda own: len(own.add_many([{"text": f"req {n}"} for n in range(30)])), first)
    child.ready()
    m.close()                            # then the parent closes, then the child writes
    assert child.result() == "30"
    assert _rows(path) == 31


def test_pending_touches_at_fork_are_written_once(tmp_path):
    """fork_pending: a count left pending (the write lock was busy) was written by the parent and
    again by every child that wrote."""
    path = tmp_path / "store.db"
    m = Memory.open(path, embedder=HashingEmbedder(dim=32))
    m.add_many([{"text": f"item number {i}", "id": f"p{i}"} for i in range(5)])
    lock = sqlite3.connect(path, isolation_level=None)
    lock.execute("BEGIN IMMEDIATE")     # another process holds the write lock: the touch stays pending
    hit = m.search("item number 3", k=1, mode="nearest")[0].id
    lock.execute("COMMIT")
    lock.close()
    for w in range(2):
        assert Child(lambda _, w=w: m.add(text=f"child {w}", id=f"c{w}")).result() == f"'c{w}'"
    m.add(text="parent", id="par")
    m.close()
    con = sqlite3.connect(path)
    assert con.execute("SELECT access_count FROM hm_memories WHERE id = ?", (hit,)).fetchone()[0] == 1
    con.close()


def test_refresh_does_not_fail_on_a_row_removed_after_its_snapshot(tmp_path):
    """ro_race: the changed rows were read in one snapshot, their embeddings (a bound store keeps no
    column) read again after it; a row removed in between raised "not in the storage any more"."""
    path = tmp_path / "store.db"
    emb = HashingEmbedder(dim=32)
    w = Memory.open(path, embedder=emb)
    w.add_many([{"text": f"seed {i}", "id": f"s{i}"} for i in range(5)])
    r = Memory.open(path, embedder=emb, read_only=True)
    assert len(r) == 5
    w.add_many([{"text": "apple", "id": "gone"}, {"text": "apple pie", "id": "kept"}])
    st = r.storage
    read_changes = st.changes_since

    def changes_then_removed(*args, **kwargs):
        out = read_changes(*args, **kwargs)
        w.remove("gone")                 # another process removes it after the snapshot
        return out

    st.changes_since = changes_then_removed
    try:
        hits = r.search("apple", k=3)    # applies the add; must not raise
    finally:
        del st.changes_since
    assert "kept" in [h.id for h in hits]
    r.refresh()
    assert "gone" not in r.ids and "kept" in r.ids
    assert float((r.point("kept") - w.point("kept")).abs().max()) == 0.0
    r.close()
    w.close()


@pytest.mark.parametrize("mirror", [True, False])
def test_postgres_a_forked_child_uses_a_session_of_its_own(pg_url, mirror):
    """pgfork: the child talked over the parent's socket (replies interleaved), and its close ended
    the parent's session."""
    m = Memory.open(pg_url, embedder=HashingEmbedder(dim=32), mirror=mirror)
    m.add(text="parent first", id="p0")
    parent_session = m.storage.con.info.backend_pid

    def body(_):
        ids = m.add_many([{"text": f"child {n}", "id": f"c{n}"} for n in range(3)])
        session = m.storage.con.info.backend_pid
        m.close()        # must not send Terminate on the parent's socket
        return len(ids), session != parent_session

    assert Child(body).result() == "(3, True)"
    m.add(text="parent second", id="p1")         # the parent's session still works
    assert m.storage.con.info.backend_pid == parent_session
    assert len(m) == 5
    m.close()


def test_an_inherited_sqlite_connection_is_released_without_deleting_another_process_log(tmp_path):
    """Closing an inherited connection checkpoints and deletes the WAL when it gets the EXCLUSIVE
    lock: from its stale view it deleted the log a killed writer left (its 50 commits lost)."""
    path = str(tmp_path / "raw.db")
    a = sqlite3.connect(path, isolation_level=None)
    a.execute("PRAGMA journal_mode = WAL")
    a.execute("CREATE TABLE t (x)")
    a.execute("INSERT INTO t VALUES (1)")
    child = Child(lambda _: release_inherited(a, path))
    a.close()                                      # the parent closes: its WAL is deleted

    def writer(_):                                 # then a writer commits 50 rows and is killed
        c = sqlite3.connect(path, isolation_level=None)
        c.execute("PRAGMA wal_autocheckpoint = 0")
        for i in range(50):
            c.execute("INSERT INTO t VALUES (?)", (i,))
        os._exit(9)

    Child(writer).result()
    assert os.path.exists(path + "-wal")
    assert child.result() == "None"
    assert _rows(path, "t") == 51
