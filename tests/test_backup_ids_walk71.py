"""A security walk over backups, node ids and DataFrame rows: a backup never replaces a file that
appears at its name while it is written, keeps a private store private, leaves no ``-wal`` /
``-shm`` beside a store no process had open; "1 and 1.0" (and True, Decimal, complex next to 1)
is refused in any order; ``from_dataframe`` names the row of an error."""

from __future__ import annotations

import os
import sqlite3
import stat
from decimal import Decimal

import numpy as np
import pytest

from hypermem import HashingEmbedder, Memory
from hypermem.hierarchy.node_ids import check_node_ids
from hypermem.hierarchy.tree import children_map
from hypermem.store import backup
from hypermem.store import backups as backups_module
from hypermem.store.atomic import atomic_new_path

pytestmark = pytest.mark.usefixtures("one_thread")


def _store(path, n=3) -> str:
    with Memory.open(str(path), embedder=HashingEmbedder(dim=16)) as mem:
        mem.add_many([{"id": f"m{i}", "text": f"memory number {i}"} for i in range(n)])
    return str(path)


def _during_copy(monkeypatch, action) -> None:
    """Run ``action()`` when backup() opens its temporary copy (after dest was checked)."""
    real_connect = backups_module.connect

    def connect(path, query=None, **k):
        if query is None:   # the copy (the store is opened with a mode)
            action()
        return real_connect(path, query, **k)
    monkeypatch.setattr(backups_module, "connect", connect)


# ---------------------------------------------------------------------------- backup
def test_a_file_created_at_dest_during_the_backup_is_kept(tmp_path, monkeypatch):
    src, dest = _store(tmp_path / "agent.db"), tmp_path / "agent-backup.db"
    _during_copy(monkeypatch, lambda: dest.write_text("another job's backup\n"))
    with pytest.raises(FileExistsError, match="another process created the file") as info:
        backup(src, dest)
    assert info.value.filename == str(dest)
    assert dest.read_text() == "another job's backup\n"
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []  # no temporary left


def test_atomic_new_path_refuses_a_name_taken_before_or_during(tmp_path):
    (tmp_path / "taken").write_text("mine")
    os.symlink(tmp_path / "nowhere", tmp_path / "dangling")
    for name in ("taken", "dangling"):
        with pytest.raises(FileExistsError, match="never replaces"), atomic_new_path(tmp_path / name):
            raise AssertionError("not reached")
    target = tmp_path / "new.txt"
    with pytest.raises(FileExistsError), atomic_new_path(target) as tmp:
        tmp.write_text("late")
        target.write_text("first")
    assert target.read_text() == "first" and not (tmp_path / "nowhere").exists()
    with atomic_new_path(tmp_path / "ok.txt", 0o600) as tmp:
        tmp.write_text("ok")
    assert (tmp_path / "ok.txt").read_text() == "ok"
    assert stat.S_IMODE(os.stat(tmp_path / "ok.txt").st_mode) == 0o600
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dangling", "new.txt", "ok.txt", "taken"]


@pytest.mark.skipif(os.name != "posix", reason="POSIX modes")
def test_a_private_store_has_a_private_backup(tmp_path):
    src = _store(tmp_path / "private.db")
    os.chmod(src, 0o600)
    old = os.umask(0o022)
    try:
        backup(src, tmp_path / "b.db")
        os.chmod(src, 0o640)
        backup(src, tmp_path / "b2.db")
        os.umask(0o077)
        os.chmod(src, 0o644)
        backup(src, tmp_path / "b3.db")
    finally:
        os.umask(old)
    modes = [stat.S_IMODE(os.stat(tmp_path / n).st_mode) for n in ("b.db", "b2.db", "b3.db")]
    assert modes == [0o600, 0o640, 0o600]
    assert len(Memory.open(str(tmp_path / "b.db"), read_only=True)) == 3


def _side(path) -> list[str]:
    return [s for s in ("-wal", "-shm") if os.path.exists(str(path) + s)]


def test_a_backup_of_a_closed_store_leaves_no_side_files(tmp_path):
    src = _store(tmp_path / "side.db")
    assert _side(src) == []
    backup(src, tmp_path / "b.db")
    assert _side(src) == [] and _side(tmp_path / "b.db") == []
    assert len(Memory.open(str(tmp_path / "b.db"), read_only=True)) == 3


def test_side_files_of_a_store_opened_during_the_backup_stay(tmp_path, monkeypatch):
    src = _store(tmp_path / "side.db")
    other = []
    _during_copy(monkeypatch, lambda: other.append(sqlite3.connect(src)) or other[0].execute(
        "SELECT count(*) FROM hm_memories").fetchone())
    backup(src, tmp_path / "b.db")
    assert _side(src) == ["-wal", "-shm"]  # the other connection holds the store: its files stay
    other[0].execute("DELETE FROM hm_memories WHERE id = 'm0'")
    other[0].commit()
    assert other[0].execute("SELECT count(*) FROM hm_memories").fetchone()[0] == 2
    other[0].close()
    assert len(Memory.open(str(tmp_path / "b.db"), read_only=True)) == 3


def test_a_backup_of_an_open_memory_keeps_its_side_files(tmp_path):
    path = str(tmp_path / "agent.db")
    mem = Memory.open(path, embedder=HashingEmbedder(dim=16))
    mem.add("the meeting moved to Friday", id="a")
    backup(mem, tmp_path / "b.db")
    assert _side(path) == ["-wal", "-shm"]
    mem.add("still writing", id="b")
    assert sorted(mem.ids) == ["a", "b"]
    mem.close()


# ---------------------------------------------------------------------------- node ids
SAME = [(1, 1.0, "float"), (1, True, "bool"), (1, np.bool_(True), "bool"), (1, Decimal("1"), "Decimal"),
        (1, 1 + 0j, "complex"), (0, False, "bool"), (2.0, Decimal("2"), "Decimal")]


@pytest.mark.parametrize("a,b,kind", SAME)
def test_one_number_in_two_types_is_refused_in_either_order(a, b, kind):
    for pairs in ([(a, 9), (7, b)], [(7, b), (a, 9)], [(9, a), (b, 7)]):
        with pytest.raises(ValueError, match=r"pair 1: ids .* \(.*\) and .* \(.*\) are the same number in "
                                             r"different types.*"):
            check_node_ids(pairs)
    with pytest.raises(ValueError, match=rf"\({kind}\)"):
        check_node_ids([(a, 9), (7, b)])


def test_children_map_refuses_a_float_after_its_int_twin():
    for edges in ([(1.0, 2.0), (2, 3.0)], [(2, 3.0), (1.0, 2.0)]):
        with pytest.raises(ValueError, match=r"edge 1: ids 2 \(int\) and 2\.0 \(float\)"):
            children_map(edges)
    with pytest.raises(ValueError, match=r"ids 1 \(int\) and True \(bool\) .*one dict key"):
        check_node_ids([(2, 3)], extra=[True, 1])


def test_distinct_values_of_several_types_are_kept():
    check_node_ids([(True, False)])
    check_node_ids([(1, 2), (3.5, 4)])
    check_node_ids([(Decimal("1.5"), 2), ("a", "b")])
    assert children_map([(True, False)])[0] == {True: [False], False: []}


# ---------------------------------------------------------------------------- from_dataframe
def test_from_dataframe_names_the_row_after_reordering():
    pd = pytest.importorskip("pandas")
    df = pd.DataFrame({"id": ["kid", "ok", "p"], "text": ["child", "fine", 5], "parent": ["p", None, None]},
                      index=["r-kid", "r-ok", "r-p"])
    with pytest.raises(TypeError, match=r"^row 'r-p': text must be a string, got int$"):
        Memory.from_dataframe(df, embedder=HashingEmbedder(dim=8))
    df = pd.DataFrame({"id": ["a", "b"], "text": ["x", "y"], "meta": [None, {"k": float("nan")}]}, index=[10, 20])
    with pytest.raises((TypeError, ValueError), match="row 20") as info:
        Memory.from_dataframe(df, embedder=HashingEmbedder(dim=8))
    assert "item #" not in str(info.value)
