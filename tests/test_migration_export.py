"""Coming from poincare-memory: the reference's keys in ``SearchResult.to_dict`` (``parent``)
and in ``viz.export``'s ``to_dict`` and ``to_networkx``, next to the reference where it is
installed."""

import json
from datetime import datetime

import pytest

from hypermem import Memory
from hypermem.viz.export import to_dict, to_networkx


def test_search_result_to_dict_has_the_references_parent_key():
    m = Memory()
    root = m.add("animals")
    m.add("dogs bark", parent=root)
    d = m.search("dogs bark", k=1)[0].to_dict()
    assert d["parent"] == root and d["parent_id"] == root
    assert m.search("animals", k=1)[0].to_dict()["parent"] is None
    ref = pytest.importorskip("poincare_memory")
    r = ref.Memory()
    r.add("dogs bark", parent=r.add("animals"))
    assert set(r.search("dogs bark", k=1)[0].to_dict()) <= set(d)


def small_tree():
    m = Memory()
    m.add("animals", id="a")
    m.add("dogs", parent="a", id="d", meta={"k": 1})
    m.add("cats", parent="a", id="c")
    m.search("dogs", k=1)
    return m


def test_to_dict_carries_the_references_keys():
    m = small_tree()
    snap = to_dict(m)
    json.dumps(snap, allow_nan=False)
    assert snap["edges"] == [{"source": "a", "target": "d"}, {"source": "a", "target": "c"}]
    assert snap["config"]["count"] == 3
    now = datetime.fromisoformat(snap["now"])
    assert snap["config"]["now_ms"] == pytest.approx(now.timestamp() * 1000.0, abs=1e-3)
    for n, r in zip(snap["nodes"], m):
        assert n["accesses"] == n["access_count"] == r.access_count
        assert n["t_ms"] == pytest.approx(r.t.timestamp() * 1000.0, abs=1e-3)
    assert any(n["accesses"] > 0 for n in snap["nodes"])
    ref = pytest.importorskip("poincare_memory.viz.export")
    import poincare_memory

    r = poincare_memory.Memory()
    r.add("animals", id="a")
    r.add("dogs", parent="a", id="d")
    want = ref.to_dict(r)
    assert set(want) <= set(snap) and set(want["config"]) <= set(snap["config"])
    assert set(want["nodes"][1]) <= set(snap["nodes"][1])


def test_to_networkx_nodes_carry_coordinates_parent_and_times():
    pytest.importorskip("networkx")
    m = small_tree()
    g = to_networkx(m)
    snap = to_dict(m)
    for n in snap["nodes"]:
        attrs = g.nodes[n["id"]]
        for key in ("x", "y", "parent", "t_ms", "accesses", "level", "depth", "text", "weight"):
            assert attrs[key] == n[key], key
    assert list(g.edges) == [("a", "d"), ("a", "c")]
