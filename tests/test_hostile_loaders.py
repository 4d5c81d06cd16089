"""Memory.load / Memory.from_json against crafted files: every field is checked and a bad
one is a MemoryFileError naming the file and the field; nothing deep, huge or of the wrong
type gets through or is reinterpreted, and a load writes nothing."""

import copy
import json
import sqlite3
from pathlib import Path

import pytest
import torch
from hostile_helpers import deep_json, execute, folder_state, loosen, nested, not_a
from hostile_helpers import refused_without_a_trace as refused
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hypermem import HalfLife, HashingEmbedder, Memory
from hypermem.store.validation import MAX_DIM, MAX_JSON_DEPTH, MemoryFileError

DIM = 16


def small_memory() -> Memory:
    mem = Memory(embedder=HashingEmbedder(dim=DIM), decay=HalfLife(24))
    mem.add("animals", id="a", meta={"k": [1, 2]})
    mem.add("dogs", id="d", parent="a")
    mem.add("cats", id="c", parent="a")
    return mem


MEM = small_memory()
DOC = json.loads(MEM.to_json())
HOSTILE = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def load_doc(doc) -> Memory:
    return Memory.from_json(json.dumps(doc))


def mutated(path: str, value):
    """A copy of DOC with the field at ``path`` ("config.dim", "records.1.sibling_index") set."""
    doc = copy.deepcopy(DOC)
    *parents, last = path.split(".")
    node = doc
    for key in parents:
        node = node[int(key)] if isinstance(node, list) else node[key]
    node[int(last) if isinstance(node, list) else last] = value
    return doc


@pytest.fixture
def saved(tmp_path) -> Path:
    path = tmp_path / "m.db"
    MEM.save(path)
    return path


def refused_without_a_trace(path, match):
    refused(lambda p: Memory.load(p), path, match)


# ---------------------------------------------------------------------------- depth
@pytest.mark.parametrize("text", [deep_json(100_000), deep_json(3000, "{\"a\": ", "}"),
                                  '{"config": ' + deep_json(100_000) + "}",
                                  '{"config": {}, "records": [{"meta": ' + deep_json(50_000) + "}]}"])
def test_json_too_deep_for_the_reader_is_a_memory_file_error(text, tmp_path):
    with pytest.raises(MemoryFileError, match="too deep"):
        Memory.from_json(text)
    path = tmp_path / "deep.json"
    path.write_text(text)
    with pytest.raises(MemoryFileError, match="too deep") as info:
        Memory.from_json(path)
    assert str(path) in str(info.value)


def test_meta_depth_limit_is_the_same_for_save_and_load(tmp_path):
    ok = {"x": nested(MAX_JSON_DEPTH - 1)}  # the dict is level 1, each list one more, the leaf 0 none
    mem = Memory(embedder=HashingEmbedder(dim=DIM))
    mem.add("deep but allowed", id="ok", meta=ok)
    mem.save(tmp_path / "ok.db")
    assert Memory.load(tmp_path / "ok.db").get("ok").meta == ok
    assert Memory.from_json(mem.to_json()).get("ok").meta == ok
    too_deep = {"x": nested(MAX_JSON_DEPTH)}
    with pytest.raises(ValueError, match="deeper than"):
        mem.update("ok", meta=too_deep)  # the store refuses it up front, unchanged
    assert mem.get("ok").meta == ok
    mem.get("ok").meta["x"] = too_deep["x"]  # a record's meta is a copy: the store is unchanged
    assert mem.get("ok").meta == ok
    mem.state.records.meta_at(mem.state.row["ok"])["x"] = too_deep["x"]  # the stored dict, behind the store's back
    with pytest.raises(ValueError, match="deeper than"):
        mem.save(tmp_path / "ok.db")  # save refuses what load would refuse; the old file stays
    assert Memory.load(tmp_path / "ok.db").get("ok").meta == ok
    with pytest.raises(MemoryFileError, match="meta of memory 'a' nests deeper"):
        load_doc(mutated("records.0.meta", too_deep))


@pytest.mark.parametrize("column,key", [("meta", None), ("value", "metric"), ("value", "decay"), ("value", "embedder")])
def test_deep_json_in_sqlite_fields(saved, column, key):
    loosen(saved)
    if column == "meta":
        execute(saved, "UPDATE records SET meta = ? WHERE id = 'a'", deep_json(100_000, '{"a": ', "}"))
    else:
        execute(saved, "UPDATE config SET value = ? WHERE key = ?", deep_json(100_000), key)
    refused_without_a_trace(saved, "too deep|nests deeper")


def test_moderately_deep_sqlite_config_value_is_refused_by_the_depth_limit(saved):
    execute(saved, "UPDATE config SET value = ? WHERE key = 'decay'", deep_json(MAX_JSON_DEPTH + 1))
    refused_without_a_trace(saved, "config value of 'decay' nests deeper than 100")


# ---------------------------------------------------------------------------- sizes
@pytest.mark.parametrize("dim", [2**40, 1099511627776, MAX_DIM + 1, 10**30])
def test_declared_huge_dimension_is_refused_before_any_allocation(saved, dim):
    doc = mutated("config.dim", dim)
    doc["config"]["embedder"]["dim"] = dim
    with pytest.raises(MemoryFileError, match="config dim"):
        load_doc(doc)
    execute(saved, "UPDATE config SET value = ? WHERE key = 'dim'", json.dumps(dim))
    execute(saved, "UPDATE config SET value = ? WHERE key = 'embedder'", json.dumps(doc["config"]["embedder"]))
    refused_without_a_trace(saved, "config dim")


def test_declared_dimension_is_checked_against_the_blobs(saved):
    """A plausible but wrong dimension: the blob lengths disagree before anything of that
    size is allocated (the message gives both sizes)."""
    execute(saved, "UPDATE config SET value = ? WHERE key = 'dim'", json.dumps(MAX_DIM))
    execute(saved, "UPDATE config SET value = ? WHERE key = 'embedder'",
            json.dumps({"type": "hashing", "dim": MAX_DIM, "ngram_range": [3, 5], "seed": 0}))
    refused_without_a_trace(saved, f"has {8 * DIM} bytes, expected {8 * MAX_DIM}")
    doc = mutated("config.dim", MAX_DIM)
    doc["config"]["embedder"]["dim"] = MAX_DIM
    with pytest.raises(MemoryFileError, match=f"has {DIM} values, expected {MAX_DIM}"):
        load_doc(doc)


# ---------------------------------------------------------------------------- types
NUMBERS = ("curvature", "base_depth", "depth_step", "inherit", "cone_k", "time_coef", "depth_bias")
FIELDS = {  # field of DOC -> (what it must be, what the error names)
    **{f"config.{k}": ("number", f"config value of '{k}' must be a finite number") for k in NUMBERS},
    "config.cone_constrained": ("bool", "config value of 'cone_constrained' must be true or false"),
    "config.metric": ("str", "config value of 'metric' must be a string"),
    "config.dim": ("int", "bad config dim"), "config.format": ("int", "format version"),
    "config.count": ("int", "saved count|holds 3 records but was saved"),
    "records.1.sibling_index": ("int", "sibling_index of memory 'd'"),
    "records.1.depth": ("number", "depth of memory 'd'"),
    "records.1.access_count": ("int", "access count of memory 'd'"),
    "records.1.id": ("str", "position 1 has a bad id"), "records.1.text": ("str", "text of memory 'd'"),
}
OPTIONAL = ("config.count", "records.1.access_count")  # null is allowed there (reference files)


@settings(HOSTILE, max_examples=80)
@given(data=st.data())
def test_fields_of_the_wrong_type_are_refused(data):
    field = data.draw(st.sampled_from(sorted(FIELDS)))
    kind, message = FIELDS[field]
    value = data.draw(not_a(kind).filter(lambda v: v is not None or field not in OPTIONAL))
    with pytest.raises(MemoryFileError, match=message) as info:
        load_doc(mutated(field, value))
    assert str(info.value).startswith("the JSON text")


@HOSTILE
@given(field=st.sampled_from(["point", "embedding", "direction"]),
       bad=st.one_of(st.sampled_from(["0.1", True, False, None, [0.1], "abc"]),
                     st.lists(st.text(max_size=3), min_size=1, max_size=3)))
def test_vectors_hold_numbers_only(field, bad):
    """Strings are not converted, true/false are not 1.0/0.0, a nested list is no number."""
    doc = copy.deepcopy(DOC)
    vec = doc["records"][0][field]
    vec[len(vec) // 2] = bad
    with pytest.raises(MemoryFileError, match=f"the {field} of memory 'a'"):
        load_doc(doc)


@pytest.mark.parametrize("value", ["false", "true", 0, 1, None])
def test_cone_constrained_must_be_a_boolean(value, saved):
    with pytest.raises(MemoryFileError, match="cone_constrained"):
        load_doc(mutated("config.cone_constrained", value))
    execute(saved, "UPDATE config SET value = ? WHERE key = 'cone_constrained'", json.dumps(value))
    refused_without_a_trace(saved, "cone_constrained")


@pytest.mark.parametrize("scale", [2.0, 0.5, 1.001, 0.0])
def test_non_unit_stored_direction_is_refused(scale, saved):
    doc = copy.deepcopy(DOC)
    doc["records"][0]["direction"] = [v * scale for v in doc["records"][0]["direction"]]
    with pytest.raises(MemoryFileError, match="direction of memory 'a' is not a unit vector"):
        load_doc(doc)
    blob = (torch.tensor(doc["records"][0]["direction"], dtype=torch.float64)).numpy().astype("<f8").tobytes()
    execute(saved, "UPDATE hypermem_rows SET direction = ? WHERE pos = 0", blob)
    refused_without_a_trace(saved, "not a unit vector")


def test_negative_depth_and_duplicate_sibling_index_are_refused():
    with pytest.raises(MemoryFileError, match="depth of memory 'a' is negative"):
        load_doc(mutated("records.0.depth", -1.0))
    with pytest.raises(MemoryFileError, match="two children of 'a' have sibling_index 0"):
        load_doc(mutated("records.2.sibling_index", 0))


@pytest.mark.parametrize("meta", ['{"x": NaN}', '{"x": Infinity}', '{"x": -Infinity}', '[1]', '"text"', "0"])
def test_sqlite_meta_must_be_a_finite_json_object(meta, saved):
    execute(saved, "UPDATE records SET meta = ? WHERE id = 'd'", meta)
    refused_without_a_trace(saved, "meta of memory 'd'")


@pytest.mark.parametrize("meta", [[], 0, "", False])
def test_falsy_meta_is_not_read_as_empty(meta):
    with pytest.raises(MemoryFileError, match="meta of memory 'd' is not an object"):
        load_doc(mutated("records.1.meta", meta))


# ---------------------------------------------------------------------------- decay specs
@pytest.mark.parametrize("spec,match", [
    (["half_life"], "must be an object"),
    ("half_life", "must be an object"),
    ({"hours": 3}, "string 'type'"),
    ({"type": "half_life"}, "exactly the keys"),
    ({"type": "half_life", "hours": 3, "extra": 1}, "exactly the keys"),
    ({"type": "half_life", "hours": -1}, "HalfLife.hours must be a finite positive number"),
    ({"type": "half_life", "hours": "24"}, "HalfLife.hours"),
    ({"type": "ebbinghaus", "stability_hours": 5, "boost_per_access": -1}, "boost_per_access"),
    ({"type": "validity", "outside_weight": 2}, "outside_weight"),
    ({"type": "product", "policies": []}, "non-empty list"),
    ({"type": "product", "policies": {"type": "none"}}, "non-empty list"),
    ({"type": "product", "policies": [{"type": "half_life", "hours": 0}]}, "HalfLife.hours"),
    (json.loads('{"type": "product", "policies": [' * 12 + '{"type": "none"}' + "]}" * 12), "nested deeper"),
])
def test_bad_decay_specs_are_memory_file_errors_not_custom_policies(spec, match, saved):
    with pytest.raises(MemoryFileError, match=match) as info:
        load_doc(mutated("config.decay", spec))
    assert "custom" not in str(info.value)
    execute(saved, "UPDATE config SET value = ? WHERE key = 'decay'", json.dumps(spec))
    refused_without_a_trace(saved, "bad decay spec")


def test_custom_decay_policy_still_asks_for_the_policy():
    with pytest.raises(ValueError, match="custom decay policy 'Mine'") as info:
        load_doc(mutated("config.decay", {"type": "Mine", "custom": True}))
    assert not isinstance(info.value, MemoryFileError)


@pytest.mark.parametrize("spec", [{"type": "hashing", "dim": DIM, "ngram_range": "35", "seed": 0},
                                  {"type": "hashing", "dim": DIM, "ngram_range": [3, 5], "seed": "0"},
                                  {"type": "hashing", "dim": str(DIM), "ngram_range": [3, 5], "seed": 0},
                                  {"type": "hashing", "dim": True}, [DIM], None])
def test_bad_embedder_specs(spec):
    with pytest.raises(MemoryFileError, match="embedder spec"):
        load_doc(mutated("config.embedder", spec))


# ---------------------------------------------------------------------------- SQLite tables
@pytest.mark.parametrize("sql,params,match", [
    ("DELETE FROM records WHERE id = 'c'", (), "holds 2 records but was saved with 3"),
    ("UPDATE config SET value = 'true' WHERE key = 'count'", (), "saved count is True"),
    ("UPDATE config SET value = '3.0' WHERE key = 'count'", (), "saved count is 3.0"),
    ("UPDATE records SET pos = 'x' WHERE id = 'c'", (), "bad or repeated pos"),
    ("UPDATE records SET pos = NULL WHERE id = 'c'", (), "bad or repeated pos"),
    ("UPDATE records SET pos = 0 WHERE id = 'c'", (), "bad or repeated pos"),
    ("UPDATE hypermem_rows SET pos = 'x' WHERE pos = 2", (), "hypermem_rows has a bad or repeated pos"),
    ("UPDATE hypermem_rows SET sibling_index = '1' WHERE pos = 2", (), "sibling_index of memory 'c'"),
    ("UPDATE hypermem_rows SET sibling_index = NULL WHERE pos = 2", (), "sibling_index of memory 'c'"),
    ("UPDATE hypermem_rows SET depth = '1.5' WHERE pos = 2", (), "depth of memory 'c'"),
    ("INSERT INTO config VALUES ('dim', '16')", (), "repeated key 'dim'"),
    ("UPDATE records SET access_count = '2' WHERE id = 'c'", (), "access count of memory 'c'"),
    ("UPDATE records SET point = 'abc' WHERE id = 'c'", (), "point of memory 'c' is missing or of type str"),
])
def test_crafted_sqlite_tables(saved, sql, params, match):
    loosen(saved)
    execute(saved, sql, *params)
    refused_without_a_trace(saved, match)


# ---------------------------------------------------------------------------- no writes
def test_loading_a_wal_mode_file_creates_no_files(saved):
    execute(saved, "PRAGMA journal_mode=WAL")
    before = folder_state(saved.parent)
    assert sorted(before) == ["m.db"]
    assert len(Memory.load(saved)) == 3
    assert folder_state(saved.parent) == before


def test_a_file_with_an_unfinished_write_ahead_log_is_refused_not_read_stale(saved):
    writer = sqlite3.connect(saved)
    try:
        writer.execute("PRAGMA journal_mode=WAL")
        writer.execute("UPDATE records SET text = 'changed' WHERE id = 'a'")
        writer.commit()
        assert (saved.parent / "m.db-wal").stat().st_size > 0
        refused_without_a_trace(saved, "write-ahead log")
    finally:
        writer.close()
    assert Memory.load(saved).get("a").text == "changed"  # once checkpointed, the change is there


# ---------------------------------------------------------------------------- sources
@pytest.mark.parametrize("text", ["[1, 2]", "[]", "123", "null", '"memory.json"', "true", "  [{}]"])
def test_json_text_that_is_not_a_document_is_not_taken_for_a_path(text):
    with pytest.raises(MemoryFileError, match="not a memory document"):
        Memory.from_json(text)


@pytest.mark.parametrize("name", ["missing.json", "x" * 5000, "not json at all"])
def test_a_missing_path_is_file_not_found(name, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(FileNotFoundError, match="no such memory file"):
        Memory.from_json(name)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("data", [b"\xff\xfe{}", b'{"config": "\xe9"}', MEM.to_json().encode("utf-16")])
def test_non_utf8_json_file_names_the_file(data, tmp_path):
    path = tmp_path / "m.json"
    path.write_bytes(data)
    with pytest.raises(MemoryFileError, match="not UTF-8 text") as info:
        Memory.from_json(path)
    assert str(path) in str(info.value)


@HOSTILE
@given(st.recursive(st.none() | st.booleans() | st.integers(-2**1100, 2**1100) | st.floats(allow_nan=False)
                    | st.text(max_size=4),
                    lambda kids: st.lists(kids, max_size=3) | st.dictionaries(st.text(max_size=3), kids, max_size=3),
                    max_leaves=12))
def test_arbitrary_json_is_a_memory_file_error_or_a_memory(value):
    """Any JSON value as a whole document, as the config or as a record: never another
    exception type."""
    for doc in (value, {"config": value, "records": []}, dict(DOC, records=[value]),
                dict(DOC, config=dict(DOC["config"], embedder=value))):
        try:
            Memory.from_json(json.dumps(doc))
        except MemoryFileError:
            pass


@pytest.mark.parametrize("meta", [{"x": float("nan")}, {"x": float("inf")}, {"x": {1, 2}}, {"x": object()}])
def test_a_parsed_document_cannot_smuggle_what_json_cannot_hold(meta):
    doc = mutated("records.0.meta", meta)
    with pytest.raises(MemoryFileError, match="meta of memory 'a' is not plain finite JSON"):
        Memory.from_json(doc)
    doc = mutated("records.0.point", [float("nan")] * DIM)
    with pytest.raises(MemoryFileError, match="point of memory 'a' has non-finite values"):
        Memory.from_json(doc)


def test_a_hot_rollback_journal_is_refused_not_read_torn(saved):
    (saved.parent / "m.db-journal").write_bytes(b"\xd9\xd5\x05\xf9\x20\xa1\x63\xd7" + b"\0" * 504)
    refused_without_a_trace(saved, "rollback journal of an interrupted write")
    (saved.parent / "m.db-journal").write_bytes(b"")  # an empty journal is no pending transaction
    assert len(Memory.load(saved)) == 3


BIG = 10**400  # a JSON integer that no float64 holds


@pytest.mark.parametrize("field,match", [
    ("config.curvature", "config value of 'curvature' must be a finite number"),
    ("config.time_coef", "config value of 'time_coef'"),
    ("records.1.depth", "depth of memory 'd' is"),
    ("records.1.access_count", "access count of memory 'd'"),
    ("config.decay", "bad decay spec"),
])
def test_integers_beyond_float64_are_refused_not_overflow_errors(field, match):
    value = {"type": "half_life", "hours": BIG} if field == "config.decay" else BIG
    with pytest.raises(MemoryFileError, match=match):
        load_doc(mutated(field, value))
    doc = copy.deepcopy(DOC)
    doc["records"][0]["embedding"][3] = BIG
    with pytest.raises(MemoryFileError, match="embedding of memory 'a'"):
        load_doc(doc)


@pytest.mark.parametrize("field", ["t", "valid_from", "valid_until", "last_accessed"])
@pytest.mark.parametrize("value,match", [("0001-01-01T00:00:00+14:00", "outside the datetime range"),
                                         ("9999-12-31T23:59:59-14:00", "outside the datetime range"),
                                         ("2025-13-01T00:00:00", "not an ISO 8601 time"), (17, "not an ISO 8601")])
def test_times_outside_the_range_or_malformed(field, value, match):
    with pytest.raises(MemoryFileError, match=match) as info:
        load_doc(mutated(f"records.0.{field}", value))
    assert f"the {'time' if field == 't' else field} of memory 'a'" in str(info.value)


def test_a_byte_order_mark_is_no_content_and_a_device_is_no_file(tmp_path):
    path = tmp_path / "bom.json"
    path.write_bytes(b"\xef\xbb\xbf" + MEM.to_json().encode())
    assert len(Memory.from_json(path)) == 3
    with pytest.raises(MemoryFileError, match="is a device"):
        Memory.from_json("/dev/zero")  # reading it would never end
