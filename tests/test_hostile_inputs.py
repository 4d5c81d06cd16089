"""Hostile sizes, depths and bytes get a clear error (or a bounded answer), never a crash.

Before: search(k=10**18) asked the allocator for 8 EB (10**7 cost 1 GiB on 3 memories); a
filter nested ~990 deep raised RecursionError; a flipped byte in a SQLite file's schema raised
a bare UnicodeDecodeError; a file's embedder/decay ``type`` of 0, a list or null was taken for
a custom embedder ("pass embedder=") instead of a malformed file.
"""

import json

import pytest

from hypermem import HalfLife, Memory
from hypermem.episodic import MemoryStorage
from hypermem.store.backends.durable import StorageError
from hypermem.store.filters import FilterError, compile_filter, filter_keys, to_postgres
from hypermem.store.validation import MAX_JSON_DEPTH, MemoryFileError


@pytest.fixture
def three():
    m = Memory()
    m.add("animals", id="a", meta={"x": 1})
    m.add("dogs bark", id="d", parent="a", meta={"x": 2})
    m.add("cats purr", id="c", parent="a", meta={"x": 2})
    return m


# ------------------------------------------------------------------ k larger than the store
@pytest.mark.parametrize("k", [10**7, 10**18, 2**63 - 1, 10**30])
def test_a_huge_k_is_clamped_to_the_candidates(three, k):
    assert len(three.search("dogs", k=k)) == 3
    assert [len(r) for r in three.search_batch(["dogs", "cats"], k=k)] == [3, 3]
    assert len(three.search("dogs", k=k, filters={"x": 2})) == 2
    assert len(three.search("dogs", k=k, metric="hyperbolic")) == 3
    assert len(three.search(None, k=k, mode="subtree", root="a")) == 3
    assert len(three.search("dogs", k=k, mode="ancestors")) <= 3
    assert len(three.suggest_parents("puppies", k=k)) <= 3
    assert len(three.search("dogs", k=k, use_index=True)) == 3


# ------------------------------------------------------------------ deep filters
def nest(depth, leaf, wrap):
    f = leaf
    for _ in range(depth):
        f = wrap(f)
    return f


@pytest.mark.parametrize("wrap", [lambda f: {"x": f}, lambda f: {"$not": f}, lambda f: {"$and": [f]},
                                  lambda f: {"$or": [f]}])
def test_a_filter_deeper_than_the_json_limit_is_a_filter_error(three, wrap):
    ok = nest(MAX_JSON_DEPTH // 2 - 1, {"x": 2}, wrap)
    three.search("dogs", filters=ok)
    for depth in (MAX_JSON_DEPTH + 1, 990, 5000):
        deep = nest(depth, {"x": 2}, wrap)
        with pytest.raises(FilterError, match=f"nests deeper than {MAX_JSON_DEPTH} levels"):
            three.search("dogs", filters=deep)
        with pytest.raises(FilterError):
            compile_filter(deep)
        with pytest.raises(FilterError):
            to_postgres(deep)
        filter_keys(deep)  # iterative: no RecursionError


def test_deep_lists_inside_a_filter_are_refused_too(three):
    lst = nest(2000, [1], lambda v: [v])
    for spec in ({"x": {"$in": lst}}, {"x": {"$eq": lst}}, {"x": lst}):
        with pytest.raises(FilterError, match="nests deeper"):
            three.search("dogs", filters=spec)


# ------------------------------------------------------------------ corrupt SQLite schemas
def flip_schema_name(path, name: bytes) -> None:
    """Flip the second byte of the table name ``name`` where the schema stores it last."""
    data = bytearray(path.read_bytes())
    i = data.rfind(name)
    while data[i: i + len(name)] == name and i > 0:
        j = i
        i = data.rfind(name, 0, i)
    data[j + 1] = 0xD7  # not UTF-8
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("table", [b"hypermem_rows", b"records", b"config"])
def test_a_schema_that_is_not_utf8_is_a_memory_file_error(three, tmp_path, table):
    p = tmp_path / "m.db"
    three.save(p)
    flip_schema_name(p, table)
    with pytest.raises(MemoryFileError, match="schema is corrupt, it holds bytes that are not UTF-8"):
        Memory.load(p)
    with pytest.raises(StorageError, match="not UTF-8"):
        Memory.open(p, read_only=True)
    three.save(p)  # a corrupt file is replaced as a non-SQLite one is
    assert Memory.load(p).ids == three.ids


@pytest.mark.parametrize("table", [b"memories", b"config"])
def test_an_episodic_schema_that_is_not_utf8_is_a_memory_file_error(tmp_path, table):
    s = MemoryStorage()
    s.instantiate("((alice ate apple) ** E1)", importance=0.9)
    p = tmp_path / "e.db"
    s.save(p)
    flip_schema_name(p, table)
    with pytest.raises(MemoryFileError, match="not UTF-8"):
        MemoryStorage.load(p)
    s.save(p)
    assert len(MemoryStorage.load(p)) == 1


# ------------------------------------------------------------------ malformed spec types
@pytest.mark.parametrize("field", ["embedder", "decay"])
@pytest.mark.parametrize("bad", [0, -1, [0.0, 1.0], {"type": "x"}, None])
def test_a_spec_type_that_is_not_a_name_is_a_memory_file_error(field, bad):
    m = Memory(decay=HalfLife(5))
    m.add("animals")
    doc = json.loads(m.to_json())
    doc["config"][field]["type"] = bad
    with pytest.raises(MemoryFileError, match="spec's 'type' must be a string|decay spec needs a string 'type'"):
        Memory.from_json(json.dumps(doc))


@pytest.mark.parametrize("field,arg", [("embedder", "embedder="), ("decay", "decay=")])
def test_a_custom_type_still_asks_for_the_object(field, arg):
    m = Memory(decay=HalfLife(5))
    m.add("animals")
    doc = json.loads(m.to_json())
    doc["config"][field]["type"] = "MyThing"
    with pytest.raises(ValueError, match=f"custom .*'MyThing'.*pass {arg}") as info:
        Memory.from_json(json.dumps(doc))
    assert not isinstance(info.value, MemoryFileError)


def test_a_search_time_of_the_wrong_type_names_at_time():
    """`search(at_time="2023-05-09")` raised "expected a datetime, got str", naming nothing."""
    from hypermem import HashingEmbedder

    mem = Memory(embedder=HashingEmbedder(dim=16))
    mem.add("x")
    with pytest.raises(TypeError, match=r"at_time must be a datetime, got str \(parse it first"):
        mem.search("x", at_time="2023-05-09T00:00:00")
    with pytest.raises(TypeError, match="at_time must be a datetime, got int"):
        mem.time_weights(at_time=1700000000)


def test_an_empty_store_names_a_bad_at_time_too():
    """An empty store returned [] for `search(at_time="...")` and only a later search, once
    the store held something, raised: the same bad call now fails the same way either way."""
    from hypermem import HashingEmbedder

    mem = Memory(embedder=HashingEmbedder(dim=16))
    with pytest.raises(TypeError, match="at_time must be a datetime, got str"):
        mem.search("x", at_time="2023-05-09T00:00:00")
    assert mem.search("x", at_time=None) == []
