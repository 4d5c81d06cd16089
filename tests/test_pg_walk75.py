"""Walk 75 over the durable stores: a float of 1e16 or more in metadata keeps its value and type on
PostgreSQL (json.dumps wrote it with an exponent, jsonb kept the numeric 1152921504606847000 for
2.0**60 and it came back an int); the JSONB pushdown of a filter compares such numbers exactly, never
stricter than the Python predicate; the whole-store reads of a mirrored store (save, to_json,
to_dataframe, iteration, time_weights, directions, embeddings) catch up with other clients first."""

from __future__ import annotations

import json

import psycopg
import pytest
import test_refresh

from hypermem import HashingEmbedder, Memory
from hypermem.store.filters import to_postgres
from hypermem.store.json_values import exact_numbers

pytestmark = pytest.mark.usefixtures("one_thread")
target = test_refresh.target   # a new SQLite path, or a new PostgreSQL database
BIG = 2.0 ** 60                # 1152921504606846976.0, json.dumps: 1.152921504606847e+18


def _emb():
    return HashingEmbedder(dim=16)


def _same(a, b) -> bool:
    """Equal values of equal types, all the way down."""
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return isinstance(b, list) and len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return type(a) is type(b) and a == b


META = {"n": BIG, "neg": -1e300, "ts": 1.7e18, "i": 2 ** 60, "small": 1e-7, "five": 5.0,
        "nest": {"l": [BIG, 2 ** 60, "1e+20"], "e+": 3e16}}


# ---------------------------------------------------------------------- 1. big floats in meta
def test_exact_numbers_writes_big_floats_exactly_and_leaves_other_text_alone():
    text = json.dumps(META)
    out = exact_numbers(text)
    assert "1152921504606846976.0" in out and "e+1" not in out.replace('"1e+20"', "")
    assert _same(json.loads(out), META)
    plain = json.dumps({"a": 1.5, "b": [1, 2.0, 1e-9]})
    assert exact_numbers(plain) is plain


def test_big_float_meta_keeps_value_and_type_on_postgres(pg_url):
    with Memory.open(pg_url, embedder=_emb()) as mem:
        mem.add("copied", id="a", meta=META)                          # COPY
        mem.add("rewritten", id="b")
        mem.update("b", meta=dict(META, via="upsert"))                 # upsert
    with Memory.open(pg_url, embedder=_emb(), mirror=False) as server:
        server.add("server", id="c")
        server.update("c", meta=dict(META, via="update"))              # the mirror-free client's UPDATE
    with Memory.open(pg_url, embedder=_emb()) as back:                # was {'n': 1152921504606847000, ...} ints
        assert _same(back.get("a").meta, META)
        assert _same(back.get("b").meta, dict(META, via="upsert"))
        assert _same(back.get("c").meta, dict(META, via="update"))
    with Memory.open(pg_url, embedder=_emb(), mirror=False) as server:
        assert _same(server.get("a").meta, META)
        assert [r.id for r in server.search("x", k=5, filters={"n": {"$gte": BIG}})] != []


def test_a_store_written_before_the_fix_still_loads(pg_url):
    with Memory.open(pg_url, embedder=_emb()) as mem:
        mem.add("old", id="a")
    with psycopg.connect(pg_url) as con:                               # the meta an older hypermem wrote
        con.execute("UPDATE hypermem_memories SET meta = %s::jsonb, changed_at = changed_at + 1",
                    (json.dumps({"n": BIG}),))
        con.execute("UPDATE hypermem_state SET value = value + 1 WHERE key IN ('version', 'stamped')")
    with Memory.open(pg_url, embedder=_emb()) as back:
        assert _same(back.get("a").meta, {"n": 1152921504606847000})   # what jsonb kept: read as before
        assert [r.id for r in back.search("x", k=5, filters={"n": 1152921504606847000}, touch=False)] == ["a"]


# ---------------------------------------------------------------------- 2. the pushdown of such numbers
FILTERS = [{"ts": BIG}, {"ts": [BIG]}, {"ts": {"$in": [BIG]}}, {"ts": {"$gte": BIG}}, {"ts": {"$lte": BIG}},
           {"ts": {"$ne": BIG}}, {"ts": {"$nin": [BIG]}}, {"$not": {"ts": {"$lt": BIG}}}, {"ts": 2 ** 60},
           {"ts": {"$gt": BIG}}, {"ts": 0.1}, {"ts": {"$gte": 0.1, "$lte": 0.1}}, {"ts": {"$in": [0.3, 0.1]}}]


def test_the_sql_filter_compares_big_numbers_as_python_does(pg_url):
    with Memory.open(pg_url, embedder=_emb()) as mem, Memory.open(pg_url, embedder=_emb(), mirror=False) as server:
        mem.add("ns clock", id="a", meta={"ts": 2 ** 60})               # an int: nanoseconds
        mem.add("a float", id="b", meta={"ts": BIG})
        mem.add("a tenth", id="c", meta={"ts": 0.1})
        mem.add("one more", id="d", meta={"ts": 2 ** 60 + 1})
        for spec in FILTERS:
            local = sorted(r.id for r in mem.search("x", k=9, filters=spec, touch=False))
            assert sorted(r.id for r in server.search("x", k=9, filters=spec)) == local, spec
            assert sorted(r.id for r in mem.search_server("x", k=9, filters=spec)) == local, spec
        assert sorted(r.id for r in mem.search("x", k=9, filters={"ts": BIG}, touch=False)) == ["a", "b"]


def test_to_postgres_sends_big_floats_as_exact_decimals():
    clause, params = to_postgres({"ts": {"$gte": BIG}, "u": {"$in": [BIG, 1.5]}})
    assert "1152921504606846976.0" in params and "[1152921504606846976.0, 1.5]" in params


# ---------------------------------------------------------------------- 3. whole-store reads catch up
WHOLE_READS = {
    "save": lambda a, tmp: len(Memory.load(_saved(a, tmp), embedder=_emb())),
    "to_json": lambda a, tmp: len(Memory.from_json(a.to_json(), embedder=_emb())),
    "to_dataframe": lambda a, tmp: len(a.to_dataframe()),
    "iter": lambda a, tmp: len(list(a)),
    "time_weights": lambda a, tmp: len(a.time_weights()),
    "directions": lambda a, tmp: a.directions.shape[0],
    "embeddings": lambda a, tmp: a.embeddings.shape[0],
    "points": lambda a, tmp: a.points.shape[0],
    "depths": lambda a, tmp: a.depths.shape[0],
}


def _saved(a, tmp):
    path = tmp / f"snap{len(list(tmp.iterdir()))}.db"
    a.save(path)
    return path


def test_whole_store_reads_see_what_another_client_committed(target, tmp_path):
    pytest.importorskip("pandas")
    snaps = tmp_path / "snaps"
    snaps.mkdir()
    with Memory.open(target, embedder=_emb()) as a, Memory.open(target, embedder=_emb()) as b:
        a.add("first", id="m0")
        for n, (name, read) in enumerate(WHOLE_READS.items(), start=2):
            b.add(f"note {n}", id=f"m{n - 1}")                     # committed by the other client
            assert read(a, snaps) == n, name                        # was n - 1: the mirror as last refreshed
        assert a.ids == [f"m{i}" for i in range(len(WHOLE_READS) + 1)]
