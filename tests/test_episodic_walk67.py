"""Fixes of a user's walk from the seed API (``eta.memory``) through ``hypermem.episodic``:
empty batches, checked times and events, variable episodes, double negation in lookups,
list inputs of the episode removals, the threshold (strictly above, ``None`` the default),
importance on any scale, and one storage per memory."""

import warnings
from datetime import datetime, timedelta, timezone

import episodic_helpers
import pytest
from episodic_helpers import T0  # noqa: F401  (the clock fixture starts there)

from hypermem.episodic import Eventuality, Memory, MemoryStorage

storage = episodic_helpers.storage


def test_instantiating_no_events_stores_nothing(storage):
    assert storage.instantiate([]) == [] and storage.instantiate([], importance=[]) == []
    assert storage.instantiate((), importance=0.9) == [] and len(storage) == 0


@pytest.mark.parametrize("name", ["start_time", "end_time", "last_access"])
@pytest.mark.parametrize("bad, error", [("yesterday", TypeError), (float("nan"), TypeError),
                                        (datetime(2026, 3, 2, 10), TypeError)])  # naive
def test_a_bad_time_is_refused_when_set_and_the_memory_still_works(storage, tmp_path, name, bad, error):
    m = storage.instantiate("((a p.v) ** E1)", importance=0.9)
    before = (m.start_time, m.end_time, m.last_access)
    with pytest.raises(error, match=name):
        setattr(m, name, bad)
    assert (m.start_time, m.end_time, m.last_access) == before
    assert storage.access(m) is m and storage.retrieve() == [m]
    assert storage.get_episode("E1", access=True) == [m]
    storage.save(tmp_path / "e.db")
    assert len(MemoryStorage.load(tmp_path / "e.db")) == 1


def test_none_is_only_an_end_time(storage):
    m = storage.instantiate("((a p.v) ** E1)", importance=0.9)
    for name in ("start_time", "last_access"):
        with pytest.raises(TypeError, match=name):
            setattr(m, name, None)
    storage.remove_from_context(m)
    m.end_time = None  # the seed's "true now"
    assert m.end_time is None and m.get_time_wffs()[1] == ("^now", "during", "E1")


def test_times_never_run_backwards_when_set(storage, clock):
    m = storage.instantiate("((a p.v) ** E1)", importance=0.9)
    with pytest.raises(ValueError, match="end_time.*ended .* before it starts"):
        m.end_time = m.start_time - timedelta(days=1)
    with pytest.raises(ValueError, match="last_access.*last accessed .* before it starts"):
        m.last_access = m.start_time - timedelta(seconds=1)
    m.last_access = T0  # set: from now on it stays put
    with pytest.raises(ValueError, match="set_times"):
        m.start_time = m.start_time + timedelta(hours=1)  # after its last access
    assert m.end_time is None and m.start_time == m.last_access == T0
    later = T0 + timedelta(hours=1)
    m.set_times(start_time=later, last_access=later)
    m.end_time = datetime(2026, 3, 2, 13, tzinfo=timezone(timedelta(hours=2)))  # 11:00 UTC
    assert m.start_time == later and m.end_time == later + timedelta(hours=1)
    assert m.end_time.tzinfo is timezone.utc and m not in storage.context  # ended: not true now


def test_the_event_is_checked_when_set(storage):
    m = storage.instantiate(["((x p.v) ** E1)", "((x p.v) ** E2)"], importance=0.9)[0]
    for bad in (None, 5):
        with pytest.raises(TypeError, match="event must be an Eventuality"):
            m.event = bad
    with pytest.raises(ValueError, match="stored in a MemoryStorage"):
        m.event = Eventuality(("y", "q.v"), "E1")  # the indexes hold it under (x p.v)
    with pytest.raises(ValueError, match="stored in a MemoryStorage"):
        m.event = Eventuality(("x", "p.v"), "E9")  # ep_ht does not know E9
    assert m.event == Eventuality(("x", "p.v"), "E1") and m.episodes == ["E1", "E2"]
    m.event = "((x p.v) ** E2)"  # another of its episodes: it comes first
    assert m.get_ep() == "E2" and m.episodes == ["E2", "E1"] and m.get_time_wffs()[0][2] == "E2"
    assert storage.get_matching("p.v") == [m] and storage.get_episode("E1") == [m]
    free = Memory("((y q.v) ** E5)", importance=0.9)
    free.event = Eventuality(("z", "r.v"), "E6")  # not stored: anything that is an event
    assert free.episodes == ["E6"] and free.get_time_wffs()[1] == ("^now", "during", "E6")


@pytest.mark.parametrize("text, message", [("((a b.v) ** ?e)", "not the variable '\\?e'"),
                                           ("(() ** E1)", "must be a fact"), ("(?x ** E1)", "must be a fact")])
def test_a_memory_needs_a_constant_episode_and_a_formula(storage, text, message):
    with pytest.raises(ValueError, match=message):
        storage.instantiate(text, 0.9)
    with pytest.raises(ValueError, match=message):
        storage.instantiate(["((ok p.v) ** E7)", text], 0.9)
    with pytest.raises(ValueError, match=message):
        Memory(text)
    assert len(storage) == 0 and storage.ep_ht == {}


def test_double_negation_is_found_as_the_fact(storage):
    m = storage.instantiate("((not (not (x p.v))) ** E3)", 0.8)
    neg = storage.instantiate("((not (y p.v)) ** E4)", 0.8)
    assert storage.get_from_context(["x", "p.v"]) == [m] and storage.get_from_context("p.v") == [m]
    assert storage.get_matching(["?s", "p.v"]) == [m] and storage.get_matching("(not (not (x p.v)))") == [m]
    assert storage.get_matching(["not", ["y", "p.v"]]) == [neg] and storage.get_matching(["not", "?w"]) == [neg]
    assert storage.does_characterize_episode(["x", "p.v"], "E3")
    assert storage.remove_matching_from_context("p.v") == [m] and m.end_time is not None
    assert storage.remove_matching(["x", "p.v"]) == [m] and list(storage) == [neg] and "p.v" not in storage.wff_ht


def test_the_episode_removals_take_the_same_inputs(storage):
    a, b = storage.instantiate(["((a p.v) ** E1)", "((b p.v) ** E2)"], importance=0.9)
    for method in (storage.remove_episode, storage.remove_episode_from_context):
        with pytest.raises(KeyError, match="E404"):
            method(["E1", "E404"])
        with pytest.raises(TypeError, match="episode must be a symbol"):
            method(5)
        with pytest.raises(TypeError, match="episode must be a symbol"):
            method(["E1", 5])
    assert storage.context == {a, b} and len(storage) == 2  # nothing changed
    assert storage.remove_episode_from_context(["E2"]) is None and storage.context == {a}
    assert storage.remove_episode_from_context(("E1", "E2")) is None and storage.context == set()
    assert storage.remove_episode(["E1", "E2"]) == [a, b]


def test_the_threshold_is_strict_and_none_is_the_default(clock):
    s = MemoryStorage(importance_threshold=None, clock=clock)
    assert s.importance_threshold == 0.5
    with pytest.warns(UserWarning, match="at this storage's importance_threshold 0.5: .*only return memories above"):
        at = s.instantiate("((at p.v) ** E1)", importance=0.5)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        above = s.instantiate("((above p.v) ** E2)", importance=0.51)
    assert s.retrieve(n=100) == [above] and [r["memory"] for r in s.scores()] == [above]
    assert at in s and s.forget() == []  # kept: only those below the threshold may go


def test_the_seed_defaults_warn_that_the_memory_is_never_retrieved(clock):
    s = MemoryStorage(clock=clock)
    with pytest.warns(UserWarning, match=r"importance 0.25, below .*importance_threshold 0.5.*importance="):
        m = s.instantiate("((a p.v) ** E1)")
    assert m in s and s.retrieve() == []


def test_importance_is_a_score_on_any_scale(clock, tmp_path):
    s = MemoryStorage(importance_threshold=5, clock=clock)  # a 1-10 poignancy scale
    low, high = s.instantiate(["((a p.v) ** E1)", "((b p.v) ** E2)"], importance=[3, 9])
    mid = s.instantiate("((c p.v) ** E3)", importance=7)
    assert s.retrieve(n=5, coeffs=(0.0, 1.0, 0.0)) == [high, mid] and low in s
    rows = {r["memory"]: r["importance"] for r in s.scores(coeffs=(0.0, 1.0, 0.0))}
    assert rows == {high: 1.0, mid: 0.0}  # min-max scaled, as for [0, 1]
    with pytest.raises(ValueError, match="finite number"):
        s.instantiate("((d p.v) ** E4)", importance=float("inf"))
    s.save(tmp_path / "e.db")
    t = MemoryStorage.load(tmp_path / "e.db", clock=clock)
    assert [m.importance for m in t] == [3.0, 9.0, 7.0] and t.importance_threshold == 5.0


def test_a_memory_belongs_to_one_storage(storage, clock):
    other = MemoryStorage(clock=clock)
    y = storage.instantiate("((y p.v) ** E1)", importance=0.9)
    with pytest.raises(ValueError, match="stored in another MemoryStorage.*copy"):
        other.store(y)
    with pytest.raises(ValueError, match="another MemoryStorage"):
        other.store([Memory("((z p.v) ** E2)", importance=0.9), y])
    assert len(other) == 0 and y.storage is storage
    twin = other.store(y.copy())
    assert twin is not y and twin.get_wff() == y.get_wff() and twin.start_time == y.start_time
    clock.tick(hours=1)
    storage.remove_from_context(y)
    assert y.end_time == clock.now and twin.end_time is None and twin in other.context
    storage.remove(y)
    assert y.storage is None and other.store(y, context=False) is twin  # merges into its twin there
