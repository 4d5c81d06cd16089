"""The store's records kept as columns (``hypermem.store.record_table``): every field reads
back exactly as stored, through every change, copy and file."""

from __future__ import annotations

import copy
import pickle
from datetime import datetime, timedelta, timezone

import pytest

from hypermem import HashingEmbedder, Memory
from hypermem.store.record_table import RecordTable

UTC = timezone.utc
T0 = datetime(2026, 3, 1, 12, 30, 15, 123457, tzinfo=UTC)


def fields(rec):
    return (rec.id, rec.text, rec.parent_id, rec.t, dict(rec.meta), rec.valid_from, rec.valid_until,
            rec.access_count, rec.last_accessed)


def clock():
    return T0 + timedelta(days=1)


def store():
    m = Memory(embedder=HashingEmbedder(dim=32), clock=clock)
    m.add("root topic", id="r", t=T0, meta={"kind": "topic", "n": [1, 2]})
    m.add("a child", id="c", parent="r", t=T0 + timedelta(microseconds=1))
    # datetimes that float seconds do not give back to the microsecond: kept as they are
    m.add("far past", id="old", t=datetime(1, 1, 1, 0, 0, 0, 1, tzinfo=UTC),
          valid_until=datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC))
    m.add("window", id="w", t=T0, valid_from=T0 - timedelta(hours=1), valid_until=T0 + timedelta(hours=2))
    return m


def test_every_field_reads_back_exactly():
    m = store()
    assert isinstance(m.state.records, RecordTable)
    old = m.get("old")
    assert old.t == datetime(1, 1, 1, 0, 0, 0, 1, tzinfo=UTC)
    assert old.valid_until == datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC) and old.valid_from is None
    assert m.get("c").t == T0 + timedelta(microseconds=1) and m.get("c").parent_id == "r"
    w = m.get("w")
    assert (w.valid_from, w.valid_until) == (T0 - timedelta(hours=1), T0 + timedelta(hours=2))
    assert m.get("r").meta == {"kind": "topic", "n": [1, 2]} and m.get("c").meta == {}
    assert [r.id for r in m] == ["r", "c", "old", "w"]
    assert "c" in m and "nope" not in m and [] not in m.state.records
    with pytest.raises(KeyError, match="unknown memory id 'nope'"):
        m.get("nope")


def test_touches_updates_links_and_removals_keep_the_rows_aligned():
    m = store()
    hits = m.search("a child", k=2)
    top = hits[0].record
    assert top.access_count == 1 and top.last_accessed == T0 + timedelta(days=1)  # the result shows its touch
    assert fields(m.get(top.id)) == fields(top)
    m.update("c", text="a changed child", meta={"edited": True}, valid_until=T0 + timedelta(days=9))
    c = m.get("c")
    assert (c.text, c.meta, c.valid_until) == ("a changed child", {"edited": True}, T0 + timedelta(days=9))
    m.link("c", "w")
    assert m.get("c").parent_id == "w" and m.children("w") == ["c"]
    before = {i: fields(m.get(i)) for i in ("r", "c", "w")}
    m.remove("old")  # compaction: every later row moves up one
    assert [r.id for r in m] == ["r", "c", "w"]
    assert {i: fields(m.get(i)) for i in ("r", "c", "w")} == before
    assert "old" not in m.state.records.exact and len(m.state.records.texts) == 3


def test_copies_pickles_and_files_keep_every_field(tmp_path):
    m = store()
    m.touch(["w", "w"])
    want = [fields(r) for r in m]
    for other in (copy.deepcopy(m), pickle.loads(pickle.dumps(m))):
        assert [fields(r) for r in other] == want
        other.update("w", meta={"copy": 1})
        assert m.get("w").meta == {}  # the copy has its own table
    m.save(tmp_path / "m.db")
    assert [fields(r) for r in Memory.load(tmp_path / "m.db", embedder=HashingEmbedder(dim=32))] == want
    with Memory.open(tmp_path / 'bound.db', embedder=HashingEmbedder(dim=32)) as b:
        b.add_many([{"text": r.text, "id": r.id, "t": r.t, "meta": dict(r.meta), "valid_from": r.valid_from,
                     "valid_until": r.valid_until, **({"parent": r.parent_id} if r.parent_id else {})} for r in m])
    with Memory.open(tmp_path / 'bound.db', embedder=HashingEmbedder(dim=32)) as b:
        assert [fields(r)[:7] for r in b] == [f[:7] for f in want]


def test_filters_read_the_metadata_without_building_records():
    m = store()
    assert [r.id for r in m.search("topic", k=5, filters={"kind": "topic"})] == ["r"]
    assert [r.id for r in m.search("topic", k=5, filters=lambda rec: rec.parent_id == "r")] == ["c"]


def test_removals_anywhere_keep_every_column_with_its_id():
    """A removal moves only the rows after its first removed one: every kept memory keeps
    its text, record, point, time and embedding; rows, ids and levels stay aligned; the
    journal names the removed ids."""
    import random

    import torch

    m = Memory(embedder=HashingEmbedder(dim=16), clock=clock)
    m.add_many([{"text": f"note {i}", "id": f"n{i}", "t": T0 + timedelta(minutes=i),
                 **({"parent": f"n{i // 3}"} if i % 4 == 3 else {})} for i in range(300)])
    m.update("n10", text="rewritten ten")              # a rewrite before a removal
    st = m.state

    def snapshot():
        return {i: (fields(m.get(i)), st.direction[st.row[i]].clone(), float(st.time[st.row[i]]),
                    st.embedding[st.row[i]].clone(), st.levels[st.row[i]]) for i in st.ids[: st.n]}

    rng = random.Random(0)
    removed = []
    for step in range(12):
        before = snapshot()
        victim = ["n0", f"n{299 - step}"][step] if step < 2 else rng.choice(st.ids[: st.n])
        gone = m.remove(victim, cascade=True)
        removed += gone
        after = snapshot()
        assert set(after) == set(before) - set(gone) and len(after) == st.n
        assert [st.row[i] for i in st.ids[: st.n]] == list(range(st.n)) and len(st.row) == st.n
        assert len(st.levels) == st.n and len(st.records.texts) == st.n
        for i, (rec, d, t, e, lv) in after.items():
            b = before[i]
            assert rec == b[0] and torch.equal(d, b[1]) and t == b[2] and torch.equal(e, b[3]) and lv == b[4]
    assert st.records.removed == removed and "n10" in m and m.get("n10").text == "rewritten ten"


def test_search_results_pause_the_cyclic_collector_and_restore_it(monkeypatch):
    """The result objects are built with automatic collection off (store.gc_pause) and the
    collector's state is given back after, also when building fails."""
    import gc

    import hypermem.store.records as records
    from hypermem import Memory

    m = Memory()
    m.add_many([{"text": f"note {i}", "id": f"n{i}"} for i in range(20)])
    seen = []
    real = records._results

    def spy(*a):
        seen.append(gc.isenabled())
        return real(*a)

    monkeypatch.setattr(records, "_results", spy)
    assert gc.isenabled()
    hits = m.search_batch(["note 3", "note 7"], k=3, touch=False)
    assert seen == [False] and gc.isenabled() and [h.id for h in hits[0]][0] == "n3"

    def boom(*a):
        raise RuntimeError("boom")

    monkeypatch.setattr(records, "_results", boom)
    with pytest.raises(RuntimeError, match="boom"):
        m.search("note 3", k=3, touch=False)
    assert gc.isenabled()
