"""What a read of HyperbolicMemory checks, and how often it asks the host: queries once a
read, exclusions named when out of range, huge features kept in their direction."""

from __future__ import annotations

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

import hypermem.nn.hyperbolic_memory as hm
from hypermem.geometry.numerics import safe_norm
from hypermem.nn import BallEncoder, HyperbolicMemory


class HostSyncs(TorchDispatchMode):
    """Counts the reads of a tensor's value on the host (``.item()``, ``bool()``, ``int()``)."""

    def __init__(self):
        super().__init__()
        self.n = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func is torch.ops.aten._local_scalar_dense.default:
            self.n += 1
        return func(*args, **(kwargs or {}))


def _memory(metric: str, **kw) -> tuple[HyperbolicMemory, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    keys = torch.nn.functional.normalize(torch.randn(300, 8, generator=g), dim=1) * 0.5
    q = torch.nn.functional.normalize(torch.randn(16, 8, generator=g), dim=1) * 0.4
    return HyperbolicMemory(keys, torch.randn(300, 3, generator=g), metric=metric, **kw), q


# ---------------------------------------------------------------------------- defect 7
@pytest.mark.parametrize("metric", ["hyperbolic", "shell"])
@pytest.mark.parametrize("k", [None, 5])
def test_a_read_checks_its_queries_with_one_host_sync(monkeypatch, metric, k):
    """The layer's own syncs, the chunked search's (hypermem.index) left out."""
    mem, q = _memory(metric, temperature=0.3)
    counter = HostSyncs()
    search = hm.exact_topk

    def uncounted_search(*args, **kwargs):
        before = counter.n
        out = search(*args, **kwargs)
        counter.n = before
        return out

    monkeypatch.setattr(hm, "exact_topk", uncounted_search)
    mem(q, k=k)  # fills the key cache (one check of the keys per change)
    with counter:
        mem(q, k=k)
    assert counter.n == 1
    quiet, _ = _memory(metric, temperature=0.3, check_finite=False)
    quiet(q, k=k)
    counter.n = 0
    with counter:
        quiet(q, k=k)
    assert counter.n == 0


def test_check_finite_false_still_checks_shapes_and_the_default_names_bad_queries():
    mem, q = _memory("hyperbolic")
    bad = q.clone()
    bad[3, 0] = float("nan")
    with pytest.raises(ValueError, match="query #3 has NaN coordinates"):
        mem(bad, k=2)
    bad[3] = 0.0
    bad[5, 0] = 2.0
    with pytest.raises(ValueError, match="query #5 is not inside the Poincaré ball"):
        mem(bad)
    quiet, _ = _memory("hyperbolic", check_finite=False)
    with pytest.raises(ValueError, match=r"queries must have shape \(batch, 8\)"):
        quiet(q[:, :4])


# ---------------------------------------------------------------------------- defect 10
@pytest.mark.parametrize("bad", [15, 300, -5])
@pytest.mark.parametrize("k", [None, 5])
def test_out_of_range_exclusions_raise_the_same_clear_error(bad, k):
    mem, q = _memory("hyperbolic")
    ex = torch.zeros(16, dtype=torch.long)
    ex[4] = bad if bad != 15 else 315
    with pytest.raises(IndexError, match=rf"exclude must be slot indices in \[-1, 299\] \(-1: none\), got {ex[4]}"):
        mem(q, k=k, exclude=ex)
    with pytest.raises(IndexError, match="exclude must be slot indices"):
        mem.select(q, 5, exclude=ex)


def test_valid_exclusions_still_exclude():
    mem, q = _memory("hyperbolic")
    top = mem(q, k=3).indices
    ex = torch.stack([top[:, 0], torch.full_like(top[:, 0], -1)], 1)
    out = mem(q, k=3, exclude=ex)
    assert not bool((out.indices == top[:, :1]).any())
    full = mem(q, exclude=ex)
    assert bool((full.weights.gather(1, top[:, :1]) == 0).all())


# ---------------------------------------------------------------------------- defect 9
@pytest.mark.parametrize(("dtype", "big"), [(torch.float32, 1e20), (torch.float64, 1e155)])
def test_huge_features_keep_their_direction(dtype, big):
    enc = BallEncoder(4, 4, init="identity", dtype=dtype)
    x = torch.tensor([[big, 0.0, 0.0, 0.0], [0.0, big, big, 0.0]], dtype=dtype)
    out = enc(x)
    unit = x / big
    assert torch.allclose(out / out.norm(dim=1, keepdim=True), unit / unit.norm(dim=1, keepdim=True))
    assert bool((out.norm(dim=1) > 0.99).all())


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_safe_norm_is_the_norm_with_a_finite_gradient_at_the_origin(dtype):
    x = torch.randn(50, 7, dtype=dtype)
    assert torch.allclose(safe_norm(x), x.norm(dim=-1), rtol=1e-6)
    z = torch.zeros(3, 4, dtype=dtype, requires_grad=True)
    n = safe_norm(z, keepdim=True)
    assert bool((n > 0).all()) and n.shape == (3, 1)
    (z / n).sum().backward()
    assert bool(torch.isfinite(z.grad).all())
    z.grad = None
    safe_norm(z).sum().backward()
    assert torch.equal(z.grad, torch.zeros_like(z))
