"""The nn layer under ``torch.compile``: a model BallEncoder -> HyperbolicMemory -> Linear
compiled gives the eager model's outputs and gradients (full and top-k reads)."""

import pytest
import torch
from torch import nn

from hypermem.geometry import poincare as P
from hypermem.nn import BallEncoder, HyperbolicMemory

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("one_thread")]


class _Model(nn.Module):
    def __init__(self, k):
        super().__init__()
        g = torch.Generator().manual_seed(0)
        self.k = k
        self.encoder = BallEncoder(6, 4, depth="learned")
        keys = P.point_at(torch.randn(32, 4, generator=g), torch.rand(32, generator=g) * 2 + 0.5)
        self.memory = HyperbolicMemory(keys, torch.randn(32, 5, generator=g), learn_values=True, depth_bias=0.1)
        self.head = nn.Linear(5, 3)

    def forward(self, x):
        return self.head(self.memory(self.encoder(x), k=self.k).read)


@pytest.mark.parametrize("k", [None, 4])
def test_compiled_model_matches_eager_outputs_and_gradients(k):
    torch.manual_seed(1)
    eager = _Model(k)
    compiled_model = _Model(k)
    compiled_model.load_state_dict(eager.state_dict())
    compiled = torch.compile(compiled_model, backend="inductor", fullgraph=True)  # no graph break
    x = torch.randn(8, 6)
    target = torch.randint(0, 3, (8,))
    outs = []
    for model in (eager, compiled):
        out = model(x)
        nn.functional.cross_entropy(out, target).backward()
        outs.append(out.detach())
    assert torch.allclose(outs[0], outs[1], atol=1e-5, rtol=1e-5)
    grads = {n: p.grad for n, p in eager.named_parameters() if p.grad is not None}
    other = {n: p.grad for n, p in compiled_model.named_parameters() if p.grad is not None}
    assert set(grads) == set(other) and {"memory.keys", "memory.values", "memory.log_temperature",
                                          "encoder.linear.weight", "head.weight"} <= set(grads)
    for name, g in grads.items():
        assert torch.allclose(g, other[name], atol=1e-5, rtol=1e-4), name


def _explained(fn, *args):
    torch._dynamo.reset()
    return torch._dynamo.explain(fn)(*args)


@pytest.mark.parametrize("k", [None, 4])
@pytest.mark.parametrize("options", [{}, {"metric": "shell"}, {"learn_curvature": True}, "timed"])
def test_a_read_traces_as_one_graph_with_no_graph_break(k, options):
    from hypermem.temporal import HalfLife

    g = torch.Generator().manual_seed(0)
    keys = P.point_at(torch.randn(32, 4, generator=g), torch.rand(32, generator=g) * 2 + 0.5)
    if options == "timed":
        options = {"decay": HalfLife(hours=1), "timestamps": torch.arange(32, dtype=torch.float64) * 60,
                   "importance": torch.rand(32, generator=g) + 0.5, "depth_bias": 0.2}
    memory = HyperbolicMemory(keys, torch.randn(32, 5, generator=g), learn_values=True, **options)
    encoder = BallEncoder(6, 4, depth="learned")
    exclude = torch.tensor([1, 2, -1, 3, 4, 5, 6, 7])

    def loss(x):
        return memory(encoder(x), k=k, exclude=exclude, at_time=3600.0).read.square().sum()

    explained = _explained(loss, torch.randn(8, 6))
    assert explained.graph_break_count == 0 and explained.graph_count == 1, explained.break_reasons
    # fullgraph=True refuses any break; the backward is AOTAutograd's graph of the same one
    compiled = torch.compile(loss, fullgraph=True, backend="aot_eager")
    x = torch.randn(8, 6)
    compiled(x).backward()
    assert memory.values.grad is not None and encoder.linear.weight.grad is not None


def test_a_compiled_read_on_cpu_still_refuses_a_nan_query():
    g = torch.Generator().manual_seed(0)
    keys = P.point_at(torch.randn(16, 4, generator=g), torch.rand(16, generator=g) + 0.5)
    memory = HyperbolicMemory(keys)
    torch._dynamo.reset()
    read = torch.compile(lambda q: memory(q, k=3).read, fullgraph=True, backend="aot_eager")
    q = 0.1 * torch.randn(2, 4)
    assert torch.isfinite(read(q)).all()
    q[1, 0] = float("nan")
    with pytest.raises(RuntimeError, match="a query has NaN or inf coordinates"):
        read(q)
