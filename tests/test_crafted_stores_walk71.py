"""Crafted files against the loaders (walk 71): a ``Memory.save`` snapshot declaring a huge
dimension is refused before the columns of its rows are allocated, and a durable store
(``Memory.open``) is checked row by row as ``Memory.load`` checks a file: NaN embeddings,
bad depths, meta that is no finite JSON object, non-unit stored directions, reversed
validity and negative counts are a MemoryFileError naming the store, the memory and the
field, never a store that loads and then answers with nan scores or raw tracebacks."""

import json
import math
import sqlite3
import struct
from datetime import datetime
from pathlib import Path

import pytest
import torch
from hostile_helpers import execute

from hypermem import HashingEmbedder, Memory
from hypermem.store.backends.rows import COLUMNS, record_of, restore
from hypermem.store.state import MemoryState
from hypermem.store.validation import MemoryFileError

DIM = 16
HUGE = 1 << 20


def watch_alloc(monkeypatch) -> list[tuple[int, int]]:
    """The ``(rows, dim)`` of every column allocation of a store from now on."""
    calls: list[tuple[int, int]] = []
    alloc = MemoryState.alloc

    def recording(self, cap):
        calls.append((cap, self.dim))
        return alloc(self, cap)

    monkeypatch.setattr(MemoryState, "alloc", recording)
    return calls


def declare_dim(path: Path, table: str, dim: int) -> None:
    con = sqlite3.connect(path)
    spec = json.loads(con.execute(f"SELECT value FROM {table} WHERE key = 'embedder'").fetchone()[0])
    spec["dim"] = dim
    con.execute(f"UPDATE {table} SET value = ? WHERE key = 'embedder'", (json.dumps(spec),))
    con.execute(f"UPDATE {table} SET value = ? WHERE key = 'dim'", (json.dumps(dim),))
    con.commit()
    con.close()


# ---------------------------------------------------------------------------- Memory.load: no allocation first
def test_a_declared_huge_dim_is_refused_before_any_row_is_allocated(tmp_path, monkeypatch):
    path = tmp_path / "snap.db"
    mem = Memory(embedder=HashingEmbedder(dim=DIM))
    mem.add_many([{"id": f"m{i}", "text": f"memory {i}"} for i in range(64)])
    mem.save(path)
    declare_dim(path, "config", HUGE)
    calls = watch_alloc(monkeypatch)
    with pytest.raises(MemoryFileError, match=rf"point of memory 'm0' has 128 bytes, expected {8 * HUGE}"):
        Memory.load(path)
    assert [c for c in calls if c[0] > 0] == []   # before: 64 rows of 2**20 floats, twice (1 GiB)


def test_rows_the_file_cannot_hold_are_refused_by_its_size(tmp_path, monkeypatch):
    """The first row has blobs of the declared size, the others are cut short: the file is far
    smaller than the 2 n dim floats its rows claim, so nothing of that size is allocated."""
    dim, n = 4096, 400
    path = tmp_path / "snap.db"
    mem = Memory(embedder=HashingEmbedder(dim=dim))
    mem.add_many([{"id": f"m{i}", "text": f"memory {i}"} for i in range(n)])
    mem.save(path)
    execute(path, "UPDATE records SET point = x'00', embedding = x'00' WHERE pos > 0")
    execute(path, "VACUUM")
    calls = watch_alloc(monkeypatch)
    with pytest.raises(MemoryFileError, match=rf"{n} records of dim {dim} hold .* more than the file's"):
        Memory.load(path)
    assert [c for c in calls if c[0] > 0] == []


def test_a_normal_snapshot_still_loads(tmp_path):
    path = tmp_path / "snap.db"
    mem = Memory(embedder=HashingEmbedder(dim=DIM))
    mem.add("animals", id="a", meta={"k": [1, {"x": None}]})
    mem.add("dogs", id="d", parent="a", meta={})
    mem.save(path)
    back = Memory.load(path)
    assert back.ids == ["a", "d"] and back.get("a").meta == {"k": [1, {"x": None}]}


# ---------------------------------------------------------------------------- Memory.open: every row checked
def durable(path: Path, n: int = 3, **kwargs) -> Path:
    mem = Memory.open(path, embedder=HashingEmbedder(dim=DIM), **kwargs)
    mem.add_many([{"id": f"m{i}", "text": f"memory number {i}"} for i in range(n)])
    mem.close()
    return path


def vector(*values: float) -> bytes:
    return struct.pack(f"<{DIM}d", *values, *[0.0] * (DIM - len(values)))


CRAFTED = [
    ("embedding = ?", vector(math.nan), "embedding of memory 'm1' has non-finite values"),
    ("embedding = ?", vector(math.inf, 1.0), "embedding of memory 'm1' has non-finite values"),
    ("embedding = ?", bytes(24), "embedding of memory 'm1' has 24 bytes"),
    ("embedding = 'text'", None, "embedding of memory 'm1' is 'text', not a blob"),
    ("depth = -5", None, "depth of memory 'm1' is negative"),
    ("depth = 1e300", None, "depth of memory 'm1' is 1e\\+300, beyond 37.4"),
    ("depth = 'abc'", None, "depth of memory 'm1' is 'abc', not a finite number"),
    ("meta = '{\"x\": NaN}'", None, "meta of memory 'm1' is not valid JSON .*NaN"),
    ("meta = '[1, 2]'", None, "meta of memory 'm1' is not an object"),
    ("meta = ?", '{"a": ' * 5000 + "1" + "}" * 5000, "meta of memory 'm1' nests too deep"),
    ("meta = ?", '{"a": ' * 150 + "1" + "}" * 150, "meta of memory 'm1' nests deeper than 100"),
    ("direction = ?", vector(*[5.0] * DIM), "direction of memory 'm1' is not a unit vector"),
    ("direction = ?", vector(math.nan), "direction of memory 'm1' has non-finite values"),
    ("valid_from = '2030-01-01T00:00:00+00:00', valid_until = '2020-01-01T00:00:00+00:00'", None,
     "memory 'm1' has valid_until before valid_from"),
    ("access_count = -3", None, "access count of memory 'm1' is -3"),
    ("t = 'yesterday'", None, "time of memory 'm1' is not an ISO 8601 time"),
    ("id = ''", None, "bad id ''"),
    ("parent_id = 'm1'", None, "parents of memory 'm1' form a cycle"),
    ("sib = 'x'", None, "sib of memory 'm1' is 'x', not an integer"),
]


@pytest.mark.parametrize("assignment,param,match", CRAFTED, ids=[c[2][:40] for c in CRAFTED])
def test_a_crafted_durable_row_is_refused_naming_the_store_and_field(assignment, param, match, tmp_path):
    path = durable(tmp_path / "d.db")
    execute(path, f"UPDATE hm_memories SET {assignment} WHERE id = 'm1'", *([] if param is None else [param]))
    for read_only in (True, False):
        with pytest.raises(MemoryFileError, match=match) as info:
            Memory.open(path, read_only=read_only)
        assert str(path) in str(info.value)


def test_a_stored_huge_dim_is_refused_before_the_columns_are_allocated(tmp_path, monkeypatch):
    path = durable(tmp_path / "d.db", n=64)
    declare_dim(path, "hm_config", HUGE)
    made: list[tuple] = []
    empty = torch.empty

    def recording(*size, **kw):
        made.append(size)
        return empty(*size, **kw)

    monkeypatch.setattr(torch, "empty", recording)
    with pytest.raises(MemoryFileError, match=rf"64 stored memories of dim {HUGE} need at least"):
        Memory.open(path, read_only=True)
    assert (64, HUGE) not in made   # before: two (64, 2**20) columns (768 MiB), then a refusal


@pytest.mark.parametrize("value,match", [("NaN", "stored setting 'time_coef' is not valid JSON"),
                                         ('{"a": ' * 5000 + "1" + "}" * 5000, "nests too deep")])
def test_a_crafted_stored_setting_is_a_memory_file_error(value, match, tmp_path):
    path = durable(tmp_path / "d.db")
    execute(path, "UPDATE hm_config SET value = ? WHERE key = 'time_coef'", value)
    with pytest.raises(MemoryFileError, match=match):
        Memory.open(path, read_only=True)


def test_good_durable_stores_still_open(tmp_path):
    path = durable(tmp_path / "d.db", n=5)
    with Memory.open(path) as mem:
        mem.add_many([{"text": "explicit", "id": "p", "point": [0.3] + [0.0] * (DIM - 1), "meta": {"deep": [[[1]]]}}])
        mem.add("child", id="c", parent="m0", valid_from=datetime(2020, 1, 1), valid_until=datetime(2021, 1, 1))
    con = sqlite3.connect(path)
    assert con.execute("SELECT count(*) FROM hm_memories WHERE direction IS NOT NULL").fetchone()[0] >= 1
    con.close()
    back = Memory.open(path, read_only=True)
    assert back.ids == ["m0", "m1", "m2", "m3", "m4", "p", "c"]
    assert back.get("p").meta == {"deep": [[[1]]]} and back.get("c").parent_id == "m0"
    hits = back.search("memory number 1", k=3)
    assert all(math.isfinite(h.score) for h in hits)
    narrow = durable(tmp_path / "f32.db", n=4, vector_dtype="float32")
    assert len(Memory.open(narrow, read_only=True)) == 4


# ---------------------------------------------------------------------------- rows as PostgreSQL gives them
def stored_rows(path: Path) -> list[dict]:
    """The rows of a SQLite store as the PostgreSQL backend returns them: times as datetimes,
    meta as a parsed object."""
    con = sqlite3.connect(path)
    rows = [dict(zip(COLUMNS, r)) for r in con.execute(f"SELECT {', '.join(COLUMNS)} FROM hm_memories")]
    con.close()
    for r in rows:
        for k in ("t", "valid_from", "valid_until", "last_accessed"):
            r[k] = None if r[k] is None else datetime.fromisoformat(r[k])
        r["meta"] = json.loads(r["meta"])
    return rows


def test_the_all_rows_read_path_of_postgres_checks_every_row(tmp_path):
    rows = stored_rows(durable(tmp_path / "d.db"))
    mem = Memory(embedder=HashingEmbedder(dim=DIM))
    restore(mem, rows)
    assert mem.ids == ["m0", "m1", "m2"]
    for change, match in ((("meta", {"x": math.nan}), "meta of memory 'm1' is not plain finite JSON"),
                          (("meta", [1]), "meta of memory 'm1' is not an object"),
                          (("embedding", vector(math.nan)), "embedding of memory 'm1' has non-finite values"),
                          (("depth", -1.0), "depth of memory 'm1' is negative"),
                          (("access_count", -3), "access count of memory 'm1' is -3")):
        bad = [dict(r) for r in rows]
        bad[1][change[0]] = change[1]
        with pytest.raises(MemoryFileError, match=match):
            restore(Memory(embedder=HashingEmbedder(dim=DIM)), bad)


def test_record_of_checks_a_single_row(tmp_path):
    rows = stored_rows(durable(tmp_path / "d.db"))
    assert record_of(rows[0]).id == "m0"
    with pytest.raises(MemoryFileError, match="meta of memory 'm0' is not an object"):
        record_of(dict(rows[0], meta="[1]"))
