"""Fixes of a tester's walk through the episodic memory's semantics: the storage's clock for
memories made outside it, merges that keep ended intervals, double negation, ended memories
leaving the context, time that runs backwards, NumPy/torch numbers, lone surrogates,
removal order and batched removals."""

import sqlite3
from datetime import datetime, timedelta, timezone

import episodic_helpers
import numpy as np
import pytest
import torch
from episodic_helpers import T0  # noqa: F401  (the clock fixture starts there)

from hypermem import HashingEmbedder
from hypermem.episodic import Eventuality, Memory, MemoryStorage, SExprSyntaxError, is_symbol
from hypermem.store.validation import MemoryFileError

storage = episodic_helpers.storage
Y2020 = datetime(2020, 1, 1, tzinfo=timezone.utc)


def test_a_memory_made_outside_takes_the_storage_clock_when_stored(make_clock):
    c = make_clock(Y2020)
    s = MemoryStorage(clock=c)
    old = Memory(Eventuality.from_text("((old fact.n) ** E1)"), importance=0.9)  # no clock: the real now
    assert old.start_time > Y2020 + timedelta(days=365)
    assert s.store(old) is old
    assert old.start_time == old.last_access == Y2020 and old.clock is c
    c.tick(hours=1)
    new = s.instantiate("((new fact.n) ** E2)", importance=0.9)
    assert s.retrieve(n=1, coeffs=(1.0, 0.0, 0.0)) == [new]  # recency no longer inverted
    # times the caller set (or a clock the caller gave) are kept
    set_by_caller = Memory(Eventuality.from_text("((set fact.n) ** E3)"), importance=0.9)
    set_by_caller.start_time = set_by_caller.last_access = Y2020 - timedelta(days=1)
    own = Memory(Eventuality.from_text("((own fact.n) ** E4)"), importance=0.9, clock=lambda: Y2020 - timedelta(days=2))
    s.store([set_by_caller, own])
    assert set_by_caller.start_time == Y2020 - timedelta(days=1) and own.start_time == Y2020 - timedelta(days=2)


def test_a_merge_outside_the_context_does_not_reopen_an_ended_memory(storage, clock):
    m = storage.instantiate("((a p b) ** E1)", importance=0.6)
    clock.tick(hours=1)
    storage.remove_from_context(m)
    ended = m.end_time
    clock.tick(hours=1)
    assert storage.instantiate("((a p b) ** E2)", importance=0.6, context=False) is m
    assert m.episodes == ["E1", "E2"] and m.end_time == ended and m not in storage.context
    assert m.get_time_wffs()[1] == (ended.isoformat(), "during", "E1")


def test_reasserting_a_fact_that_ended_keeps_the_gap(storage, clock):
    home = ("^me", "at.p", "Home")
    at7 = storage.instantiate(Eventuality(home, "E1"), importance=0.6)
    clock.tick(hours=1)
    storage.instantiate(Eventuality(("not", home), "E2"), importance=0.6)
    clock.tick(hours=9)
    at17 = storage.instantiate(Eventuality(home, "E3"), importance=0.6)
    assert at17 is not at7
    assert (at7.episodes, at7.start_time, at7.end_time) == (["E1"], T0, T0 + timedelta(hours=1))
    assert (at17.episodes, at17.start_time, at17.end_time) == (["E3"], T0 + timedelta(hours=10), None)
    assert storage.get_from_context(home) == [at17] and storage.get_matching(home) == [at7, at17]


def test_storing_an_ended_memory_again_is_a_new_interval_not_a_reopening(storage, clock):
    m = storage.instantiate("((a p b) ** E1)", importance=0.6)
    clock.tick(hours=1)
    storage.remove_from_context(m)
    ended = m.end_time
    clock.tick(hours=2)
    again = storage.store(m)
    assert again is not m and (m.start_time, m.end_time) == (T0, ended) and m not in storage.context
    assert (again.episodes, again.start_time, again.end_time) == (["E1"], T0 + timedelta(hours=3), None)
    assert storage.get_from_context(("a", "p", "b")) == [again]
    assert storage.store(m) is again  # the open interval takes it: no third copy
    assert storage.store(m, context=False) is m and m.end_time == ended  # outside the context: as it was
    assert storage.store(again) is again and len(storage.get_matching("p")) == 2


def test_reasserted_facts_save_and_load(storage, clock, tmp_path):
    a = storage.instantiate("((a p b) ** E1)", importance=0.6)
    clock.tick(hours=1)
    storage.remove_from_context(a)
    clock.tick(hours=1)
    b = storage.instantiate("((a p b) ** E2)", importance=0.6)
    storage.save(tmp_path / "e.db")
    back = MemoryStorage.load(tmp_path / "e.db", clock=clock)
    x, y = back.get_matching("p")
    assert (x.end_time, y.end_time, y in back.context, x in back.context) == (a.end_time, None, True, False)
    assert back.instantiate("((a p b) ** E3)", importance=0.6) is y and y.episodes == ["E2", "E3"] and b


def test_double_negation_counts_as_the_fact(storage, clock):
    nn = storage.instantiate("((not (not (x q))) ** E1)", importance=0.6)
    clock.tick(minutes=1)
    n = storage.instantiate("((not (x q)) ** E2)", importance=0.6)
    assert storage.context == {n} and nn.end_time == clock.now
    clock.tick(minutes=1)
    p = storage.instantiate("((x q) ** E3)", importance=0.6)
    assert storage.context == {p} and n.end_time == clock.now
    nnn = storage.instantiate("((not (not (not (x q)))) ** E4)", importance=0.6)
    assert storage.context == {nnn}


def test_an_ended_memory_leaves_the_context(storage, clock):
    m = storage.instantiate("((a p b) ** E1)", importance=0.6)
    clock.tick(minutes=1)
    m.end()
    assert m.end_time == clock.now and m not in storage.context
    assert storage.get_from_context("?f") == [] and storage.get_matching("p") == [m]
    storage.remove(m)
    m.end()  # no longer stored: nothing to tell


def test_time_running_backwards_never_inverts_an_interval(storage, clock, tmp_path):
    m = storage.instantiate("((a p b) ** E1)", importance=0.6)
    clock.tick(days=-2)
    storage.access(m)
    storage.remove_from_context(m)
    assert m.end_time == m.start_time == m.last_access == T0
    storage.save(tmp_path / "e.db")
    for column, other in (("end_time", "2026-03-01T09:00:00+00:00"), ("last_access", "2026-03-01T09:00:00+00:00")):
        path = tmp_path / f"{column}.db"
        path.write_bytes((tmp_path / "e.db").read_bytes())
        with sqlite3.connect(path) as con:
            con.execute(f"UPDATE memories SET {column} = ?", (other,))
        con.close()
        with pytest.raises(MemoryFileError, match=rf"memory 0 .*\({column} 2026-03-01.*before it starts \(start_time"):
            MemoryStorage.load(path)


def test_numpy_and_torch_numbers_are_numbers(storage):
    for i, v in enumerate((np.float32(0.6), np.float64(0.6), np.int64(1), torch.tensor(0.6), torch.tensor(1))):
        assert 0.59 < storage.instantiate(f"((a{i} p) ** E{i})", importance=v).importance <= 1.0
    assert len(storage.retrieve(n=np.int64(3))) == 3 and len(storage.retrieve(n=torch.tensor(2))) == 2
    assert storage.forget(max_size=np.int64(5)) == []
    assert storage.scores(coeffs=(np.float32(1), torch.tensor(0.5), 1))[0]["score"] > 0
    for bad in (True, np.bool_(True), torch.tensor(True), torch.tensor([0.6]), "0.6"):
        with pytest.raises(ValueError, match="importance must be a finite number"):
            storage.instantiate("((b p) ** E1)", importance=bad)
    with pytest.raises(ValueError, match="n must be an integer"):
        storage.retrieve(n=np.float64(3.0))


def test_a_lone_surrogate_is_refused_when_parsed(clock, tmp_path):
    s = MemoryStorage(clock=clock)  # no embedder: nothing else would see the text
    assert not is_symbol("\ud800") and is_symbol("caf\u00e9")
    with pytest.raises(SExprSyntaxError, match=r"lone surrogate '\\ud800' at position 3"):
        s.instantiate("((a\ud800 p) ** E1)", importance=0.6)
    with pytest.raises(ValueError, match="lone surrogate"):
        s.instantiate(Eventuality(("a\ud800", "p"), "E1"), importance=0.6)
    with pytest.raises(ValueError, match="episode symbol"):
        Eventuality(("a", "p"), "E\udfff")
    s.instantiate("((caf\u00e9 p) ** E1)", importance=0.6)
    s.save(tmp_path / "e.db")
    assert len(MemoryStorage.load(tmp_path / "e.db")) == 1


def test_removals_return_insertion_order(storage):
    m0, m1, m2 = storage.instantiate(["((a p) ** E0)", "((b p) ** E1)", "((c p) ** E2)"], importance=0.6)
    assert storage.remove([m2, m0, m2]) == [m0, m2] and list(storage) == [m1]


def test_each_removal_operation_is_one_batch_in_the_hyperbolic_store(clock):
    s = MemoryStorage(embedder=HashingEmbedder(dim=8), clock=clock)
    mems = s.instantiate([f"((a{i} p) ** E{i})" for i in range(40)], importance=0.6)
    s.instantiate("((shared p) ** E0)", importance=0.6)
    calls = []
    real = s.hyperbolic.remove_many
    s.hyperbolic.remove_many = lambda ids, *a, **k: calls.append(list(ids)) or real(calls[-1], *a, **k)
    assert s.remove(mems[30:35]) == mems[30:35]
    gone = s.remove_episode(["E0", "E1", "E2"])  # a list of episodes: one removal
    assert gone[:3] == mems[:3] and len(gone) == 4 and "E0" not in s.ep_ht
    with pytest.raises(KeyError, match="E99"):
        s.remove_episode(["E3", "E99"])
    assert mems[3] in s  # nothing changed
    assert len(s.forget(max_size=10)) == 22 and len(s) == 10
    assert [len(c) for c in calls] == [5, 4, 22]  # one remove_many per operation
