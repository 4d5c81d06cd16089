"""Times at the edges a tester reached: a timeline padded past year 9999, a LangGraph ttl
refused before anything is written, decay weights of a NaN ``now`` or a ``None`` time, and
aware times or ``NaT`` that ``to_utc`` cannot hold."""

from __future__ import annotations

import math
from datetime import datetime, timedelta, timezone

import numpy as np
import pytest
import torch

from hypermem import Memory
from hypermem.temporal import Ebbinghaus, HalfLife, NoDecay, Product, ValidityWindow
from hypermem.temporal.clock import TimeRangeError, to_utc
from hypermem.viz.export import weight_timeline

UTC = timezone.utc
NOW = datetime(2026, 1, 1, tzinfo=UTC)
LAST = datetime(9999, 12, 31, 23, 59, 59, tzinfo=UTC)
POLICIES = [NoDecay(), HalfLife(24), Ebbinghaus(), ValidityWindow(), Product(HalfLife(24), ValidityWindow())]


# ---------------------------------------------------------------- 1. the timeline's padding
@pytest.mark.parametrize("times", [[NOW, datetime(9000, 1, 1, tzinfo=UTC)],
                                   [datetime(1, 1, 1, tzinfo=UTC), LAST]])
def test_timeline_of_a_store_reaching_year_9999_stays_in_range(times, tmp_path):
    mem = Memory(clock=lambda: NOW)
    for i, t in enumerate(times):
        mem.add(f"memory {i}", t=t)
    tl = weight_timeline(mem, steps=11)
    assert tl["labels"][-1] == "9999-12-31T23:59+00:00" and tl["seconds"] == sorted(tl["seconds"])
    assert tl["labels"][0] == times[0].isoformat(timespec="minutes") and len(tl["weights"]) == len(tl["seconds"])
    assert tl["seconds"][tl["index"]] == NOW.timestamp()
    mem.inspect(str(tmp_path / "x.html"))
    assert (tmp_path / "x.html").stat().st_size > 0


def test_timeline_of_one_memory_at_the_last_second_keeps_a_span():
    mem = Memory(clock=lambda: LAST)
    mem.add("the end", t=LAST)
    tl = weight_timeline(mem, steps=5, at_time=LAST + timedelta(microseconds=999999))
    assert tl["seconds"][-1] == LAST.timestamp() and tl["seconds"][0] < LAST.timestamp() - 600
    assert len(tl["seconds"]) == 5 and tl["index"] == 4


def test_timeline_of_an_ordinary_store_is_unchanged():
    mem = Memory(clock=lambda: NOW)
    mem.add("a", t=NOW - timedelta(hours=4))
    tl = weight_timeline(mem, steps=5)
    hi = NOW.timestamp() + 3600.0  # newest (now) + span / 4
    assert tl["seconds"][0] == NOW.timestamp() - 4 * 3600 and tl["seconds"][-1] == hi


# ---------------------------------------------------------------- 2. LangGraph ttl
@pytest.mark.parametrize("ttl, why", [(-1, "got -1$"), (0, "got 0$"), (True, "got True"),
                                      (math.nan, "got nan"), ("5", "got '5'"), (float("inf"), "year 10000"),
                                      (1e12, "year 10000"), (10 ** 400, "year 10000")],
                         ids=["negative", "zero", "bool", "nan", "str", "inf", "1e12", "huge-int"])
def test_langgraph_bad_ttl_writes_nothing(ttl, why):
    pytest.importorskip("langgraph.store.base", reason="the langgraph extra is not installed")
    from hypermem.integrations.langgraph import HypermemStore

    s = HypermemStore(Memory())
    with pytest.raises(ValueError, match=r"ttl must be a positive number of minutes.*" + why) as err:
        s.put(("new", "ns"), "k", {"text": "x"}, ttl=ttl)
    assert "\n" not in str(err.value) and len(str(err.value)) < 200
    assert len(s.memory) == 0


def test_langgraph_batch_with_one_bad_put_writes_nothing(clock):
    pytest.importorskip("langgraph.store.base", reason="the langgraph extra is not installed")
    from langgraph.store.base import PutOp

    from hypermem.integrations.langgraph import HypermemStore

    s = HypermemStore(clock=clock)
    s.put(("old",), "gone", {"text": "to delete"})
    before = sorted(r.id for r in s.memory)
    ops = [PutOp(("old",), "gone", None), PutOp(("a",), "ok", {"text": "fine"}, ttl=5),
           PutOp(("b",), "bad", {"text": "x"}, ttl=float("inf"))]
    with pytest.raises(ValueError, match="ttl must be a positive number of minutes"):
        s.batch(ops)
    with pytest.raises(TypeError, match="must be a dict"):
        s.batch([PutOp(("c",), "ok", {"text": "fine"}), PutOp(("d",), "bad", ["not", "a", "dict"])])
    assert sorted(r.id for r in s.memory) == before


def test_langgraph_ttl_config_and_refresh(clock):
    pytest.importorskip("langgraph.store.base", reason="the langgraph extra is not installed")
    from hypermem.integrations.langgraph import HypermemStore

    with pytest.raises(ValueError, match="ttl must be a positive number of minutes, got True"):
        HypermemStore(ttl={"default_ttl": True})
    s = HypermemStore(clock=clock)
    s.put(("n",), "k", {"text": "x"}, ttl=2.5)
    assert s.memory.get('item:[["n"], "k"]').valid_until == clock() + timedelta(minutes=2.5)
    clock.tick(minutes=1)
    assert s.get(("n",), "k") is not None  # refreshed from the new now
    assert s.memory.get('item:[["n"], "k"]').valid_until == clock() + timedelta(minutes=2.5)


# ---------------------------------------------------------------- 3. decay policies
@pytest.mark.parametrize("policy", POLICIES, ids=lambda p: type(p).__name__)
def test_policies_refuse_a_nan_now_and_a_none_time(policy):
    one = torch.zeros(1)
    with pytest.raises(ValueError, match="now must be a finite time"):
        policy.weight(math.nan, [NOW], one, [None], [None])
    with pytest.raises(ValueError, match="now must be a finite time"):
        policy.weight(math.inf, torch.tensor([NOW.timestamp()], dtype=torch.float64), one, [None], [None])
    with pytest.raises(ValueError, match="times: a creation time is None"):
        policy.weight(NOW, [None], one, [None], [None])
    with pytest.raises(TypeError, match="datetime64"):
        policy.weight(np.datetime64("2026-01-01"), [NOW], one, [None], [None])
    w = policy.weight(NOW, [NOW - timedelta(days=400), NOW], torch.zeros(2), [None, None], [None, None])
    assert w.shape == (2,) and bool(((w >= 1e-6) & (w <= 1)).all())


# ---------------------------------------------------------------- 4. to_utc
@pytest.mark.parametrize("t", [datetime(1, 1, 1, tzinfo=timezone(timedelta(hours=5))),
                               datetime(9999, 12, 31, 23, tzinfo=timezone(timedelta(hours=-5)))])
def test_to_utc_names_a_time_outside_the_range(t):
    with pytest.raises(ValueError, match=r"at_time .* is outside the range datetime can hold in UTC") as err:
        to_utc(t, "at_time")
    assert isinstance(err.value, (OverflowError, TimeRangeError)) and "\n" not in str(err.value)
    mem = Memory(clock=lambda: NOW)
    mem.add("a", t=NOW)
    with pytest.raises(ValueError, match=r"add\(\): t .* outside the range datetime can hold in UTC"):
        mem.add("b", t=t)
    with pytest.raises(ValueError, match=r"item #0: valid_until .* outside the range"):
        mem.add_many([{"text": "c", "valid_until": t}])
    with pytest.raises(ValueError, match="at_time .* outside the range"):
        mem.search("a", at_time=t)
    assert len(mem) == 1


def test_to_utc_refuses_pandas_nat():
    pd = pytest.importorskip("pandas")
    with pytest.raises(ValueError, match="at_time is NaT"):
        to_utc(pd.NaT, "at_time")
    mem = Memory(clock=lambda: NOW)
    with pytest.raises(ValueError, match=r"add\(\): t is NaT"):
        mem.add("b", t=pd.NaT)
    assert len(mem) == 0 and to_utc(pd.Timestamp("2026-01-01", tz="UTC")) == NOW
