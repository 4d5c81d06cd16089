"""Dtype handling of hypermem.nn (walk 71): one dtype for HyperbolicRAG, point_at in half
precision, narrowing casts of a memory's keys, the encoder's curvature under a half cast,
exact selection under autocast, CosineKeys' dtypes."""

import warnings
import zlib

import geoopt
import pytest
import torch
import torch.nn.functional as F

from hypermem import Memory
from hypermem.geometry import poincare as P
from hypermem.nn import BallEncoder, CosineKeys, HyperbolicMemory, HyperbolicRAG, make_ball


class HashEmbedder:
    dim = 16

    def embed(self, texts):
        return torch.stack([torch.randn(16, generator=torch.Generator().manual_seed(zlib.crc32(t.encode())))
                            for t in texts])


def small_store(n=3, embedder=None):
    store = Memory(embedder=embedder or HashEmbedder())
    root = store.add("root")
    store.add_many([{"text": f"t{i}", "parent": root} for i in range(n)])
    return store, torch.tensor([-1] + [0] * n)


@pytest.fixture
def default_float64():
    was = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    yield
    torch.set_default_dtype(was)


# 1. HyperbolicRAG: one dtype for the encoders and the memory
def test_rag_built_under_default_float64_runs_in_float64(default_float64):
    store, parent = small_store()
    rag = HyperbolicRAG(store, parent, 16, two_heads=True)
    assert rag.encoder.linear.weight.dtype == rag.vote_encoder.linear.weight.dtype == torch.float64
    assert rag.memory.keys.dtype == torch.float64
    x = torch.randn(2, 16, dtype=torch.float64)
    assert rag(x).shape == (2, 4)
    assert rag.train_scores(x, torch.tensor([1, 2]), None)[1].dtype == torch.float64
    with pytest.raises(ValueError, match="features are torch.float32 but the BallEncoder's weights are torch.float64"):
        rag(x.float())


def test_rag_dtype_argument_and_refusal():
    store, parent = small_store()
    rag = HyperbolicRAG(store, parent, 16, dtype=torch.float64)
    assert rag.encoder.linear.weight.dtype == rag.memory.keys.dtype == torch.float64
    assert HyperbolicRAG(store, parent, 16).memory.keys.dtype == torch.float32
    with pytest.raises(ValueError, match="dtype is torch.bfloat16"):
        HyperbolicRAG(store, parent, 16, dtype=torch.bfloat16)


# 2. point_at / BallEncoder(depth=r) in half precision: the depth asked for
@pytest.mark.parametrize("dt", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("scale", [1e-3, 1e-4, 1e-5])
def test_point_at_half_short_direction_has_the_depth(dt, scale):
    v = (scale * F.normalize(torch.ones(2, 8), dim=-1)).to(dt).requires_grad_()
    p = P.point_at(v, 3.0)
    assert p.dtype == dt
    assert torch.allclose(P.distance_to_origin(p.double()), torch.full((2,), 3.0, dtype=torch.float64), atol=0.03)
    p.float().sum().backward()
    assert torch.isfinite(v.grad).all()


@pytest.mark.parametrize("dt", [torch.bfloat16, torch.float16])
def test_point_at_half_deep_point_stays_inside(dt):
    p = P.point_at(torch.randn(4, 8).to(dt), 12.0)
    assert P.is_inside(p.double()).all()


@pytest.mark.parametrize("dt", [torch.bfloat16, torch.float16])
def test_half_encoder_fixed_depth(dt):
    torch.manual_seed(0)
    enc = BallEncoder(8, 8, depth=3.0, init="identity").to(dt)
    out = enc((1e-4 * torch.randn(4, 8)).to(dt))
    assert torch.allclose(P.distance_to_origin(out.double()), torch.full((4,), 3.0, dtype=torch.float64), atol=0.05)


# 3. a narrowing cast keeps every key inside, with a warning
def deep_float64_memory():
    u = F.normalize(torch.randn(4, 8, dtype=torch.float64, generator=torch.Generator().manual_seed(0)), dim=-1)
    keys = P.point_at(u, torch.tensor([2.0, 9.0, 12.0, 20.0], dtype=torch.float64))
    return HyperbolicMemory(keys, torch.eye(4, dtype=torch.float64), dtype=torch.float64)


def test_float_cast_reprojects_deep_keys_with_a_warning():
    mem = deep_float64_memory()
    before = mem.keys.detach().clone()
    with pytest.warns(UserWarning, match=r"cast to torch.float32: 3 of 4 keys .*keep the layer in torch.float64"):
        mem.float()
    assert mem.keys.dtype == torch.float32 and isinstance(mem.keys, geoopt.ManifoldParameter)
    assert P.is_inside(mem.keys.detach()).all()
    assert torch.allclose(mem.keys.detach()[0].double(), before[0])  # the shallow key unchanged
    assert torch.isfinite(mem(torch.zeros(1, 8), k=2).read).all()


def test_widening_and_shallow_casts_do_not_warn():
    mem = HyperbolicMemory(0.5 * torch.eye(4))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        mem.double()
        mem.float()


def test_float64_checkpoint_into_float32_layer_reprojects():
    sd = deep_float64_memory().state_dict()
    m32 = HyperbolicMemory(0.1 * torch.ones(4, 8) / 8 ** 0.5, torch.zeros(4, 4))
    with pytest.warns(UserWarning, match=r"\(torch.float64\) loaded into torch.float32 keys: 3 of 4"):
        m32.load_state_dict(sd)
    assert m32.keys.dtype == torch.float32 and P.is_inside(m32.keys.detach()).all()
    m32(torch.zeros(1, 8), k=2)


# 4. the encoder's curvature keeps its dtype under a half cast
@pytest.mark.parametrize("cast", ["bfloat16", "half"])
def test_half_encoder_keeps_fixed_curvature(cast):
    enc = getattr(BallEncoder(16, 8, curvature=2.0), cast)()
    assert enc.linear.weight.dtype != torch.float32 and enc.ball.isp_c.dtype == torch.float64
    enc2 = BallEncoder(16, 8, curvature=2.0)
    enc2.load_state_dict(enc.state_dict())
    assert enc2.curvature == 2.0


def test_half_encoder_shared_learned_curvature_still_trains():
    torch.manual_seed(0)
    ball = make_ball(1.0, learnable=True)
    enc = BallEncoder(16, 8, curvature=ball)
    mem = HyperbolicMemory(0.5 * F.normalize(torch.randn(20, 8), dim=-1), torch.randn(20, 4), curvature=ball)
    mem(enc(torch.randn(5, 16)), k=3).read.sum().backward()  # a float64 gradient on isp_c
    enc.bfloat16()
    assert ball.isp_c.dtype == ball.isp_c.grad.dtype == torch.float64
    opt = geoopt.optim.RiemannianAdam(torch.nn.ModuleList([enc, mem]).parameters(), lr=1e-3)
    for _ in range(5):
        loss = mem(enc(torch.randn(5, 16).bfloat16()), k=3).read.pow(2).sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert abs(mem.curvature - 1.0) > 1e-3


# 5. exact selection under autocast
def test_rag_select_under_autocast_is_exact():
    torch.manual_seed(0)
    store, parent = small_store(600)
    rag = HyperbolicRAG(store, parent, 16, k=10)
    q = rag.encoder(torch.randn(64, 16)).detach()
    ref = rag.memory.select(q, 10)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        amp = rag.select(q, 10)
    assert torch.equal(amp.sort(1).values, ref.sort(1).values)
    assert torch.equal(rag.select(q.bfloat16(), 10).sort(1).values, rag.memory.select(q.bfloat16(), 10).sort(1).values)
    with pytest.raises(ValueError, match="queries are torch.float64 but the memory is torch.float32"):
        rag.select(q.double(), 10)


def test_cosine_keys_under_autocast_is_exact():
    torch.manual_seed(0)
    keys = torch.randn(2000, 16)
    q = torch.randn(64, 16)
    for ck in (CosineKeys(keys), CosineKeys(keys, depth=torch.rand(2000))):
        ref_sel, ref_scores = ck.select(q, 5), ck.score_all(q)[0]
        with torch.autocast("cpu", dtype=torch.bfloat16):
            sel, scores = ck.select(q, 5), ck.score_all(q)[0]
        assert torch.equal(sel.sort(1).values, ref_sel.sort(1).values)
        assert scores.dtype == torch.float32 and torch.allclose(scores, ref_scores)


# 6. CosineKeys' dtypes
def test_cosine_keys_dtypes_follow_the_keys_or_the_argument():
    keys = torch.randn(6, 4, dtype=torch.float64)
    ck = CosineKeys(keys, depth=torch.arange(6.0))
    assert ck.keys.dtype == ck.log_temperature.dtype == ck.depth.dtype == ck.depth_head.weight.dtype == torch.float64
    assert torch.equal(ck.keys.detach(), keys)
    assert CosineKeys(keys, dtype=torch.float32).keys.dtype == torch.float32
    with pytest.raises(ValueError, match="the keys are torch.float16.*dtype=torch.float32"):
        CosineKeys(keys.half())
    with pytest.raises(ValueError, match="dtype is torch.bfloat16"):
        CosineKeys(keys, dtype=torch.bfloat16)


def test_cosine_keys_half_queries_converted_float64_named():
    keys = torch.randn(6, 4)
    for ck in (CosineKeys(keys), CosineKeys(keys, depth=torch.arange(6.0))):
        ref = ck.select(keys[:2], 3)
        for dt in (torch.bfloat16, torch.float16):
            assert ck.select(keys[:2].to(dt), 3)[:, 0].tolist() == ref[:, 0].tolist()
            assert ck.score_all(keys[:2].to(dt))[0].dtype == torch.float32
            assert ck.score_slots(keys[:2].to(dt), ref)[0].dtype == torch.float32
        with pytest.raises(ValueError, match="queries are torch.float64 but the CosineKeys keys are torch.float32"):
            ck.select(keys[:2].double(), 3)


def test_cosine_keys_with_depth_under_default_float64(default_float64):
    ck = CosineKeys(torch.randn(6, 4, dtype=torch.float32), depth=torch.arange(6.0))  # a float32 layer throughout
    assert ck.score_all(torch.randn(2, 4, dtype=torch.float32))[0].shape == (2, 6)


# minor: the message names the keys' dtype when no dtype was passed
def test_half_keys_without_dtype_name_the_keys():
    with pytest.raises(ValueError, match="the keys are torch.float16.*pass dtype=torch.float32"):
        HyperbolicMemory(0.3 * torch.eye(4).half())
    assert HyperbolicMemory(0.3 * torch.eye(4).half(), dtype=torch.float32).keys.dtype == torch.float32
