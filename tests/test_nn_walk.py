"""Defects found walking hypermem.nn from an installed wheel, each pinned by a test."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from hypermem.nn import BallEncoder, HyperbolicMemory, make_ball


def _keys(n=10, d=4, r=0.5, seed=0, dtype=torch.float64):
    g = torch.Generator().manual_seed(seed)
    return r * F.normalize(torch.randn(n, d, generator=g, dtype=dtype), dim=-1)


# -- 1. a state_dict of another curvature is the curvature used everywhere ---------------------
def test_state_dict_of_another_curvature_is_used():
    keys, vals = _keys(), torch.randn(10, 3, dtype=torch.float64)
    src = HyperbolicMemory(keys * 0.6, vals, curvature=2.0)
    dst = HyperbolicMemory(keys, vals)
    dst.load_state_dict(src.state_dict())
    assert dst.curvature == 2.0 and float(dst.ball.c) == pytest.approx(2.0)
    assert "curvature=2," in repr(dst)
    q = 0.5 * keys[:3] * 0.6
    torch.testing.assert_close(dst(q).distances, src(q).distances, rtol=0, atol=0)


def test_encoder_state_dict_of_another_curvature_is_used():
    src = BallEncoder(6, 4, curvature=3.0, dtype=torch.float64)
    dst = BallEncoder(6, 4, dtype=torch.float64)
    dst.load_state_dict(src.state_dict())
    x = torch.randn(5, 6, dtype=torch.float64)
    assert dst.curvature == 3.0
    torch.testing.assert_close(dst(x), src(x), rtol=0, atol=0)


def test_learned_curvature_loads_into_a_fixed_module_as_its_value():
    keys = _keys()
    src = HyperbolicMemory(keys * 0.5, learn_curvature=True)
    with torch.no_grad():
        src.ball.isp_c.add_(0.7)  # as if trained
    dst = HyperbolicMemory(keys * 0.5)
    dst.load_state_dict(src.state_dict())
    assert not dst.ball.learnable and "isp_c" not in dict(dst.named_parameters())
    assert dst.curvature == pytest.approx(float(src.ball.c.detach()), rel=1e-15)
    q = 0.3 * keys[:2]
    torch.testing.assert_close(dst(q).distances, src(q).distances)


# -- 2. the origin: finite distances, reads, losses and gradients for both metrics ------------
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("metric", ["shell", "hyperbolic"])
@pytest.mark.parametrize("k", [None, 3])
def test_origin_query_and_key_are_finite(metric, dtype, k):
    from hypermem.nn import memory_info_nce

    keys = _keys(dtype=dtype)
    keys[0] = 0.0
    mem = HyperbolicMemory(keys, torch.randn(10, 3, dtype=dtype), metric=metric)
    q = torch.zeros(2, 4, dtype=dtype)
    q[1] = keys[3] * 0.9
    q.requires_grad_(True)
    out = mem(q, k=k)
    assert torch.isfinite(out.distances).all() and torch.isfinite(out.read).all()
    (out.read.sum() + out.distances.sum()).backward()
    assert torch.isfinite(q.grad).all() and q.grad.abs().max() < 1e6
    assert torch.isfinite(mem.keys.grad).all() and mem.keys.grad.abs().max() < 1e6
    loss = memory_info_nce(mem, q.detach(), torch.tensor([0, 3]), k=None if k is None else 2)
    assert torch.isfinite(loss)


def test_shell_distance_unchanged_away_from_the_origin():
    from hypermem.geometry import poincare as P
    from hypermem.nn.distance import all_distance

    keys, q = _keys(), _keys(3, seed=1, r=0.3)
    got = all_distance(q, keys, "shell", 1.0, 1.0)
    cos = F.normalize(q, dim=-1) @ F.normalize(keys, dim=-1).T
    torch.testing.assert_close(got, P.shell_distance_from_cosine(cos, 1.0, 1.0))


# -- 3. the losses reach a learnable curvature ------------------------------------------------
def test_losses_pass_gradient_to_a_learnable_curvature():
    from hypermem.nn import hyperbolic_info_nce, poincare_ranking_loss

    ball = make_ball(1.0, learnable=True)
    q, keys = _keys(4, seed=1, r=0.4), _keys(6, seed=2, r=0.6)
    for loss in (hyperbolic_info_nce(q, keys, torch.tensor([0, 1, 2, 3]), ball=ball),
                 poincare_ranking_loss(q, keys[:4], keys[None, 4:].expand(4, 2, 4), ball=ball)):
        ball.isp_c.grad = None
        loss.backward()
        assert ball.isp_c.grad is not None and float(ball.isp_c.grad) != 0.0
    fixed = hyperbolic_info_nce(q, keys, torch.tensor([0, 1, 2, 3]), ball=1.0)
    torch.testing.assert_close(fixed, hyperbolic_info_nce(q, keys, torch.tensor([0, 1, 2, 3]), ball=make_ball(1.0)))


# -- 4. learnable curvature + RiemannianAdam: keys stay on the moving ball --------------------
def test_riemannian_adam_keeps_keys_on_a_growing_curvature():
    import geoopt

    from hypermem.nn import memory_info_nce

    torch.manual_seed(2)
    ball = make_ball(1.0, learnable=True)
    enc = BallEncoder(8, 4, curvature=ball, dtype=torch.float64)
    mem = HyperbolicMemory(0.5 * F.normalize(torch.randn(10, 4, dtype=torch.float64), dim=-1), torch.randn(10, 3),
                           curvature=ball)
    x = torch.randn(6, 8, dtype=torch.float64)
    opt = geoopt.optim.RiemannianAdam(torch.nn.ModuleList([enc, mem]).parameters(), lr=0.1)
    for _ in range(40):  # c grows past 1.9 while keys sit at its margin (NaN at step 15 before)
        loss = memory_info_nce(mem, enc(x), torch.arange(6), k=3)
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert float(ball.c.detach()) > 1.5 and torch.isfinite(mem.keys).all() and float(loss.detach()) < 0.1


def test_adam_moment_at_a_point_just_outside_the_shrunken_ball_is_finite():
    ball = make_ball(1.0, learnable=True)
    mem = HyperbolicMemory(_keys(r=0.99), curvature=ball)
    with torch.no_grad():
        ball.isp_c.add_(0.1)  # c grew before the keys' step: they lie just outside
    g = torch.ones_like(mem.keys)
    assert torch.isfinite(mem.keys_manifold.component_inner(mem.keys.detach(), g)).all()


def test_nan_key_error_says_nan_not_switch_optimizer():
    mem = HyperbolicMemory(_keys(), learn_curvature=True)
    with torch.no_grad():
        mem.keys[6] = float("nan")
    with pytest.raises(ValueError, match=r"key #6 has NaN coordinates .*curvature is learned") as err:
        mem(torch.zeros(1, 4, dtype=torch.float64))
    assert "RiemannianAdam" not in str(err.value)


# -- 5. bf16 autocast: BallEncoder's points keep the parameters' dtype and depth --------------
@pytest.mark.parametrize("depth", [None, "learned", 6.5])
def test_encoder_under_bf16_autocast_keeps_dtype_and_depth(depth):
    torch.manual_seed(0)
    enc = BallEncoder(8, 4, depth=depth)
    x = 4.0 * torch.randn(16, 8)
    with torch.no_grad():
        eager = enc(x)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            mixed = enc(x)
    assert mixed.dtype == torch.float32
    r_eager, r_mixed = enc.ball.distance_to_origin(eager), enc.ball.distance_to_origin(mixed)
    if depth is None:  # inputs that reach depth > 5.5 (bf16 capped them at ~5)
        assert float(r_eager.max()) > 5.5
    torch.testing.assert_close(r_mixed, r_eager, rtol=0.05, atol=0.05)


# -- 6. a compiled read on CPU still refuses a key outside the ball ----------------------------
@pytest.mark.parametrize("k", [None, 3])
def test_a_compiled_read_on_cpu_refuses_a_key_outside_the_ball(k):
    memory = HyperbolicMemory(_keys(16, dtype=torch.float32))
    torch._dynamo.reset()
    read = torch.compile(lambda q: memory(q, k=k).read, fullgraph=True, backend="aot_eager")
    q = 0.1 * torch.randn(2, 4)
    assert torch.isfinite(read(q)).all()
    with torch.no_grad():
        memory.keys[5] *= 3.0  # as a Euclidean optimizer step would
    with pytest.raises(RuntimeError, match="a key has left the Poincaré ball"):
        read(q)


# -- 7. keys at the boundary are kept at the dtype's margin, like every point ----------------
@pytest.mark.parametrize("dtype,eps", [(torch.float32, 1e-7), (torch.float64, 1e-15)])
def test_keys_near_the_boundary_are_projected_to_the_margin(dtype, eps):
    keys = _keys(dtype=dtype)
    keys[0] = torch.tensor([1.0 - eps, 0.0, 0.0, 0.0], dtype=dtype)
    mem = HyperbolicMemory(keys)
    r_max = mem.ball.max_radius(dtype)
    assert float(mem.ball.distance_to_origin(mem.keys.detach()[0])) <= r_max * (1 + 1e-3)
    mem.append(keys[:1], ids=["edge"])
    assert float(mem.ball.distance_to_origin(mem.keys.detach()[-1])) <= r_max * (1 + 1e-3)
    torch.testing.assert_close(mem.keys.detach()[1:10], keys[1:])  # inside the margin: unchanged


# -- 8. the documented optimizer pattern lists a shared curvature once ------------------------
def test_documented_optimizer_pattern_lists_a_shared_curvature_once():
    import pathlib
    import warnings

    import geoopt

    doc = (pathlib.Path(__file__).parent.parent / "docs" / "nn.md").read_text()
    assert "RiemannianAdam([*encoder.parameters(), *layer.parameters()]" not in doc
    assert "ModuleList([encoder, layer])" in doc
    ball = make_ball(1.0, learnable=True)
    enc, mem = BallEncoder(8, 4, curvature=ball, dtype=torch.float64), HyperbolicMemory(_keys(), curvature=ball)
    params = list(torch.nn.ModuleList([enc, mem]).parameters())
    assert sum(p is ball.isp_c for p in params) == 1
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        geoopt.optim.RiemannianAdam(params, lr=0.1)
