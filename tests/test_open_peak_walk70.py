"""Walk 70: ``Memory.open`` of a durable SQLite store streams its rows into the state's columns a
fetch at a time (backends.rows.restore_stream): the state is the one the whole-table restore gave
(every column and record compared exactly), without every row's blobs held at once."""

import json
import math

import numpy as np
import pytest
import torch
from persistence_helpers import Clock, note_item

from hypermem import HashingEmbedder, Memory
from hypermem.store.backends import rows as rows_module
from hypermem.store.backends import sqlite as sqlite_module
from hypermem.store.backends.rows import (
    derived_directions,
    load_state,
    record_of,
    restore_stream,
    stored_time,
)
from hypermem.store.backends.sqlite import SqliteStorage, StoredRow
from hypermem.store.persistence import restore_state
from hypermem.store.state import COLUMNS

SMALL = 64   # fetches and parts of 64 rows: a 300-row store is read in five


@pytest.fixture
def small_parts(monkeypatch):
    monkeypatch.setattr(sqlite_module, "FETCH", SMALL)
    monkeypatch.setattr(rows_module, "PART", SMALL)


def whole_table_restore(memory, rows):
    """The restore before walk 70: every blob joined at once, one float64 copy of the store."""
    rows = sorted(rows, key=lambda r: r["seq"])
    n, dim = len(rows), memory.dim
    records = [record_of(r) for r in rows]
    pos = {rec.id: j for j, rec in enumerate(records)}
    level = {}
    for j in range(n):   # the test stores have no cycle and no orphan
        chain, cur = [], j
        while cur not in level and records[cur].parent_id is not None:
            chain.append(cur)
            cur = pos[records[cur].parent_id]
        base = level.setdefault(cur, 0)
        for k, node in enumerate(reversed(chain)):
            level[node] = base + 1 + k
    levels = [level[j] for j in range(n)]
    width = len(rows[0]["embedding"])
    emb = torch.from_numpy(np.frombuffer(b"".join(r["embedding"] for r in rows), "<f8" if width == 8 * dim else "<f4")
                           .reshape(n, dim).astype(np.float64))
    depth = torch.tensor([float(r["depth"]) for r in rows], dtype=torch.float64)
    restore_state(memory, records, levels, [int(r["sib"]) for r in rows], torch.zeros(n, dim, dtype=torch.float64),
                  depth, emb)
    for g in range(max(levels) + 1):
        gen = [j for j in range(n) if levels[j] == g]
        derive = [j for j in gen if rows[j]["direction"] is None]
        if derive:
            memory.state.direction[derive] = derived_directions(memory, derive)
        for j in gen:
            if rows[j]["direction"] is not None:
                vec = np.frombuffer(rows[j]["direction"], "<f8").astype(np.float64)
                memory.state.direction[j] = torch.from_numpy(vec).to(memory.device, memory.dtype)
    memory.state.changed()


def build(path, vector_dtype, dtype):
    mem = Memory.open(path, embedder=HashingEmbedder(dim=32), clock=Clock(), dtype=dtype, vector_dtype=vector_dtype)
    g = np.random.default_rng(1)
    xs = g.standard_normal((300, 32))   # float32 values first; past row 150 not (the column widens mid-stream)
    xs[:150] = xs[:150].astype(np.float32)
    items = [note_item(i, embedding=torch.from_numpy(xs[i].copy())) for i in range(300)]
    mem.add_many(items)
    mem.add_many([{"text": "an explicit point", "id": "pt",   # a stored direction
                   "point": torch.full((32,), 0.05, dtype=torch.float64)}])
    mem.link("n7", "n150")
    mem.search("topic 3", k=5)
    mem.close()


def state_of(mem):
    st = mem.state
    cols = {name: getattr(st, name) for name in COLUMNS}
    cols = {k: None if v is None else (v.dtype, v[: st.n].clone()) for k, v in cols.items()}
    return (cols, st.n, list(st.ids), dict(st.row), {p: list(k) for p, k in st.children.items()}, list(st.levels),
            [r.to_dict() for r in st.records.at_rows(range(st.n))])


def assert_same_state(a, b):
    cols_a, *rest_a = a
    cols_b, *rest_b = b
    assert rest_a == rest_b
    for name in COLUMNS:
        if cols_a[name] is None or cols_b[name] is None:
            assert cols_a[name] is None and cols_b[name] is None, name
            continue
        assert cols_a[name][0] == cols_b[name][0], name
        assert torch.equal(cols_a[name][1], cols_b[name][1]), name   # bit for bit (no NaN in these columns)


@pytest.mark.parametrize("vector_dtype,dtype", [("float32", torch.float64), ("float64", torch.float64),
                                                ("float32", torch.float32), ("float64", torch.float32)])
def test_streamed_open_gives_the_whole_table_state(tmp_path, small_parts, vector_dtype, dtype):
    path = tmp_path / "d.db"
    build(path, vector_dtype, dtype)
    storage = SqliteStorage(path, read_only=True)
    version, rows = storage.load_rows()
    ref = Memory(embedder=HashingEmbedder(dim=32), clock=Clock(), dtype=dtype)
    whole_table_restore(ref, rows)
    new = Memory(embedder=HashingEmbedder(dim=32), clock=Clock(), dtype=dtype)
    got_version, seq, sib = load_state(new, storage)
    storage.close()
    assert got_version == version
    assert seq == {r["id"]: int(r["seq"]) for r in rows} and sib == {r["id"]: int(r["sib"]) for r in rows}
    assert_same_state(state_of(new), state_of(ref))
    assert new.state.embedding.dtype == (torch.float64 if vector_dtype == "float64" else torch.float32)
    assert new.state.valid_until[1] == math.inf and new.state.valid_until[0] < math.inf and stored_time(rows[0]["t"]) == new.get("n0").t
    assert json.loads(rows[4]["meta"]) == new.get("n4").meta and new.get("n4").parent_id == "n3"
    with Memory.open(path, embedder=HashingEmbedder(dim=32), clock=Clock(), dtype=dtype) as opened:
        assert list(opened.ids) == list(ref.ids) and torch.equal(opened.directions, ref.directions)


def test_open_holds_one_fetch_of_rows_at_a_time(tmp_path, small_parts, monkeypatch):
    path = tmp_path / "d.db"
    build(path, "float32", torch.float64)
    live, most = [0], [0]

    class Counted(StoredRow):
        __slots__ = ()

        def __init__(self, values):
            super().__init__(values)
            live[0] += 1
            most[0] = max(most[0], live[0])

        def __del__(self):
            live[0] -= 1

    monkeypatch.setattr(sqlite_module, "StoredRow", Counted)
    with Memory.open(path, embedder=HashingEmbedder(dim=32), clock=Clock()) as mem:
        assert len(mem) == 301
    assert 0 < most[0] <= 2 * SMALL   # before: all 301 rows (and their blobs) at once


def test_a_bad_row_leaves_the_state_as_it_was(tmp_path, small_parts):
    path = tmp_path / "d.db"
    build(path, "float32", torch.float64)
    storage = SqliteStorage(path, read_only=True)
    _, rows = storage.load_rows()
    storage.close()
    with Memory.open(path, embedder=HashingEmbedder(dim=32), clock=Clock(), read_only=True) as mem:
        before = state_of(mem)
        bad = dict(rows[200])
        bad["embedding"] = bad["embedding"][:-4]
        chunks = [rows[:SMALL], rows[SMALL:200] + [bad] + rows[201:]]
        with pytest.raises(ValueError, match="the stored embedding of memory 'n.*' has 124 bytes, not 32 floats"):
            restore_stream(mem, len(rows), chunks)
        with pytest.raises(ValueError, match="holds 64 memories, not the 301 it counted"):
            restore_stream(mem, len(rows), chunks[:1])
        assert_same_state(state_of(mem), before)
