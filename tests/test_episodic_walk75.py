"""Episodic soak, walk 75: a merge never moves a last access back; a stored memory's episodes
stay in step with its storage's index; save/load keeps whether a last access was set."""

import sqlite3
from datetime import datetime, timedelta, timezone

import pytest

from hypermem.episodic import Memory, MemoryStorage
from hypermem.store.validation import MemoryFileError

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


def test_assigning_episodes_of_a_stored_memory_reindexes_it_and_saves_a_loadable_file(tmp_path):
    s = MemoryStorage(clock=lambda: T0)
    m = s.instantiate("((Alice at.p Home) ** E1)", importance=0.8)
    m.episodes = ["E9", "E8"]
    assert m.event.ep == m.get_ep() == "E9" and m.get_wff() == ("Alice", "at.p", "Home")
    assert s.get_episode("E9") == [m] and s.get_episode("E8") == [m] and s.get_episode("E1") == []
    assert set(s.ep_ht) == {"E9", "E8"}
    s.save(tmp_path / "s.db")
    (back,) = MemoryStorage.load(tmp_path / "s.db", clock=lambda: T0)
    assert back.episodes == ["E9", "E8"] and back.event.ep == "E9"
    assert s.remove_episode("E9") == [] and m.episodes == ["E8"] and m.event.ep == "E8"
    assert s.remove_episode("E8") == [m] and len(s) == 0 and s.ep_ht == {}


def test_episodes_returned_are_a_copy_and_add_and_drop_reach_the_index():
    s = MemoryStorage(clock=lambda: T0)
    m = s.instantiate("((Bob at.p Work) ** E2)", importance=0.8)
    m.episodes.append("E5")
    assert m.episodes == ["E2"] and s.get_episode("E5") == []
    assert m.add_episodes(["E7", "E2"]) == ["E7"]
    assert s.get_episode("E7") == [m] and s.does_characterize_episode("at.p", "E7")
    m.drop_episode("E2")
    assert m.event.ep == "E7" and s.get_episode("E2") == [] and "E2" not in s.ep_ht
    assert s.remove_episode("E7") == [m] and len(s) == 0


def test_bad_episode_lists_are_refused_and_change_nothing():
    s = MemoryStorage(clock=lambda: T0)
    m = s.instantiate("((Carol at.p Park) ** E3)", importance=0.8)
    for bad, err in (([], ValueError), (["E1", "E1"], ValueError), (["?e"], ValueError), ("E9", TypeError),
                     ([3], TypeError), (["a b"], ValueError)):
        with pytest.raises(err):
            m.episodes = bad
    with pytest.raises(ValueError, match="only episode"):
        m.drop_episode("E3")
    with pytest.raises(ValueError, match="not one of"):
        m.drop_episode("E4")
    with pytest.raises(ValueError, match="constant"):
        m.add_episodes(["?x"])
    assert m.episodes == ["E3"] and set(s.ep_ht) == {"E3"} and m.event.ep == "E3"


def _saved_pair(tmp_path):
    """A merged memory and one whose last access was set explicitly, both equal to their
    start with no access counted, and one whose last access follows its start; saved."""
    s = MemoryStorage(clock=lambda: T0)
    merged = s.instantiate("((Alice at.p Home) ** E1)", importance=0.8)
    assert s.instantiate("((Alice at.p Home) ** E2)", importance=0.8) is merged
    given = s.instantiate("((Bob at.p Work) ** E3)", importance=0.8)
    given.last_access = given.start_time
    free = s.instantiate("((Carol at.p Park) ** E4)", importance=0.8)
    s.save(tmp_path / "s.db")
    return [merged, given, free], tmp_path / "s.db"


def _moved(mems):
    for m in mems:
        m.start_time = T0 - timedelta(days=2)
    return [(m.last_access, m.last_access_set) for m in mems]


def test_save_load_keeps_whether_the_last_access_was_set(tmp_path):
    mems, path = _saved_pair(tmp_path)
    assert [m.last_access_set for m in mems] == [True, True, False]
    loaded = list(MemoryStorage.load(path, clock=lambda: T0))
    assert _moved(loaded) == _moved(mems) == [(T0, True), (T0, True), (T0 - timedelta(days=2), False)]


def test_a_file_without_last_access_set_loads_and_a_bad_flag_is_refused(tmp_path):
    _, path = _saved_pair(tmp_path)
    bad = tmp_path / "bad.db"
    bad.write_bytes(path.read_bytes())
    con = sqlite3.connect(path)
    con.execute("ALTER TABLE memories DROP COLUMN last_access_set")  # as written before the column
    con.commit()
    con.close()
    old = list(MemoryStorage.load(path, clock=lambda: T0))
    # the old rule (nothing else to go by): a last access equal to the start with no access counted follows it
    assert [m.last_access_set for m in old] == [False, False, False] and old[0].episodes == ["E1", "E2"]
    for value, match in ((None, "bad flag"), (2, "bad flag"), ("x", "bad flag"), (1.5, "bad flag"), (0, "follows the start")):
        con = sqlite3.connect(bad)
        con.execute("UPDATE memories SET last_access_set = ?, last_access = ? WHERE seq = 1",
                    (value, (T0 + timedelta(hours=1)).isoformat()))
        con.commit()
        con.close()
        with pytest.raises(MemoryFileError, match=match):
            MemoryStorage.load(bad)
