"""Durable stores under an operator's walk: a backup restored into a live store, a row whose
parent is gone, a failing touch (disk full)."""

from __future__ import annotations

import sqlite3
import warnings

import pytest

from hypermem import HashingEmbedder, Memory

pytestmark = pytest.mark.usefixtures("one_thread")


def _open(path, **kw):
    return Memory.open(path, embedder=HashingEmbedder(dim=16), **kw)


def _copy(src: str, dst: str) -> None:
    """The SQLite backup API from ``src`` into ``dst`` (a live file: its pages replaced)."""
    a, b = sqlite3.connect(src), sqlite3.connect(dst)
    try:
        a.backup(b)
    finally:
        a.close()
        b.close()


def test_a_backup_restored_into_a_live_store_is_seen_whole(tmp_path):
    path, bak = str(tmp_path / "mem.db"), str(tmp_path / "bak.db")
    a = _open(path)
    a.add("root", id="r")
    for i in range(4):
        a.add(f"kept {i}", id=f"k{i}", parent="r")
    _copy(path, bak)  # 5 memories
    for i in range(3):
        a.add(f"later {i}", id=f"d{i}", parent="r")
    assert len(a.ids) == 8
    _copy(bak, path)  # restored while ``a`` holds it open
    assert sorted(_open(path, read_only=True).ids) == ["k0", "k1", "k2", "k3", "r"]
    assert a.refresh() is True
    assert sorted(a.ids) == ["k0", "k1", "k2", "k3", "r"]
    assert all(h.record.id[0] != "d" for h in a.search("later 0", k=8))
    b = _open(path)
    b.add("by b", id="b")
    a.refresh()
    assert sorted(a.ids) == sorted(b.ids) == ["b", "k0", "k1", "k2", "k3", "r"]
    with pytest.raises(KeyError, match="d0"):
        a.add("x", parent="d0")
    again = _open(path, read_only=True)
    assert len(again.ids) == 6 and again.stats() is not None
    for m in (a, b, again):
        m.close()


def test_a_write_under_a_parent_gone_from_storage_is_refused(tmp_path):
    path = str(tmp_path / "mem.db")
    a = _open(path)
    a.add("root", id="p")
    a.add("other", id="q")
    con = sqlite3.connect(path)  # the parent's row gone without a trace (no log entry, no new version)
    con.execute("DELETE FROM hm_memories WHERE id = 'p'")
    con.commit()
    con.close()
    with pytest.raises(KeyError, match="'p'"):
        a.add("child", id="c", parent="p")
    with pytest.raises(KeyError, match="'p'"):
        a.link("q", "p")
    a.close()
    fresh = _open(path)
    assert fresh.ids == ["q"] and fresh.parent("q") is None
    fresh.close()


def test_an_orphan_row_loads_as_a_root_with_a_warning(tmp_path):
    path = str(tmp_path / "mem.db")
    a = _open(path)
    a.add("root", id="r")
    a.add("child", id="c", parent="r")
    a.add("grandchild", id="g", parent="c")
    a.close()
    con = sqlite3.connect(path)
    con.execute("UPDATE hm_memories SET parent_id = 'ghost' WHERE id = 'c'")
    con.commit()
    con.close()
    for kw in ({"read_only": True}, {}):
        with pytest.warns(RuntimeWarning, match="'c' \\(parent 'ghost'\\)"):
            m = _open(path, **kw)
        assert sorted(m.ids) == ["c", "g", "r"] and m.parent("c") is None and m.parent("g") == "c"
        assert m.search("grandchild", k=1)[0].record.id == "g"
        m.close()
    with pytest.warns(RuntimeWarning):
        m = _open(path)
    m.update("c", meta={"fixed": True})  # stores it as the root it now is
    m.close()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert _open(path, read_only=True).parent("c") is None


def test_a_touch_that_cannot_be_written_stays_pending(tmp_path, monkeypatch):
    path = str(tmp_path / "mem.db")
    a = _open(path)
    a.add("alpha", id="x")
    a.add("beta", id="y")

    def full(items):
        raise sqlite3.OperationalError("database or disk is full")

    monkeypatch.setattr(a.storage, "touch", full)
    with pytest.warns(RuntimeWarning, match="disk is full"):
        assert a.search("alpha", k=1)[0].record.id == "x"
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # warned once
        a.search("alpha", k=1)
    assert a.get("x").access_count == 2
    assert _open(path, read_only=True).get("x").access_count == 0
    monkeypatch.undo()
    a.add("gamma", id="z")  # the next write stores the pending counts
    assert _open(path, read_only=True).get("x").access_count == 2
    a.close()
