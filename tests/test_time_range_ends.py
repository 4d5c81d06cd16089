"""Memories at the ends of ``datetime``'s range (``datetime.max`` / ``datetime.min``, which a
TTL clamp or a "valid forever" writes): their float seconds round past the range, and every
view that turns seconds back into a time must still answer."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from hypermem import HashingEmbedder, Memory
from hypermem.temporal.clock import from_seconds, to_seconds

LAST = datetime.max.replace(tzinfo=timezone.utc)
FIRST = datetime.min.replace(tzinfo=timezone.utc)


def test_from_seconds_gives_the_ends_of_the_range_back():
    assert to_seconds(LAST) == 253402300800.0   # rounds up to year 10000
    assert from_seconds(to_seconds(LAST)) == LAST and from_seconds(to_seconds(FIRST)) == FIRST
    assert from_seconds(0) == datetime(1970, 1, 1, tzinfo=timezone.utc)
    for beyond in (253402300801.0, 1e20, -62135596801.0):   # a time no datetime holds stays an error
        with pytest.raises((ValueError, OverflowError)):
            from_seconds(beyond)


def test_stats_table_files_and_page_of_a_store_holding_both_ends(tmp_path):
    emb = HashingEmbedder(dim=16)
    mem = Memory(embedder=emb)
    a = mem.add("forever", t=LAST, valid_until=LAST)
    b = mem.add("long ago", t=FIRST)
    mem.add("now")
    stats = mem.stats()   # was ValueError: year 10000 is out of range
    assert stats["newest"] == LAST.isoformat() and stats["oldest"] == FIRST.isoformat()
    assert len(mem.search("forever", k=3)) == 3
    mem.save(tmp_path / "m.db")
    again = Memory.load(tmp_path / "m.db", embedder=emb)
    assert again.get(a).t == LAST and again.get(b).t == FIRST and again.get(a).valid_until == LAST
    html = mem.inspect(tmp_path / "m.html")
    assert "9999" in html
    with Memory.open(tmp_path / "d.db", embedder=emb) as durable:
        durable.add("forever", t=LAST)
        assert durable.stats()["newest"] == LAST.isoformat()
