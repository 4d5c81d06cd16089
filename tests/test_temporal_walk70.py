"""Walk 70 (temporal facts): a calibrated time term over a validity window warns, at_time searches
that leave out facts recorded later but valid then warn, and stats/table follow search's at_time rule."""

import math
import warnings
from datetime import datetime, timezone

from hypermem import HalfLife, Memory, Product, ValidityWindow
from hypermem.embed import HashingEmbedder
from hypermem.retrieval.scoring import calibrated_time_coef
from hypermem.store.calibration import distance_spread

U = timezone.utc
NOW = datetime(2026, 6, 1, tzinfo=U)
Y2019, Y2020, Y2021, Y2023 = (datetime(y, 1, 1, tzinfo=U) for y in (2019, 2020, 2021, 2023))


def _acme(decay, recorded_today=False, **kw):
    mem = Memory(embedder=HashingEmbedder(dim=64), decay=decay, clock=lambda: NOW, **kw)
    a = mem.add("The CEO of Acme is Alice", t=NOW if recorded_today else Y2019, valid_from=Y2019, valid_until=Y2023)
    b = mem.add("The CEO of Acme is Bob", t=NOW if recorded_today else Y2023, valid_from=Y2023)
    return mem, a, b


def _caught(fn):
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        out = fn()
    return out, [str(x.message) for x in w]


def test_a_window_alone_keeps_the_seeds_coefficient_and_ranks_the_current_fact_first():
    """A ValidityWindow has no age to calibrate: its term is an exclusion at time_coef 1, so the
    expired fact that matches the query better still ranks below the current one, unwarned."""
    for decay in (ValidityWindow(), Product(ValidityWindow(), ValidityWindow(outside_weight=0.5))):
        mem = Memory(embedder=HashingEmbedder(dim=64), decay=decay, clock=lambda: NOW, recency_weight=0.1)
        a = mem.add("who is the CEO of Acme now: the CEO of Acme is Alice", t=Y2019, valid_from=Y2019,
                    valid_until=Y2023)
        b = mem.add("Acme appointed Bob to run the company", t=Y2023, valid_from=Y2023)
        res, msgs = _caught(lambda m=mem: m.search("who is the CEO of Acme now?", k=2, touch=False))
        assert mem.time_coef == 1.0 and msgs == []
        assert [r.record.id for r in res] == [b, a]
        assert res[0].distance > res[1].distance   # Alice matches better; the window decides


def test_calibrated_time_term_over_a_window_warns_once_naming_the_remedies():
    for decay in (Product(HalfLife(72), ValidityWindow()),):
        mem, a, b = _acme(decay, recency_weight=0.1)
        _, msgs = _caught(lambda m=mem: [m.search("CEO of Acme", k=2, touch=False) for _ in range(3)])
        assert len(msgs) == 1, msgs
        assert "valid_only=True" in msgs[0] and "time_coef=1.0" in msgs[0]
        coef = mem.time_coef
        assert f"{coef * math.log(1e-6):.3g}" in msgs[0]      # the cost it names is the one it ranks with
        # the remedy it names works: valid_only leaves the expired fact out
        assert [r.record.id for r in mem.search("CEO of Acme", k=2, valid_only=True)] == [b]


def test_no_window_or_explicit_coef_no_warning_and_ranking_unchanged():
    mem, a, b = _acme(HalfLife(72), recency_weight=0.1)
    res, msgs = _caught(lambda: mem.search("CEO of Acme", k=2, touch=False))
    assert msgs == []
    st = mem.state
    assert mem.time_coef == calibrated_time_coef(0.1, distance_spread(st, mem.curvature, mem.base_depth, mem.metric))
    w = mem.time_weights([r.record.id for r in res])
    for r, wi in zip(res, w.tolist()):   # the one formula, the calibrated coefficient as before
        assert abs(r.score - (-r.distance + mem.time_coef * math.log(max(wi, 1e-6)))) < 1e-9
    mem2, _, _ = _acme(ValidityWindow(), time_coef=1.0)
    _, msgs = _caught(lambda: mem2.search("CEO of Acme", k=2, touch=False))
    assert msgs == []


def test_at_time_search_warns_when_facts_valid_then_were_recorded_later():
    mem, a, b = _acme(ValidityWindow(), recorded_today=True)
    res, msgs = _caught(lambda: mem.search("CEO of Acme", at_time=Y2021, valid_only=True))
    assert res == [] and len(msgs) == 1 and "recorded after" in msgs[0] and "t=valid_from" in msgs[0]
    # the documented recipe: record a past fact with t=valid_from
    hist, a2, _ = _acme(ValidityWindow())
    res, msgs = _caught(lambda: hist.search("CEO of Acme", k=1, at_time=Y2021, valid_only=True))
    assert [r.record.id for r in res] == [a2] and msgs == []
    # a full result computes nothing and says nothing
    _, msgs = _caught(lambda: mem.search("CEO of Acme", k=2))
    assert msgs == []


def test_stats_and_table_at_time_leave_out_memories_created_later():
    mem, a, b = _acme(Product(HalfLife(24 * 30), ValidityWindow()))
    found = {r.record.id for r in mem.search("CEO of Acme", k=5, at_time=Y2020, touch=False)}
    assert found == {a}
    s = mem.stats(at_time=Y2020)
    assert (s["count"], s["roots"], s["levels"], s["newest"]) == (1, 1, {0: 1}, Y2019.isoformat())
    assert [row["id"] for row in mem.table(at_time=Y2020)] == [a]
    assert list(mem.to_dataframe(at_time=Y2020)["id"]) == [a]
    assert mem.stats()["count"] == 2 and [row["id"] for row in mem.table()] == [a, b]
    assert mem.stats(at_time=NOW)["count"] == 2
