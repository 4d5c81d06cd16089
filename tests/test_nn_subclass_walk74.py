"""Subclassing HyperbolicMemory (docs/nn.md, "Subclassing"): a subclass's extra state composes
with the slot ids (``super().get_extra_state()`` under ``SLOT_IDS_KEY``), and a subclass's own
per-slot tables (``slot_tables``) follow ``append`` / ``remove`` / a load of another slot count;
a table left at the wrong row count is refused by name instead of read misaligned."""

from __future__ import annotations

import io
import pathlib
import re

import pytest
import torch

from hypermem.nn import HyperbolicMemory
from hypermem.nn.module_state import SLOT_IDS_KEY

D = torch.float64


def _keys(n: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(n)
    return 0.3 * torch.nn.functional.normalize(torch.randn(n, 4, generator=g, dtype=D), dim=1)


class Tagged(HyperbolicMemory):
    """Extra state of its own, composed with the base's (the documented pattern)."""

    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.tag = "v1"

    def get_extra_state(self):
        return {SLOT_IDS_KEY: super().get_extra_state(), "tag": self.tag}

    def set_extra_state(self, state):
        super().set_extra_state(state)
        self.tag = state["tag"]


class Priority(HyperbolicMemory):
    """A per-slot buffer of its own, declared."""

    slot_tables = HyperbolicMemory.slot_tables + ("priority",)

    def __init__(self, keys, values=None, **kw):
        super().__init__(keys, values, **kw)
        self.register_buffer("priority", torch.arange(keys.shape[0], dtype=D))


class Undeclared(HyperbolicMemory):
    def __init__(self, keys, values=None, **kw):
        super().__init__(keys, values, **kw)
        self.register_buffer("priority", torch.ones(keys.shape[0], dtype=D))


def _roundtrip(sd):
    buf = io.BytesIO()
    torch.save(sd, buf)
    buf.seek(0)
    return torch.load(buf, weights_only=True)


def test_a_subclass_extra_state_composes_with_the_slot_ids():
    m = Tagged(_keys(3), ids=["a", "b", "c"])
    m.append(_keys(1), ids=["d"])
    m.tag = "v2"
    sd = _roundtrip(m.state_dict())
    assert set(sd["_extra_state"]) == {SLOT_IDS_KEY, "tag"}
    fresh = Tagged(_keys(3))
    fresh.load_state_dict(sd)                           # strict; a grown checkpoint, too
    assert fresh.tag == "v2" and fresh.ids == ["a", "b", "c", "d"] and len(fresh) == 4
    assert int(fresh.index_of("d")) == 3
    base = HyperbolicMemory(_keys(3))
    base.load_state_dict(sd)                            # the base takes the ids, ignores the rest
    assert base.ids == ["a", "b", "c", "d"]


def test_a_base_checkpoint_loads_into_a_subclass_keeping_its_own_entries():
    m = HyperbolicMemory(_keys(3), ids=["x", "y", "z"])
    sd = m.state_dict()
    assert sd["_extra_state"].dtype == torch.uint8     # the base's format is unchanged
    fresh = Tagged(_keys(3))
    fresh.tag = "mine"
    fresh.load_state_dict(sd)
    assert fresh.ids == ["x", "y", "z"] and fresh.tag == "mine"


def test_a_subclass_that_drops_the_ids_is_refused_at_save_and_load():
    class Bare(HyperbolicMemory):  # the PyTorch pattern without super(): the ids would be lost
        def get_extra_state(self):
            return {"tag": 1}

        def set_extra_state(self, state):
            pass

    with pytest.raises(TypeError, match="super\\(\\).get_extra_state"):
        Bare(_keys(3)).state_dict()
    sd = HyperbolicMemory(_keys(3)).state_dict()
    sd["_extra_state"] = {"tag": 1}
    fresh = HyperbolicMemory(_keys(3))
    before = fresh.keys.detach().clone()
    with pytest.raises(ValueError, match=SLOT_IDS_KEY):
        fresh.load_state_dict(sd)
    assert torch.equal(fresh.keys, before)


def test_declared_per_slot_tables_follow_append_and_remove():
    m = Priority(_keys(4))
    m.append(_keys(2), ids=["p", "q"], slot_rows={"priority": torch.tensor([7.0, 8.0])})
    assert m.priority.tolist() == [0, 1, 2, 3, 7, 8]
    m.remove(["1", "p"])
    assert m.priority.tolist() == [0, 2, 3, 8] and m.ids == ["0", "2", "3", "q"]
    before = m.priority.clone()
    with pytest.raises(ValueError, match="slot_rows=\\{'priority'"):
        m.append(_keys(1))                             # no rows and no default: nothing changes
    assert len(m) == 4 and torch.equal(m.priority, before)
    with pytest.raises(ValueError, match="must have shape \\(1,\\)"):
        m.append(_keys(1), slot_rows={"priority": torch.ones(2)})
    with pytest.raises(ValueError, match="not a per-slot table"):
        m.append(_keys(1), slot_rows={"priority": torch.ones(1), "other": torch.ones(1)})
    assert len(m) == 4


def test_a_default_for_new_rows_and_a_trained_table_keep_their_parameter():
    class Learned(HyperbolicMemory):
        slot_tables = HyperbolicMemory.slot_tables + ("gain",)

        def __init__(self, keys, **kw):
            super().__init__(keys, **kw)
            self.gain = torch.nn.Parameter(torch.ones(keys.shape[0], 2, dtype=D))

        def new_slot_rows(self, name, m):
            return torch.full((m, 2), 0.5, dtype=D)

    m = Learned(_keys(3))
    gain = m.gain
    opt = torch.optim.Adam(m.parameters(), lr=0.1)
    (m(_keys(2) * 0.5).read.sum() + m.gain.sum()).backward()
    opt.step()
    m.append(_keys(2), optimizer=opt)
    assert m.gain is gain and m.gain.shape == (5, 2) and torch.equal(m.gain[3:], torch.full((2, 2), 0.5, dtype=D))
    assert opt.state[m.gain]["exp_avg"].shape == (5, 2)
    (m(_keys(2) * 0.5).read.sum() + m.gain.sum()).backward()
    opt.step()                                          # the optimizer state followed


def test_a_grown_checkpoint_resizes_declared_tables_on_load():
    m = Priority(_keys(3))
    m.append(_keys(2), slot_rows={"priority": torch.tensor([5.0, 6.0])})
    fresh = Priority(_keys(3))
    fresh.load_state_dict(_roundtrip(m.state_dict()))
    assert len(fresh) == 5 and fresh.priority.tolist() == [0, 1, 2, 5, 6]


def test_an_undeclared_per_slot_buffer_warns_at_append_and_is_refused_at_a_grown_load():
    m = Undeclared(_keys(3))
    with pytest.warns(UserWarning, match="Undeclared.priority has one row per slot .3. but is not in slot_tables"):
        m.append(_keys(1))
    grown = Undeclared(_keys(4))
    sd = grown.state_dict()
    fresh = Undeclared(_keys(3))
    before = fresh.keys.detach().clone()
    with pytest.raises(ValueError, match="'priority' is not in slot_tables"):
        fresh.load_state_dict(sd)
    assert len(fresh) == 3 and torch.equal(fresh.keys, before) and fresh.priority.shape == (3,)


def test_a_declared_table_of_the_wrong_row_count_is_refused_at_read_and_load():
    class Wrong(Priority):
        def __init__(self, keys, **kw):
            super().__init__(keys, **kw)
            self.priority = torch.ones(keys.shape[0] - 1, dtype=D)

    m = Wrong(_keys(4))
    with pytest.raises(ValueError, match=r"Wrong.priority has shape \(3,\) but the memory has 4 slots"):
        m(_keys(2) * 0.5, k=2)
    with pytest.raises(ValueError, match="Wrong.priority has shape"):
        m(_keys(2) * 0.5)
    ok = Priority(_keys(4))
    ok(_keys(2) * 0.5)
    ok.priority = torch.ones(2, dtype=D)                # a write outside append / remove
    ok.invalidate()
    with pytest.raises(ValueError, match="Priority.priority has shape"):
        ok(_keys(2) * 0.5)
    sd = {k: v for k, v in Priority(_keys(4)).state_dict().items() if k != "priority"}
    with pytest.raises(ValueError, match="Priority.priority has shape"):
        ok.load_state_dict(sd, strict=False)


def test_slot_tables_must_keep_the_bases():
    class Dropped(HyperbolicMemory):
        slot_tables = ("keys", "values")

    m = Dropped(_keys(3))
    with pytest.raises(TypeError, match="leaves out"):
        m.append(_keys(1))


def test_the_documented_subclass_example_runs():
    doc = (pathlib.Path(__file__).parent.parent / "docs" / "nn.md").read_text(encoding="utf-8")
    scope: dict = {}
    exec(compile(re.search(r"## Subclassing.*?```python\n(.*?)```", doc, re.S)[1], "docs/nn.md", "exec"), scope)
    loaded = scope["loaded"]
    assert loaded.ids == scope["memory"].ids and loaded.tag == "trained"
    assert torch.equal(loaded.priority, scope["memory"].priority)
