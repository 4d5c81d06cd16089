"""The nearest-neighbour floor of ``parent="auto"`` (``hypermem.store.nearest_floor``): a text
nearer to no memory than the store's own memories are to theirs stays a root, and says why."""

from __future__ import annotations

import math

import pytest
import torch

import hypermem.store.nearest_floor as nf
from hypermem import HashingEmbedder, Memory


def test_the_floor_is_the_quantile_of_the_leave_one_out_nearest_cosine():
    E = torch.tensor([[1.0, 0.0], [1.0, 0.1], [0.0, 1.0], [0.2, 1.0]], dtype=torch.float64)
    U = E / E.norm(dim=1, keepdim=True)
    nn = [float(U[0] @ U[1]), float(U[1] @ U[0]), float(U[2] @ U[3]), float(U[3] @ U[2])]
    rows_seen = []

    def cosine_rows(rows):   # leave-one-out nearest cosines of these rows
        rows_seen.append(rows.tolist())
        c = U[rows] @ U.T
        c[torch.arange(len(rows)), rows] = -math.inf
        return c.max(dim=1).values

    old = nf.FLOOR_MIN_MEMORIES
    nf.FLOOR_MIN_MEMORIES = 2
    try:
        got = nf.nearest_floor(4, cosine_rows, q=0.5, sample=10, chunk=3)
    finally:
        nf.FLOOR_MIN_MEMORIES = old
    assert rows_seen == [[0, 1, 2], [3]]                              # asked a chunk at a time
    assert got == pytest.approx(float(torch.quantile(torch.tensor(nn, dtype=torch.float64), 0.5)))
    assert nf.nearest_floor(4, cosine_rows, q=0.5) == -math.inf       # fewer than FLOOR_MIN_MEMORIES
    monkeypatch_free = nf.FLOOR_QUANTILE
    nf.FLOOR_QUANTILE = None
    try:
        assert nf.nearest_floor(100, cosine_rows) == -math.inf              # no quantile: no floor
    finally:
        nf.FLOOR_QUANTILE = monkeypatch_free


def test_stale_after_ten_percent():
    assert nf.stale(100, None) and not nf.stale(100, 100) and not nf.stale(110, 100)
    assert nf.stale(111, 100) and nf.stale(89, 100)


def _filed() -> Memory:
    m = Memory(embedder=HashingEmbedder(dim=256))
    m.add_many([{"id": f"k{j}", "text": f"kitchen appliance {w}"} for j, w in enumerate(["oven", "fridge", "kettle"])])
    m.add_many([{"id": f"n{j}", "text": f"kitchen appliance {w} note {j} cleaning schedule",
                 "parent": f"k{j % 3}"} for j, w in enumerate(["oven", "fridge", "kettle"] * 10)])
    return m


def test_a_text_from_elsewhere_stays_a_root_and_says_why(monkeypatch):
    m = _filed()
    floor = m.suggester.floor()
    assert 0 < floor < 1
    near = m.add("kitchen appliance kettle note cleaning schedule descale", parent="auto")
    assert m.parent(near) == "k2"
    assert m.get(near).meta["auto_parent"]["nearest"] >= floor   # kept on a placed memory too
    far = m.add("zebra migrations cross savannah rivers yearly", parent="auto")
    info = m.get(far).meta["auto_parent"]
    assert m.parent(far) is None and info["parent"] is None and info["reason"].startswith("below the floor")
    assert info["nearest"] < info["floor"] == pytest.approx(floor)
    assert info["suggested"]                                          # the candidates it would have had
    monkeypatch.setattr(nf, "FLOOR_QUANTILE", None)                   # no floor: placed as before
    again = m.add("zebra migrations cross savannah rivers yearly", parent="auto")
    assert m.parent(again) is not None and "floor" not in m.get(again).meta["auto_parent"]


def test_roots_from_elsewhere_neither_lower_the_floor_nor_let_their_like_in():
    """The floor and a text's nearest memory count the filed memories only: texts from elsewhere
    left roots do not lower it, and a second text like them (or the same) stays a root too."""
    m = _filed()
    floor = m.suggester.floor()
    for j in range(12):   # more than a tenth of the store: the floor is read again
        m.add(f"zebra migrations cross savannah rivers yearly {j}", parent="auto")
    assert m.parent(m.ids[-1]) is None and m.suggester.floor() == pytest.approx(floor)
    again = m.add("zebra migrations cross savannah rivers yearly 3", parent="auto")
    info = m.get(again).meta["auto_parent"]
    assert m.parent(again) is None and info["nearest"] < info["floor"]


def test_the_floor_is_read_again_only_when_the_store_grew_by_a_tenth(monkeypatch):
    m = _filed()
    calls = []
    real = nf.nearest_floor
    monkeypatch.setattr(nf, "nearest_floor", lambda *a, **k: calls.append(1) or real(*a, **k))
    m.add("kitchen appliance oven note 99", parent="auto")
    m.add("kitchen appliance oven note 98", parent="auto")
    assert len(calls) == 1                                            # 33 -> 35 memories: kept
    m.add_many([{"text": f"kitchen appliance fridge extra {j}", "parent": "k1"} for j in range(5)])
    m.add("kitchen appliance oven note 97", parent="auto")
    assert len(calls) == 2                                            # 35 -> 40: more than 10%


def test_the_pair_score_path_of_a_hierarchy_encoder_keeps_the_floor_too(tmp_path, monkeypatch):
    """A store with a hierarchy encoder and no tree places by the pair score; the floor comes
    first there as well (a floor at the 100% quantile: nearly every text is below it)."""
    pytest.importorskip("sentence_transformers")
    from encoder_helpers import EDGES, NAMES, tiny_model_folder

    from hypermem.hierarchy.encoder_training import fit_hierarchy_encoder

    enc = fit_hierarchy_encoder(EDGES, NAMES, base=str(tiny_model_folder(tmp_path / "tiny")), geometry="poincare",
                                epochs=1, batch_size=8, validate_every=4, validation_edges=EDGES[:2], seed=1)
    enc.threshold = -math.inf   # attach whatever the pair score picks, unless the floor says no
    m = Memory(embedder=enc)
    m.add_many([{"text": t} for t in sorted(set(NAMES.values()))[:30]])
    assert len(m) >= nf.FLOOR_MIN_MEMORIES
    monkeypatch.setattr(nf, "FLOOR_QUANTILE", 1.0)
    i = m.add("a text from somewhere else entirely", parent="auto")
    info = m.get(i).meta["auto_parent"]
    assert info["by"] == "subsumption" and info["parent"] is None and info["nearest"] < info["floor"]
    monkeypatch.setattr(nf, "FLOOR_QUANTILE", None)
    j = m.add("a text from somewhere else entirely", parent="auto")
    assert m.get(j).meta["auto_parent"]["by"] == "subsumption" and m.parent(j) is not None
