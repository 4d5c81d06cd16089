"""MCP ``list_recent`` reads the time column: the same records, in the same order, as
``heapq.nlargest`` over every record (ties in store order), without building every record."""

from __future__ import annotations

import heapq
import random
from datetime import datetime, timedelta, timezone

import pytest

from hypermem import HashingEmbedder, Memory
from hypermem.integrations import _record_filters as RF

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_newest_records_equal_heapq_over_every_record(seed):
    rng = random.Random(seed)
    mem = Memory(embedder=HashingEmbedder(dim=16))
    times = [T0 + timedelta(seconds=rng.randrange(20)) for _ in range(60)]   # many ties
    times += [datetime.max.replace(tzinfo=timezone.utc), T0 + timedelta(microseconds=3)]
    mem.add_many([{"text": f"note {i}", "t": t} for i, t in enumerate(times)])
    for victim in rng.sample(mem.ids, 5):
        mem.remove(victim)
    for n in (1, 5, 17, 100):
        want = [r.id for r in heapq.nlargest(n, mem, key=lambda r: r.t)]
        assert [r.id for r in RF.newest_records(mem, n)] == want


def test_list_recent_builds_only_the_records_it_returns(monkeypatch, tmp_path):
    pytest.importorskip("mcp")
    from mcp_helpers import _call, _data

    from hypermem.integrations.mcp_server import build_server

    mem = Memory.open(tmp_path / "s.db", embedder=HashingEmbedder(dim=16))
    mem.add_many([{"text": f"note {i}", "t": T0 + timedelta(seconds=i)} for i in range(200)])
    monkeypatch.setattr(Memory, "__iter__", lambda self: (_ for _ in ()).throw(AssertionError("read every record")))

    async def script(c):
        return _data(await c.call_tool("list_recent", {"n": 3}))["results"]
    try:
        assert [r["text"] for r in _call(build_server(mem), script)] == ["note 199", "note 198", "note 197"]
    finally:
        mem.close()
