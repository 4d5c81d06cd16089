"""``append`` / ``remove`` keep the memory's Parameter objects, so the optimizer a user built
keeps training the grown or shrunk memory (:mod:`hypermem.nn.param_rows`): a stateless one
as is, one with per-parameter state given ``optimizer=`` (its state resized), and without it
a loud shape error at the next step, never a silent stop."""

from __future__ import annotations

import pathlib
import textwrap

import geoopt
import pytest
import torch
import torch.nn.functional as F

from hypermem.nn import HyperbolicMemory

pytestmark = pytest.mark.usefixtures("one_thread")

# small steps: Euclidean optimizers move the keys as plain vectors (they stay well inside the ball)
OPTIMIZERS = {
    "Adam": lambda ps: torch.optim.Adam(ps, lr=1e-2),
    "AdamW": lambda ps: torch.optim.AdamW(ps, lr=1e-2),
    "SGD-momentum": lambda ps: torch.optim.SGD(ps, lr=1e-2, momentum=0.9),
    "RiemannianAdam": lambda ps: geoopt.optim.RiemannianAdam(ps, lr=5e-2),
    "RiemannianSGD-momentum": lambda ps: geoopt.optim.RiemannianSGD(ps, lr=5e-2, momentum=0.9),
}
STATELESS = {
    "SGD": lambda ps: torch.optim.SGD(ps, lr=1e-2),
    "RiemannianSGD": lambda ps: geoopt.optim.RiemannianSGD(ps, lr=5e-2),
}
Q = torch.randn(3, 4, generator=torch.Generator().manual_seed(1)) * 0.1


def _memory():
    g = torch.Generator().manual_seed(0)
    K = F.normalize(torch.randn(10, 4, generator=g), dim=1) * 0.5
    return HyperbolicMemory(K, torch.randn(10, 3, generator=g), learn_values=True)


def _steps(m, opt, n, k=4):
    for _ in range(n):
        loss = m(Q, k=k).read.sum()  # the last loss (and its graph) stays alive across the write
        opt.zero_grad()
        loss.backward()
        opt.step()
    return loss


def _new_rows(m=2):
    return torch.full((m, 4), 0.1), torch.randn(m, 3, generator=torch.Generator().manual_seed(2))


@pytest.mark.parametrize("name", sorted(STATELESS))
def test_a_stateless_optimizer_keeps_training_the_grown_memory(name):
    m = _memory()
    keys, values, manifold = m.keys, m.values, m.keys.manifold
    opt = STATELESS[name](m.parameters())
    last = _steps(m, opt, 1)  # a loss kept alive holds the keys' gradient accumulator of the old shape
    m.append(*_new_rows())
    assert m.keys is keys and m.values is values  # same objects: the optimizer still holds them
    assert isinstance(m.keys, geoopt.ManifoldParameter) and m.keys.manifold is manifold
    assert m.keys.shape == (12, 4) and m.values.shape == (12, 3)
    before_k, before_v = m.keys.detach().clone(), m.values.detach().clone()
    _steps(m, opt, 3, k=12)
    assert last.grad_fn is not None
    assert not torch.equal(before_k, m.keys.detach()) and not torch.equal(before_v, m.values.detach())
    assert not torch.equal(before_k[10:], m.keys.detach()[10:])  # the new slots train too
    m.remove([0, 11])
    assert m.keys is keys and m.keys.shape == (10, 4)
    before_k = m.keys.detach().clone()
    _steps(m, opt, 2)
    assert not torch.equal(before_k, m.keys.detach())


@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_a_stateful_optimizer_not_given_to_the_write_fails_loudly(name):
    for write in ("append", "remove"):
        m = _memory()
        opt = OPTIMIZERS[name](m.parameters())
        _steps(m, opt, 2)
        if write == "append":
            m.append(*_new_rows())
        else:
            m.remove([3, 4, 5])
        loss = m(Q, k=4).read.sum()
        opt.zero_grad()
        loss.backward()
        with pytest.raises(RuntimeError, match="size|shape"):
            opt.step()


@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_optimizer_given_to_the_write_has_its_state_resized_and_trains_on(name):
    m = _memory()
    opt = OPTIMIZERS[name](m.parameters())
    _steps(m, opt, 3)
    old = {n: {s: t.clone() for s, t in opt.state[p].items() if isinstance(t, torch.Tensor)}
           for n, p in (("keys", m.keys), ("values", m.values))}
    m.append(*_new_rows(), optimizer=opt)
    for n, p in (("keys", m.keys), ("values", m.values)):
        for s, t in old[n].items():
            new = opt.state[p][s]
            if t.dim() == 0:  # Adam's step count is kept
                assert torch.equal(new, t)
            else:
                assert new.shape == p.shape and torch.equal(new[:10], t) and not new[10:].any()
    before = m.keys.detach().clone()
    _steps(m, opt, 3, k=12)
    assert not torch.equal(before[10:], m.keys.detach()[10:])
    state = {s: t.clone() for s, t in opt.state[m.keys].items() if isinstance(t, torch.Tensor) and t.dim()}
    assert state, "a stateful optimizer keeps per-row state"
    kept = torch.tensor([i for i in range(12) if i not in (0, 11)])
    m.remove(["0", m.ids[11]], optimizer=[opt])  # a list of optimizers works too
    for s, t in state.items():
        assert torch.equal(opt.state[m.keys][s], t[kept])
    before = m.keys.detach().clone()
    _steps(m, opt, 2)
    assert not torch.equal(before, m.keys.detach())


def test_a_pending_gradient_is_resized_with_the_rows():
    m = _memory()
    m(Q, k=None).read.sum().backward()
    g = m.keys.grad.clone()
    m.append(*_new_rows())
    assert m.keys.grad.shape == (12, 4) and torch.equal(m.keys.grad[:10], g) and not m.keys.grad[10:].any()
    m.remove([1])
    assert torch.equal(m.keys.grad[:9], torch.cat([g[:1], g[2:]]))


def test_a_wrong_optimizer_argument_is_refused_before_anything_changes():
    m = _memory()
    other = torch.optim.Adam([torch.nn.Parameter(torch.zeros(3))])
    with pytest.raises(ValueError, match="neither the keys nor the values"):
        m.append(*_new_rows(), optimizer=other)
    with pytest.raises(TypeError, match="torch optimizer"):
        m.remove([0], optimizer="adam")
    assert len(m) == 10 and m.ids == [str(i) for i in range(10)]


def test_compiled_reads_follow_the_grown_and_shrunk_memory():
    m = _memory()
    opt = geoopt.optim.RiemannianAdam(m.parameters(), lr=5e-2)
    compiled = torch.compile(m, backend="aot_eager", fullgraph=True)
    for k in (None, 4):
        _steps(compiled, opt, 1, k=k)
    m.append(*_new_rows(), optimizer=opt)
    for k in (None, 4):
        out, ref = compiled(Q, k=k), m(Q, k=k)
        assert out.weights.shape == ref.weights.shape and torch.allclose(out.read, ref.read, atol=1e-6)
    before = m.keys.detach().clone()
    _steps(compiled, opt, 2, k=None)
    assert not torch.equal(before[10:], m.keys.detach()[10:])
    m.remove([0, 1, 2], optimizer=opt)
    out, ref = compiled(Q, k=4), m(Q, k=4)
    assert torch.allclose(out.read, ref.read, atol=1e-6)
    _steps(compiled, opt, 1, k=4)


def test_the_documented_example_runs():
    doc = (pathlib.Path(__file__).parent.parent / "docs" / "nn.md").read_text(encoding="utf-8")
    part = doc.split("**Growing and shrinking while training**", 1)[1]
    code = textwrap.dedent(part.split("```python\n", 1)[1].split("```", 1)[0])
    scope: dict = {}
    exec(compile(code, "docs/nn.md", "exec"), scope)
    assert len(scope["memory"]) == 4 and scope["memory"].keys.shape == (4, 4)


@pytest.mark.parametrize("write", ["append", "remove"])
def test_a_loss_from_before_a_write_raises_torchs_inplace_error(write):
    """The write changes the parameters in place: the pre-write graph's saved keys would be the
    new rows, so its backward raises torch's own error (it was an opaque shape error)."""
    m = _memory()
    q = 0.1 * torch.randn(2, 4)
    loss = m(q).read.pow(2).sum()
    if write == "append":
        m.append(*_new_rows())
    else:
        m.remove([0])
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        loss.backward()
    m(q).read.pow(2).sum().backward()   # a graph built after the write trains the new rows
    assert m.keys.grad.shape == m.keys.shape


def test_a_write_under_inference_mode_leaves_the_memory_trainable():
    m = _memory()
    opt = geoopt.optim.RiemannianAdam(m.parameters(), lr=1e-2)
    _steps(m, opt, 1)
    with torch.inference_mode():
        m.append(*_new_rows(), optimizer=opt)
        m.remove([1], optimizer=opt)
    assert not m.keys.is_inference() and not m.values.is_inference()
    assert not any(t.is_inference() for s in opt.state.values() for t in s.values() if isinstance(t, torch.Tensor))
    before = m.keys.detach().clone()
    _steps(m, opt, 2)
    assert not torch.equal(before, m.keys.detach())
