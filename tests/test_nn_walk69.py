"""Fixes from a PyTorch user's walk through ``hypermem.nn`` (stop 69): ``sparse_grad=True``
under ``DistributedDataParallel`` (two gloo processes on the CPU), ``BallEncoder`` after
``to_empty()`` refused until initialised, a zero direction's gradient in ``point_at`` (the
encoder's fixed and learned depths), and ``torch.func.vmap`` with ``check_finite``."""

from __future__ import annotations

import copy
import os
import socket
import warnings

import geoopt
import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import nn
from torch.autograd import gradcheck

from hypermem import HashingEmbedder, Memory
from hypermem.geometry import poincare as P
from hypermem.geometry.numerics import safe_norm
from hypermem.nn import BallEncoder, HyperbolicMemory, HyperbolicRAG

pytestmark = pytest.mark.usefixtures("one_thread")


# -- 1. sparse_grad=True under DistributedDataParallel ---------------------------------------
def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _ddp_worker(rank: int, world: int, port: int, out: str) -> None:
    torch.set_num_threads(1)
    os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = "127.0.0.1", str(port)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    g = torch.Generator().manual_seed(rank)  # other keys per rank: DDP broadcasts rank 0's
    keys = 0.5 * torch.nn.functional.normalize(torch.randn(12, 4, generator=g, dtype=torch.float64), dim=-1)
    mem = HyperbolicMemory(keys, torch.randn(12, 3, generator=g, dtype=torch.float64), learn_values=True,
                           sparse_grad=True)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        ddp = nn.parallel.DistributedDataParallel(mem)
        opt = geoopt.optim.RiemannianAdam(mem.parameters(), lr=0.05)
        result = {"grads": []}
        for _ in range(3):
            q = 0.3 * torch.nn.functional.normalize(torch.randn(5, 4, generator=g, dtype=torch.float64), dim=-1)
            opt.zero_grad()
            ddp(q, k=3).read.pow(2).sum().backward()
            result["grads"].append({n: p.grad.clone() for n, p in mem.named_parameters()})
            opt.step()
    result["state"] = {n: t.clone() for n, t in mem.state_dict().items()}
    result["warnings"] = [str(w.message) for w in seen]
    torch.save(result, os.path.join(out, f"rank{rank}.pt"))
    dist.destroy_process_group()


@pytest.mark.slow
def test_sparse_grad_memory_trains_under_ddp_with_gradients_synced(tmp_path):
    mp.spawn(_ddp_worker, args=(2, _free_port(), str(tmp_path)), nprocs=2, join=True)
    r0, r1 = (torch.load(tmp_path / f"rank{r}.pt", weights_only=False) for r in (0, 1))
    for g0, g1 in zip(r0["grads"], r1["grads"], strict=True):
        assert set(g0) == {"keys", "values", "log_temperature"}
        for name in g0:
            assert not g0[name].is_sparse  # dense under DDP, all-reduced like any other gradient
            assert torch.equal(g0[name], g1[name]), name
    assert r0["grads"][0]["keys"].abs().sum() > 0
    assert r0["state"].keys() == r1["state"].keys()
    for name, t in r0["state"].items():
        assert torch.equal(t, r1["state"][name]), name
    for r in (r0, r1):
        assert any("DistributedDataParallel accepts sparse gradients only from nn.Embedding" in w
                   for w in r["warnings"])


@pytest.mark.filterwarnings("ignore:sparse_grad=True. torch.distributed is initialised")
def test_in_a_process_group_the_gathers_are_dense_and_rag_gives_the_keys_a_dense_optimizer():
    store = Memory(embedder=HashingEmbedder(dim=8))
    root = store.add("animals")
    for t in ["dogs are loyal", "cats purr", "parrots talk"]:
        store.add(t, parent=root)
    rag = HyperbolicRAG(store, torch.tensor([-1, 0, 0, 0]), 8)  # sparse_grad=True by default
    assert rag.sparse_parameters() == [rag.memory.keys]
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{_free_port()}", rank=0, world_size=1)
    try:
        assert rag.sparse_parameters() == []
        assert [type(o) for o in rag.optimizers()] == [geoopt.optim.RiemannianAdam]
        mem = rag.memory
        mem(mem.keys.detach()[:2] * 0.5, k=2).read.sum().backward()
        assert mem.keys.grad is not None and not mem.keys.grad.is_sparse
    finally:
        dist.destroy_process_group()


def test_sparse_grad_stays_sparse_without_torch_distributed():
    mem = HyperbolicMemory(0.3 * torch.eye(4), torch.eye(4), learn_values=True, sparse_grad=True)
    mem(torch.full((2, 4), 0.1), k=2).read.sum().backward()
    assert mem.keys.grad.is_sparse and mem.values.grad.is_sparse


# -- 2. BallEncoder after to_empty() ---------------------------------------------------------
def _emptied(**kw) -> BallEncoder:
    return BallEncoder(6, 6, **kw).to("meta").to_empty(device="cpu")


def test_an_emptied_encoder_with_finite_garbage_refuses_naming_to_empty():
    enc = _emptied(depth="learned")
    with torch.no_grad():  # finite garbage (what to_empty often leaves), written where no version moves
        for p in enc.parameters():
            p.data.fill_(0.25)
    with pytest.raises(ValueError, match=r"BallEncoder is uninitialised: its parameters linear\.weight, "
                                         r"linear\.bias, depth_head\.weight, depth_head\.bias still hold "
                                         r"what \.to_empty\(\) allocated.*load_state_dict\(\).*reset_parameters"):
        enc(torch.randn(2, 6))


def test_an_emptied_encoder_runs_after_reset_parameters_like_a_fresh_one():
    fresh = BallEncoder(6, 6, depth="learned", init="identity", curvature=0.5)
    enc = copy.deepcopy(fresh).to("meta").to_empty(device="cpu")
    enc.reset_parameters()
    for (n, a), b in zip(fresh.state_dict().items(), enc.state_dict().values(), strict=True):
        assert torch.equal(a, b), n  # identity map, depth head and curvature as the constructor left them
    x = torch.randn(3, 6)
    assert torch.equal(enc(x), fresh(x))


def test_an_emptied_encoder_runs_after_a_load_or_writing_every_weight():
    good = BallEncoder(6, 6).state_dict()
    enc = _emptied()
    enc.load_state_dict(good)
    assert torch.isfinite(enc(torch.randn(2, 6))).all()
    enc = _emptied()
    nn.init.xavier_uniform_(enc.linear.weight)  # in place: the version moves
    with pytest.raises(ValueError, match=r"its parameters linear\.bias still hold"):
        enc(torch.randn(2, 6))
    enc.linear.bias = nn.Parameter(torch.zeros(6))  # replaced
    assert torch.isfinite(enc(torch.randn(2, 6))).all()
    assert enc.uninitialised() == []


# -- 3. a zero direction in point_at (BallEncoder depth=<float> / "learned") ----------------
def _old_point_at(u, r, c=1.0):
    """The formula before: ``u / safe_norm(u)`` (norm floored at ``tiny``)."""
    u = u / safe_norm(u, keepdim=True)
    return P.project(torch.tanh(c ** 0.5 * r / 2.0) * u / c ** 0.5, c)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_point_at_gives_a_zero_gradient_at_a_zero_direction_and_the_old_one_elsewhere(dtype):
    g = torch.Generator().manual_seed(1)
    base = torch.randn(6, 5, generator=g, dtype=dtype)
    base[2] = 0.0
    base[4] = 1e-30 if dtype == torch.float64 else 1e-15  # small, squares still positive
    r = torch.rand(6, 1, generator=g, dtype=dtype) + 0.5
    w = torch.randn(6, 5, generator=g, dtype=dtype)
    outs, grads = [], []
    for f in (lambda u: P.point_at(u, r.squeeze(1), 0.7), lambda u: _old_point_at(u, r, 0.7)):
        u = base.clone().requires_grad_()
        out = f(u)
        (out * w).sum().backward()
        outs.append(out.detach())
        grads.append(u.grad)
    tol = {"rtol": 1e-6, "atol": 1e-7} if dtype == torch.float32 else {"rtol": 1e-14, "atol": 1e-15}
    torch.testing.assert_close(outs[0], outs[1], **tol)  # every value as before to rounding (the origin at 0)
    assert torch.equal(outs[0][2], torch.zeros(5, dtype=dtype))
    assert torch.isfinite(grads[0]).all() and torch.equal(grads[0][2], torch.zeros(5, dtype=dtype))
    assert grads[1][2].abs().max() > 1e10              # what the floored norm gave
    keep = [0, 1, 3, 4, 5]
    torch.testing.assert_close(grads[0][keep], grads[1][keep], **tol)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("depth", [1.5, "learned"])
def test_encoder_input_gradient_at_a_zero_row_is_zero(depth, dtype):
    enc = BallEncoder(4, 4, depth=depth, dtype=dtype, bias=False, init="identity")
    x = torch.zeros(2, 4, dtype=dtype)
    x[1] = torch.tensor([0.3, -0.2, 0.1, 0.5], dtype=dtype)
    x.requires_grad_()
    out = enc(x)
    (out * torch.arange(1.0, 5.0, dtype=dtype)).sum().backward()
    assert torch.equal(out[0].detach(), torch.zeros(4, dtype=dtype))
    assert torch.equal(x.grad[0], torch.zeros(4, dtype=dtype))
    assert torch.isfinite(x.grad).all() and x.grad[1].abs().sum() > 0


def test_point_at_passes_gradcheck_away_from_zero():
    g = torch.Generator().manual_seed(2)
    u = torch.randn(4, 3, generator=g, dtype=torch.float64).requires_grad_()
    r = (torch.rand(4, 1, generator=g, dtype=torch.float64) + 0.3).requires_grad_()
    assert gradcheck(lambda a, b: P.point_at(a, b, 0.8), (u, r))
    enc = BallEncoder(3, 3, depth=1.2, dtype=torch.float64)
    assert gradcheck(enc, (u,))


# -- 4. torch.func.vmap and check_finite -----------------------------------------------------
def test_vmap_with_check_finite_says_to_turn_it_off():
    enc = BallEncoder(4, 4, dtype=torch.float64)
    x = torch.randn(5, 4, dtype=torch.float64)
    with pytest.raises(RuntimeError, match=r"torch\.func\.vmap cannot: build the layer with check_finite=False"):
        torch.func.vmap(enc)(x)
    enc.check_finite = False
    assert torch.equal(torch.func.vmap(enc)(x), enc(x))
