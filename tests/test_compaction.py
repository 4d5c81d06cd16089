"""Removing rows in place (``hypermem.store.compaction``): the runs between removed blocks
move down exactly as a gather of the kept rows would put them, through the buffer or not."""

from __future__ import annotations

import random

import pytest
import torch

from hypermem import HashingEmbedder, Memory
from hypermem.store import compaction
from hypermem.store.compaction import delete_blocks, removed_blocks, shift_rows


def test_removed_blocks_are_the_maximal_runs():
    assert removed_blocks(torch.tensor([0, 1, 2, 5, 7, 8], dtype=torch.long)) == [(0, 3), (5, 6), (7, 9)]
    assert removed_blocks(torch.tensor([], dtype=torch.long)) == []


@pytest.mark.parametrize("buffer_bytes,layout", [(compaction.BUFFER_BYTES, "contiguous"),
                                                  (compaction.BUFFER_BYTES, "strided"), (64, "strided")])
def test_shift_rows_equals_a_gather_of_the_kept_rows(monkeypatch, buffer_bytes, layout):
    """A contiguous CPU column moves by memmove; a strided one (as a CUDA column would) through
    the buffer, 64 bytes: many trips through it."""
    monkeypatch.setattr(compaction, "BUFFER_BYTES", buffer_bytes)
    rng = random.Random(0)
    for trial in range(40):
        n = rng.randrange(1, 300)
        cap = n + rng.randrange(0, 20)
        shape = (cap, rng.choice([1, 3, 8])) if trial % 3 else (cap,)
        t = torch.randn(*shape, dtype=rng.choice([torch.float32, torch.float64]))
        if layout == "strided":   # every other element of a wider tensor: not contiguous
            t = torch.randn(*shape[:-1], shape[-1] * 2, dtype=t.dtype)[..., ::2]
        assert t.is_contiguous() == (layout == "contiguous")
        if trial == 0 and layout == "contiguous":
            t = torch.cat([torch.zeros_like(t[:2]), t])[2:]   # a column that starts past its storage's first byte
            assert t.storage_offset() == 2 * t[:1].numel()
        keep = torch.tensor([rng.random() > 0.2 for _ in range(n)])
        end = rng.randrange(0, n + 1)                                 # a mirror valid up to `end`
        blocks = removed_blocks((~keep).nonzero().squeeze(1))
        want = t[:end][keep[:end]].clone()
        values = list(range(n))
        delete_blocks(values, blocks)
        assert values == keep.nonzero().squeeze(1).tolist()
        kept = shift_rows(t, blocks, end)
        assert kept == int(keep[:end].sum()) and torch.equal(t[:kept], want)


@pytest.mark.parametrize("dim", [8, 256])
def test_a_subtree_scattered_over_many_blocks_is_removed_by_a_gather(dim):
    """The lists gather; the wide columns of ``dim=256`` (2 KB rows) still move their runs."""
    m = Memory(embedder=HashingEmbedder(dim=dim))
    m.add("the hub", id="hub")
    m.add_many([{"text": f"item {i}", "id": f"i{i}", **({"parent": "hub"} if i % 2 else {})} for i in range(300)])
    m.update("i3", text="rewritten three")
    m.update("i200", text="rewritten two hundred")
    before = {i: (m.get(i).text, m.state.direction[m.state.row[i]].clone()) for i in m.state.ids[: m.state.n]}
    gone = m.remove("hub", cascade=True)
    row_before = {i: r for r, i in enumerate(before)}
    blocks = removed_blocks(torch.tensor(sorted(row_before[i] for i in gone)))
    assert not compaction.moves_runs(blocks, 301)
    assert compaction.moves_column(m.state.direction, blocks, 301) == (dim == 256)
    assert not compaction.moves_column(m.state.depth, blocks, 301)
    assert [m.state.row[i] for i in m.state.ids[: m.state.n]] == list(range(m.state.n)) == list(range(150))
    for i in m.state.ids[: m.state.n]:
        assert m.get(i).text == before[i][0] and torch.equal(m.state.direction[m.state.row[i]], before[i][1])
    assert m.state.records.rewrites == [-1, m.state.row["i200"]] and m.get("i200").text == "rewritten two hundred"


def _tree():
    m = Memory(embedder=HashingEmbedder(dim=8))
    m.add_many([{"text": f"memory {i}", "id": f"m{i}", **({"parent": f"m{i // 4}"} if i % 5 == 4 else {})}
                for i in range(60)])
    return m


def test_remove_many_equals_a_loop_of_remove_in_one_compaction(monkeypatch):
    a, b = _tree(), _tree()
    ids = ["m3", "m40", "m10", "m57", "m1"]            # m1 has a child (m4): with cascade it goes too
    gone = [g for i in ids for g in b.remove(i, cascade=True)]
    calls = []
    keep_rows = type(a.state).keep_rows
    monkeypatch.setattr(type(a.state), "keep_rows", lambda self, keep: calls.append(1) or keep_rows(self, keep))
    assert a.remove_many(ids, cascade=True) == gone and calls == [1]
    assert a.ids == b.ids and all(torch.equal(a.point(i), b.point(i)) for i in a.ids)
    assert {p: a.children(p) for p in a.ids} == {p: b.children(p) for p in b.ids}
    assert a.remove_many([]) == []


def test_remove_many_checks_every_id_before_removing_any():
    m = _tree()
    before = list(m.ids)
    with pytest.raises(KeyError, match="nope"):
        m.remove_many(["m5", "nope"])
    with pytest.raises(ValueError, match="'m1' has 1 children"):
        m.remove_many(["m5", "m1"])                    # m1's child m4 is not named
    assert m.ids == before
    assert m.remove_many(["m6", "m24", "m24"]) == ["m6", "m24"]   # a parent with its named child, an id twice
    assert "m6" not in m and "m24" not in m and len(m) == 58


def test_remove_many_through_durable_storage(tmp_path):
    path = tmp_path / "m.db"
    with Memory.open(path, embedder=HashingEmbedder(dim=8)) as m:
        m.add_many([{"text": f"memory {i}", "id": f"m{i}", **({"parent": "m0"} if i in (5, 6) else {})}
                    for i in range(20)])
        assert m.remove_many(["m0", "m9"], cascade=True) == ["m0", "m5", "m6", "m9"]
    again = Memory.open(path, embedder=HashingEmbedder(dim=8))
    assert again.ids == [f"m{i}" for i in range(20) if i not in (0, 5, 6, 9)]
    again.close()
