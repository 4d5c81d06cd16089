"""Episodic soak, walk 75: a merge never moves a last access back; a stored memory's episodes
stay in step with its storage's index; save/load keeps whether a last access was set."""

from datetime import datetime, timedelta, timezone

from hypermem.episodic import Memory, MemoryStorage

T0 = datetime(2026, 3, 1, 12, tzinfo=timezone.utc)


def test_merging_a_backfilled_duplicate_keeps_the_later_last_access():
    s = MemoryStorage(clock=lambda: T0)
    live = s.instantiate("((Alice like.v tea) ** D9.1)", importance=0.8)
    old = Memory("((Alice like.v tea) ** D1.7)", importance=0.8)
    old.start_time = T0 - timedelta(days=3)
    assert s.store(old) is live
    assert live.start_time == T0 - timedelta(days=3) and live.last_access == T0
    assert live.episodes == ["D9.1", "D1.7"]


def test_merging_after_the_clock_moved_back_keeps_the_later_last_access():
    now = [T0]
    s = MemoryStorage(clock=lambda: now[0])
    x = s.instantiate("((Bob like.v X1) ** E1)", importance=0.8)
    now[0] = T0 - timedelta(hours=2)
    assert s.instantiate("((Bob like.v X1) ** E9)", importance=0.8) is x
    assert (x.start_time, x.last_access) == (T0 - timedelta(hours=2), T0)
