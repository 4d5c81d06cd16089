"""HyperbolicMemory and BallEncoder: gradients, exact top-k reads, writing, devices, dtypes."""

from __future__ import annotations

import math
from datetime import datetime, timedelta, timezone

import geoopt
import pytest
import torch
from torch.func import functional_call

from hypermem.geometry import PoincareBall
from hypermem.nn import BallEncoder, HyperbolicMemory
from hypermem.temporal import HalfLife

pytestmark = pytest.mark.usefixtures("one_thread")
BALL = PoincareBall()
NOW = datetime(2026, 1, 1, tzinfo=timezone.utc)


def make_memory(n=40, d=6, metric="hyperbolic", dtype=torch.float64, device="cpu", seed=0, **kw):
    keys = BALL.random_points(n, d, 3.0, seed=seed, dtype=dtype, device=device)
    g = torch.Generator().manual_seed(seed + 1)
    values = torch.randn(n, 3, generator=g, dtype=dtype).to(device)
    return HyperbolicMemory(keys, values, metric=metric, temperature=0.7, **kw)


def queries(b=5, d=6, dtype=torch.float64, device="cpu", seed=9):
    return BALL.random_points(b, d, 2.5, seed=seed, dtype=dtype, device=device)


def timed(n, **kw):
    stamps = torch.tensor([(NOW - timedelta(hours=3 * i)).timestamp() for i in range(n)], dtype=torch.float64)
    return dict(timestamps=stamps, decay=HalfLife(hours=24), time_coef=1.0, depth_bias=0.2,
                importance=torch.linspace(0.5, 1.0, n, dtype=torch.float64), **kw)


# -- gradients ---------------------------------------------------------------------------------
@pytest.mark.parametrize("metric", ["hyperbolic", "shell"])
@pytest.mark.parametrize("k", [None, 4])
def test_gradcheck_full_and_topk_read(metric, k):
    mem = make_memory(n=8, d=3, metric=metric, learn_values=True, **timed(8))
    q = queries(2, 3)

    def read(q, K, V, log_t):
        out = functional_call(mem, {"keys": K, "values": V, "log_temperature": log_t}, (q,),
                              {"k": k, "at_time": NOW})
        return out.read, out.weights

    inputs = tuple(t.detach().clone().requires_grad_() for t in (q, mem.keys, mem.values, mem.log_temperature))
    assert torch.autograd.gradcheck(read, inputs, eps=1e-6, atol=1e-6)


def test_gradients_reach_queries_keys_values_temperature():
    mem = make_memory(learn_values=True)
    q = queries().requires_grad_()
    out = mem(q, k=5)
    (out.read ** 2).sum().backward()
    for name, g in [("queries", q.grad), ("keys", mem.keys.grad), ("values", mem.values.grad),
                    ("temperature", mem.log_temperature.grad)]:
        assert g is not None and bool(torch.isfinite(g).all()), name
        assert float(g.abs().sum()) > 0, name
    # only the selected slots get gradient
    touched = (mem.keys.grad.abs().sum(1) > 0).nonzero().squeeze(1)
    assert set(touched.tolist()) <= set(out.indices.reshape(-1).tolist())


def test_sparse_gradients_have_batch_times_k_rows():
    mem = make_memory(n=200, learn_values=True, sparse_grad=True)
    out = mem(queries(), k=7)
    out.read.sum().backward()
    assert mem.keys.grad.is_sparse and mem.values.grad.is_sparse
    assert mem.keys.grad._indices().shape[1] == 5 * 7
    dense = make_memory(n=200, learn_values=True)
    dense(queries(), k=7).read.sum().backward()
    assert torch.allclose(mem.keys.grad.to_dense(), dense.keys.grad)


# -- top-k equals full ---------------------------------------------------------------------------
@pytest.mark.parametrize("metric", ["hyperbolic", "shell"])
@pytest.mark.parametrize("with_bias", [False, True])
def test_topk_read_equals_full_read_restricted(metric, with_bias):
    extra = timed(300) if with_bias else {}
    mem = make_memory(n=300, metric=metric, **extra)
    q = queries(8)
    full = mem(q, at_time=NOW)
    top = mem(q, k=9, at_time=NOW)
    # the k slots are the k best of the full scores (exact search)
    assert torch.equal(top.indices, torch.argsort(-full.scores, dim=1, stable=True)[:, :9])
    sub = torch.gather(full.scores, 1, top.indices)
    assert torch.allclose(sub, top.scores, atol=1e-10)
    assert torch.allclose(torch.gather(full.distances, 1, top.indices), top.distances, atol=1e-10)
    w = torch.softmax(sub, 1)
    assert torch.allclose(w, top.weights, atol=1e-12)
    assert torch.allclose(torch.einsum("bk,bkv->bv", w, mem.values[top.indices]), top.read)


def test_selection_ignores_temperature_without_bias():
    mem = make_memory(n=100)
    q = queries()
    a = mem(q, k=6).indices
    with torch.no_grad():
        mem.log_temperature.fill_(math.log(0.01))
    assert torch.equal(a, mem(q, k=6).indices)


def test_exclude_drops_slots_from_topk_and_full_reads():
    mem = make_memory(n=50)
    q = queries(4)
    top = mem(q, k=5)
    ex = top.indices[:, :2]
    again = mem(q, k=5, exclude=ex)
    assert torch.equal(again.indices[:, :3], top.indices[:, 2:])
    assert not bool((again.indices.unsqueeze(2) == ex.unsqueeze(1)).any())
    full = mem(q, exclude=ex)
    assert float(torch.gather(full.weights.detach(), 1, ex).abs().max()) == 0.0
    # fewer slots than k once excluded: -1 entries with weight 0, weights still sum to 1
    tiny_mem = make_memory(n=4)
    out = tiny_mem(q, k=4, exclude=torch.zeros(4, dtype=torch.long))
    assert bool((out.indices[:, -1] == -1).all()) and float(out.weights.detach()[:, -1].abs().max()) == 0.0
    assert torch.allclose(out.weights.sum(1), torch.ones(4, dtype=torch.float64))


def test_time_and_depth_terms_change_the_ranking_like_the_store_formula():
    kw = timed(30)
    mem = make_memory(n=30, **kw)
    q = queries(3)
    out = mem(q, at_time=NOW)
    d = BALL.pairwise_distance(q, mem.keys.detach())
    age_h = (NOW.timestamp() - kw["timestamps"]) / 3600
    w = (0.5 ** (age_h / 24) * kw["importance"]).clamp_min(1e-6)
    expected = -d / 0.7 + 0.2 * BALL.distance_to_origin(mem.keys.detach()) + torch.log(w)
    assert torch.allclose(out.scores, expected, atol=1e-10)


# -- the store round trip ----------------------------------------------------------------------------
def test_memory_to_module_to_memory_round_trip(clock):
    from hypermem import HalfLife as HL
    from hypermem import Memory

    # the shared clock of conftest stands at 2026-01-01 (NOW)
    mem = Memory(decay=HL(hours=48), clock=clock, depth_bias=0.1)
    animal = mem.add("animals", t=NOW - timedelta(days=2), meta={"kind": "class"})
    dog = mem.add("dogs bark loudly", parent=animal, t=NOW - timedelta(hours=5))
    mem.add("puppies are young dogs", parent=dog)
    mem.add("cats purr", parent=animal, valid_until=NOW + timedelta(days=1))
    mem.add("stocks and bonds", t=NOW - timedelta(days=10))
    mem.search("dogs", k=2)  # access counts
    layer = HyperbolicMemory.from_memory(mem, learn_keys=True, learn_values=False)
    assert isinstance(layer.keys, geoopt.ManifoldParameter) and layer.keys.requires_grad
    assert not isinstance(layer.values, torch.nn.Parameter)
    assert layer.ids == mem.ids and torch.allclose(layer.keys.detach(), mem.points)
    assert torch.allclose(layer.values, mem.embeddings)
    # the layer scores like the store (temperature 1): same top-k, same scores
    qp = mem.embed_query("a loud dog")
    hits = mem.search(qp, k=5, touch=False)
    out = layer(qp.unsqueeze(0), k=5, at_time=NOW)
    assert [layer.ids[i] for i in out.indices[0].tolist()] == [h.record.id for h in hits]
    assert torch.allclose(out.scores[0], torch.tensor([h.score for h in hits], dtype=torch.float64), atol=1e-9)
    back = layer.to_memory()
    assert back.ids == mem.ids and torch.allclose(back.points, mem.points, atol=1e-12)
    assert [back.parent(i) for i in back.ids] == [mem.parent(i) for i in mem.ids]
    assert [back.get(i).text for i in back.ids] == [mem.get(i).text for i in mem.ids]
    assert [back.get(i).access_count for i in back.ids] == [mem.get(i).access_count for i in mem.ids]
    assert back.get(animal).meta == {"kind": "class"}
    hits2 = back.search(qp, k=5, touch=False)
    assert [(h.record.id, round(h.score, 9)) for h in hits2] == [(h.record.id, round(h.score, 9)) for h in hits]


def test_trained_keys_travel_back_to_the_store():
    from hypermem import Memory

    mem = Memory()
    a = mem.add("alpha")
    mem.add("beta", parent=a)
    layer = HyperbolicMemory.from_memory(mem)
    with torch.no_grad():
        layer.keys[1] = BALL.point_at(torch.ones(mem.dim, dtype=torch.float64), 2.0)
    back = layer.to_memory()
    assert torch.allclose(back.point(back.ids[1]), layer.keys[1].detach(), atol=1e-12)
    assert back.parent(back.ids[1]) == a


# -- writing ----------------------------------------------------------------------------------------
def test_append_update_remove():
    mem = make_memory(n=10, depth=torch.ones(10, dtype=torch.float64))
    new = mem.append(BALL.random_points(3, 6, 2.0, seed=5), torch.zeros(3, 3, dtype=torch.float64), ids=["x", "y", "z"])
    assert new == ["x", "y", "z"] and len(mem) == 13 and mem.depth.shape == (13,)
    assert isinstance(mem.keys, geoopt.ManifoldParameter) and mem.keys.requires_grad
    p = BALL.point_at(torch.tensor([1.0, 0, 0, 0, 0, 0], dtype=torch.float64), 1.0)
    mem.update("y", keys=p.unsqueeze(0))
    out = mem(p.unsqueeze(0) * 0.999, k=1)
    assert mem.ids[int(out.indices[0, 0])] == "y"
    gone = mem.remove(["x", "0"])
    assert gone == ["x", "0"] and len(mem) == 11 and "x" not in mem.ids
    assert mem.ids[int(mem(p.unsqueeze(0) * 0.999, k=1).indices[0, 0])] == "y"


def test_bad_input_is_refused_and_leaves_state_intact():
    mem = make_memory(n=10)
    before = mem.keys.detach().clone()
    with pytest.raises(ValueError, match="inside the Poincaré ball"):
        mem.append(torch.full((2, 6), 0.9, dtype=torch.float64), torch.zeros(2, 3, dtype=torch.float64))
    with pytest.raises(ValueError, match="distinct"):
        mem.append(BALL.random_points(1, 6, seed=1), torch.zeros(1, 3, dtype=torch.float64), ids=["3"])
    with pytest.raises(KeyError, match="nope"):
        mem.remove("nope")
    with pytest.raises(ValueError, match="inside the Poincaré ball"):
        mem.update(0, keys=torch.full((1, 6), 2.0, dtype=torch.float64))
    assert len(mem) == 10 and torch.equal(mem.keys.detach(), before)
    with pytest.raises(ValueError, match="shape"):
        mem(torch.zeros(2, 5, dtype=torch.float64))
    with pytest.raises(ValueError, match="float32"):
        mem(torch.zeros(2, 6, dtype=torch.float32))
    with pytest.raises(ValueError, match="query #1"):
        mem(torch.tensor([[0.0] * 6, [1.0] + [0.0] * 5], dtype=torch.float64))
    with pytest.raises(ValueError, match="k must be"):
        mem(queries(), k=0)
    with pytest.raises(ValueError, match="metric"):
        HyperbolicMemory(before, metric="cosine")


# -- dtypes, devices, no_grad, optimisers ------------------------------------------------------------
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_devices_dtypes_and_no_grad(device, dtype):
    mem = make_memory(n=64, dtype=dtype, device=device, **timed(64))
    mem.to(device)
    assert mem.timestamps.dtype == torch.float64 and mem.keys.dtype == dtype
    q = queries(4, dtype=dtype, device=device)
    with torch.no_grad():
        out = mem(q, k=5, at_time=NOW)
    assert out.read.device.type == device.type and out.read.dtype == dtype and not out.read.requires_grad
    assert torch.allclose(out.weights.sum(1), torch.ones(4, dtype=dtype, device=device), atol=1e-5)
    full = mem(q, at_time=NOW)
    assert torch.equal(out.indices, torch.argsort(-full.scores, dim=1, stable=True)[:, :5])


def test_to_float32_keeps_timestamps_float64():
    mem = make_memory(n=8, **timed(8))
    stamps = mem.timestamps.clone()
    mem.to(torch.float32)
    assert mem.keys.dtype == torch.float32 and isinstance(mem.keys, geoopt.ManifoldParameter)
    assert mem.timestamps.dtype == torch.float64 and torch.equal(mem.timestamps, stamps)


def test_riemannian_adam_on_mixed_euclidean_and_manifold_parameters():
    torch.manual_seed(0)
    mem = make_memory(n=30, learn_values=True)
    enc = BallEncoder(5, 6, dtype=torch.float64)
    model = torch.nn.ModuleDict({"enc": enc, "mem": mem})
    opt = geoopt.optim.RiemannianAdam(model.parameters(), lr=0.05)
    x = torch.randn(16, 5, dtype=torch.float64)
    target = torch.randn(16, 3, dtype=torch.float64)
    losses = []
    for _ in range(30):
        opt.zero_grad()
        loss = ((mem(enc(x), k=8).read - target) ** 2).mean()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < losses[0]
    assert bool(BALL.is_inside(mem.keys.detach()).all())


def test_state_dict_round_trip():
    a = make_memory(n=12, learn_values=True, **timed(12))
    b = make_memory(n=12, seed=3, learn_values=True, **timed(12))
    b.load_state_dict(a.state_dict())
    q = queries()
    assert torch.allclose(a(q, k=3, at_time=NOW).read, b(q, k=3, at_time=NOW).read)


# -- learning ---------------------------------------------------------------------------------------
def test_tiny_model_learns_to_retrieve_the_right_slot_on_hierarchical_data():
    """Slots are the nodes of a tree (children near their parent); queries are noisy
    features of the leaves seen through an unknown linear map; the model (encoder + memory)
    must retrieve each query's own leaf slot."""
    from hypermem.nn import memory_info_nce

    torch.manual_seed(0)
    d, feat = 8, 12
    roots = torch.nn.functional.normalize(torch.randn(4, d), dim=1)
    mids = torch.nn.functional.normalize(roots.repeat_interleave(3, 0) + 0.5 * torch.randn(12, d), dim=1)
    leaves = torch.nn.functional.normalize(mids.repeat_interleave(4, 0) + 0.35 * torch.randn(48, d), dim=1)
    dirs = torch.cat([roots, mids, leaves])
    radius = torch.cat([torch.full((4,), 1.0), torch.full((12,), 2.0), torch.full((48,), 3.0)])
    keys = BALL.point_at(dirs.double(), radius.double()).float()
    leaf_slots = torch.arange(16, 64)
    mix = torch.randn(feat, d)

    def batch(n):
        s = leaf_slots[torch.randint(0, 48, (n,))]
        x = dirs[s] @ mix.T + 0.05 * torch.randn(n, feat)
        return x, s

    mem = HyperbolicMemory(keys, None, metric="hyperbolic", temperature=0.3, learn_keys=True)
    enc = BallEncoder(feat, d, depth="learned", init_depth=2.0)
    model = torch.nn.ModuleDict({"enc": enc, "mem": mem})
    opt = geoopt.optim.RiemannianAdam(model.parameters(), lr=0.02)
    x_test, s_test = batch(512)

    def accuracy():
        with torch.no_grad():
            return float((mem(enc(x_test), k=1).indices[:, 0] == s_test).float().mean())

    before = accuracy()
    for _ in range(200):
        x, s = batch(64)
        opt.zero_grad()
        memory_info_nce(mem, enc(x), s, k=16).backward()
        opt.step()
    after = accuracy()
    assert before < 0.3
    assert after > 0.9


# -- the encoder ------------------------------------------------------------------------------------
def test_ball_encoder_depth_modes_and_identity_init():
    x = torch.randn(6, 5, dtype=torch.float64)
    e = BallEncoder(5, 5, init="identity", depth=1.0, dtype=torch.float64)
    p = e(x)
    assert torch.allclose(BALL.distance_to_origin(p), torch.ones(6, dtype=torch.float64))
    assert torch.allclose(p / p.norm(dim=1, keepdim=True), x / x.norm(dim=1, keepdim=True))
    learned = BallEncoder(5, 3, depth="learned", init_depth=2.5, dtype=torch.float64)
    assert torch.allclose(BALL.distance_to_origin(learned(x)), torch.full((6,), 2.5, dtype=torch.float64))
    learned(x).sum().backward()
    assert learned.depth_head.weight.grad is not None
    ex = BallEncoder(5, 3)
    assert bool(BALL.is_inside(ex(100 * torch.randn(6, 5))).all())
    with pytest.raises(ValueError, match="identity"):
        BallEncoder(5, 3, init="identity")
    with pytest.raises(ValueError, match="depth"):
        BallEncoder(5, 3, depth=-1.0)
    with pytest.raises(ValueError, match="size 5"):
        e(torch.zeros(2, 4, dtype=torch.float64))


# -- losses -------------------------------------------------------------------------------------------
def test_ranking_loss_is_info_nce_at_temperature_one():
    from hypermem.nn import hyperbolic_info_nce, poincare_ranking_loss

    u = queries(4)
    v = BALL.random_points(4, 6, 2.0, seed=11)
    neg = BALL.random_points(4 * 5, 6, 2.0, seed=12).view(4, 5, 6)
    keys = torch.cat([v.unsqueeze(1), neg], 1)
    a = poincare_ranking_loss(u, v, neg)
    b = hyperbolic_info_nce(u, keys, torch.zeros(4, dtype=torch.long), temperature=1.0)
    assert torch.allclose(a, b)
    d = BALL.distance(u.unsqueeze(1), keys)
    expected = (torch.logsumexp(-d, 1) + d[:, 0]).mean()
    assert torch.allclose(a, expected)


def test_memory_info_nce_with_all_other_slots_as_negatives_equals_the_full_loss():
    from hypermem.nn import memory_info_nce

    mem = make_memory(n=25, **timed(25))
    q = queries(6)
    t = torch.tensor([0, 3, 5, 7, 11, 24])
    full = memory_info_nce(mem, q, t, k=None, at_time=NOW)
    top = memory_info_nce(mem, q, t, k=24, at_time=NOW)
    assert torch.allclose(full, top)
    ex = torch.tensor([1, 2, 3, 4, 5, 6])
    ex[t == ex] = 9
    assert torch.allclose(memory_info_nce(mem, q, t, exclude=ex, at_time=NOW),
                          memory_info_nce(mem, q, t, k=23, exclude=ex, at_time=NOW))
    with pytest.raises(IndexError):
        memory_info_nce(mem, q, t + 100)


def test_entailment_cone_loss_is_zero_inside_and_pushes_violations():
    from hypermem.nn import entailment_cone_loss

    general = BALL.point_at(torch.tensor([[1.0, 0.0, 0.0]], dtype=torch.float64), 1.5)
    inside = BALL.point_at(torch.tensor([[1.0, 0.01, 0.0]], dtype=torch.float64), 3.0)
    outside = BALL.point_at(torch.tensor([[0.0, 1.0, 0.0]], dtype=torch.float64), 3.0)
    assert float(entailment_cone_loss(general, inside)) == 0.0
    assert float(entailment_cone_loss(general, outside)) > 0.1
    # a negative pair already far outside costs nothing; one inside costs the margin
    assert float(entailment_cone_loss(general, inside, general, outside, margin=0.01)) == 0.0
    both = entailment_cone_loss(general, inside, general, inside, margin=0.05, reduction="sum")
    assert torch.allclose(both, torch.tensor(0.05, dtype=torch.float64))
    x = outside.clone().requires_grad_()
    entailment_cone_loss(general, x).backward()
    assert float(x.grad.abs().sum()) > 0
    with pytest.raises(ValueError, match="both"):
        entailment_cone_loss(general, inside, neg_general=general)
