"""Walk 75, the drawings of a mirrored durable store: since its whole-store reads (iteration,
``time_weights``, ``depths``, ``directions``, ``stats``) each catch up with other clients, the
inspector, ``to_dict``, ``weight_timeline``, ``to_networkx`` and ``plot`` read one snapshot
(:mod:`hypermem.viz.snapshot`): one refresh, then the state as it is.  Another client that
writes between their reads no longer mixes two states (the inspector's ``torch.stack`` of the
weights failed, the records and weights had different lengths)."""

from __future__ import annotations

import base64
import re
from contextlib import contextmanager
from datetime import datetime, timedelta, timezone

import numpy as np
import pytest

from hypermem import HalfLife, HashingEmbedder, Memory
from hypermem.viz import render_html
from hypermem.viz.export import to_dict, to_networkx, weight_timeline
from hypermem.viz.payload import pack

pytestmark = pytest.mark.usefixtures("one_thread")
NOW = datetime(2026, 6, 1, tzinfo=timezone.utc)


def _open(path):
    return Memory.open(path, embedder=HashingEmbedder(dim=16), decay=HalfLife(72), clock=lambda: NOW)


@contextmanager
def _busy(tmp_path, monkeypatch, quiet: int = 0):
    """``a``, whose every refresh() after the first ``quiet`` ones is followed at once by a commit
    of another client ``b`` (the interleaving a second process can produce between two reads)."""
    path = str(tmp_path / "mem.db")
    with _open(path) as a, _open(path) as b:
        a.add("animals", id="a", t=NOW - timedelta(days=3))
        b.add("dogs", id="d", parent="a", t=NOW - timedelta(days=1))
        catch_up, calls, wrote = a.refresh, [], []

        def refresh():
            changed = catch_up()
            calls.append(changed)
            if len(calls) > quiet:
                wrote.append(b.add(f"note {len(wrote)}", parent="a", t=NOW))   # committed right after
            return changed

        monkeypatch.setattr(a, "refresh", refresh)
        yield a, calls, wrote


@pytest.fixture
def busy(tmp_path, monkeypatch):
    with _busy(tmp_path, monkeypatch) as it:
        yield it


def _u16(s: str) -> np.ndarray:
    return np.frombuffer(base64.b64decode(s), dtype="<u2")


@pytest.mark.parametrize("quiet", [0, 7, 9], ids=["from-the-first-read", "between-the-weights", "later"])
def test_the_inspector_page_is_built_from_one_state(tmp_path, monkeypatch, quiet):
    """``quiet=7``: the commits begin among the time grid's weights (was: ``torch.stack`` of
    weights of 2, then 3 memories); ``quiet=0``: from the first read (the layout's)."""
    with _busy(tmp_path, monkeypatch, quiet) as (a, calls, wrote):
        data = pack(a, timeline_steps=9)
        assert len(calls) == 1                         # one refresh: the later commits are not read
        page = render_html(a, timeline_steps=9)        # the page builds, with the state of its own refresh
    assert data["n"] == 2 and data["ids"] == ["a", "d"] and data["stats"]["count"] == 2
    assert len(data["texts"]) == 2 and len(np.frombuffer(base64.b64decode(data["parent"]), "<i4")) == 2
    born, steps = _u16(data["born"]), len(data["timeline"]["seconds"])
    assert len(born) == 2 and len(_u16(data["weights"])) == int((steps - born).sum())
    assert re.search(rf'"n":\s*{2 + len(wrote[:1])}\b', page) and len(calls) == 2


def test_dict_timeline_graph_and_plot_read_one_state(busy):
    a, _, wrote = busy
    snap = to_dict(a)
    assert len(wrote) == 1 and [n["id"] for n in snap["nodes"]] == ["a", "d"]
    assert snap["stats"]["count"] == 2 and snap["nodes"][0]["children"] == ["d"]
    timeline = weight_timeline(a, steps=5)             # every time of the grid: the 3 memories of one state
    assert len(wrote) == 2 and {len(w) for w in timeline["weights"]} == {3}
    nx = pytest.importorskip("networkx")
    g = to_networkx(a)
    assert isinstance(g, nx.DiGraph) and len(wrote) == 3 and g.number_of_nodes() == 4
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    from hypermem.viz.mpl import plot
    ax = plot(a)
    assert len(wrote) == 4 and len(ax.collections[0].get_offsets()) == 5
