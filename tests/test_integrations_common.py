"""What the framework adapters share (hypermem.integrations._common), without any framework,
and the promise that `import hypermem` imports none."""

from __future__ import annotations

import subprocess
import sys
from datetime import datetime, timedelta, timezone

import pytest

from hypermem import HashingEmbedder, Memory
from hypermem.integrations import _common as C

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)


def test_import_hypermem_imports_no_framework():
    code = ("import sys, hypermem, hypermem.integrations, hypermem.integrations._common\n"
            "bad = sorted(m for m in sys.modules if m.split('.')[0] in "
            "('langchain_core', 'langchain_tests', 'llama_index', 'langgraph', 'langsmith'))\n"
            "assert not bad, bad\n")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


def test_to_time_accepts_datetimes_iso_strings_and_seconds():
    assert C.to_time(None) is None
    assert C.to_time("2026-01-01T00:00:00Z") == T0
    assert C.to_time("2026-01-01T01:00:00+01:00") == T0
    assert C.to_time("2026-01-01") == T0  # naive: UTC
    assert C.to_time(T0.timestamp()) == T0
    assert C.to_time(datetime(2026, 1, 1)) == T0
    with pytest.raises(ValueError, match="when"):
        C.to_time("soon", "when")
    with pytest.raises(TypeError, match="when"):
        C.to_time(True, "when")
    with pytest.raises(ValueError, match="finite"):
        C.to_time(float("nan"))


def test_split_and_record_metadata_round_trip():
    args, meta = C.split_metadata({"parent": "p", "t": "2026-01-01T00:00:00Z", "valid_until": T0, "x": 1})
    assert args == {"parent": "p", "t": T0, "valid_until": T0} and meta == {"x": 1}
    mem = Memory(embedder=HashingEmbedder(dim=16))
    mem.add("p", id="p")
    i = mem.add("child", meta=meta, **args)
    assert C.record_metadata(mem.get(i)) == {"x": 1, "parent": "p", "valid_until": T0.isoformat()}
    assert C.record_metadata(mem.get(i), include_time=True)["t"] == T0.isoformat()
    with pytest.raises(TypeError, match="metadata must be a dict"):
        C.split_metadata(["x"])


@pytest.fixture()
def recs():
    mem = Memory(embedder=HashingEmbedder(dim=16))
    for n, meta in enumerate([{"a": 1, "s": "Hello World", "l": ["x", "y"]}, {"a": 5, "nested": {"b": 2}},
                              {"a": None}, {}]):
        mem.add(f"text {n}", id=f"r{n}", meta=meta)
    return [mem.get(f"r{n}") for n in range(4)]


@pytest.mark.parametrize("spec, want", [
    ({"a": 1}, ["r0"]), ({"a": {"$ne": 1}}, ["r1", "r2", "r3"]), ({"a": {"$gt": 1}}, ["r1"]),
    ({"a": {"$gte": 1, "$lt": 5}}, ["r0"]), ({"a": {"$in": [1, 5]}}, ["r0", "r1"]),
    ({"a": {"$nin": [1]}}, ["r1", "r2", "r3"]), ({"a": {"$exists": False}}, ["r3"]),
    ({"a": {"$empty": True}}, ["r2", "r3"]), ({"l": {"$contains": "x"}}, ["r0"]),
    ({"l": {"$all": ["x", "y"]}}, ["r0"]), ({"l": {"$any": ["y", "z"]}}, ["r0"]),
    ({"s": {"$text_match": "World"}}, ["r0"]), ({"s": {"$text_match_insensitive": "world"}}, ["r0"]),
    ({"nested": {"b": 2}}, ["r1"]), ({"nested": {"b": 3}}, []),
    ({"$or": [{"a": 1}, {"a": 5}]}, ["r0", "r1"]), ({"$not": {"a": 1}}, ["r1", "r2", "r3"]),
    ({"$and": [{"a": {"$gte": 1}}, {"nested": {"b": 2}}]}, ["r1"]), ({}, ["r0", "r1", "r2", "r3"]),
])
def test_filter_language(recs, spec, want):
    pred = C.compile_filter(spec)
    assert [r.id for r in recs if pred(r)] == want


def test_bad_filters_fail_before_any_search():
    with pytest.raises(ValueError, match=r"\$near"):
        C.compile_filter({"a": {"$near": 1}})
    with pytest.raises(ValueError, match=r"\$xor"):
        C.compile_filter({"$xor": []})
    with pytest.raises(TypeError, match=r"\$in"):
        C.compile_filter({"a": {"$in": 3}})
    with pytest.raises(TypeError, match="dict"):
        C.compile_filter(["a"])
    assert C.compile_filter(None) is None


def test_upsert_orders_parents_first_and_replaces_existing_ids():
    mem = Memory(embedder=HashingEmbedder(dim=16))
    ids = C.upsert(mem, [{"text": "leaf", "id": "l", "parent": "m"}, {"text": "mid", "id": "m", "parent": "r"},
                         {"text": "root", "id": "r"}, {"text": "no id"}])
    assert ids[:3] == ["l", "m", "r"] and ids[3] in mem and mem.ancestors("l") == ["m", "r"]
    C.upsert(mem, [{"text": "middle", "id": "m", "meta": {"v": 2}}, {"text": "middle again", "id": "m"}])
    assert mem.get("m").text == "middle again" and mem.parent("m") is None and mem.children("m") == ["l"]
    with pytest.raises(ValueError, match="cycle"):
        C.upsert(mem, [{"text": "x", "id": "x", "parent": "y"}, {"text": "y", "id": "y", "parent": "x"}])


def test_relevance_and_mmr():
    assert C.relevance(0.0) == 1.0 and C.relevance(5.0) == 1.0 and C.relevance(-1.0) == pytest.approx(0.3678794)
    assert C.relevance(-1e9) == 0.0
    mem = Memory(embedder=HashingEmbedder(dim=64))
    mem.add_many([{"text": t, "id": t} for t in ("red apple", "red apples", "blue ocean waves")])
    hits = mem.search("red apple", k=3)
    assert [h.id for h in C.mmr(mem, hits, 2, 1.0)] == [h.id for h in hits[:2]]
    assert [h.id for h in C.mmr(mem, hits, 2, 0.2)] == ["red apple", "blue ocean waves"]


def test_open_memory(tmp_path):
    m = Memory()
    assert C.open_memory(m) is m
    with pytest.raises(ValueError, match="not both"):
        C.open_memory(m, HashingEmbedder())
    with pytest.raises(ValueError, match="://"):
        C.open_memory("mysql://x/y")
    with pytest.raises(TypeError, match="int"):
        C.open_memory(3)
    path = tmp_path / "m.db"
    fresh = C.open_memory(path, HashingEmbedder(dim=8))
    assert len(fresh) == 0 and fresh.dim == 8
    fresh.add("hello", id="h", t=T0 - timedelta(days=1))
    fresh.save(path)
    assert C.open_memory(path).get("h").text == "hello"


def test_plain_equality_filters_go_to_the_store_as_they_are(recs):
    for spec in ({"a": 1}, {"a": {"$gt": 1}}, {"$or": [{"a": 1}]}, {"nested": {"b": 2}}):
        assert C.store_filter(spec) == spec              # the store speaks the same language
    for spec in ({"parent": "x"}, {"$not": {"valid_until": {"$exists": True}}}):
        assert callable(C.store_filter(spec))            # record fields: compiled here
    mem = Memory(embedder=HashingEmbedder(dim=16))
    for r in recs:
        mem.add(r.text, id=r.id, meta=r.meta)
    assert [h.id for h in mem.search("text", k=4, filters=C.store_filter({"a": 1}))] == \
        [h.id for h in mem.search("text", k=4, filters=C.compile_filter({"a": 1}))] == ["r0"]
