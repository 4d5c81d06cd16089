"""mem.plot(): every parent link in one LineCollection of vectorised geodesic arcs, and at
most max_labels labels, the shallowest first, none overlapping another."""

import math
import time
from datetime import datetime, timedelta, timezone

import numpy as np
import pytest

from hypermem import HalfLife, HashingEmbedder, Memory
from hypermem.viz import plot
from hypermem.viz.mpl import geodesic_arc, geodesic_arcs, pick_labels, tree_levels

matplotlib = pytest.importorskip("matplotlib")
matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.collections import LineCollection  # noqa: E402

T0 = datetime(2025, 1, 1, tzinfo=timezone.utc)
NOW = T0 + timedelta(days=365)


def forest(domains=10, topics=6, notes=4):
    """Roots created a year ago (decayed to ~0), fresh leaves with long, similar texts."""
    mem = Memory(embedder=HashingEmbedder(dim=16), decay=HalfLife(24 * 30), clock=lambda: NOW)
    for d in range(domains):
        mem.add(f"domain {d}", id=f"d{d}", t=T0, meta={"name": f"Domain{d}"})
        for k in range(topics):
            mem.add(f"topic {k} of domain {d} with a long description", id=f"d{d}t{k}", parent=f"d{d}",
                    t=T0 + timedelta(days=100))
            for j in range(notes):
                mem.add(f"booked the flaky CI job number {j} for topic {k} of {d}", id=f"d{d}t{k}n{j}",
                        parent=f"d{d}t{k}", t=NOW - timedelta(hours=j + 1))
    return mem


def test_links_are_one_line_collection_of_geodesics():
    mem = forest(3, 3, 2)
    ax = mem.plot()
    links = [c for c in ax.collections if isinstance(c, LineCollection)]
    assert len(links) == 1 and not ax.lines
    assert len(links[0].get_segments()) == sum(r.parent_id is not None for r in mem)
    assert len(ax.collections[0].get_offsets()) == len(mem)  # the points stay collections[0]
    plt.close(ax.figure)


def test_vectorised_arcs_match_the_single_arc_and_are_orthogonal_to_the_rim():
    rng = np.random.default_rng(0)
    a = rng.uniform(-0.6, 0.6, (50, 2))
    b = rng.uniform(-0.6, 0.6, (50, 2))
    b[0] = -0.5 * a[0]  # collinear with the origin: a straight segment
    arcs = geodesic_arcs(a, b, samples=16)
    assert arcs.shape == (50, 17, 2)
    for i in (0, 7, 31):
        assert np.allclose(arcs[i], np.array(geodesic_arc(tuple(a[i]), tuple(b[i]), samples=16)), atol=1e-12)
    assert np.allclose(arcs[0], a[0] + (b[0] - a[0]) * np.linspace(0, 1, 17)[:, None])
    # Every curved arc lies on a circle of centre c with |c|^2 = r^2 + 1 (orthogonal to the rim).
    for i in range(1, 50):
        p, m, q = arcs[i, 0], arcs[i, 8], arcs[i, 16]
        ax_, ay_, bx, by = p[0] - m[0], p[1] - m[1], q[0] - m[0], q[1] - m[1]
        d = 2 * (ax_ * by - ay_ * bx)
        if abs(d) < 1e-9:
            continue
        ux = (by * (ax_ * ax_ + ay_ * ay_) - ay_ * (bx * bx + by * by)) / d
        uy = (ax_ * (bx * bx + by * by) - bx * (ax_ * ax_ + ay_ * ay_)) / d
        c = m + np.array([ux, uy])
        r2 = ux * ux + uy * uy
        assert math.isclose(c @ c, r2 + 1, rel_tol=1e-6)


def test_tree_levels_match_memory_levels_and_deep_chains_are_fast():
    mem = forest(2, 3, 2)
    row = {r.id: i for i, r in enumerate(mem)}
    parent = np.array([-1 if r.parent_id is None else row[r.parent_id] for r in mem])
    assert tree_levels(parent).tolist() == [mem.level(r.id) for r in mem]
    t = time.perf_counter()
    assert tree_levels(np.arange(-1, 199_999))[-1] == 199_999
    assert time.perf_counter() - t < 2.0


def test_labels_are_capped_shallowest_first_and_never_overlap():
    mem = forest()
    fig, ax = plt.subplots(figsize=(6, 6))
    mem.plot(ax=ax, labels=True)
    texts = [t.get_text() for t in ax.texts]
    assert 10 < len(texts) <= 40
    assert {f"Domain{d}" for d in range(10)} <= set(texts)  # old roots beat fresh leaves
    fig.canvas.draw()
    boxes = [t.get_window_extent() for t in ax.texts]
    for i in range(len(boxes)):
        for j in range(i):
            assert not boxes[i].overlaps(boxes[j]), (texts[i], texts[j])
    frame = ax.get_window_extent()
    assert all(frame.x0 - 1 <= b.x0 and b.x1 <= frame.x1 + 1 for b in boxes)
    plt.close(fig)
    ax = plot(mem, labels=True, max_labels=5)  # the roots only, being the shallowest
    assert len(ax.texts) == 5 and all(t.get_text().startswith("Domain") for t in ax.texts)
    plt.close(ax.figure)
    ax = mem.plot(labels=True, max_labels=3)  # the Memory method passes the option through
    assert len(ax.texts) == 3
    plt.close(ax.figure)
    with pytest.raises(ValueError, match="max_labels"):
        plot(mem, labels=True, max_labels=-1)


def test_pick_labels_tries_the_other_side_before_dropping():
    px, py = np.array([100.0, 300.0, 115.0]), np.array([100.0, 100.0, 100.0])
    kept = pick_labels(px, py, np.array([50.0, 50.0, 50.0]), 10.0, np.array([0, 1, 2]))
    assert kept[:2] == [(0, 1), (1, 1)]  # the third fits on neither side
    assert len(kept) == 2
    kept = pick_labels(np.array([100.0, 105.0]), np.array([100.0, 100.0]), np.array([40.0, 40.0]), 10.0,
                       np.array([0, 1]))
    assert kept == [(0, 1), (1, -1)]
    assert len(pick_labels(np.zeros(100), np.arange(100) * 20.0, np.full(100, 10.0), 10.0, np.arange(100),
                           max_labels=7)) == 7
