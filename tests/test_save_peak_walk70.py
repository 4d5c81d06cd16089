"""Walk 70: ``save`` / ``load`` stream the SQLite file a chunk at a time (store.sqlite_stream),
and the durable SQLite storage reads its rows without a dict a row.  The file's content is the
one the whole-store writer gave (compared row by row), and files of that writer still load."""

import json
import sqlite3

import pytest
import torch
from persistence_helpers import Clock, assert_same, note_item

from hypermem import HashingEmbedder, Memory
from hypermem.geometry import poincare as P
from hypermem.store import sqlite_stream
from hypermem.store.backends.sqlite import SqliteStorage, StoredRow
from hypermem.store.persistence import MemoryFileError, memory_config

CHUNK = 64   # small chunks: a 300-memory store is written and read in five


def store(n=300, dtype=torch.float64) -> Memory:
    mem = Memory(embedder=HashingEmbedder(dim=32), clock=Clock(), dtype=dtype)
    mem.add_many([note_item(i) for i in range(n)])
    mem.link("n7", "n150")   # sibling order that is no longer the insertion order, across chunks
    mem.search("topic 3", k=5)  # access counts and last-accessed times
    return mem


def whole_store_file(mem: Memory, path, hypermem_rows: bool = True) -> None:
    """The file the writer before walk 70 gave: every record a dict, the points of the whole store
    at once, one blob a row (the format of docs/file-format.md)."""
    st, n = mem.state, len(mem)
    sibling = {k: j for kids in st.children.values() for j, k in enumerate(kids)}
    directions = st.direction[:n].to(torch.float64)
    depths = st.depth[:n].to(torch.float64)
    config = memory_config(mem)
    points = P.point_at(directions, depths, config["curvature"])
    embeddings = st.embeddings_of()

    def blob(row):
        return row.numpy().astype("<f8").tobytes()

    def iso(t):
        return None if t is None else t.isoformat()

    path.unlink(missing_ok=True)
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE config (key TEXT PRIMARY KEY, value TEXT)")
    con.execute("CREATE TABLE records (pos INTEGER PRIMARY KEY, id TEXT UNIQUE, text TEXT, parent_id TEXT, "
                "t TEXT, valid_from TEXT, valid_until TEXT, access_count INTEGER, last_accessed TEXT, "
                "meta TEXT, point BLOB, embedding BLOB)")
    con.executemany("INSERT INTO config VALUES (?, ?)", [(k, json.dumps(v)) for k, v in config.items()])
    recs = [r.to_dict() for r in mem]
    con.executemany("INSERT INTO records VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", [
        (pos, r["id"], r["text"], r["parent_id"], iso(rec.t), iso(rec.valid_from), iso(rec.valid_until),
         rec.access_count, iso(rec.last_accessed), json.dumps(rec.meta, ensure_ascii=False), blob(points[pos]),
         blob(embeddings[pos])) for pos, (r, rec) in enumerate(zip(recs, mem))])
    if hypermem_rows:
        con.execute("CREATE TABLE hypermem_rows (pos INTEGER PRIMARY KEY, direction BLOB, depth REAL, "
                    "sibling_index INTEGER)")
        con.executemany("INSERT INTO hypermem_rows VALUES (?, ?, ?, ?)", [
            (pos, blob(directions[pos]), float(depths[pos]), sibling.get(i, 0)) for pos, i in enumerate(mem.ids)])
    con.commit()
    con.close()


def rows_of(path) -> dict:
    con = sqlite3.connect(path)
    try:
        tables = [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table' ORDER BY name")]
        return {t: con.execute(f"SELECT * FROM {t} ORDER BY 1").fetchall() for t in tables}
    finally:
        con.close()


@pytest.fixture
def small_chunks(monkeypatch):
    monkeypatch.setattr(sqlite_stream, "CHUNK", CHUNK)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_a_chunked_save_writes_the_rows_of_the_whole_store_writer(tmp_path, small_chunks, dtype):
    mem = store(dtype=dtype)
    mem.save(tmp_path / "new.db")
    whole_store_file(mem, tmp_path / "old.db")
    new, old = rows_of(tmp_path / "new.db"), rows_of(tmp_path / "old.db")
    assert list(new) == ["config", "hypermem_rows", "records"]
    assert len(new["records"]) == len(mem) == 300
    for table in new:
        assert len(new[table]) == len(old[table])
        for a, b in zip(new[table], old[table]):
            assert a == b, (table, a[:2])


@pytest.mark.parametrize("hypermem_rows", [True, False])
def test_files_of_the_whole_store_writer_load_through_chunks(tmp_path, small_chunks, hypermem_rows):
    mem = store()
    whole_store_file(mem, tmp_path / "old.db", hypermem_rows)
    back = Memory.load(tmp_path / "old.db", clock=mem.clock)
    if hypermem_rows:
        assert_same(mem, back)
    else:  # the reference's layout: directions and depths derived from the points, a chunk at a time
        assert back.ids == mem.ids and torch.equal(back.embeddings, mem.embeddings)
        torch.testing.assert_close(back.points, mem.points, rtol=0, atol=1e-12)
        one = sqlite_stream.CHUNK
        sqlite_stream.CHUNK = 10_000
        try:
            whole = Memory.load(tmp_path / "old.db", clock=mem.clock)
        finally:
            sqlite_stream.CHUNK = one
        assert_same(whole, back)
        return
    back.save(tmp_path / "again.db")   # saved again: the same rows
    again, old = rows_of(tmp_path / "again.db"), rows_of(tmp_path / "old.db")
    assert again["records"] == old["records"] and again["hypermem_rows"] == old["hypermem_rows"]


def _edit(path, sql: str, *args) -> None:
    con = sqlite3.connect(path)
    con.execute(sql, args)
    con.commit()
    con.close()


def test_checks_across_chunks_still_refuse_a_duplicate_id_and_a_sibling_clash(tmp_path, small_chunks):
    mem = store()
    path = tmp_path / "m.db"
    whole_store_file(mem, path)
    dup = tmp_path / "dup.db"
    whole_store_file(mem, dup)
    con = sqlite3.connect(dup)   # a file of another writer: ids without the UNIQUE constraint
    con.execute("ALTER TABLE records RENAME TO r0")
    con.execute("CREATE TABLE records AS SELECT * FROM r0")
    con.execute("DROP TABLE r0")
    con.execute("UPDATE records SET id = 'n3', parent_id = NULL WHERE pos = 250")
    con.execute("UPDATE records SET parent_id = NULL WHERE parent_id = 'n249'")
    con.commit()
    con.close()
    with pytest.raises(MemoryFileError, match="duplicate id 'n3'"):
        Memory.load(dup, clock=mem.clock)
    # two children of n0 (rows 1 and 2) and of n150 (row 7 after the link) given one sibling index
    sib = rows_of(path)["hypermem_rows"][2][3]
    _edit(path, "UPDATE hypermem_rows SET sibling_index = ? WHERE pos = 1", sib)
    with pytest.raises(MemoryFileError, match="two children of 'n0' have sibling_index"):
        Memory.load(path, clock=mem.clock)
    whole_store_file(mem, path)
    kids = mem.children("n150")
    assert len(kids) == 3 and kids[-1] == "n7"
    last = [r for r in rows_of(path)["hypermem_rows"] if r[0] == 151][0][3]
    _edit(path, "UPDATE hypermem_rows SET sibling_index = ? WHERE pos = 7", last)
    with pytest.raises(MemoryFileError, match="two children of 'n150' have sibling_index"):
        Memory.load(path, clock=mem.clock)


def test_a_row_of_a_later_chunk_is_checked(tmp_path, small_chunks):
    mem = store()
    path = tmp_path / "m.db"
    whole_store_file(mem, path)
    _edit(path, "UPDATE hypermem_rows SET depth = depth + 0.5 WHERE pos = 200")
    with pytest.raises(MemoryFileError, match="disagree"):
        Memory.load(path, clock=mem.clock)
    whole_store_file(mem, path)
    _edit(path, "DELETE FROM hypermem_rows WHERE pos = 299")
    with pytest.raises(MemoryFileError, match="does not match the records table"):
        Memory.load(path, clock=mem.clock)


def test_durable_sqlite_rows_are_read_without_a_dict_a_row(tmp_path):
    path = tmp_path / "d.db"
    mem = Memory.open(path, embedder=HashingEmbedder(dim=32), clock=Clock())
    mem.add_many([{"text": f"note {i}", "id": f"n{i}", "meta": {"i": i},
                   **({"parent": f"n{i - 1}"} if i % 4 else {})} for i in range(50)])
    want = (list(mem.ids), mem.directions.clone(), [mem.get(i).to_dict() for i in mem.ids])
    mem.close()
    storage = SqliteStorage(path, read_only=True)
    version, rows = storage.load_rows()
    storage.close()
    assert all(type(r) is StoredRow for r in rows) and len(rows) == 50
    assert rows[5]["id"] == "n5" and dict(rows[5])["parent_id"] == "n4" and json.loads(rows[5]["meta"]) == {"i": 5}
    back = Memory.open(path, embedder=HashingEmbedder(dim=32), clock=Clock())
    assert back.ids == want[0] and torch.equal(back.directions, want[1])
    assert [back.get(i).to_dict() for i in back.ids] == want[2]
    back.close()
