"""The slot ids of a HyperbolicMemory travel in its ``state_dict`` (``_extra_state``): a layer
rebuilt and loaded finds its slots by id again, through ``torch.save`` / ``weights_only`` and
safetensors; an old state dict without them still loads; bad ids are refused before anything
is loaded."""

from __future__ import annotations

import io
import json

import pytest
import torch
from safetensors.torch import load as st_load
from safetensors.torch import save as st_save

from hypermem.nn import HyperbolicMemory

K = 0.3 * torch.eye(4, dtype=torch.float64)


def _written() -> HyperbolicMemory:
    m = HyperbolicMemory(K[:3], torch.eye(3, 4, dtype=torch.float64), ids=["cat", "dog", "owl"])
    m.append(0.2 * K[3:], torch.ones(1, 4, dtype=torch.float64), ids=["émeu"])
    m.remove(["dog"])
    return m


def test_a_rebuilt_layer_finds_its_slots_by_id_after_load_state_dict():
    m = _written()
    assert m.ids == ["cat", "owl", "émeu"]
    fresh = HyperbolicMemory(torch.zeros(3, 4, dtype=torch.float64), torch.zeros(3, 4, dtype=torch.float64))
    assert fresh.ids == ["0", "1", "2"]
    fresh.load_state_dict(m.state_dict())
    assert fresh.ids == ["cat", "owl", "émeu"]
    assert fresh.index_of(["émeu", "cat"]).tolist() == [2, 0]
    assert torch.equal(fresh.keys[fresh.index_of(["émeu"])[0]], m.keys[2])


def test_the_ids_survive_weights_only_torch_load_and_safetensors():
    m = _written()
    buf = io.BytesIO()
    torch.save(m.state_dict(), buf)
    buf.seek(0)
    sd = torch.load(buf, weights_only=True)
    sd2 = st_load(st_save(m.state_dict()))
    for state in (sd, sd2):
        fresh = HyperbolicMemory(torch.zeros(3, 4, dtype=torch.float64), torch.zeros(3, 4, dtype=torch.float64))
        fresh.load_state_dict(state)
        assert fresh.ids == m.ids


def test_a_layer_of_another_size_with_inconsistent_slot_tensors_reports_torchs_size_mismatch_and_keeps_its_ids():
    # a layer of another size takes the checkpoint's slot count (tests/test_nn_walk67.py), but
    # only when every per-slot tensor has it: values of another row count keep torch's error
    m = _written()
    sd = m.state_dict()
    sd["values"] = sd["values"][:2]
    small = HyperbolicMemory(torch.zeros(1, 4, dtype=torch.float64), torch.zeros(1, 4, dtype=torch.float64))
    for assign in (False, True):
        with pytest.raises(RuntimeError, match="size mismatch for keys"):
            small.load_state_dict(sd, assign=assign)
        assert small.ids == ["0"] and len(small) == 1


def test_a_state_dict_saved_without_ids_still_loads_with_the_layers_own():
    m = _written()
    old = {k: v for k, v in m.state_dict().items() if k != "_extra_state"}
    fresh = HyperbolicMemory(torch.zeros(3, 4, dtype=torch.float64), torch.zeros(3, 4, dtype=torch.float64),
                             ids=["a", "b", "c"])
    fresh.load_state_dict(old)   # strict: no missing key
    assert fresh.ids == ["a", "b", "c"] and torch.equal(fresh.keys, m.keys)


def _ids(v) -> torch.Tensor:
    return torch.tensor(list(json.dumps(v).encode()), dtype=torch.uint8)


@pytest.mark.parametrize("extra,match", [
    (_ids(["a", "b"]), "got 2 ids for 3 slots"),
    (_ids(["a", "a", "b"]), "distinct"),
    (_ids({"ids": ["a"]}), "list of strings"),
    (torch.tensor([0xFF, 0xFE], dtype=torch.uint8), "UTF-8 JSON"),
    (torch.zeros(3), "uint8"),
    (["a", "b", "c"], "uint8"),
])
def test_bad_ids_are_refused_before_anything_is_loaded(extra, match):
    m = _written()
    sd = m.state_dict()
    sd["_extra_state"] = extra
    fresh = HyperbolicMemory(0.1 * K[:3], torch.zeros(3, 4, dtype=torch.float64))
    before = fresh.keys.detach().clone()
    with pytest.raises(ValueError, match=match) as err:
        fresh.load_state_dict(sd)
    assert "_extra_state" in str(err.value)
    assert fresh.ids == ["0", "1", "2"] and torch.equal(fresh.keys, before)
