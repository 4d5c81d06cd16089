"""The mirror-free PostgreSQL store at an explicit ``at_time``: ``stats``, ``table`` and
``to_dataframe`` leave out the memories recorded after it (``t > at_time``), as the in-process
store does (:mod:`hypermem.store.as_of`), and change nothing without ``at_time``."""

from __future__ import annotations

from datetime import timedelta

import pytest
from storage_parity import T0, settings

from hypermem import Memory

pytestmark = pytest.mark.usefixtures("one_thread")
T = T0 + timedelta(days=5)


def _fill(mem) -> None:
    """A root and a child recorded by ``T``; a root recorded later with a child recorded before
    it (kept at ``T``, at level 1 and no root); a late grandchild; an access on a later row."""
    mem.add("animals", id="a", t=T0)
    mem.add("dog", id="d", parent="a", t=T0 + timedelta(days=1))
    mem.add("plants", id="p", t=T0 + timedelta(days=9))
    mem.add("fern", id="f", parent="p", t=T0 + timedelta(days=2))
    mem.add("puppy", id="y", parent="d", t=T0 + timedelta(days=8))
    mem.touch(["y", "y", "d"])


def _rows(table):
    return [{k: v for k, v in r.items() if k not in ("weight", "depth")} for r in table]


def test_stats_and_table_at_time_leave_out_rows_recorded_later(pg_url):
    ref = Memory(**settings())
    with Memory.open(pg_url, mirror=False, **settings()) as srv:
        _fill(ref)
        _fill(srv)
        sa, sb = ref.stats(T), srv.stats(T)
        assert sb["count"] == 3 and sb["roots"] == 1 and sb["levels"] == {0: 1, 1: 2} and sb["accesses"] == 1
        assert sb["newest"] == (T0 + timedelta(days=2)).isoformat()
        assert abs(sa.pop("mean_time_weight") - sb.pop("mean_time_weight")) <= 1e-12
        assert sa == sb
        ta, tb = ref.table(T), srv.table(T)
        assert [r["id"] for r in tb] == ["a", "d", "f"] and _rows(ta) == _rows(tb)
        assert all(abs(x["weight"] - y["weight"]) <= 1e-12 for x, y in zip(ta, tb))
        assert list(srv.to_dataframe(T)["id"]) == ["a", "d", "f"]
        # before every row: nothing; without at_time, and at a time after every row: everything
        assert srv.stats(T0 - timedelta(days=1))["count"] == 0 and srv.table(T0 - timedelta(days=1)) == []
        late = T0 + timedelta(days=30)
        assert srv.stats()["count"] == srv.stats(late)["count"] == 5 == len(srv.table()) == len(srv.table(late))
        sa, sb = ref.stats(late), srv.stats(late)
        assert abs(sa.pop("mean_time_weight") - sb.pop("mean_time_weight")) <= 1e-12
        assert sa == sb
