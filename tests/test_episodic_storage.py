"""MemoryStorage: every method, the design document's examples, context maintenance,
merging and forgetting (retrieval: test_episodic_retrieval.py)."""

import episodic_helpers
import pytest
import torch
from episodic_helpers import T0, snapshot

from hypermem import CallableEmbedder
from hypermem.episodic import (
    DEFAULT_TELIC_PREDICATES,
    ArgKey,
    EpisodicMemory,
    Eventuality,
    Memory,
    MemoryStorage,
)

BETWEEN = ("Block1", "between.p", "Block2", "Block3")
ON = ("Block1", "on.p", "Table")

storage = episodic_helpers.storage  # the fixture, shared with test_episodic_retrieval.py


# ---------------------------------------------------------------------- EpisodicMemory


def test_memory_times_come_from_the_clock(clock):
    m = Memory(Eventuality(ON, "E1"), importance=0.5, clock=clock)
    assert Memory is EpisodicMemory
    assert m.start_time == T0 and m.last_access == T0 and m.end_time is None
    assert m.get_ep() == "E1" and m.get_wff() == ON
    assert m.get_time_wffs() == [(T0.isoformat(), "during", "E1"), ("^now", "during", "E1")]
    clock.tick(minutes=5)
    m.update_last_access()
    assert m.last_access == clock.now and m.access_count == 1
    clock.tick(minutes=5)
    m.end()
    assert m.end_time == clock.now
    assert m.get_time_wffs()[1] == (clock.now.isoformat(), "during", "E1")


def test_memory_telic():
    reply = Eventuality.from_text("((^you reply-to.v E1) ** E3)")
    assert "reply-to.v" in DEFAULT_TELIC_PREDICATES
    assert EpisodicMemory(reply).is_telic()
    assert not EpisodicMemory(reply, telic=False).is_telic()
    assert EpisodicMemory(Eventuality(ON, "E1"), telic=True).is_telic()
    assert not EpisodicMemory(Eventuality(ON, "E1")).is_telic()
    # the storage's own predicates decide once it holds the memory
    s = MemoryStorage(telic_predicates={"on.p"})
    assert s.instantiate(Eventuality(ON, "E1")).is_telic()
    assert not s.instantiate(reply).is_telic()


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf"), 10**400, True, "0.5", None])
def test_memory_importance_must_be_finite(bad):
    with pytest.raises(ValueError, match="importance"):
        EpisodicMemory(Eventuality(ON, "E1"), importance=bad)
    m = EpisodicMemory(Eventuality(ON, "E1"), importance=0.3)
    with pytest.raises(ValueError):
        m.importance = bad
    assert m.importance == 0.3


def test_memory_bad_arguments():
    with pytest.raises(TypeError, match="Eventuality"):
        EpisodicMemory(ON)
    with pytest.raises(TypeError, match="telic"):
        EpisodicMemory(Eventuality(ON, "E1"), telic="yes")
    naive = EpisodicMemory.__new__(EpisodicMemory)
    with pytest.raises(TypeError, match="timezone-aware"):
        EpisodicMemory.__init__(naive, Eventuality(ON, "E1"), clock=lambda: T0.replace(tzinfo=None))


# ---------------------------------------------------------------------- store / instantiate / indexes


def test_instantiate_files_the_document_example_under_every_key(storage, clock):
    m = storage.instantiate("((Block1 between.p Block2 Block3) ** E1)", importance=0.8)
    assert isinstance(m, EpisodicMemory) and m.start_time == T0
    assert storage.memories == {m} and storage.context == {m}
    assert storage.ep_ht == {"E1": {m}}
    assert {(k.as_tuple() if isinstance(k, ArgKey) else k): v for k, v in storage.wff_ht.items()} == {
        "between.p": {m},
        ("Block1", "between.p", None, None): {m},
        (None, "between.p", "Block2", None): {m},
        (None, "between.p", None, "Block3"): {m},
    }
    assert storage.hyperbolic.ids == [storage.key_of(m)]
    assert storage.hyperbolic.get(storage.key_of(m)).text == "(Block1 between.p Block2 Block3)"
    assert storage.point(m).shape == (32,)


def test_store_lists_and_context_flag(storage):
    a = EpisodicMemory(Eventuality(ON, "E1"))
    b = EpisodicMemory(Eventuality(("^you", "smile.v"), "E2"))
    out = storage.store([a, b], context=False)
    assert out == [a, b] and storage.context == set()
    assert storage.wff_ht[("^you", "smile.v")] == {b}
    assert storage.store(a) is a and storage.context == {a}  # storing again: into context
    assert len(storage) == 2 and a in storage and list(storage) == [a, b]


def test_instantiate_lists_with_importances(storage):
    ms = storage.instantiate([Eventuality(ON, "E1"), "((^you smile.v) ** E2)"], importance=[0.2, 0.7])
    assert [m.importance for m in ms] == [0.2, 0.7]
    assert [m.get_ep() for m in ms] == ["E1", "E2"]


@pytest.mark.parametrize("events, importance, error", [
    ([Eventuality(ON, "E1"), "((a b) ** E2)"], [0.2, float("nan")], ValueError),
    ([Eventuality(ON, "E1"), "((a b) ** E2)"], [0.2, float("inf")], ValueError),
    ([Eventuality(ON, "E1"), "((a b) ** E2)"], [0.2], ValueError),
    ([Eventuality(ON, "E1"), "((a b) ** E2"], 0.5, ValueError),
    ([Eventuality(ON, "E1"), ("a", "b")], 0.5, TypeError),
    (Eventuality(ON, "E1"), [0.5], ValueError),
    (42, 0.5, TypeError),
])
def test_bad_input_stores_nothing(storage, events, importance, error):
    storage.instantiate("((x y) ** E0)")
    before = snapshot(storage)
    with pytest.raises(error):
        storage.instantiate(events, importance=importance)
    assert snapshot(storage) == before


def test_store_refuses_non_memories_and_keeps_state(storage):
    storage.instantiate("((x y) ** E0)")
    before = snapshot(storage)
    with pytest.raises(TypeError, match="#1"):
        storage.store([EpisodicMemory(Eventuality(ON, "E1")), "not a memory"])
    with pytest.raises(TypeError):
        storage.store("((x y) ** E0)")
    assert snapshot(storage) == before


def test_a_failing_embedder_leaves_everything_intact(clock):
    def fn(texts):
        if any("boom" in t for t in texts):
            raise RuntimeError("embedder down")
        return torch.ones(len(texts), 4)

    s = MemoryStorage(embedder=CallableEmbedder(fn, dim=4), clock=clock)
    s.instantiate("((x y) ** E0)")
    before = snapshot(s)
    with pytest.raises(RuntimeError, match="embedder down"):
        s.instantiate(["((a b) ** E1)", "((boom c) ** E2)"])
    assert snapshot(s) == before


# ---------------------------------------------------------------------- merging duplicates


def test_duplicate_formulas_merge_across_episodes(storage, clock):
    """The document's TODO: (^you reply-to.v E1) ** E3 and ** E4 become one memory."""
    e3 = storage.instantiate("((^you reply-to.v E1) ** E3)", importance=0.4)
    clock.tick(minutes=1)
    e4 = storage.instantiate("((^you reply-to.v E1) ** E4)", importance=0.7)
    assert e4 is e3 and len(storage) == 1
    assert e3.episodes == ["E3", "E4"] and e3.get_ep() == "E3"
    assert e3.importance == 0.7 and e3.start_time == T0
    assert storage.get_episode("E3") == [e3] and storage.get_episode("E4") == [e3]
    assert storage.ep_ht == {"E3": {e3}, "E4": {e3}}
    assert storage.does_characterize_episode("reply-to.v", "E4")
    assert len(storage.hyperbolic) == 1
    # the same formula in one list merges too; importance keeps the larger
    s2 = MemoryStorage(clock=clock)
    a, b = s2.instantiate(["((x p y) ** E1)", "((x p y) ** E2)"], importance=[0.9, 0.1])
    assert a is b and a.episodes == ["E1", "E2"] and a.importance == 0.9


def test_a_fact_that_holds_again_after_it_ended_is_a_new_memory(storage, clock):
    m = storage.instantiate(Eventuality(ON, "E1"))
    clock.tick(hours=1)
    storage.remove_from_context(m)
    ended = clock.now
    assert m.end_time == ended
    clock.tick(hours=1)
    again = storage.instantiate(Eventuality(ON, "E2"))
    assert again is not m and again.start_time == clock.now and again.end_time is None
    assert m.end_time == ended and m.start_time == T0 and m.episodes == ["E1"]  # the gap is kept
    assert storage.context == {again} and storage.get_matching(ON) == [m, again]
    assert storage.instantiate(Eventuality(ON, "E3")) is again and again.episodes == ["E2", "E3"]


# ---------------------------------------------------------------------- context and negation


def test_negation_maintains_the_context(storage, clock):
    w = storage.instantiate(Eventuality(ON, "E1"))
    clock.tick(hours=1)
    not_w = storage.instantiate(Eventuality(("not", ON), "E2"))
    assert w not in storage.context and not_w in storage.context
    assert w.end_time == clock.now and not_w.end_time is None
    assert storage.get_from_context("on.p") == []
    assert storage.get_from_context(("not", ON)) == [not_w]
    assert storage.get_matching("on.p") == [w]  # still remembered, just not true now
    clock.tick(hours=1)
    again = storage.instantiate(Eventuality(ON, "E3"))
    assert again is not w and again in storage.context and again.end_time is None  # a new interval
    assert w.end_time == T0.replace(hour=10) and w not in storage.context
    assert not_w not in storage.context and not_w.end_time == clock.now
    # a negation stored outside the context changes nothing in it
    storage.store(EpisodicMemory(Eventuality(("not", ("^you", "smile.v")), "E4")), context=False)
    smile = storage.instantiate("((^you smile.v) ** E5)")
    assert smile in storage.context


def test_remove_from_context_ends_and_accepts_lists(storage, clock):
    a, b = storage.instantiate(["((a p) ** E1)", "((b p) ** E2)"])
    clock.tick(seconds=30)
    storage.remove_from_context([a, b])
    assert storage.context == set() and a.end_time == b.end_time == clock.now
    storage.remove_from_context(a)  # not in context: nothing to do
    assert a.end_time == T0.replace(second=30)
    with pytest.raises(KeyError):
        storage.remove_from_context(EpisodicMemory(Eventuality(ON, "E9")))


def test_telic_events_leave_context_when_accessed_or_flushed(storage, clock):
    reply = storage.instantiate("((^you reply-to.v E1) ** E3)")
    say = storage.instantiate("((^me say-to.v ^you hi) ** E4)")
    fact = storage.instantiate(Eventuality(ON, "E5"))
    clock.tick(minutes=1)
    assert storage.access(reply) is reply
    assert reply not in storage.context and reply.end_time == clock.now and reply.last_access == clock.now
    assert storage.access([fact]) == [fact] and fact in storage.context
    assert storage.flush_context() == [say]
    assert storage.context == {fact}


def test_access_unknown_memory_is_a_key_error(storage):
    m = storage.instantiate(Eventuality(ON, "E1"))
    stranger = EpisodicMemory(Eventuality(ON, "E2"))
    with pytest.raises(KeyError, match="not stored"):
        storage.access([m, stranger])
    assert m.access_count == 0  # all or nothing
    with pytest.raises(TypeError):
        storage.access("E1")


# ---------------------------------------------------------------------- lookup


@pytest.fixture
def blocks(storage):
    ms = storage.instantiate([
        Eventuality(BETWEEN, "E1"),
        Eventuality(("Block4", "between.p", "Block1", "Block4"), "E2"),
        Eventuality(("Block1", "between.p", "Block5", "Block2"), "E3"),
        Eventuality(ON, "E1"),
        Eventuality(("^me", "say-to.v", "^you", ("that", ("Block1", ("on.p", "Table")))), "E4"),
    ], importance=0.6)
    return storage, ms


def test_get_matching_by_predicate_and_pattern(blocks):
    s, (b1, b2, b3, on, say) = blocks
    assert s.get_matching("between.p") == [b1, b2, b3]
    assert s.get_matching(["Block1", "between.p", "?x", "Block2"]) == [b3]  # the document's pattern
    assert s.get_matching("(Block1 between.p ?x ?y)") == [b1, b3]
    assert s.get_matching(("?x", "between.p", "?y", "?x")) == [b2]  # repeated variable
    assert s.get_matching(("?s", "say-to.v", "?h", ("that", ("?b", ("on.p", "?t"))))) == [say]  # nested
    assert s.get_matching(("?s", "?p", "Table")) == [on]  # variable predicate: a scan
    assert s.get_matching("?anything") == [b1, b2, b3, on, say]
    assert s.get_matching("under.p") == []


def test_get_from_context_and_access(blocks, clock):
    s, (b1, b2, b3, on, say) = blocks
    s.remove_from_context(b2)
    assert s.get_from_context("between.p") == [b1, b3]
    clock.tick(minutes=3)
    assert s.get_from_context("say-to.v", access=True) == [say]
    assert say.last_access == clock.now and say not in s.context  # telic: accessed, so gone
    assert s.get_matching("between.p", access=True) == [b1, b2, b3]
    assert b2.last_access == clock.now and b2.access_count == 1


@pytest.mark.parametrize("bad, error", [(3, TypeError), (None, TypeError), ({"p": 1}, TypeError),
                                        ("between p", ValueError), ("(a b", ValueError), (("a", 1), TypeError)])
def test_bad_patterns_are_clear_errors(blocks, bad, error):
    s, _ = blocks
    for method in (s.get_matching, s.get_from_context, s.remove_matching, s.remove_matching_from_context):
        with pytest.raises(error):
            method(bad)
    with pytest.raises(error):
        s.get_characterizing_episode(bad, "E1")
    assert len(s) == 5


def test_get_episode(blocks, clock):
    s, (b1, b2, b3, on, say) = blocks
    assert s.get_episode("E1") == [b1, on]
    assert s.get_episode("E99") == []
    clock.tick(minutes=1)
    assert s.get_episode("E1", access=True) == [b1, on] and on.last_access == clock.now
    with pytest.raises(TypeError):
        s.get_episode(("E1",))


def test_characterizing_episode(blocks):
    s, (b1, b2, b3, on, say) = blocks
    assert s.get_characterizing_episode("between.p", "E1") == [b1]
    assert s.get_characterizing_episode(("Block1", "?p", "?x"), "E1") == [on]
    assert s.does_characterize_episode("on.p", "E1")
    assert not s.does_characterize_episode("on.p", "E2")
    assert s.get_characterizing_episode("on.p", "E99") == []
    assert not s.does_characterize_episode("on.p", "E99")


# ---------------------------------------------------------------------- removal


def _no_trace(s, m):
    return (m not in s.memories and m not in s.context and all(m not in v for v in s.ep_ht.values())
            and all(m not in v for v in s.wff_ht.values()) and all(v for v in s.wff_ht.values()))


def test_remove(blocks):
    s, (b1, b2, b3, on, say) = blocks
    key = s.key_of(b2)
    assert s.remove(b2) == [b2]
    assert _no_trace(s, b2) and "E2" not in s.ep_ht and key not in s.hyperbolic
    assert s.remove([b1, on]) == [b1, on] and "E1" not in s.ep_ht
    with pytest.raises(KeyError):
        s.remove([b3, b2])  # b2 is gone: nothing removed
    assert b3 in s and len(s) == 2 and len(s.hyperbolic) == 2
    with pytest.raises(KeyError):
        s.key_of(b2)


def test_removing_many_keeps_the_others_points(storage):
    ms = storage.instantiate([f"((x{i} p y) ** E{i})" for i in range(40)])
    keep = ms[::3]
    points = {storage.key_of(m): storage.point(m) for m in keep}
    gone = [m for m in ms if m not in keep]
    storage.remove(gone)
    assert storage.hyperbolic.ids == [storage.key_of(m) for m in keep]
    for m in keep:
        assert torch.equal(storage.point(m), points[storage.key_of(m)])
    assert all(_no_trace(storage, m) for m in gone)


def test_remove_episode(blocks):
    s, (b1, b2, b3, on, say) = blocks
    assert s.remove_episode("E1") == [b1, on]
    assert _no_trace(s, b1) and _no_trace(s, on) and "E1" not in s.ep_ht
    with pytest.raises(KeyError, match="E1"):
        s.remove_episode("E1")
    with pytest.raises(KeyError):
        s.remove_episode_from_context("E77")


def test_remove_episode_of_a_merged_memory_keeps_the_other_episode(storage):
    m = storage.instantiate("((^you reply-to.v E1) ** E3)")
    storage.instantiate("((^you reply-to.v E1) ** E4)")
    assert storage.remove_episode("E3") == []
    assert m in storage and m.episodes == ["E4"] and m.get_ep() == "E4" and "E3" not in storage.ep_ht
    assert storage.remove_episode("E4") == [m] and len(storage) == 0


def test_remove_episode_from_context(blocks):
    s, (b1, b2, b3, on, say) = blocks
    s.remove_episode_from_context("E1")
    assert b1 not in s.context and on not in s.context and b1 in s and b2 in s.context


def test_remove_matching(blocks):
    s, (b1, b2, b3, on, say) = blocks
    assert s.remove_matching_from_context(["Block1", "between.p", "?x", "?y"]) == [b1, b3]
    assert b1 in s and b1 not in s.context
    assert s.remove_matching("between.p") == [b1, b2, b3]
    assert all(_no_trace(s, m) for m in (b1, b2, b3)) and list(s) == [on, say]


# ---------------------------------------------------------------------- forgetting


def test_forget_keeps_the_most_important(storage):
    ms = storage.instantiate([f"((x{i} p) ** E{i})" for i in range(5)], importance=[0.1, 0.9, 0.3, 0.7, 0.5])
    evicted = storage.forget(max_size=2)
    assert evicted == [ms[0], ms[2], ms[4]]  # lowest first
    assert list(storage) == [ms[1], ms[3]] and len(storage.hyperbolic) == 2
    assert all(_no_trace(storage, m) for m in evicted)
    assert storage.forget(max_size=5) == []


def test_forget_weighs_recency_and_threshold(storage, clock):
    old = storage.instantiate("((old p) ** E1)", importance=0.6)
    clock.tick(hours=2)
    new = storage.instantiate("((new p) ** E2)", importance=0.6)
    clock.tick(hours=2)
    newest = storage.instantiate("((newest p) ** E3)", importance=0.2)
    # combined = (recency + importance) / 2: old (0 + .6)/2 = .3, new (.5 + .6)/2 = .55, newest (1 + .2)/2 = .6
    assert storage.forget(max_size=2) == [old]
    assert storage.forget(threshold=0.58) == [new]
    assert list(storage) == [newest]


def test_forget_can_spare_the_context(storage):
    a, b, c = storage.instantiate(["((a p) ** E1)", "((b p) ** E2)", "((c p) ** E3)"], importance=[0.1, 0.2, 0.9])
    storage.remove_from_context(c)
    assert storage.forget(max_size=1, keep_context=True) == [c]  # a and b are true now
    assert list(storage) == [a, b]


@pytest.mark.parametrize("kwargs", [{"max_size": -1}, {"max_size": 1.5}, {"threshold": "1.5"},
                                    {"threshold": float("nan")}, {"threshold": float("inf")}])
def test_forget_bad_arguments(storage, kwargs):
    storage.instantiate("((a p) ** E1)")
    with pytest.raises(ValueError):
        storage.forget(**kwargs)
    assert len(storage) == 1


def test_storage_constructor_checks():
    with pytest.raises(TypeError, match="clock"):
        MemoryStorage(clock="now")
    with pytest.raises(TypeError, match="telic_predicates"):
        MemoryStorage(telic_predicates="say-to.v")
    with pytest.raises(ValueError, match="symbols"):
        MemoryStorage(telic_predicates=["say to"])
    with pytest.raises(TypeError, match="decay"):
        MemoryStorage(decay=3)
    assert "MemoryStorage(memories=0" in repr(MemoryStorage())
