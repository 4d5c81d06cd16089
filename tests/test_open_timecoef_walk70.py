"""Walk 70: ``Memory.open(path, time_coef=...)`` of a store whose time term is calibrated by
``recency_weight`` (a non-hashing embedder): refused with the coefficient the store ranks with
(not the stale one saved at creation), never silently dropped; ``time_coef`` with
``recency_weight`` is the "not both" error, as for ``Memory(...)``."""

import hashlib
from datetime import datetime, timezone

import pytest

from hypermem import HalfLife, Memory
from hypermem.store.backends.opening import stored_config

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)


class Emb:
    """A cheap deterministic non-hashing embedder (stands in for MiniLM)."""

    dim = 16

    def embed(self, texts):
        return [[(b - 127.5) / 128 for b in hashlib.sha256(t.encode()).digest()[:16]] for t in texts]


@pytest.fixture
def calibrated(tmp_path):
    p = str(tmp_path / "tc.db")
    with Memory.open(p, embedder=Emb(), decay=HalfLife(hours=72), clock=lambda: T0) as m:
        m.add_many([{"text": f"note {i}"} for i in range(30)])
        ranks_with = m.time_coef
        assert m.recency_weight == 0.1
    return p, ranks_with


def test_time_coef_refused_with_the_coefficient_the_store_ranks_with(calibrated):
    p, ranks_with = calibrated
    stale = stored_config(p)["time_coef"]   # saved when the store was created empty
    assert stale != pytest.approx(ranks_with)
    with pytest.raises(ValueError, match=r"recency_weight=0\.1") as e:
        Memory.open(p, embedder=Emb(), time_coef=1.0)
    msg = str(e.value)
    assert f"{ranks_with:.6g}" in msg and f"{stale!r}" not in msg and "mem.time_coef = 1.0" in msg


def test_time_coef_of_the_saved_value_is_not_silently_dropped(calibrated):
    p, _ = calibrated
    stale = stored_config(p)["time_coef"]
    with pytest.raises(ValueError, match="cannot open it with time_coef="):
        Memory.open(p, embedder=Emb(), time_coef=stale)


def test_time_coef_and_recency_weight_together_are_not_both(calibrated):
    p, _ = calibrated
    with pytest.raises(ValueError, match="not both"):
        Memory.open(p, embedder=Emb(), time_coef=1.0, recency_weight=0.1)


def test_recency_weight_still_wins_and_the_hint_works(calibrated):
    p, ranks_with = calibrated
    with Memory.open(p, embedder=Emb(), recency_weight=0.5) as m:
        assert m.time_coef == pytest.approx(5 * ranks_with)
    with Memory.open(p, embedder=Emb()) as m:   # not stored
        assert m.time_coef == pytest.approx(ranks_with)
        m.time_coef = 1.0                        # the error's hint: a fixed coefficient for this object
        assert m.time_coef == 1.0 and m.recency_weight is None


def test_a_store_with_an_explicit_time_coef_keeps_the_created_with_check(tmp_path):
    p = str(tmp_path / "h.db")
    Memory.open(p).close()   # hashing embedder: time_coef=1.0 stored, no recency_weight
    with Memory.open(p, time_coef=1.0) as m:
        assert m.time_coef == 1.0
    with pytest.raises(ValueError, match=r"was created with time_coef=1\.0; cannot open it with time_coef=0\.5"):
        Memory.open(p, time_coef=0.5)
