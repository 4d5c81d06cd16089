"""An empty recall says why, where the store can tell (a walker's agent got ``{"results": []}``
and no hint): the only matches expired, ``at_time`` is before every memory, or a filter compares
a number field with a string operand (what an LLM often sends) or the reverse."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

pytest.importorskip("mcp")

from mcp_helpers import _call, _data, db_fixture  # noqa: E402, F401

from hypermem.integrations.mcp_server import build_server  # noqa: E402

PAST = datetime(2020, 1, 1, tzinfo=timezone.utc)


def recall(db, **args):
    async def script(c):
        return _data(await c.call_tool("recall", {"query": "tea", **args}))
    return _call(build_server(db), script)


def test_expired_matches_are_counted_with_the_argument_that_shows_them(db):
    db.add("green tea", meta={"kind": "drink"}, t=PAST, valid_until=datetime(2021, 1, 1, tzinfo=timezone.utc))
    db.add("black tea", meta={"kind": "drink"}, t=PAST, valid_until=datetime(2021, 1, 1, tzinfo=timezone.utc))
    out = recall(db)
    assert out["results"] == []
    assert any("2 memories matched but expired" in w and "include_expired=true" in w for w in out["warnings"])
    assert len(recall(db, include_expired=True)["results"]) == 2


def test_an_at_time_before_every_memory_is_named(db):
    db.add("tea", t=datetime(2024, 5, 1, tzinfo=timezone.utc))
    out = recall(db, at_time="2023-01-01T00:00:00Z")
    assert out["results"] == [] and any("before every memory" in w and "2024-05-01" in w for w in out["warnings"])


@pytest.mark.parametrize("filters, words", [
    ({"n": {"$gte": "2"}}, "compares a string ('2') with a field that holds numbers (e.g. 3)"),
    ({"$or": [{"n": "3"}]}, "compares a string ('3') with a field that holds numbers"),
    ({"label": {"$in": [7]}}, "compares a number (7) with a field that holds strings (e.g. '7')"),
])
def test_a_filter_operand_of_the_other_type_is_named(db, filters, words):
    db.add("tea", meta={"n": 3, "label": "7"})
    out = recall(db, filters=filters)
    assert out["results"] == [] and any(words in w for w in out["warnings"]), out


def test_a_result_or_a_plain_miss_has_no_such_warning(db):
    db.add("tea", meta={"n": 3})
    assert "warnings" not in recall(db, filters={"n": {"$gte": 2}})
    out = recall(db, filters={"n": {"$gte": 5}})
    assert out["results"] == [] and "warnings" not in out


def test_an_unknown_argument_has_the_prefix_of_the_other_tool_errors(db):
    from mcp_helpers import _error

    async def script(c):
        return (_error(await c.call_tool("recall", {"query": "tea", "limit": 3})),
                _error(await c.call_tool("recall", {"query": "tea", "mode": "subtree"})))
    unknown, other = _call(build_server(db), script)
    assert other.startswith("Error executing tool recall: ")
    assert unknown.startswith("Error executing tool recall: recall takes no argument 'limit'; its arguments are query")
