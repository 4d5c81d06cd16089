"""Episodic memory against hostile input: formulas nested beyond the documented limit are
refused by the parser's own error (never RecursionError), error messages stay short, and
MemoryStorage.load checks every field of a crafted file and writes nothing."""

import json
import sqlite3

import pytest
from episodic_helpers import T0, snapshot
from hostile_helpers import deep_json, execute, folder_state, loosen, nested
from hostile_helpers import refused_without_a_trace as refused
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hypermem import HalfLife, HashingEmbedder
from hypermem.episodic import (
    Eventuality,
    MemoryStorage,
    SExprSyntaxError,
    format_sexpr,
    has_variables,
    match,
    parse_sexpr,
    substitute,
    to_sexpr,
)
from hypermem.episodic.sexpr import MAX_DEPTH, SExprTooDeepError
from hypermem.store.validation import MemoryFileError

HOSTILE = settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def parens(n: int, leaf: str = "a") -> str:
    return "(" * n + leaf + ")" * n


# ---------------------------------------------------------------------------- depth
@pytest.mark.parametrize("depth", [MAX_DEPTH + 1, 3000, 5000, 100_000])
def test_formulas_deeper_than_the_limit_are_refused_by_the_parser(depth):
    with pytest.raises(SExprTooDeepError, match=f"deeper than {MAX_DEPTH}") as info:
        parse_sexpr(parens(depth))
    assert isinstance(info.value, SExprSyntaxError) and len(str(info.value)) < 300
    with pytest.raises(SExprTooDeepError):
        to_sexpr(nested(depth, "a"))


def test_everything_works_at_the_limit():
    text = parens(MAX_DEPTH)
    expr = parse_sexpr(text)
    assert format_sexpr(expr) == text and to_sexpr(nested(MAX_DEPTH, "a")) == expr
    pattern = parse_sexpr(parens(MAX_DEPTH, "?x"))
    assert has_variables(pattern) and match(pattern, expr) == {"?x": "a"}
    assert substitute(pattern, {"?x": "b"}) == parse_sexpr(parens(MAX_DEPTH, "b"))


def test_a_list_that_contains_itself_is_too_deep():
    loop = ["a"]
    loop.append(loop)
    with pytest.raises(SExprTooDeepError):
        to_sexpr(loop)
    with pytest.raises(SExprTooDeepError):
        MemoryStorage().get_matching(loop)


@pytest.mark.parametrize("depth", [MAX_DEPTH, 5000])
def test_storage_entry_points_refuse_deep_formulas_and_change_nothing(depth):
    s = MemoryStorage()
    s.instantiate("((a p.v b) ** E1)")
    before = snapshot(s)
    deep = parens(depth)
    with pytest.raises(SExprTooDeepError):  # (wff ** ep) adds one level to the wff
        Eventuality.from_text(f"({deep} ** E2)")
    with pytest.raises(SExprTooDeepError):
        s.instantiate(f"({deep} ** E2)")
    with pytest.raises(SExprTooDeepError):
        s.instantiate(Eventuality(nested(depth, "a"), "E2"))
    if depth > MAX_DEPTH:
        for call in (s.get_matching, s.remove_matching, s.get_from_context, s.remove_matching_from_context):
            with pytest.raises(SExprTooDeepError):
                call(deep)
            with pytest.raises(SExprTooDeepError):
                call(nested(depth, "a"))
    assert snapshot(s) == before


def test_deepest_eventuality_is_stored_matched_removed_saved_and_loaded(tmp_path):
    s = MemoryStorage(embedder=HashingEmbedder(dim=16))
    wff = parens(MAX_DEPTH - 1)
    m = s.instantiate(f"({wff} ** E1)")
    assert s.get_matching(parens(MAX_DEPTH - 1, "?x")) == [m]
    s.save(tmp_path / "e.db")
    assert format_sexpr(list(MemoryStorage.load(tmp_path / "e.db"))[0].get_wff()) == wff
    assert s.remove_matching(wff) == [m] and len(s) == 0


# ---------------------------------------------------------------------------- messages
@pytest.mark.parametrize("text", ["(" * 100_000, ")" + "x" * 100_000, '"' + "x" * 100_000, "(a) " + "b " * 50_000,
                                  "(a " * 200 + '"unterminated' + " x" * 10_000])
def test_parser_errors_quote_a_short_excerpt(text):
    with pytest.raises(SExprSyntaxError) as info:
        parse_sexpr(text)
    assert len(str(info.value)) < 300


@HOSTILE
@given(st.text(alphabet='()" ab?\\', max_size=600))
def test_any_text_parses_or_is_a_short_syntax_error(text):
    try:
        expr = parse_sexpr(text)
    except SExprSyntaxError as exc:
        assert len(str(exc)) < 300
    else:
        assert parse_sexpr(format_sexpr(expr)) == expr


@HOSTILE
@given(st.integers(1, MAX_DEPTH + 40), st.integers(0, 3))
def test_depth_boundary_for_text_and_lists(depth, width):
    text = "(" * depth + " ".join(["s"] * width) + ")" * depth
    items = nested(depth - 1, ["s"] * width)
    if depth <= MAX_DEPTH:
        assert parse_sexpr(text) == to_sexpr(items)
        assert format_sexpr(items) == text
    else:
        with pytest.raises(SExprTooDeepError):
            parse_sexpr(text)
        with pytest.raises(SExprTooDeepError):
            to_sexpr(items)


# ---------------------------------------------------------------------------- loader
def _storage(clock, embedder=True):
    s = MemoryStorage(embedder=HashingEmbedder(dim=16) if embedder else None, clock=clock, decay=HalfLife(5))
    for i in range(31):
        s.instantiate(f"((a{i} p.v b) ** E{i})", importance=0.5)
    return s


@pytest.fixture(scope="module")
def saved_bytes(tmp_path_factory, make_clock):
    path = tmp_path_factory.mktemp("saved") / "e.db"
    _storage(make_clock(T0)).save(path)
    return path.read_bytes()


@pytest.fixture
def saved(tmp_path, saved_bytes):
    path = tmp_path / "e.db"
    path.write_bytes(saved_bytes)
    return path


def refused_without_a_trace(path, match):
    refused(lambda p: MemoryStorage.load(p), path, match)


@pytest.mark.parametrize("sql,params,match", [
    ("DELETE FROM memories WHERE seq = 3", (), "holds 30 memories but was saved with count 31"),
    ("INSERT INTO memories SELECT 99, '(extra p.v b)', event_ep, '[\"E99\"]', importance, telic, start_time, "
     "end_time, last_access, access_count, in_context, embedding, last_access_set FROM memories WHERE seq = 0", (),
     "holds 32 memories but was saved with count 31"),
    ("UPDATE config SET value = 'true' WHERE key = 'count'", (), "saved with count True"),
    ("UPDATE memories SET seq = 'x' WHERE seq = 3", (), r"key number \(seq\) 'x'"),
    ("UPDATE memories SET seq = NULL WHERE seq = 3", (), r"key number \(seq\) None"),
    ("UPDATE memories SET seq = 2.5 WHERE seq = 3", (), r"key number \(seq\) 2.5"),
    ("UPDATE memories SET seq = -1 WHERE seq = 3", (), r"key number \(seq\) -1"),
    ("UPDATE memories SET seq = 2 WHERE seq = 3", (), r"key number \(seq\) 2 is used by two"),
    ("UPDATE config SET value = '5' WHERE key = 'next'", (), "bad next key number 5"),
    ("INSERT INTO config VALUES ('count', '31')", (), "repeated key 'count'"),
    ("UPDATE config SET value = 'true' WHERE key = 'format'", (), "format version True"),
])
def test_crafted_tables(saved, sql, params, match):
    loosen(saved)
    execute(saved, sql, *params)
    refused_without_a_trace(saved, match)


@pytest.mark.parametrize("column,value,match", [
    ("episodes", deep_json(100_000), "episode list of memory 4 nests too deep"),
    ("episodes", '[["E1"]]', "episode list of memory 4 nests deeper"),
    ("episodes", '["E1", NaN]', "episode list of memory 4 is not valid JSON"),
    ("episodes", '"E1"', "bad episode list"),
    ("wff", parens(100_000), "formula of memory 4 is malformed"),
    ("wff", parens(MAX_DEPTH), "formula of memory 4 is not an eventuality's"),
    ("wff", "(" * 5000 + "a", "formula of memory 4 is malformed"),
    ("start_time", "x" * 100_000, "start time of memory 4"),
    ("event_ep", "E 1", "bad episode"),
    ("importance", "half", "importance"),
    ("telic", 2, "bad flags"),
])
def test_bad_fields_are_named_briefly(saved, column, value, match):
    execute(saved, f"UPDATE memories SET {column} = ? WHERE seq = 4", value)
    before = folder_state(saved.parent)
    with pytest.raises(MemoryFileError, match=match) as info:
        MemoryStorage.load(saved)
    assert len(str(info.value)) < 400 and str(saved) in str(info.value)
    assert folder_state(saved.parent) == before


@pytest.mark.parametrize("key,value,match", [
    ("decay", deep_json(100_000), "config value of 'decay' nests too deep"),
    ("telic_predicates", deep_json(200), "nests deeper than 100"),
    ("importance_threshold", "NaN", "not valid JSON"),
    ("curvature", "Infinity", "not valid JSON"),
    ("importance_threshold", '"0.5"', "bad storage settings"),
    ("telic_predicates", '"say-to.v"', "bad storage settings"),
    ("dtype", '["float64"]', "bad dtype"),
    ("curvature", "true", "curvature True"),
    ("decay", '["half_life"]', "bad decay spec"),
    ("decay", '{"type": "half_life"}', "bad decay spec"),
    ("decay", '{"type": "half_life", "hours": -1}', "bad decay spec.*HalfLife.hours"),
    ("embedder", '{"type": "hashing", "dim": 1099511627776, "ngram_range": [3, 5], "seed": 0}', "embedder spec dim"),
    ("embedder", '{"type": "hashing", "dim": 1048576, "ngram_range": [3, 5], "seed": 0}',
     "has 128 bytes, expected 8388608"),
    ("embedder", '{"type": "hashing", "dim": 16, "ngram_range": "35", "seed": 0}', "ngram_range"),
    ("embedder", '[16]', "embedder spec is not an object"),
])
def test_bad_config_values(saved, key, value, match):
    execute(saved, "UPDATE config SET value = ? WHERE key = ?", value, key)
    refused_without_a_trace(saved, match)


def test_custom_decay_still_asks_for_the_policy(saved):
    execute(saved, "UPDATE config SET value = ? WHERE key = 'decay'", '{"type": "Mine", "custom": true}')
    with pytest.raises(ValueError, match="custom decay policy 'Mine'") as info:
        MemoryStorage.load(saved)
    assert not isinstance(info.value, MemoryFileError)


def _numeric(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


WORDS = st.text(max_size=3).filter(lambda t: not _numeric(t))  # SQLite column affinity would make numbers of these
COLUMNS = {"importance": st.one_of(WORDS, st.sampled_from([float("inf"), float("-inf")]), st.none()),
           "access_count": st.one_of(WORDS, st.floats(0.5, 9.5).filter(lambda x: x != int(x)),
                                     st.integers(-2**63, -1), st.none()),
           "in_context": st.one_of(WORDS, st.integers(2, 9), st.none()),
           "end_time": st.one_of(WORDS, st.integers(-2**63, 2**63 - 1), st.sampled_from(["2026-01-01T00:00:00"])),
           "wff": st.one_of(st.text(alphabet="() ab", max_size=12).filter(lambda t: t.count("(") != t.count(")")),
                            st.none()),
           "embedding": st.one_of(st.binary(max_size=40), st.text(max_size=3), st.none())}


@HOSTILE
@given(data=st.data())
def test_any_bad_column_value_is_a_named_memory_file_error(tmp_path_factory, saved_bytes, data):
    path = tmp_path_factory.mktemp("e") / "e.db"
    path.write_bytes(saved_bytes)
    column = data.draw(st.sampled_from(sorted(COLUMNS)))
    execute(path, f"UPDATE memories SET {column} = ? WHERE seq = 7", data.draw(COLUMNS[column]))
    refused_without_a_trace(path, "memory 7")


def test_loading_a_wal_mode_file_creates_no_files(saved):
    execute(saved, "PRAGMA journal_mode=WAL")
    before = folder_state(saved.parent)
    assert len(MemoryStorage.load(saved)) == 31
    assert folder_state(saved.parent) == before
    writer = sqlite3.connect(saved)
    try:
        writer.execute("PRAGMA journal_mode=WAL")
        writer.execute("UPDATE config SET value = ? WHERE key = 'importance_threshold'", (json.dumps(0.25),))
        writer.commit()
        refused_without_a_trace(saved, "write-ahead log")
    finally:
        writer.close()
    assert MemoryStorage.load(saved).importance_threshold == 0.25


JSON_VALUES = st.recursive(st.none() | st.booleans() | st.integers(-2**70, 2**70) | st.floats(allow_nan=False)
                           | st.text(max_size=4),
                           lambda kids: st.lists(kids, max_size=3) | st.dictionaries(st.text(max_size=6), kids,
                                                                                     max_size=3),
                           max_leaves=10)
CONFIG_KEYS = ["count", "curvature", "decay", "dtype", "embedder", "format", "importance_threshold", "kind", "next",
               "telic_predicates"]


@HOSTILE
@given(key=st.sampled_from(CONFIG_KEYS), value=JSON_VALUES)
def test_any_json_config_value_loads_or_is_a_memory_file_error(tmp_path_factory, saved_bytes, key, value):
    """Never another exception type; and when it loads, the value was one the loader
    accepts as it is (here: the same number of memories)."""
    path = tmp_path_factory.mktemp("c") / "e.db"
    path.write_bytes(saved_bytes)
    execute(path, "UPDATE config SET value = ? WHERE key = ?", json.dumps(value), key)
    before = folder_state(path.parent)
    try:
        assert len(MemoryStorage.load(path)) == 31
    except MemoryFileError as exc:
        assert str(path) in str(exc)
    except ValueError as exc:  # a custom embedder or decay policy: pass it back
        assert key in ("decay", "embedder") and "custom" in str(exc)
    assert folder_state(path.parent) == before


@pytest.mark.parametrize("key,value", [("importance_threshold", "1" + "0" * 400), ("curvature", "1" + "0" * 400),
                                       ("decay", '{"type": "ebbinghaus", "stability_hours": 1, "boost_per_access": '
                                                 + "1" + "0" * 400 + "}")])
def test_integers_beyond_float64_in_the_config(saved, key, value):
    execute(saved, "UPDATE config SET value = ? WHERE key = ?", value, key)
    refused_without_a_trace(saved, "bad storage settings|curvature|bad decay spec")


@pytest.mark.parametrize("column", ["start_time", "end_time", "last_access"])
@pytest.mark.parametrize("value", ["0001-01-01T00:00:00+14:00", "9999-12-31T23:59:59-14:00"])
def test_times_that_leave_the_datetime_range_in_utc(saved, column, value):
    execute(saved, f"UPDATE memories SET {column} = ? WHERE seq = 2", value)
    refused_without_a_trace(saved, "of memory 2 is outside the datetime range in UTC")
