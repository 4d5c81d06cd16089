"""HyperbolicMemory moved, cast, loaded and differentiated as torch users do: meta and
``to_empty``, ``assign=True``, half-precision casts, ``.data`` writes, ``torch.func``."""

from __future__ import annotations

import geoopt
import pytest
import torch

from hypermem.nn import HyperbolicMemory
from hypermem.nn.curvature import make_ball

K = 0.3 * torch.eye(4)
Q = torch.tensor([[0.29, 0.01, 0.0, 0.0], [0.0, 0.2, 0.05, 0.0]])


def _memory(**kw) -> HyperbolicMemory:
    return HyperbolicMemory(K, torch.eye(4), timestamps=torch.arange(4, dtype=torch.float64) + 1.7e9,
                            access_counts=torch.ones(4, dtype=torch.float64), **kw)


# ---------------------------------------------------------------------------- defect 1
@pytest.mark.parametrize("learn_curvature", [False, True])
def test_meta_then_to_empty_then_load_restores_the_layer(learn_curvature):
    m = _memory(learn_curvature=learn_curvature)
    sd = {k: v.clone() for k, v in m.state_dict().items()}
    expected = m(Q, k=2)
    m.to("meta")
    assert m.keys.is_meta and m.timestamps.is_meta and m.timestamps.dtype == torch.float64
    m.to_empty(device="cpu")
    assert m.timestamps.device.type == "cpu" and m.timestamps.dtype == torch.float64
    m.load_state_dict(sd)
    assert torch.equal(m.timestamps, sd["timestamps"]) and torch.equal(m.access_counts, sd["access_counts"])
    out = m(Q, k=2)
    assert torch.equal(out.indices, expected.indices) and torch.allclose(out.read, expected.read)


def test_time_buffers_keep_float64_under_float_and_double_casts():
    m = _memory(dtype=torch.float64)
    ts = m.timestamps.clone()
    m.float()
    assert m.keys.dtype == torch.float32 and m.timestamps.dtype == torch.float64
    assert torch.equal(m.timestamps, ts)  # not rounded through float32 (128 s steps at 1.7e9)
    m.double()
    assert m.keys.dtype == torch.float64 and torch.equal(m.timestamps, ts)


# ---------------------------------------------------------------------------- defect 3
def _assert_manifold_keys(m: HyperbolicMemory) -> None:
    assert isinstance(m.keys, geoopt.ManifoldParameter)
    assert m.keys.manifold is m.keys_manifold
    if m.ball.learnable:
        assert m.keys_manifold.isp_c is m.ball.isp_c  # the manifold follows the trained curvature


@pytest.mark.parametrize("learn_curvature", [False, True])
def test_keys_stay_a_manifold_parameter_after_to_empty_and_assign(learn_curvature):
    m = _memory(learn_curvature=learn_curvature)
    sd = {k: v.clone() for k, v in m.state_dict().items()}
    m.to("meta").to_empty(device="cpu")
    m.load_state_dict(sd)
    _assert_manifold_keys(m)
    m2 = _memory(learn_curvature=learn_curvature)
    m2.load_state_dict({k: v.clone() for k, v in sd.items()}, assign=True)
    _assert_manifold_keys(m2)
    # a Riemannian step keeps the keys in the ball (a Euclidean one would have pushed them out)
    opt = geoopt.optim.RiemannianSGD([m2.keys], lr=50.0)
    m2(Q).read.sum().backward()
    opt.step()
    assert bool((m2.keys.detach().norm(dim=1) < 1.0).all())
    m2(Q)


# ---------------------------------------------------------------------------- defect 5
@pytest.mark.parametrize("cast", ["bfloat16", "half"])
def test_half_precision_casts_are_refused_before_anything_changes(cast):
    m = _memory()
    with pytest.raises(TypeError, match=r"float32 or torch.float64, not torch\.(bfloat16|float16).*autocast"):
        getattr(m, cast)()
    assert m.keys.dtype == torch.float32 and m.ball.isp_c.dtype in (torch.float32, torch.float64)
    with pytest.raises(TypeError, match="torch.autocast"):
        m.to(torch.bfloat16)
    assert m(Q).read.dtype == torch.float32


# ---------------------------------------------------------------------------- defect 2
@pytest.mark.parametrize("write", ["copy", "uniform", "mul"])
def test_invalidate_after_a_data_write_gives_the_new_top_k(write):
    torch.manual_seed(0)
    keys = torch.nn.functional.normalize(torch.randn(50, 4), dim=1) * 0.5
    m = HyperbolicMemory(keys, torch.randn(50, 3))
    m(Q, k=3)  # fills the key cache
    new = torch.nn.functional.normalize(torch.randn(50, 4), dim=1) * 0.6
    if write == "copy":
        m.keys.data.copy_(new)
    elif write == "uniform":
        m.keys.data.uniform_(-0.4, 0.4)
    else:
        m.keys.data.mul_(1.5)
    m.invalidate()
    fresh = HyperbolicMemory(m.keys.detach().clone(), m.values.clone())
    assert torch.equal(m(Q, k=3).indices, fresh(Q, k=3).indices)


def test_invalidate_lets_the_next_read_refuse_keys_pushed_out_by_data():
    m = _memory()
    m(Q, k=2)
    m.keys.data.mul_(5)  # every key outside the ball, behind autograd's back
    m.invalidate()
    for k in (None, 2):
        with pytest.raises(ValueError, match="key #0 has left the Poincaré ball"):
            m(Q, k=k)


def test_no_grad_writes_need_no_invalidate():
    m = _memory()
    m(Q, k=2)
    with torch.no_grad():
        m.keys.mul_(5)
    with pytest.raises(ValueError, match="key #0 has left the Poincaré ball"):
        m(Q, k=2)


# ---------------------------------------------------------------------------- defect 6
@pytest.mark.parametrize("k", [None, 2])
def test_torch_func_grad_through_functional_call(k):
    from torch.func import functional_call, grad

    m = _memory()
    params = {n: p.detach().clone() for n, p in m.named_parameters()}
    g = grad(lambda p: functional_call(m, p, (Q,), {"k": k}).read.square().sum())(params)
    m(Q, k=k).read.square().sum().backward()
    assert torch.allclose(g["keys"], m.keys.grad, atol=1e-6)
    assert torch.allclose(g["log_temperature"], m.log_temperature.grad, atol=1e-6)


# ---------------------------------------------------------------------------- defect 8
def test_meta_construction_is_refused_by_name():
    with pytest.raises(ValueError, match="cannot be built on the meta device.*to_empty"):
        HyperbolicMemory(K, device="meta")
    with torch.device("meta"), pytest.raises(ValueError, match="cannot be built on the meta device"):
        HyperbolicMemory(K)
    with pytest.raises(ValueError, match="cannot be built on the meta device"):
        HyperbolicMemory(K.to("meta"))


# ---------------------------------------------------------------------------- defect 12 (load)
def test_a_state_dict_with_keys_outside_the_ball_is_refused_at_load():
    m = _memory()
    sd = m.state_dict()
    bad = sd["keys"].clone()
    bad[2] = torch.tensor([0.0, 0.0, 1.5, 0.0])
    before = m.keys.detach().clone()
    with pytest.raises(ValueError, match=r"state_dict\['keys'\] row #2 is not a point inside the Poincaré ball"):
        m.load_state_dict({**sd, "keys": bad})
    assert torch.equal(m.keys.detach(), before)


def test_keys_are_checked_against_the_loaded_curvature():
    m = HyperbolicMemory(0.3 * torch.eye(4), curvature=make_ball(4.0))  # radius 0.5
    other = HyperbolicMemory(0.9 * torch.eye(4), curvature=1.0)
    m.load_state_dict(other.state_dict())  # a checkpoint of curvature 1: its keys fit its ball
    assert m.curvature == pytest.approx(1.0)
    sd = other.state_dict()
    sd["ball.isp_c"] = m.state_dict()["ball.isp_c"].clone().fill_(5.0)  # c = softplus(5) ~ 5: radius 0.45
    with pytest.raises(ValueError, match=r"row #0 is not a point inside the Poincaré ball of curvature 5"):
        m.load_state_dict(sd)


# ---------------------------------------------------------------------------- a read after to_empty
@pytest.mark.parametrize("fill", [float("inf"), float("nan"), 3.0])
@pytest.mark.parametrize("assign", [False, True])
def test_a_read_after_to_empty_without_a_load_names_uninitialised_memory(fill, assign):
    m = _memory()
    sd = {k: v.clone() for k, v in m.state_dict().items()}
    model = torch.nn.Sequential(m).to("meta").to_empty(device="cpu")  # as a model holding it does
    with torch.no_grad():
        m.keys.fill_(fill)  # what empty memory may hold
    with pytest.raises(ValueError, match=r"key #0 .*may be uninitialised.*to_empty\(\).*load_state_dict"):
        m(Q, k=2)
    model.load_state_dict({f"0.{k}": v for k, v in sd.items()}, assign=assign)
    assert m(Q, k=2).read.isfinite().all()
    with torch.no_grad():
        m.keys[1] = float("nan")  # after a load, a NaN key is a diverged step again
    with pytest.raises(ValueError, match="key #1 has NaN coordinates .*optimizer step diverged") as err:
        m(Q, k=2)
    assert "uninitialised" not in str(err.value)
