"""The inspector's compact embedded data (hypermem.viz.payload): labels, the decay in
words, the time grid, typed arrays that decode to the layout, size per memory."""

import base64
import json
import math
import re
from datetime import datetime, timedelta, timezone

import numpy as np
import pytest

from hypermem import Ebbinghaus, HalfLife, HashingEmbedder, Memory, NoDecay, Product, ValidityWindow
from hypermem.temporal import policy_spec
from hypermem.viz import structural_coordinates
from hypermem.viz.payload import describe_decay, first_words, memory_labels, pack, time_grid

T0 = datetime(2025, 1, 1, tzinfo=timezone.utc)
NOW = T0 + timedelta(days=10)


def arr(doc, key, dtype):
    return np.frombuffer(base64.b64decode(doc[key]), dtype=dtype)


def page_weights(doc):
    """The page's weights as a (steps, n) array (0 before a memory's creation) and ``born``."""
    steps, born = len(doc["timeline"]["seconds"]), arr(doc, "born", "<u2").astype(int)
    flat, out, at = arr(doc, "weights", "<u2") / doc["weight_scale"], np.zeros((steps, len(born))), 0
    for i, b in enumerate(born):
        out[b:, i] = flat[at: at + steps - b]
        at += steps - b
    assert at == len(flat)
    return out, born


def small(decay=None):
    mem = Memory(embedder=HashingEmbedder(dim=16), decay=decay or HalfLife(72), clock=lambda: NOW)
    mem.add("root memory about everything", id="r", t=T0, meta={"title": "The Root", "name": "root-name"})
    mem.add("a child", id="c", parent="r", t=T0 + timedelta(days=2), meta={"lemma": "kid", "label": ""})
    mem.add("one two three four five six seven", id="g", parent="c", t=T0 + timedelta(days=9))
    mem.add("x", id="x", parent="r", t=T0 + timedelta(days=3), meta={"name": 3})
    return mem


def test_labels_come_from_the_callable_then_meta_then_the_first_words():
    recs = list(small())
    assert memory_labels(recs) == ["root-name", "kid", "one two three four five…", "x"]
    assert memory_labels(recs, label=lambda r: r.id * 2) == ["rr", "cc", "gg", "xx"]
    with pytest.raises(TypeError, match="returned int"):
        memory_labels(recs, label=lambda r: 1)
    with pytest.raises(TypeError, match="callable"):
        memory_labels(recs, label="name")
    assert first_words("a  b\nc") == "a b c"
    assert first_words("w" * 60).endswith("…") and len(first_words("w" * 60)) == 40
    assert first_words("") == ""


def test_the_decay_in_words():
    assert describe_decay(policy_spec(NoDecay())) == "no decay"
    assert describe_decay(policy_spec(HalfLife(72))) == "half-life 72 h"
    assert describe_decay(policy_spec(Ebbinghaus(168, 0.5))) == "Ebbinghaus forgetting, stability 168 h (+50 % per access)"
    words = describe_decay(policy_spec(Product(HalfLife(24), ValidityWindow(0.1))))
    assert words == "half-life 24 h × validity window (weight 0.1 outside)"

    class Mine:
        def weight(self, now, times, access_counts, valid_from, valid_until):
            return times * 0 + 0.5

    assert describe_decay(policy_spec(Mine())) == "custom policy Mine"


def test_time_grid_runs_from_the_oldest_memory_to_now():
    g = time_grid(100.0, 100_000.0, 5)
    assert g[0] == 100.0 and g[-1] == 100_000.0 and len(g) == 5
    g = time_grid(100.0, 100_000.0, 5, future=1000.0)
    assert g[-1] == 101_000.0 and 100_000.0 in g
    assert time_grid(5000.0, 5000.0, 3)[0] == 5000.0 - 3600.0  # at least an hour
    with pytest.raises(ValueError, match="steps"):
        time_grid(0.0, 1.0, 1)
    with pytest.raises(ValueError, match="future"):
        time_grid(0.0, 1.0, 3, future=-1.0)


def test_pack_decodes_to_the_layout_and_the_policy_weights():
    mem = small()
    doc = pack(mem, timeline_steps=9)
    json.dumps(doc, allow_nan=False)
    assert doc["ids"] == mem.ids and doc["labels"] == ["root-name", "kid", "one two three four five…", ""]
    assert arr(doc, "parent", "<i4").tolist() == [-1, 0, 1, 0]
    rad, ang = arr(doc, "radius", "<f4").astype(float), arr(doc, "angle", "<u4").astype(float)
    theta = ang * 2 * math.pi / 2**32
    z = np.tanh(rad / 2) * np.exp(1j * theta)
    xy = structural_coordinates(mem).numpy()
    assert np.abs(z - (xy[:, 0] + 1j * xy[:, 1])).max() < 1e-7
    np.testing.assert_allclose(rad, mem.depths.numpy() * math.sqrt(mem.curvature), rtol=1e-7)
    times = doc["t0"] + arr(doc, "time", "<f4").astype(float)
    np.testing.assert_allclose(times, [r.t.timestamp() for r in mem], atol=1.0)
    tl = doc["timeline"]
    assert tl["seconds"][0] == T0.timestamp() and tl["seconds"][-1] == NOW.timestamp() == doc["now_s"]
    assert tl["index"] == len(tl["seconds"]) - 1
    w, born = page_weights(doc)
    assert born.tolist() == [0, 2, 8, 3]  # the first grid step at or after each creation (a day a step)
    for k, s in enumerate(tl["seconds"]):
        want = mem.time_weights(at_time=datetime.fromtimestamp(s, timezone.utc)).numpy()
        want[born > k] = 0  # not created yet
        assert np.abs(w[k] - want).max() <= 0.5 / 1000 + 1e-12
    assert "access" not in doc and doc["decay"] == {"words": "half-life 72 h", "constant": False}
    assert set(doc["meta"]) == {"0", "1", "3"}


def test_no_decay_has_no_weights_and_access_counts_travel():
    mem = small(NoDecay())
    mem.search("a child", k=1)
    doc = pack(mem)
    assert "weights" not in doc and doc["decay"]["constant"] is True
    assert arr(doc, "access", "<u4").sum() == sum(r.access_count for r in mem) > 0
    with pytest.raises(TypeError, match="timedelta"):
        pack(mem, future=3)


def test_the_page_stays_small_per_memory():
    mem = Memory(embedder=HashingEmbedder(dim=16), decay=HalfLife(72), clock=lambda: NOW)
    rng = np.random.default_rng(0)
    mem.add_many([{"text": f"memory {i} about topic {i % 97}", "id": f"m{i}",
                   "parent": None if i < 5 else f"m{int(rng.integers(0, i))}",
                   "t": T0 + timedelta(hours=float(rng.random() * 200))} for i in range(5000)])
    page = mem.inspect()
    per = len(page.encode()) / len(mem)
    assert per < 150, per
    data = re.search(r'<script type="application/json" id="hm-data">(.*?)</script>', page, flags=re.S).group(1)
    assert len(json.loads(data)["ids"]) == 5000


def test_the_weights_printed_agree_with_table_and_later_memories_weigh_nothing():
    mem = Memory(embedder=HashingEmbedder(dim=16), decay=HalfLife(24 * 30), clock=lambda: NOW)
    rng = np.random.default_rng(1)
    mem.add_many([{"text": f"note {i}", "id": f"n{i}", "t": NOW - timedelta(days=float(rng.random() * 365))}
                  for i in range(2000)])
    doc = pack(mem, timeline_steps=21)
    w, born = page_weights(doc)
    now = w[doc["timeline"]["index"]]
    shown = [f"{v:.3f}" for v in now]  # what panels.js prints: fmt(weight(i), 3)
    assert shown == [f"{r['weight']:.3f}" for r in mem.table()]
    # The first step is the oldest memory's time: only it exists; the rest weigh 0 (hidden), not 1.
    times = np.array([r.t.timestamp() for r in mem])
    assert born.tolist() == np.searchsorted(doc["timeline"]["seconds"], times).tolist()
    assert (born == 0).sum() == 1 and w[0][born > 0].max() == 0
    for k, s in enumerate(doc["timeline"]["seconds"]):
        assert ((born <= k) == (times <= s)).all()
