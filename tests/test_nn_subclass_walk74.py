"""Subclassing HyperbolicMemory: a subclass's extra state composes with the slot ids
(``super().get_extra_state()`` under ``SLOT_IDS_KEY``)."""

from __future__ import annotations

import io

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
