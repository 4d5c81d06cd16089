"""Walk 70 (a data scientist with pandas): a DataFrame goes back into a Memory
(``Memory.from_dataframe``, parents first, NaN roots), a level whose depth is clamped warns once a
store, and a pandas Timestamp is stored as the datetime that save/load gives back."""

import math
import warnings
from datetime import datetime, timezone

import pytest
import torch

from hypermem import Memory
from hypermem.embed import HashingEmbedder
from hypermem.store import checks, from_dataframe, parents_first
from hypermem.store.checks import max_depth
from hypermem.store.placement import saturation_level

pd = pytest.importorskip("pandas")


def _emb():
    return HashingEmbedder(dim=32)


def _tree(**kw):
    t0 = datetime(2024, 5, 1, 12, 0, 0, 123456, tzinfo=timezone.utc)
    mem = Memory(embedder=_emb(), clock=lambda: t0, **kw)
    mem.add("animals and pets", id="animal", meta={"source": "notes", "n": 1})
    mem.add("dogs are loyal animals", id="dog", parent="animal", t=datetime(2023, 1, 2, tzinfo=timezone.utc))
    mem.add("cats sleep a lot", id="cat", parent="animal")
    mem.add("a puppy chews shoes", id="puppy", parent="dog", meta={"tags": ["young"]})
    mem.add("plants need water", id="plant")
    return mem


def _rows(mem):
    return [(r.id, r.text, r.parent_id, r.t, r.meta, r.valid_from, r.valid_until) for r in mem]


# ---------------------------------------------------------------- from_dataframe
def test_from_dataframe_round_trips_records_and_search():
    mem = _tree()
    df = mem.to_dataframe()
    assert math.isnan(df.parent[0]) or df.parent[0] is None   # a root's parent as pandas writes it
    back = Memory.from_dataframe(df, embedder=_emb())
    assert type(back) is Memory
    assert _rows(back) == _rows(mem)
    assert torch.equal(back.points, mem.points)
    for q in ("loyal dogs", "water for plants", "puppy shoes"):
        assert [(r.id, r.score) for r in back.search(q, k=5)] == [(r.id, r.score) for r in mem.search(q, k=5)]
    # the package-level function is the same
    assert _rows(from_dataframe(df, embedder=_emb())) == _rows(mem)


def test_from_dataframe_puts_parents_first_in_any_row_order():
    mem = _tree()
    df = mem.to_dataframe().sort_values("text", ascending=False)   # puppy before dog before animal
    back = from_dataframe(df, embedder=_emb())
    assert {r.id: r.parent_id for r in back} == {r.id: r.parent_id for r in mem}
    assert back.level("puppy") == 2
    assert back.ids.index("animal") < back.ids.index("dog") < back.ids.index("puppy")


def test_from_dataframe_reads_missing_values_times_as_text_and_validity():
    df = pd.DataFrame({
        "id": ["r", None, "c"],
        "text": ["root note", "another root", "child note"],
        "parent": [float("nan"), None, "r"],
        "t": ["2024-01-01T10:00:00+00:00", None, "2024-01-02T10:00:00"],   # ISO text; naive is UTC
        "valid_from": [None, None, "2024-01-01T00:00:00+00:00"],
        "embedding": [None, None, [1.0] + [0.0] * 31],
    })
    now = datetime(2025, 1, 1, tzinfo=timezone.utc)
    back = from_dataframe(df, embedder=_emb(), clock=lambda: now)
    recs = list(back)
    assert [r.parent_id for r in recs] == [None, None, "r"]
    assert recs[0].t == datetime(2024, 1, 1, 10, tzinfo=timezone.utc) and type(recs[0].t) is datetime
    assert recs[1].t == now and recs[1].id not in ("r", "c")
    assert recs[2].t == datetime(2024, 1, 2, 10, tzinfo=timezone.utc)
    assert recs[2].valid_from == datetime(2024, 1, 1, tzinfo=timezone.utc)
    assert back.embedding("c")[0] == 1.0


def test_from_dataframe_refuses_unknown_columns_and_differing_times():
    df = _tree().to_dataframe()
    with pytest.raises(ValueError, match=r"unknown columns \['score'\]"):
        from_dataframe(df.assign(score=1.0), embedder=_emb())
    with pytest.raises(ValueError, match="no 'text' column"):
        from_dataframe(df.drop(columns="text"), embedder=_emb())
    later = df.copy()
    later.loc[1, "time"] = later.loc[1, "time"] + pd.Timedelta(seconds=1)
    with pytest.raises(ValueError, match="row 1: t .* and time .* differ"):
        from_dataframe(later, embedder=_emb())
    with pytest.raises(TypeError, match="pandas.DataFrame"):
        from_dataframe(df.to_dict("records"), embedder=_emb())


def test_from_dataframe_names_duplicate_ids_and_cycles_by_row():
    df = pd.DataFrame({"id": ["a", "b", "a"], "text": ["x one", "y two", "z three"]})
    with pytest.raises(ValueError, match=r"duplicate id 'a' \(row 0 and row 2\)"):
        from_dataframe(df, embedder=_emb())
    cyc = pd.DataFrame({"id": ["a", "b"], "text": ["x one", "y two"], "parent": ["b", "a"]})
    with pytest.raises(ValueError, match="parent cycle"):
        from_dataframe(cyc, embedder=_emb())


def test_add_many_names_a_nan_parent():
    rows = _tree().to_dataframe()[["id", "text", "parent", "t", "meta"]].to_dict("records")
    with pytest.raises(TypeError, match=r"item #0: parent is a missing parent \(NaN\): use None for a root"):
        Memory(embedder=_emb()).add_many(rows)


def test_parents_first_keeps_an_ordered_list_and_orders_the_rest():
    items = [{"id": "a", "text": "x"}, {"id": "b", "parent": "a", "text": "y"}, {"text": "z", "parent": "stored"}]
    assert parents_first(items) == [0, 1, 2]
    rev = items[::-1]
    order = parents_first(rev)
    assert [rev[i].get("id") for i in order].index("a") < [rev[i].get("id") for i in order].index("b")
    with pytest.raises(ValueError, match="item #0: id 'a' is its own parent"):
        parents_first([{"id": "a", "parent": "a", "text": "x"}])


# ---------------------------------------------------------------- level saturation
def _chain(mem, n, start=0):
    mem.add_many([{"text": f"level {i}", "id": f"n{i}", "parent": f"n{i - 1}" if i else None}
                  for i in range(start, n)])


def test_a_clamped_level_warns_once_a_store_at_the_callers_line():
    mem = Memory(embedder=_emb())
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _chain(mem, 40)                       # depths up to 20.5 < 23.72: no warning
        assert caught == []
        _chain(mem, 101, start=40)
        mem.add("one more level", parent="n100")   # the same store: no second warning
    sat = [w for w in caught if "levels 46 and deeper" in str(w.message)]
    assert len(sat) == 1 and len(caught) == 1, [str(w.message) for w in caught]
    assert sat[0].filename == __file__
    assert "depth_step" in str(sat[0].message) and "base_depth" in str(sat[0].message)
    assert mem.depth("n45") < mem.depth("n46") == mem.depth("n100") == pytest.approx(max_depth(1.0))
    other = Memory(embedder=_emb())
    with pytest.warns(UserWarning, match="levels 46 and deeper"):   # another store warns again, one add() too
        other.add("root", id="n0")
        for i in range(1, 47):
            other.add(f"level {i}", id=f"n{i}", parent=f"n{i - 1}")


def test_a_smaller_depth_step_keeps_a_deep_chain_apart_without_warning():
    mem = Memory(embedder=_emb(), depth_step=0.2)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _chain(mem, 101)
    depths = [mem.depth(f"n{i}") for i in range(101)]
    assert depths == sorted(set(depths))


def test_saturation_level_is_the_first_clamped_level():
    for base, step, c in [(1.0, 0.5, 1.0), (0.3, 0.7, 2.0), (1.0, 0.1, 0.5)]:
        top = max_depth(c)
        lv = saturation_level(base, step, top)
        assert base + step * lv > top >= base + step * (lv - 1)
    assert saturation_level(1.0, 0.5, max_depth(1.0)) == 46


def test_float32_store_warning_names_its_shallower_points():
    mem = Memory(embedder=_emb(), dtype=torch.float32)
    with pytest.warns(UserWarning, match="float32 store .* dtype=torch.float64"):
        _chain(mem, 60)


# ---------------------------------------------------------------- pandas Timestamps
def test_a_timestamp_with_nanoseconds_is_stored_as_the_loaded_datetime(tmp_path, monkeypatch):
    monkeypatch.setattr(checks, "NANOSECONDS_WARNED", False)
    mem = Memory(embedder=_emb())
    ts = pd.Timestamp("2024-01-01 10:00:00.123456789", tz="UTC")
    with pytest.warns(UserWarning, match="nanoseconds") as rec:
        i = mem.add("x y", t=ts)
    assert rec[0].filename == __file__
    with warnings.catch_warnings():
        warnings.simplefilter("error")   # once a process
        j = mem.add("z w", t=pd.Timestamp("2024-01-01 10:00:00.000000001", tz="UTC"),
                    valid_from=pd.Timestamp("2023-06-01", tz="Europe/Paris"))
    got = mem.get(i).t
    assert type(got) is datetime and got == datetime(2024, 1, 1, 10, 0, 0, 123456, tzinfo=timezone.utc)
    assert mem.get(j).valid_from == datetime(2023, 5, 31, 22, tzinfo=timezone.utc)
    assert type(mem.get(j).valid_from) is datetime
    mem.save(tmp_path / "m.db")
    back = Memory.load(tmp_path / "m.db")
    assert _rows(back) == _rows(mem)
    mem.update(i, t=pd.Timestamp("2020-02-02 02:02:02.5", tz="UTC"))
    assert type(mem.get(i).t) is datetime


def test_a_timestamp_without_nanoseconds_does_not_warn(monkeypatch):
    monkeypatch.setattr(checks, "NANOSECONDS_WARNED", False)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        i = (mem := Memory(embedder=_emb())).add("x y", t=pd.Timestamp("2024-01-01 10:00:00.5"))   # naive: UTC
    assert mem.get(i).t == datetime(2024, 1, 1, 10, 0, 0, 500000, tzinfo=timezone.utc) and type(mem.get(i).t) is datetime
    with pytest.raises(ValueError, match="NaT"):
        mem.add("a b", t=pd.NaT)
