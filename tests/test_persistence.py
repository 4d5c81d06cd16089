"""Saving and loading: exact round trips (SQLite and JSON), the reference's files,
atomic saves (exceptions, a full disk, SIGKILL), corrupt files and clear errors."""

import errno
import json
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
import torch

from hypermem import CallableEmbedder, HalfLife, HashingEmbedder, Memory, Product, ValidityWindow
from hypermem.store import atomic, persistence
from hypermem.store.persistence import MemoryFileError

T0 = datetime(2025, 3, 1, 12, 0, tzinfo=timezone.utc)
ROOT = Path(__file__).resolve().parents[1]


class Clock:
    def __init__(self, t=T0 + timedelta(days=10)):
        self.t = t

    def __call__(self):
        return self.t


def rich_memory(dtype=torch.float64, device="cpu", dim=64):
    """A memory that exercises every piece of state: hierarchy with a re-parented child
    (sibling order differs from insertion order), updated text, a removed memory,
    validity windows, access counts, nested meta, unicode, an explicit point and a
    precomputed embedding, and a composite decay policy."""
    mem = Memory(embedder=HashingEmbedder(dim=dim, seed=7), decay=Product(HalfLife(48), ValidityWindow(0.01)),
                 curvature=0.7, base_depth=0.8, depth_step=0.6, inherit=0.4, cone_k=0.05, time_coef=0.5,
                 depth_bias=0.1, clock=Clock(), dtype=dtype, device=device)
    mem.add("animals live on earth", id="animal", t=T0, meta={"kind": "topic", "tags": ["a", "b"],
                                                              "nested": {"x": 1.5, "ok": True, "none": None}})
    mem.add("dogs are loyal", parent="animal", id="dog", t=T0 + timedelta(hours=1))
    mem.add("cats are independent", parent="animal", id="cat", t=T0 + timedelta(hours=2),
            valid_from=T0, valid_until=T0 + timedelta(days=3))
    mem.add("wolves hunt in packs", id="wolf", t=T0 + timedelta(hours=3))
    mem.add("puppies play", parent="dog", id="puppy", t=T0 + timedelta(hours=4), meta={"ü": "日本語 ✓"})
    mem.add("temporary note", id="tmp", t=T0 + timedelta(hours=5))
    mem.add_many([{"text": "a fixed point", "id": "fixed", "point": [0.3] + [0.0] * (dim - 1)},
                  {"text": "precomputed", "id": "pre", "parent": "animal",
                   "embedding": torch.linspace(-1, 1, dim, dtype=torch.float64)}])
    mem.link("dog", None)
    mem.link("dog", "animal")  # children of animal: cat, pre, dog (not insertion order)
    mem.update("wolf", text="wolves howl at night", meta={"edited": 1})
    mem.remove("tmp")
    mem.search("loyal dog", k=2)
    mem.search("animals", k=3, mode="subtree", root="animal")
    return mem


def assert_same(a: Memory, b: Memory, exact: bool = True):
    assert a.ids == b.ids
    for x, y in zip(a, b):
        assert x == y
        assert x.to_dict() == y.to_dict()
        assert type(x.t) is type(y.t) and x.t.tzinfo is not None and y.t.tzinfo is not None
    for i in a.ids:
        assert a.children(i) == b.children(i)
        assert a.level(i) == b.level(i)
    assert a.roots() == b.roots()
    assert (a.dim, a.curvature, a.base_depth, a.depth_step, a.inherit, a.cone_constrained, a.cone_k, a.metric,
            a.time_coef, a.depth_bias) == (b.dim, b.curvature, b.base_depth, b.depth_step, b.inherit,
                                           b.cone_constrained, b.cone_k, b.metric, b.time_coef, b.depth_bias)
    assert a.decay == b.decay
    assert a.dtype == b.dtype
    n = len(a)
    if exact:
        assert torch.equal(a.points.cpu(), b.points.cpu())
        assert torch.equal(a.directions.cpu(), b.directions.cpu())
        assert torch.equal(a.depths.cpu(), b.depths.cpu())
    else:
        torch.testing.assert_close(a.points.cpu(), b.points.cpu(), rtol=0, atol=1e-12)
    assert torch.equal(a.embeddings, b.embeddings)
    for name in ("time", "access", "valid_from", "valid_until"):
        assert torch.equal(getattr(a.state, name)[:n].cpu(), getattr(b.state, name)[:n].cpu()), name
    assert a.stats() == b.stats()


def same_search(a: Memory, b: Memory):
    for kwargs in ({"query": "loyal dogs"}, {"query": "animals", "mode": "subtree", "root": "animal"},
                   {"query": None, "mode": "children", "root": "animal"}):
        ra = a.search(k=4, touch=False, **kwargs)
        rb = b.search(k=4, touch=False, **kwargs)
        assert [(r.id, r.score) for r in ra] == [(r.id, r.score) for r in rb]


def temp_files(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.endswith(".tmp"))


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
    with pytest.raises(ValueError, match="dimension mismatch.*16-dimensional.*dim=32"):
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


# ----------------------------------------------------------------------------- atomic saves
def test_non_json_meta_is_refused_and_the_old_file_survives(tmp_path):
    mem = rich_memory()
    path = tmp_path / "m.db"
    mem.save(path)
    jpath = tmp_path / "m.json"
    mem.to_json(jpath)
    before, jbefore = path.read_bytes(), jpath.read_bytes()
    meta = mem.get("puppy").meta  # a non-empty meta is the stored dict itself
    for bad in (object(), {1, 2}, ("a", "b"), float("nan")):
        meta["bad"] = bad  # changed in place, behind the store's back
        with pytest.raises(ValueError, match="meta of memory 'puppy'"):
            mem.save(path)
        with pytest.raises(ValueError, match="meta of memory 'puppy'"):
            mem.to_json(jpath)
        assert path.read_bytes() == before and jpath.read_bytes() == jbefore
    del meta["bad"]
    meta[1] = "int key"
    with pytest.raises(ValueError, match="would not load back equal"):
        mem.save(path)
    assert path.read_bytes() == before
    assert temp_files(tmp_path) == []
    del meta[1]
    assert_same(Memory.load(path, clock=mem.clock), Memory.from_json(jpath, clock=mem.clock))


def test_full_disk_in_the_middle_of_a_save_leaves_the_old_file(tmp_path, monkeypatch):
    mem = rich_memory()
    path, jpath = tmp_path / "m.db", tmp_path / "m.json"
    mem.save(path)
    mem.to_json(jpath)
    before, jbefore = path.read_bytes(), jpath.read_bytes()
    mem.add("new memory", id="new")
    real_blob, calls = persistence._blob, []

    def failing_blob(row):  # the disk fills up after a few rows have been written
        calls.append(1)
        if len(calls) > 3:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_blob(row)

    monkeypatch.setattr(persistence, "_blob", failing_blob)
    with pytest.raises(OSError, match="No space left"):
        mem.save(path)
    monkeypatch.setattr(persistence, "_blob", real_blob)

    def failing_fsync(fd):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(atomic.os, "fsync", failing_fsync)
    with pytest.raises(OSError, match="No space left"):
        mem.save(path)
    with pytest.raises(OSError, match="No space left"):
        mem.to_json(jpath)
    monkeypatch.undo()
    assert path.read_bytes() == before and jpath.read_bytes() == jbefore
    assert temp_files(tmp_path) == []
    old = Memory.load(path)
    assert "new" not in old and len(old) == len(mem) - 1


CHILD = textwrap.dedent(r"""
    import resource, signal, sys, warnings
    warnings.filterwarnings("ignore")
    import torch
    torch.set_num_threads(1)
    from hypermem import HashingEmbedder, Memory
    full, looped = sys.argv[1], sys.argv[2]
    mem = Memory(embedder=HashingEmbedder(dim=64))
    mem.add_many([{"text": f"memory number {i}", "meta": {"version": 0}} for i in range(1000)])
    # 1. A real full disk: the file-size limit makes the write fail half way.
    mem.save(full)  # the old, complete file
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (65536, hard))
    mem.add("one more", meta={"version": -1})
    try:
        mem.save(full)
    except Exception as exc:
        print("failed:", type(exc).__name__, exc, flush=True)
    else:
        print("saved", flush=True)
    resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
    mem.remove(mem.ids[-1])
    # 2. Save over and over; the fourth save stops half way through writing its rows and
    #    says so, and the parent kills us there with SIGKILL.
    import time
    from hypermem.store import persistence
    blob, state = persistence._blob, {"v": 0, "calls": 0}
    def slow_blob(row):
        state["calls"] += 1
        if state["v"] == 4 and state["calls"] == len(mem):  # half way through the records table
            print("mid-save", flush=True)
            time.sleep(60)
        return blob(row)
    persistence._blob = slow_blob
    while True:
        state["v"] += 1
        state["calls"] = 0
        mem.add(f"version {state['v']}", meta={"version": state["v"]})
        mem.save(looped)
        print(state["v"], flush=True)
""")
N_CHILD = 1000


@pytest.fixture(scope="module")
def crashed_child(tmp_path_factory):
    """Run CHILD: a save that hits a real file-size limit, then saves until one is killed
    with SIGKILL half way through writing its rows."""
    folder = tmp_path_factory.mktemp("crash")
    full, looped = folder / "full.db", folder / "looped.db"
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(full), str(looped)], stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL, text=True, env=env)
    try:
        first = child.stdout.readline()
        done = 0
        while True:
            line = child.stdout.readline().strip()
            assert line, "the child stopped early"
            if line == "mid-save":
                break
            done = int(line)
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=60)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    return {"folder": folder, "full": full, "looped": looped, "first": first, "done": done,
            "returncode": child.returncode}


def test_a_real_full_disk_leaves_the_old_file(crashed_child):
    assert crashed_child["first"].startswith("failed:"), crashed_child["first"]
    mem = Memory.load(crashed_child["full"])
    assert len(mem) == N_CHILD and {r.meta["version"] for r in mem} == {0}


def test_sigkill_in_the_middle_of_many_saves_leaves_a_loadable_file(crashed_child):
    assert crashed_child["returncode"] == -signal.SIGKILL
    assert crashed_child["done"] == 3
    mem = Memory.load(crashed_child["looped"])  # the third save, complete
    versions = [r.meta["version"] for r in mem]
    assert versions == [0] * N_CHILD + [1, 2, 3]
    assert mem.get(mem.ids[-1]).text == "version 3"
    # The kill came while the fourth save was writing: it left its temporary file (never a broken target).
    assert [n.startswith(".looped.db.") for n in temp_files(crashed_child["folder"])] == [True]


def test_save_into_a_missing_folder_or_onto_a_folder(tmp_path):
    mem = rich_memory()
    with pytest.raises(FileNotFoundError, match="does not exist"):
        mem.save(tmp_path / "nope" / "m.db")
    with pytest.raises(IsADirectoryError):
        mem.save(tmp_path)
    assert not (tmp_path / "nope").exists()


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
    other = tmp_path / "other.db"
    con = sqlite3.connect(other)
    con.execute("CREATE TABLE t (x)")
    con.close()
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
