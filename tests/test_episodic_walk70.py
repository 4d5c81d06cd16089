"""Fixes of a conversational agent's walk through ``hypermem.episodic``: a back-filled
turn's last access follows its start time (not the wall clock), ``coeffs`` as an array or
tensor, and quoting raw text as a symbol."""

from datetime import datetime, timedelta, timezone

import numpy as np
import pytest
import torch

from hypermem.episodic import (
    Eventuality,
    Memory,
    MemoryStorage,
    SExprSyntaxError,
    format_sexpr,
    parse_sexpr,
    quote_symbol,
    unquote_symbol,
)

SAID = datetime(2023, 5, 8, 13, 56, tzinfo=timezone.utc)


class Clock:
    def __init__(self, now):
        self.now = now

    def __call__(self):
        return self.now


@pytest.fixture
def clock():
    return Clock(datetime(2023, 5, 10, tzinfo=timezone.utc))  # far from the wall clock


def turn(text, ep):
    return Eventuality.from_text(f"((Caroline say-to.v Melanie {quote_symbol(text)}) ** {ep})")


def test_a_back_filled_turn_keeps_its_time_as_its_last_access(clock):
    s = MemoryStorage(clock=clock)
    m = Memory(turn("I went to a support group", "D1.3"), 0.8)  # the seed's way: no clock
    m.start_time = SAID
    assert m.last_access == SAID  # "last_access starts as the start time"
    assert s.store(m) is m and m.start_time == m.last_access == SAID
    clock.now = datetime(2023, 6, 1, tzinfo=timezone.utc)
    s.access(m)
    assert m.last_access == clock.now and m.access_count == 1
    clock.now = datetime(2023, 7, 1, tzinfo=timezone.utc)
    new = s.instantiate(turn("new turn", "D9.1"), importance=0.8)
    rows = s.scores()
    assert [r["memory"] for r in rows] == [new, m] and [r["recency"] for r in rows] == [1.0, 0.0]


def test_an_untouched_clockless_memory_takes_the_storage_time_and_set_times_are_kept(clock):
    s = MemoryStorage(clock=clock)
    plain = s.store(Memory(turn("hello", "D1.1"), 0.8))
    assert plain.start_time == plain.last_access == clock.now
    m = Memory(turn("bye", "D1.2"), 0.8)
    m.set_times(start_time=SAID, last_access=SAID + timedelta(hours=1))
    s.store(m)
    assert (m.start_time, m.last_access) == (SAID, SAID + timedelta(hours=1))


def test_a_clockless_duplicate_merges_without_the_wall_clock(clock):
    s = MemoryStorage(clock=clock)
    first = s.instantiate("((Caroline happy.a) ** E1)", importance=0.8)
    again = s.store(Memory(Eventuality.from_text("((Caroline happy.a) ** E9)"), 0.8))
    assert again is first and first.episodes == ["E1", "E9"]
    assert first.start_time == first.last_access == clock.now


def test_an_unset_last_access_moves_with_the_start_until_set(clock, tmp_path):
    s = MemoryStorage(clock=clock)
    m = s.instantiate(turn("hi", "D2.1"), importance=0.8)
    m.start_time = SAID  # back-filled after instantiate
    assert m.last_access == SAID
    m.start_time = SAID + timedelta(days=1)  # later: the last access comes along
    assert m.last_access == SAID + timedelta(days=1)
    n = s.instantiate("((Caroline happy.a) ** D2.2)", importance=0.8)  # not telic: an access keeps it open
    s.access(n)  # an access is kept
    with pytest.raises(ValueError, match="last access"):
        n.start_time = clock.now + timedelta(days=1)
    n.start_time = SAID
    assert n.last_access == clock.now
    s.save(tmp_path / "e.db")
    back = {x.get_ep(): x for x in MemoryStorage.load(tmp_path / "e.db", clock=clock)}
    assert [(x.start_time, x.last_access, x.access_count) for x in (back["D2.1"], back["D2.2"])] == \
        [(m.start_time, m.last_access, 0), (SAID, clock.now, 1)]
    back["D2.1"].start_time = SAID  # still unset after loading: it follows
    assert back["D2.1"].last_access == SAID
    with pytest.raises(ValueError, match="last access"):
        back["D2.2"].start_time = clock.now + timedelta(days=1)


def test_a_copy_keeps_whether_the_last_access_was_set(clock):
    m = Memory(turn("x", "D3.1"), 0.8)
    m.start_time = SAID
    c = m.copy()
    c.start_time = SAID - timedelta(days=1)
    assert c.last_access == SAID - timedelta(days=1)


@pytest.mark.parametrize("coeffs", [np.array([0.0, 0.0, 1.0]), torch.tensor([0.0, 0.0, 1.0]), (0, 0, 1), [0, 0, 1],
                                    np.array([0, 0, 1], dtype=np.int64), torch.tensor([0.0, 0.0, 1.0], dtype=torch.float16)])
def test_coeffs_may_be_an_array_or_a_tensor(clock, coeffs):
    s = MemoryStorage(clock=clock)
    old = s.instantiate(turn("old", "D1.1"), importance=0.8)
    clock.now += timedelta(days=1)
    s.instantiate(turn("new", "D1.2"), importance=0.8)
    assert [r["score"] for r in s.scores(coeffs=coeffs)] == [1.0, 1.0]  # salience alone: all 1 with no query
    assert s.retrieve(n=1, coeffs=coeffs) == [old]  # ties keep insertion order


@pytest.mark.parametrize("coeffs, match", [
    (np.zeros(2), "3 numbers.*got 2"), (torch.zeros(4), "3 numbers.*got 4"),
    (np.zeros((1, 3)), "one dimension.*shape \\(1, 3\\)"), (torch.tensor(1.0), "one dimension.*shape \\(\\)"),
    (np.array([1.0, np.nan, 1.0]), "importance coefficient must be a finite number"),
    (torch.tensor([1.0, 1.0, float("inf")]), "salience coefficient must be a finite number"),
    ("abc", "a list, a tuple, or a 1-D NumPy array or tensor"), (np.array(["a", "b", "c"]), "recency coefficient"),
])
def test_bad_coeffs_are_refused_with_a_clear_message(clock, coeffs, match):
    s = MemoryStorage(clock=clock)
    s.instantiate(turn("x", "D1.1"), importance=0.8)
    with pytest.raises(ValueError, match=match):
        s.retrieve(coeffs=coeffs)


@pytest.mark.parametrize("text", ["", "plain", 'she said "hi" (twice)', "a \\ b \\", '\\"', "two\nlines ) (", "é ✓"])
def test_quote_symbol_round_trips_through_the_parser(text):
    sym = quote_symbol(text)
    wff = parse_sexpr(f"(Alice say-to.v Bob {sym})")
    assert wff == ("Alice", "say-to.v", "Bob", sym) and unquote_symbol(wff[3]) == text
    assert parse_sexpr(format_sexpr(wff)) == wff


def test_quote_symbol_refuses_what_is_not_text():
    with pytest.raises(TypeError, match="quote_symbol takes a string"):
        quote_symbol(3)
    with pytest.raises(SExprSyntaxError, match="lone surrogate"):
        quote_symbol("a\ud800")
    for bad in ("plain", '"open', '"a" "b"', 7):
        with pytest.raises(ValueError, match="double-quoted symbol"):
            unquote_symbol(bad)
