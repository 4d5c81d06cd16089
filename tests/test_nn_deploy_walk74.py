"""Deploying a model that holds the nn layers (walk 74): tracing refused, "now" as a tensor input
(eager, torch.export strict and non-strict, torch.compile without recompiles), a dynamically
quantized BallEncoder, and a bf16 model around a float32 memory (docs/nn.md, "Deploying")."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from hypermem.nn import BallEncoder, HyperbolicMemory
from hypermem.temporal import HalfLife, ValidityWindow

pytestmark = pytest.mark.usefixtures("one_thread")

N = 12
T0 = datetime(2026, 1, 1, tzinfo=timezone.utc).timestamp()
G = torch.Generator().manual_seed(0)
KEYS = 0.5 * F.normalize(torch.randn(N, 8, generator=G), dim=1) * torch.rand(N, 1, generator=G)
VALUES = torch.randn(N, 4, generator=G)
Q = 0.3 * F.normalize(torch.randn(5, 8, generator=G), dim=1)


def _timed(policy):
    kw = dict(timestamps=torch.full((N,), T0, dtype=torch.float64), decay=policy)
    if isinstance(policy, ValidityWindow):
        kw["valid_until"] = torch.tensor([T0 + 3600.0 * i for i in range(N)], dtype=torch.float64)
    return HyperbolicMemory(KEYS, VALUES, **kw).eval()


class Read(nn.Module):
    def __init__(self, mem, k=3):
        super().__init__()
        self.mem, self.k = mem, k

    def forward(self, q, now):
        return self.mem(q, k=self.k, at_time=now).read


# ------------------------------------------------------------------ 1. torch.jit.trace refused
@pytest.mark.parametrize("k", [None, 3])
def test_trace_of_a_read_is_refused_naming_export_and_compile(k):
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.mem = HyperbolicMemory(KEYS, VALUES)

        def forward(self, q):
            return self.mem(q, k=k).read

    with pytest.raises(TypeError, match="torch.jit.trace.*torch.export.*torch.compile"):
        torch.jit.trace(M(), Q)
    assert torch.isfinite(M()(Q)).all()   # eager afterwards is untouched


def test_trace_of_hyperbolic_rag_is_refused():
    from hypermem import Memory
    from hypermem.nn import HyperbolicRAG

    store = Memory()
    root = store.add("animals")
    for t in ["dogs are loyal", "cats purr", "parrots talk"]:
        store.add(t, parent=root)
    rag = HyperbolicRAG(store, torch.tensor([-1, 0, 0, 0]), feature_dim=8, k=2)
    with pytest.raises(TypeError, match="HyperbolicRAG.*torch.export.*torch.compile"):
        torch.jit.trace(rag, torch.randn(3, 8))


# ------------------------------------------------------------------ 2. at_time as a tensor
@pytest.mark.parametrize("policy", [HalfLife(hours=1), ValidityWindow()])
@pytest.mark.parametrize("k", [None, 3])
def test_tensor_at_time_equals_the_float(policy, k):
    mem = _timed(policy)
    for h in (0.0, 2.5, 30.0):
        t = T0 + 3600.0 * h
        a, b = mem(Q, k=k, at_time=t), mem(Q, k=k, at_time=torch.tensor(t, dtype=torch.float64))
        assert torch.equal(a.read, b.read) and torch.equal(a.indices, b.indices)
        assert torch.equal(mem.time_weights(t), mem.time_weights(torch.tensor(t, dtype=torch.float64)))


def test_tensor_at_time_checks():
    mem = _timed(HalfLife(hours=1))
    with pytest.raises(TypeError, match="float32.*float64"):
        mem(Q, at_time=torch.tensor(T0, dtype=torch.float32))
    with pytest.raises(ValueError, match="0-d"):
        mem(Q, at_time=torch.tensor([T0, T0], dtype=torch.float64))
    with pytest.raises(ValueError, match="finite"):
        mem(Q, at_time=torch.tensor(float("nan"), dtype=torch.float64))
    exact = torch.tensor(int(T0))   # int64 seconds are exact
    assert torch.equal(mem(Q, at_time=exact).read, mem(Q, at_time=float(int(T0))).read)


@pytest.mark.parametrize("strict", [False, True])
def test_export_takes_now_as_an_input(strict):
    m = Read(_timed(ValidityWindow()))
    ep = torch.export.export(m, (Q, torch.tensor(T0, dtype=torch.float64)), strict=strict).module()
    moved = False
    for h in (0.0, 5.0, 25.0):
        now = torch.tensor(T0 + 3600.0 * h, dtype=torch.float64)
        assert torch.allclose(ep(Q, now), m(Q, now), atol=1e-6)
        moved |= not torch.allclose(m(Q, now), m(Q, torch.tensor(T0, dtype=torch.float64)))
    assert moved   # the expiring slots changed the read: the exported program saw time move


def test_export_refuses_the_frozen_default_clock():
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.mem = _timed(ValidityWindow())

        def forward(self, q):
            return self.mem(q, k=3).read

    with pytest.raises(RuntimeError, match="at_time"):
        torch.export.export(M(), (Q,), strict=False)


def test_compile_serves_changing_tensor_times_without_recompiles():
    from torch._dynamo.utils import counters

    mem = _timed(HalfLife(hours=1))
    torch._dynamo.reset()
    counters.clear()
    f = torch.compile(lambda q, now: mem(q, k=3, at_time=now).read, fullgraph=True, backend="eager")
    for h in range(4):
        now = torch.tensor(T0 + 3600.0 * h, dtype=torch.float64)
        assert torch.allclose(f(Q, now), mem(Q, k=3, at_time=now).read, atol=1e-6)
    assert counters["stats"]["unique_graphs"] == 1
    torch._dynamo.reset()


# ------------------------------------------------------------------ 4. quantize_dynamic
def test_quantize_dynamic_of_a_ball_encoder():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 16), BallEncoder(16, 8), nn.Identity()).eval()
    x = torch.randn(6, 16)
    ref = model(x)
    qm = torch.ao.quantization.quantize_dynamic(model, {nn.Linear}, dtype=torch.qint8)
    assert not isinstance(qm[1].linear, nn.Linear) or qm[1].linear is not model[1].linear
    out = qm(x)
    assert out.dtype == torch.float32 and torch.isfinite(out).all()
    assert (out - ref).abs().max() < 0.05
    assert bool((out.norm(dim=1) < 1).all())


# ------------------------------------------------------------------ 5. bf16 around a float32 memory
@pytest.mark.parametrize("k", [None, 3])
def test_half_query_reads_back_in_its_dtype(k):
    mem = HyperbolicMemory(KEYS, VALUES).eval()
    head = nn.Linear(4, 2).to(torch.bfloat16)
    out = mem(Q.bfloat16(), k=k)
    assert out.read.dtype == torch.bfloat16
    assert out.distances.dtype == torch.float32 and out.scores.dtype == torch.float32
    ref = mem(Q.bfloat16().float(), k=k)
    assert torch.equal(out.read, ref.read.bfloat16())
    assert head(out.read).dtype == torch.bfloat16


def test_autocast_read_unchanged():
    mem = HyperbolicMemory(KEYS, VALUES).eval()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = mem(Q, k=3)
    ref = mem(Q, k=3)
    assert out.read.dtype == torch.bfloat16 and torch.isfinite(out.read).all()
    assert out.weights.dtype == torch.float32 and torch.equal(out.indices, ref.indices)


def test_inference_mode_reads_as_no_grad():
    mem = HyperbolicMemory(KEYS, VALUES).eval()
    with torch.no_grad():
        ref = mem(Q, k=3).read
    with torch.inference_mode():
        out = mem(Q, k=3).read
    assert torch.equal(out, ref)


def test_compile_with_the_default_clock_follows_it_without_recompiles():
    from torch._dynamo.utils import counters

    now = [datetime(2026, 1, 1, tzinfo=timezone.utc)]
    mem = HyperbolicMemory(KEYS, VALUES, timestamps=torch.full((N,), T0, dtype=torch.float64),
                           valid_until=torch.tensor([T0 + 3600.0 * i for i in range(N)], dtype=torch.float64),
                           decay=ValidityWindow(), clock=lambda: now[0]).eval()
    torch._dynamo.reset()
    counters.clear()
    f = torch.compile(lambda q: mem(q, k=3).read, backend="eager")
    graphs = []
    for h in (0, 5, 25):
        now[0] = datetime.fromtimestamp(T0 + 3600.0 * h, timezone.utc)
        assert torch.allclose(f(Q), mem(Q, k=3).read, atol=1e-6)
        graphs.append(counters["stats"]["unique_graphs"])
    assert graphs[0] == graphs[-1]
    with pytest.raises(Exception, match="disable"):
        torch._dynamo.reset()
        torch.compile(lambda q: mem(q, k=3).read, backend="eager", fullgraph=True)(Q)
    torch._dynamo.reset()
