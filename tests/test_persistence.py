"""Saving and loading: exact round trips (SQLite and JSON), the reference's files, corrupt
files and clear errors (atomic saves: test_persistence_atomic.py)."""

import json
import os
import sqlite3
from datetime import timedelta

import pytest
import torch
from persistence_helpers import T0, Clock, assert_same, foreign_sqlite, rich_memory, temp_files

from hypermem import CallableEmbedder, HalfLife, HashingEmbedder, Memory, Product, ValidityWindow
from hypermem.store.persistence import MemoryFileError


def same_search(a: Memory, b: Memory):
    for kwargs in ({"query": "loyal dogs"}, {"query": "animals", "mode": "subtree", "root": "animal"},
                   {"query": None, "mode": "children", "root": "animal"}):
        ra = a.search(k=4, touch=False, **kwargs)
        rb = b.search(k=4, touch=False, **kwargs)
        assert [(r.id, r.score) for r in ra] == [(r.id, r.score) for r in rb]


# ----------------------------------------------------------------------------- round trips
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_sqlite_round_trip_is_exact(tmp_path, dtype, device):
    mem = rich_memory(dtype=dtype, device=device)
    path = tmp_path / "mem.db"
    mem.save(path)
    back = Memory.load(path, clock=mem.clock, device=device)
    assert back.device == mem.device and back.embedder == mem.embedder
    assert_same(mem, back)
    same_search(mem, back)
    assert temp_files(tmp_path) == []


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_json_round_trip_is_exact(tmp_path, dtype):
    mem = rich_memory(dtype=dtype)
    text = mem.to_json()
    assert_same(mem, Memory.from_json(text, clock=mem.clock))
    assert_same(mem, Memory.from_json(json.loads(text), clock=mem.clock))
    path = tmp_path / "mem.json"
    assert mem.to_json(path, indent=2) == path.read_text()
    back = Memory.from_json(path, clock=mem.clock)
    assert_same(mem, back)
    same_search(mem, back)
    # JSON -> SQLite -> JSON gives the same document.
    back.save(tmp_path / "again.db")
    assert Memory.load(tmp_path / "again.db").to_json() == text


def test_loaded_memory_keeps_working_and_nothing_is_re_embedded(tmp_path):
    calls = []

    def fn(texts):
        calls.append(list(texts))
        return HashingEmbedder(dim=16).embed(texts)

    emb = CallableEmbedder(fn, dim=16)
    mem = Memory(embedder=emb, clock=Clock())
    mem.add("root", id="r")
    mem.add("child", id="c", parent="r")
    mem.save(tmp_path / "m.db")
    calls.clear()
    back = Memory.load(tmp_path / "m.db", embedder=emb, clock=mem.clock)
    assert calls == []  # the saved embeddings are used as they are
    assert_same(mem, back)
    back.add("grandchild", parent="c", id="g")
    assert back.level("g") == 2 and back.ancestors("g") == ["c", "r"]
    back.update("c", text="another child")
    back.remove("r", cascade=True)
    assert len(back) == 0


def test_empty_memory_round_trips(tmp_path):
    mem = Memory(dtype=torch.float32)
    mem.save(tmp_path / "e.db")
    back = Memory.load(tmp_path / "e.db")
    assert len(back) == 0 and back.dtype == torch.float32 and back.dim == mem.dim
    assert len(Memory.from_json(mem.to_json())) == 0
    back.add("now it has one")
    assert len(back) == 1


def test_save_replaces_an_existing_file(tmp_path):
    path = tmp_path / "m.db"
    mem = rich_memory()
    mem.save(path)
    mem.add("one more", id="more")
    mem.save(path)
    assert "more" in Memory.load(path)
    assert temp_files(tmp_path) == []


def test_dtype_and_device_overrides(tmp_path, device):
    mem = rich_memory()
    mem.save(tmp_path / "m.db")
    back = Memory.load(tmp_path / "m.db", dtype=torch.float32, device=device)
    assert back.dtype == torch.float32 and back.device.type == torch.device(device).type
    assert torch.equal(back.directions.cpu(), mem.directions.to(torch.float32))


# ----------------------------------------------------------------------------- specs
def test_hashing_embedder_and_builtin_policies_are_restored(tmp_path):
    for decay in (None, HalfLife(5), Product(HalfLife(3), ValidityWindow())):
        mem = Memory(embedder=HashingEmbedder(dim=32, ngram_range=(2, 4), seed=3), decay=decay)
        mem.add("hello world")
        mem.save(tmp_path / "m.db")
        back = Memory.load(tmp_path / "m.db")
        assert back.embedder == mem.embedder and back.decay == mem.decay
    spec = json.loads(mem.to_json())["config"]["embedder"]
    assert spec == {"type": "hashing", "dim": 32, "ngram_range": [2, 4], "seed": 3}


def test_custom_embedder_or_policy_must_be_passed_back(tmp_path):
    class Linear:
        def weight(self, now, times, access_counts, valid_from, valid_until):
            return torch.ones_like(torch.as_tensor(times, dtype=torch.float64))

    emb = CallableEmbedder(lambda texts: HashingEmbedder(dim=16).embed(texts), dim=16)
    mem = Memory(embedder=emb, decay=Linear())
    mem.add("hello")
    path = tmp_path / "m.db"
    mem.save(path)
    with pytest.raises(ValueError, match="custom embedder 'CallableEmbedder'.*pass embedder="):
        Memory.load(path)
    with pytest.raises(ValueError, match="custom decay policy 'Linear'.*pass decay="):
        Memory.load(path, embedder=emb)
    with pytest.raises(ValueError, match="custom embedder"):
        Memory.from_json(mem.to_json())
    back = Memory.load(path, embedder=emb, decay=Linear())
    assert back.embedder is emb and isinstance(back.decay, Linear)
    with pytest.raises(ValueError, match="dimension mismatch.*made with a 16-dimensional embedder.*dim=32"):
        Memory.load(path, embedder=HashingEmbedder(dim=32), decay=Linear())


# ----------------------------------------------------------------------------- the reference
def test_reference_file_loads_with_the_same_records_and_points(tmp_path):
    pm = pytest.importorskip("poincare_memory", reason="the reference poincare-memory (bench extra) is absent")
    ref = pm.Memory(decay=pm.Product(pm.HalfLife(24), pm.ValidityWindow()), base_depth=1.2, depth_step=0.4,
                    clock=lambda: T0 + timedelta(days=2))
    a = ref.add("animals", meta={"k": [1, 2], "s": "x"}, t=T0)
    d = ref.add("dogs are loyal", parent=a, t=T0 + timedelta(hours=1), valid_from=T0,
                valid_until=T0 + timedelta(days=5))
    ref.add("puppies", parent=d, t=T0 + timedelta(hours=2))
    ref.add("cars", t=T0 + timedelta(hours=3))
    ref.search("dog", k=2)
    path = tmp_path / "ref.db"
    ref.save(path)
    mem = Memory.load(path, clock=lambda: T0 + timedelta(days=2))
    assert mem.ids == [r.id for r in ref]
    for r, h in zip(ref, mem):
        assert (h.id, h.text, h.parent_id, h.t, h.meta, h.valid_from, h.valid_until, h.access_count,
                h.last_accessed) == (r.id, r.text, r.parent_id, r.t, r.meta, r.valid_from, r.valid_until,
                                     r.access_count, r.last_accessed)
    torch.testing.assert_close(mem.points, torch.as_tensor(ref.points), rtol=0, atol=1e-12)
    con = sqlite3.connect(path)
    blobs = [b for (b,) in con.execute("SELECT embedding FROM records ORDER BY pos")]
    con.close()
    stored = torch.stack([torch.frombuffer(bytearray(b), dtype=torch.float64) for b in blobs])
    assert torch.equal(mem.embeddings, stored)
    assert [mem.level(i) for i in mem.ids] == [0, 1, 2, 0]
    assert mem.decay == Product(HalfLife(24), ValidityWindow()) and mem.embedder == HashingEmbedder()
    assert (mem.base_depth, mem.depth_step) == (1.2, 0.4)
    # The reference's JSON loads too, and the reference reads hypermem's files.
    (tmp_path / "ref.json").write_text(ref.to_json())
    assert_same(mem, Memory.from_json(tmp_path / "ref.json", clock=mem.clock), exact=False)
    mem.save(tmp_path / "ours.db")
    again = pm.Memory.load(tmp_path / "ours.db")
    assert [r.text for r in again] == [r.text for r in ref]
    torch.testing.assert_close(torch.as_tensor(again.points), mem.points, rtol=0, atol=1e-12)


# ----------------------------------------------------------------------------- bad files
def test_missing_file_is_file_not_found_with_no_side_effect(tmp_path):
    for load in (Memory.load, Memory.from_json):
        with pytest.raises(FileNotFoundError):
            load(tmp_path / "missing.db")
    assert list(tmp_path.iterdir()) == []


@pytest.fixture
def saved(tmp_path):
    path = tmp_path / "m.db"
    rich_memory().save(path)
    return path


def corrupt_with(path, sql, *params):
    con = sqlite3.connect(path)
    con.execute(sql, params)
    con.commit()
    con.close()


@pytest.mark.parametrize("sql,params,message", [
    ("UPDATE config SET value = '2' WHERE key = 'format'", (), "format version 2"),
    ("UPDATE config SET value = '\"one\"' WHERE key = 'format'", (), "format version must be an integer"),
    ("DELETE FROM config WHERE key = 'format'", (), "no format version"),
    ("UPDATE config SET value = '65' WHERE key = 'dim'", (), "embedder spec says dim 64"),
    ("UPDATE records SET point = x'0000' WHERE id = 'dog'", (), "point of memory 'dog' has 2 bytes"),
    ("UPDATE records SET parent_id = 'ghost' WHERE id = 'dog'", (), "unknown parent 'ghost'"),
    ("UPDATE records SET parent_id = 'puppy' WHERE id = 'dog'", (), "cycle"),
    ("UPDATE records SET meta = 'not json' WHERE id = 'dog'", (), "meta of memory 'dog' is not valid JSON"),
    ("UPDATE records SET t = 'yesterday' WHERE id = 'dog'", (), "not an ISO 8601 time"),
    ("DELETE FROM records WHERE id = 'cat'", (), "truncated"),
    ("DELETE FROM hypermem_rows WHERE pos = 2", (), "hypermem_rows does not match"),
    ("UPDATE hypermem_rows SET depth = depth + 1 WHERE pos = 0", (), "disagree"),
    ("UPDATE config SET value = '\"nope\"' WHERE key = 'metric'", (), "invalid config"),
    ("DROP TABLE records", (), "not a memory file"),
])
def test_corrupt_sqlite_files_are_clear_errors(saved, sql, params, message):
    corrupt_with(saved, sql, *params)
    with pytest.raises(MemoryFileError, match=message):
        Memory.load(saved)


def test_point_outside_the_ball_is_refused(saved):
    outside = torch.zeros(64, dtype=torch.float64)
    outside[0] = 2.0
    corrupt_with(saved, "UPDATE records SET point = ? WHERE id = 'dog'", outside.numpy().tobytes())
    with pytest.raises(MemoryFileError, match="not inside the Poincaré ball"):
        Memory.load(saved)


def test_garbage_and_truncated_files(tmp_path, saved):
    junk = tmp_path / "junk.db"
    junk.write_bytes(os.urandom(4096))
    with pytest.raises(MemoryFileError, match="not a readable memory file"):
        Memory.load(junk)
    data = saved.read_bytes()
    for cut in (len(data) // 2, 200, 0):
        short = tmp_path / f"short{cut}.db"
        short.write_bytes(data[:cut])
        with pytest.raises(MemoryFileError):
            Memory.load(short)
    other = foreign_sqlite(tmp_path / "other.db")
    with pytest.raises(MemoryFileError, match="not a memory file"):
        Memory.load(other)
    rich_memory().to_json(tmp_path / "m.json")
    with pytest.raises(MemoryFileError, match="looks like JSON: use Memory.from_json"):
        Memory.load(tmp_path / "m.json")


def test_bad_json_documents(tmp_path):
    good = json.loads(rich_memory().to_json())
    with pytest.raises(MemoryFileError, match="not valid JSON"):
        Memory.from_json('{"config": ')
    (tmp_path / "cut.json").write_text(json.dumps(good)[:500])
    with pytest.raises(MemoryFileError, match="not valid JSON"):
        Memory.from_json(tmp_path / "cut.json")
    with pytest.raises(MemoryFileError, match="not a memory document"):
        Memory.from_json({"hello": 1})

    def broken(change):
        doc = json.loads(json.dumps(good))
        change(doc)
        return doc

    cases = [
        (lambda d: d["config"].update(format=7), "format version 7"),
        (lambda d: d["records"][1]["point"].pop(), "point of memory 'dog' has 63 values"),
        (lambda d: d["records"][1].update(embedding="abc"), "embedding of memory 'dog' is missing or of type"),
        (lambda d: d["records"][2].update(id="animal"), "duplicate id 'animal'"),
        (lambda d: d["records"][1].pop("direction"), "some records have a direction"),
        (lambda d: d["records"][1].update(depth="deep"), "depth of memory 'dog'"),
        (lambda d: d["config"].update(dim=65), "embedder spec says dim 64"),
        (lambda d: d["records"].pop(), "truncated"),
    ]
    for change, message in cases:
        with pytest.raises(MemoryFileError, match=message):
            Memory.from_json(broken(change))
    nan = broken(lambda d: d["records"][0]["point"].__setitem__(0, float("nan")))
    with pytest.raises(MemoryFileError, match="NaN"):
        Memory.from_json(json.dumps(nan))  # Python writes NaN; the reader refuses it
    with pytest.raises(MemoryFileError, match="non-finite"):
        Memory.from_json(nan)
