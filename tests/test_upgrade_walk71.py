"""Stores written by older versions, opened by this one (upgrade walk 71): a layout-1 process still
writing after the upgrade, the removal log's floor and layout 3, the one-way upgrade's warning,
and a snapshot saved before hybrid search ranking as it did."""

from __future__ import annotations

import sqlite3
import warnings

import pytest

from hypermem import CallableEmbedder, HashingEmbedder, Memory
from hypermem.store.backends.rows import COLUMNS


def _emb():
    return HashingEmbedder(dim=16)


def _target(request, tmp_path, kind: str) -> str:
    return str(tmp_path / "m.db") if kind == "sqlite" else request.getfixturevalue("pg_url")


class _Sql:
    """Raw SQL on a store's tables, as another (older) process would run it."""

    def __init__(self, target: str):
        self.pg = target.startswith("postgresql")
        if self.pg:
            import psycopg

            self.con = psycopg.connect(target, autocommit=True)
        else:
            self.con = sqlite3.connect(target, isolation_level=None)
        self.p = "hypermem" if self.pg else "hm"

    def run(self, *statements: str) -> None:
        for sql in statements:
            self.con.execute(sql.replace("{p}", self.p))

    def one(self, sql: str):
        return self.con.execute(sql.replace("{p}", self.p)).fetchone()

    def layout(self) -> int:
        return int(self.one("SELECT value FROM {p}_config WHERE key = 'layout'")[0])


    def close(self) -> None:
        self.con.close()


def _layout(target: str) -> int:
    sql = _Sql(target)
    try:
        return sql.layout()
    finally:
        sql.close()


def _downgrade_to_layout_1(target: str) -> None:
    """The store as a version of layout 1 wrote it: no change stamps, no removal log."""
    sql = _Sql(target)
    sql.run("DROP INDEX {p}_memories_changed", "DROP INDEX {p}_memories_touched", "DROP TABLE {p}_removed", "ALTER TABLE {p}_memories DROP COLUMN changed_at",
            "ALTER TABLE {p}_memories DROP COLUMN touched_at", "DELETE FROM {p}_state WHERE key <> 'version'",
            "UPDATE {p}_config SET value = '1' WHERE key = 'layout'")
    sql.close()


def _old_process_write(target: str, add: str | None = None, edit: str | None = None, remove: str | None = None):
    """One write transaction of a layout-1 process that opened the store before it was upgraded:
    rows written without ``changed_at`` (the column's default, 0), no removal log, version + 1."""
    sql = _Sql(target)
    cols = list(COLUMNS) + (["dirv", "lor"] if sql.pg else [])
    if add is not None:
        picks = ", ".join(f"'{add}'" if c == "id" else "'written by the old process'" if c == "text" else
                          "seq + 1000" if c == "seq" else c for c in cols)
        sql.run(f"INSERT INTO {{p}}_memories ({', '.join(cols)}) SELECT {picks} FROM {{p}}_memories WHERE id = 'b'")
    if edit is not None:
        sql.run(f"UPDATE {{p}}_memories SET text = 'edited by the old process' WHERE id = '{edit}'")
    if remove is not None:
        sql.run(f"DELETE FROM {{p}}_memories WHERE id = '{remove}'")
    sql.run("UPDATE {p}_state SET value = value + 1 WHERE key = 'version'")
    sql.close()


def _full_reads(mem, monkeypatch) -> list:
    calls: list = []
    load = mem.storage.load_rows

    def counted(*args, **kwargs):
        calls.append(1)
        return load(*args, **kwargs)

    monkeypatch.setattr(mem.storage, "load_rows", counted)
    return calls


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_writes_of_a_layout_1_process_still_open_after_the_upgrade_are_seen(request, tmp_path, monkeypatch, kind):
    target = _target(request, tmp_path, kind)
    with Memory.open(target, embedder=_emb()) as mem:
        mem.add_many([{"text": "alpha", "id": "a"}, {"text": "beta", "id": "b", "parent": "a"},
                      {"text": "gamma", "id": "c"}, {"text": "delta", "id": "d"}])
    _downgrade_to_layout_1(target)
    with pytest.warns(UserWarning, match=r"from storage layout 1 to 2 .*one-way.*can no longer open it"):
        reader = Memory.open(target, embedder=_emb())   # writable: upgraded in place
    with warnings.catch_warnings():
        warnings.simplefilter("error")                  # upgraded already: no second warning
        writer = Memory.open(target, embedder=_emb())
    _old_process_write(target, add="old_after", edit="b", remove="c")
    assert reader.refresh()                             # the advance stamped nothing: re-read whole
    assert reader.ids == ["a", "b", "d", "old_after"] and reader.get("b").text == "edited by the old process"
    assert reader.get("old_after").text == "written by the old process"
    _old_process_write(target, remove="d")              # then a writer of this version writes after it
    with pytest.warns(UserWarning, match=r"layout 2 to 3"):
        writer.add("epsilon", id="e")                   # it records the unstamped write as the floor
    assert "d" not in writer.ids
    assert reader.refresh() and reader.ids == ["a", "b", "old_after", "e"]   # behind the floor: re-read whole
    reads = _full_reads(reader, monkeypatch)
    writer.add("zeta", id="z")
    writer.update("a", text="alpha two")
    assert reader.refresh() and reader.ids[-1] == "z" and reader.get("a").text == "alpha two"
    assert reads == []                                  # healed: stamped writes are read incrementally
    with Memory.open(target, read_only=True, embedder=_emb()) as fresh:
        assert fresh.ids == reader.ids
    assert _layout(target) == 3
    reader.close()
    writer.close()


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_the_first_removal_floor_takes_the_store_to_layout_3(request, tmp_path, kind):
    """A version that reads only layouts 1 and 2 does not know the floor (it would keep deleted
    memories): the store it could open is no longer one it can open after the first prune."""
    target = _target(request, tmp_path, kind)
    mem = Memory.open(target, embedder=_emb())
    mem.storage.removal_log_versions = 4
    mem.add_many([{"text": f"note {i}", "id": f"f{i}"} for i in range(12)])
    assert _layout(target) == 2                   # created at 2: older versions still open it
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        for i in range(12):
            mem.remove(f"f{i}")
    ups = [str(w.message) for w in got if "storage layout" in str(w.message)]
    assert len(ups) == 1 and "from storage layout 2 to 3" in ups[0] and "removal log was pruned" in ups[0]
    assert _layout(target) == 3
    mem.close()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with Memory.open(target, read_only=True, embedder=_emb()) as fresh:
            assert fresh.ids == []
        with Memory.open(target, embedder=_emb()) as again:
            again.add("still writable", id="w")


def test_a_layout_2_file_pruned_before_layout_3_is_upgraded_when_opened_for_writing(tmp_path):
    target = str(tmp_path / "m.db")
    with Memory.open(target, embedder=_emb()) as mem:
        mem.add_many([{"text": "a", "id": "a"}, {"text": "b", "id": "b"}])
    sql = _Sql(target)   # as a version that pruned without raising the layout left it
    sql.run("INSERT INTO hm_state VALUES ('removed_floor', 1)")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert Memory.open(target, read_only=True, embedder=_emb()).ids == ["a", "b"]
    assert sql.layout() == 2                            # read-only: left as it is
    with pytest.warns(UserWarning, match=r"from storage layout 2 to 3"):
        Memory.open(target, embedder=_emb()).close()
    assert sql.layout() == 3
    sql.run("UPDATE hm_config SET value = '4' WHERE key = 'layout'")
    with pytest.raises(Exception, match=r"has storage layout 4; this hypermem reads 1, 2 and 3"):
        Memory.open(target, read_only=True, embedder=_emb())
    sql.close()


def _real():
    """A 'real' embedder (hybrid defaults to 0.3): hashing vectors under another name."""
    return CallableEmbedder(HashingEmbedder(dim=32).embed, dim=32)


TEXTS = ["the user prefers green tea", "the dog is called Rex", "budget meeting on Tuesday",
         "Rex needs a vet", "allergic to peanuts", "tea shop closes at six"]


def test_a_snapshot_saved_before_hybrid_search_ranks_as_it_did(tmp_path):
    mem = Memory(embedder=_real())
    mem.add_many([{"text": t, "id": f"m{i}"} for i, t in enumerate(TEXTS)])
    assert mem.hybrid == 0.3
    path = tmp_path / "old.db"
    mem.save(path)
    with sqlite3.connect(path) as con:                  # as a version before hybrid search wrote it
        con.execute("DELETE FROM config WHERE key IN ('hybrid', 'recency_weight', 'lexical')")
    old = Memory.load(path, embedder=_real())
    assert old.hybrid == 0.0
    for q in ("tea", "Rex the dog", "peanuts"):
        assert [h.id for h in old.search(q, k=6, touch=False)] == [h.id for h in mem.search(q, k=6, touch=False,
                                                                                               hybrid=0)]
    old.hybrid = 0.3                                    # opting in
    assert [h.id for h in old.search("tea", k=6, touch=False)] == [h.id for h in mem.search("tea", k=6, touch=False)]
    with sqlite3.connect(path) as con:                  # a file of the NumPy reference (no dtype): hypermem's default
        con.execute("DELETE FROM config WHERE key IN ('dtype', 'count')")
    assert Memory.load(path, embedder=_real()).hybrid == 0.3


def test_a_durable_store_created_before_hybrid_search_ranks_as_it_did(tmp_path):
    target = str(tmp_path / "d.db")
    with Memory.open(target, embedder=_real()) as mem:
        mem.add_many([{"text": t, "id": f"m{i}"} for i, t in enumerate(TEXTS)])
        assert mem.hybrid == 0.3
    with sqlite3.connect(target) as con:
        con.execute("DELETE FROM hm_config WHERE key IN ('hybrid', 'recency_weight', 'lexical')")
    with Memory.open(target, embedder=_real()) as again:
        assert again.hybrid == 0.0
    with Memory.open(target, embedder=_real(), hybrid=0.3) as again:
        assert again.hybrid == 0.3
