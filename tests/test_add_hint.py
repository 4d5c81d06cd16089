"""Pointers to add_many: the one-time hint on a long run of single adds, and the adapters'
bulk paths calling the embedder once (issue 32, item 6)."""

from __future__ import annotations

import time
import warnings

import pytest
import torch

from hypermem import CallableEmbedder, HashingEmbedder, Memory
from hypermem.integrations import _common as C
from hypermem.store.add_hint import AddManyHint, OneByOne


class Counting:
    """A slow embedder that counts its calls."""

    def __init__(self, delay=0.0):
        self.calls, self.delay = 0, delay
        self.inner = HashingEmbedder(dim=16)
        self.dim = 16

    def embed(self, texts):
        self.calls += 1
        time.sleep(self.delay)
        return self.inner.embed(texts)


def test_the_run_of_single_adds_is_told_once():
    run = OneByOne(calls=3, gap=0.5)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        run.record(0.0, 0.6)
        run.record(2.0, 2.6)           # a pause longer than gap: a new run
        run.record(2.7, 3.0)
        assert run.count == 2 and not run.told
        run.record(3.1, 3.5)            # 3 calls in a row: the hint is due, not given by record()
        assert not run.told
    with pytest.warns(AddManyHint, match="add_many"):
        run.start()                     # given at the start of the next add, before it writes
    assert run.told
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for n in range(10):
            run.record(4.0 + n, 4.9 + n)  # told already
            run.start()


def test_a_slow_embedder_in_a_loop_gets_the_hint_and_a_cheap_one_does_not():
    mem = Memory(embedder=Counting(delay=0.01))
    mem.one_by_one = OneByOne(calls=5)
    with pytest.warns(AddManyHint) as got:
        for n in range(30):
            mem.add(f"note {n}")
    assert len([w for w in got if issubclass(w.category, AddManyHint)]) == 1
    cheap = Memory(embedder=HashingEmbedder(dim=16))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for n in range(200):
            cheap.add(f"note {n}")
        mem2 = Memory(embedder=Counting(delay=0.01))
        mem2.one_by_one = OneByOne(calls=5)
        mem2.add_many([{"text": f"note {n}"} for n in range(30)])   # add_many is not counted


def test_the_adapters_bulk_path_embeds_once_and_not_again_for_the_same_text():
    emb = Counting()
    mem = Memory(embedder=emb)
    items = [{"text": f"note {n}", "id": f"n{n}"} for n in range(10)]
    C.upsert(mem, items)
    assert emb.calls == 1 and len(mem) == 10
    C.upsert(mem, [dict(it, meta={"v": 1}) for it in items])      # the same texts: no embedding
    assert emb.calls == 1 and mem.get("n3").meta == {"v": 1}
    C.upsert(mem, [{"text": "a new text", "id": "n3"}])
    assert emb.calls == 2 and mem.get("n3").text == "a new text"
    ref = Memory(embedder=CallableEmbedder(lambda t: HashingEmbedder(dim=16).embed(t), dim=16))
    ref.add("a new text", id="n3")
    assert torch.allclose(mem.embedding("n3"), ref.embedding("n3"))


def test_the_hint_names_how_to_silence_it_and_that_filter_works():
    """The hint claimed "often 10x faster"; for short chat turns add_many gains 1.1-1.4x, and an
    agent that must store turn by turn needs to turn it off by the class the message names."""
    import hypermem.store

    run = OneByOne(calls=2)
    with pytest.warns(AddManyHint) as got:
        run.record(0.0, 0.1)
        run.record(0.1, 0.2)
        run.start()
    text = str(got[0].message)
    assert "10x faster" not in text and "hypermem.store.AddManyHint" in text
    assert hypermem.store.AddManyHint is AddManyHint
    quiet = OneByOne(calls=2)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        warnings.filterwarnings("ignore", category=hypermem.store.AddManyHint)
        quiet.record(0.0, 0.1)
        quiet.record(0.1, 0.2)
        quiet.start()
    assert quiet.told


def test_under_warnings_as_errors_the_add_that_raises_stores_nothing_and_its_retry_stores_once(tmp_path):
    """The hint was warned after the add's commit: under -W error add() raised for a stored memory
    and the caller's retry stored it twice (walk 72).  Now the add that raises has written nothing."""
    db = Memory.open(str(tmp_path / "agent.db"), embedder=Counting(delay=0.01))
    db.one_by_one = OneByOne(calls=3, commits=True)
    stored = []
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for n in range(10):
            try:
                stored.append(db.add(f"turn {n}", id=f"t{n}"))
            except AddManyHint:
                assert len(db) == n and f"t{n}" not in db     # nothing of the failed add is stored
                stored.append(db.add(f"turn {n}", id=f"t{n}"))   # the retry: stored once, not told again
    assert stored == [f"t{n}" for n in range(10)] and len(db) == 10 and db.one_by_one.told
    db.close()


def test_the_hint_text_is_the_same_for_each_store_so_the_default_filter_shows_it_once_per_line():
    """Its text named the run's own count and seconds, so a service opening a store per request had
    a new text, shown again by Python's default filter, on every request."""
    def request(n):
        run = OneByOne(calls=2)
        run.record(0.0, 0.1)
        run.record(0.1, 0.3 + 0.1 * n)   # each store's run took another time
        run.start()                       # one line of "the caller's" code

    with warnings.catch_warnings(record=True) as shown:
        warnings.simplefilter("default")
        for n in range(5):
            request(n)
    assert len([w for w in shown if issubclass(w.category, AddManyHint)]) == 1
