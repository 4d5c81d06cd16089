"""Fixes of a tester's walk through the episodic memory at scale: a wide formula's keys are
linear in its size and a formula beyond ``MAX_SIZE`` is refused fast; merging a repeated
event and removing many memories cost one index operation per memory, not one per stored
episode or per removal."""

import time
import tracemalloc

import episodic_helpers
import pytest
from episodic_helpers import T0  # noqa: F401  (the clock fixture starts there)

from hypermem.episodic import ArgKey, Eventuality, MemoryStorage, parse_sexpr, to_sexpr, wff_keys
from hypermem.episodic.sexpr import MAX_SIZE, SExprTooLargeError

storage = episodic_helpers.storage


def wide(k):
    return "((big " + " ".join(f"w{i}" for i in range(k)) + ") ** E)"


# ---------------------------------------------------------------------- 1. wide formulas


def test_the_keys_of_a_wide_formula_are_linear_in_its_size():
    wff = ("w0", "big", *(f"w{i}" for i in range(1, 3000)))
    keys = wff_keys(wff)
    assert len(keys) == len(wff)
    # no key copies the formula: each is the predicate or an ArgKey of constant size
    assert keys[0] == "big" and all(isinstance(k, ArgKey) for k in keys[1:])
    assert keys[2] == ArgKey(3001, "big", 2, "w1") and keys[2].as_tuple()[2] == "w1"
    assert len({hash(k) for k in keys}) == len(keys)


def test_storing_a_wide_formula_holds_linear_memory():
    s = MemoryStorage()
    tracemalloc.start()
    try:
        m = s.instantiate(wide(4000), importance=0.6)
        held = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    assert held < 8_000_000  # the tuple keys held 4000 x 4001 slots: over 120 MB
    pattern = ["?s", "w0", *(f"?x{i}" for i in range(3998)), "w3999"]  # (big w0 w1 ... w3999)
    assert s.get_matching(pattern) == [m] and s.get_matching(["?s", "w0", "w1"]) == []


def test_a_formula_beyond_max_size_is_refused_fast_and_names_the_limit(storage):
    text = wide(150_000)  # a megabyte of text
    assert len(text) > 1_000_000
    t = time.perf_counter()
    with pytest.raises(SExprTooLargeError, match=r"more than 10000 symbols and lists.*MAX_SIZE"):
        storage.instantiate(text, importance=0.6)
    assert time.perf_counter() - t < 2.0  # stops at the limit (was killed for memory)
    assert len(storage) == 0
    with pytest.raises(SExprTooLargeError, match="MAX_SIZE"):
        to_sexpr(["big"] * (MAX_SIZE + 1))
    with pytest.raises(SExprTooLargeError, match="MAX_SIZE"):
        storage.get_matching(["?x"] * (MAX_SIZE + 1))


def test_size_boundary_of_text_lists_and_eventualities():
    words = ["w"] * (MAX_SIZE - 1)  # one list and MAX_SIZE - 1 symbols: exactly MAX_SIZE
    assert len(parse_sexpr("(" + " ".join(words) + ")")) == MAX_SIZE - 1
    assert len(to_sexpr(words)) == MAX_SIZE - 1
    with pytest.raises(SExprTooLargeError):
        parse_sexpr("(" + " ".join(words + ["w"]) + ")")
    fits = ["w"] * (MAX_SIZE - 4)  # (wff ** ep) adds a list and two symbols
    assert len(Eventuality(fits, "E1").wff) == MAX_SIZE - 4
    with pytest.raises(SExprTooLargeError, match=r"\(<wff> \*\* <episode>\) fits .*MAX_SIZE"):
        Eventuality(fits + ["w"], "E1")


# ---------------------------------------------------------------------- 2. merging a repeated event


class Ep(str):
    """An episode symbol that counts its comparisons (a list scan compares with every item)."""

    compared = 0

    def __eq__(self, other):
        Ep.compared += 1
        return str.__eq__(self, other)

    __hash__ = str.__hash__


class CountingDict(dict):
    touched = 0

    def setdefault(self, key, default=None):
        CountingDict.touched += 1
        return super().setdefault(key, default)


def test_merging_a_repeated_event_is_constant_work_per_merge(clock):
    s = MemoryStorage(clock=clock)
    s.ep_ht = CountingDict(s.ep_ht)
    first = s.instantiate(Eventuality(("^you", "greet.v", "^me"), Ep("G0")), importance=0.6)
    for i in range(1, 300):
        s.instantiate(Eventuality(("^you", "greet.v", "^me"), Ep(f"G{i}")), importance=0.6)
    Ep.compared = CountingDict.touched = 0
    last = s.instantiate(Eventuality(("^you", "greet.v", "^me"), Ep("G300")), importance=0.6)
    assert last is first and len(s) == 1
    assert Ep.compared <= 3  # a list scan compared with all 300 episodes
    assert CountingDict.touched == 1  # only the new episode is filed (was all 301)
    assert first.episodes == [f"G{i}" for i in range(301)]  # order kept
    assert s.get_episode("G300") == [first] and set(s.ep_ht) == {f"G{i}" for i in range(301)}
    # a repeated episode is not listed twice; dropping one keeps the order of the rest
    assert s.instantiate("((^you greet.v ^me) ** G5)", importance=0.6) is first and len(first.episodes) == 301
    assert s.remove_episode("G5") == [] and first.episodes[4:6] == ["G4", "G6"]
    first.episodes.append("G999")  # a copy: changes nothing (an in-place change would bypass ep_ht)
    assert first.add_episodes(["G999", "G1000", "G999"]) == ["G999", "G1000"]
