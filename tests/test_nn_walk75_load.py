"""Walk 75 of the nn layers: a ``state_dict`` of a memory built with optional per-slot tables
(timestamps, values, depth, importance) that the loading layer lacks, or the reverse, or of
another dimension, is refused by torch's error with the cause and the fix named; ``strict=False``
still loads it and returns torch's key lists."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from hypermem.nn import HyperbolicMemory

D = 4


def _keys(n: int, dim: int = D, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return 0.5 * F.normalize(torch.randn(n, dim, generator=g, dtype=torch.float64), dim=1)


def _timed(n: int = 5, **kw) -> HyperbolicMemory:
    return HyperbolicMemory(_keys(n), timestamps=torch.full((n,), 1.7e9), access_counts=torch.arange(n * 1.0), **kw)


def test_timestamps_into_a_layer_without_them_names_the_cause_and_the_fix():
    with pytest.raises(RuntimeError) as e:
        HyperbolicMemory(_keys(5, seed=1)).load_state_dict(_timed().state_dict())
    msg = str(e.value)
    assert 'Unexpected key(s) in state_dict: "timestamps"' in msg   # torch's line stays
    assert "saved from a memory with timestamps" in msg and "timestamps=" in msg and "strict=False" in msg
    assert "access_counts" in msg and "access_counts=" in msg


def test_a_layer_with_timestamps_loading_a_state_without_them_names_the_cause_and_the_fix():
    with pytest.raises(RuntimeError) as e:
        _timed().load_state_dict(HyperbolicMemory(_keys(5, seed=1)).state_dict())
    msg = str(e.value)
    assert 'Missing key(s) in state_dict: "timestamps"' in msg
    assert "saved from a memory without timestamps" in msg and "strict=False" in msg


def test_strict_false_still_loads_and_returns_torchs_key_lists():
    plain, timed = HyperbolicMemory(_keys(5, seed=1)), _timed()
    out = plain.load_state_dict(_timed().state_dict(), strict=False)
    assert out.unexpected_keys == ["timestamps", "access_counts"] and out.missing_keys == []
    assert repr(out) == "_IncompatibleKeys(missing_keys=[], unexpected_keys=['timestamps', 'access_counts'])"
    assert torch.equal(plain.keys.detach(), _keys(5)) and plain.timestamps is None
    own = timed.timestamps.clone()
    out = timed.load_state_dict(HyperbolicMemory(_keys(5, seed=1)).state_dict(), strict=False)
    assert out.missing_keys == ["timestamps", "access_counts"] and out.unexpected_keys == []
    assert torch.equal(timed.keys.detach(), _keys(5, seed=1)) and torch.equal(timed.timestamps, own)


def test_inside_a_model_the_hint_names_the_prefixed_key():
    class Model(nn.Module):
        def __init__(self, mem):
            super().__init__()
            self.mem = mem

    with pytest.raises(RuntimeError, match=r'"mem\.timestamps".*saved from a memory with timestamps'):
        Model(HyperbolicMemory(_keys(5))).load_state_dict(Model(_timed()).state_dict())


@pytest.mark.parametrize("table,kw,with_it", [
    ("values", {"values": torch.ones(5, 3, dtype=torch.float64)}, "with values"),
    ("depth", {"depth": torch.ones(5, dtype=torch.float64)}, "with depth"),
    ("importance", {"importance": torch.ones(5, dtype=torch.float64)}, "with importance"),
])
def test_the_other_optional_tables_name_the_cause_both_ways(table, kw, with_it):
    with pytest.raises(RuntimeError, match=rf'"{table}".*saved from a memory {with_it}.*{table}=.*strict=False'):
        HyperbolicMemory(_keys(5)).load_state_dict(HyperbolicMemory(_keys(5), **kw).state_dict())
    with pytest.raises(RuntimeError, match=rf'"{table}".*saved from a memory without {table}.*strict=False'):
        HyperbolicMemory(_keys(5), **kw).load_state_dict(HyperbolicMemory(_keys(5)).state_dict())


def test_another_dimension_names_the_dimension():
    with pytest.raises(RuntimeError) as e:
        HyperbolicMemory(_keys(5, dim=6)).load_state_dict(HyperbolicMemory(_keys(5)).state_dict())
    msg = str(e.value)
    assert "size mismatch for keys" in msg   # torch's line stays
    assert "4-dimensional" in msg and "6" in msg and "keys of dimension 4" in msg
    with pytest.raises(RuntimeError, match=r"values of dimension 2.*this layer's 3"):
        HyperbolicMemory(_keys(5), torch.ones(5, 3)).load_state_dict(
            HyperbolicMemory(_keys(5), torch.ones(5, 2)).state_dict())


def test_a_slot_count_that_cannot_follow_says_which_table_is_missing():
    with pytest.raises(RuntimeError) as e:
        _timed(5).load_state_dict(HyperbolicMemory(_keys(8)).state_dict(), strict=False)
    msg = str(e.value)
    assert "size mismatch for keys" in msg and "'timestamps' is not in the state_dict" in msg


def test_learnable_or_fixed_curvature_and_either_dtype_load_the_checkpoints_values():
    """Pins what already worked: curvature and dtype are data of the checkpoint, not its layout."""
    fixed = HyperbolicMemory(_keys(5), curvature=0.5)
    learned = HyperbolicMemory(_keys(5, seed=2), curvature=2.0, learn_curvature=True)
    learned.load_state_dict(fixed.state_dict())
    assert learned.curvature == pytest.approx(0.5) and learned.ball.isp_c.requires_grad
    fixed.load_state_dict(HyperbolicMemory(_keys(5, seed=2), curvature=2.0, learn_curvature=True).state_dict())
    assert fixed.curvature == pytest.approx(2.0) and not fixed.ball.isp_c.requires_grad
    f32 = HyperbolicMemory(_keys(5).float())
    f32.load_state_dict(HyperbolicMemory(_keys(5, seed=2)).state_dict())
    assert f32.keys.dtype == torch.float32 and torch.allclose(f32.keys.double(), _keys(5, seed=2), atol=1e-6)
