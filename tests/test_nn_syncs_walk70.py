"""Host syncs of a read: a learnable curvature is read from the device once per change (the key
cache follows version counters, not values), the chunked top-k search reads which chunks a bias
excludes once per search instead of once per chunk, with the same results, and a layer on meta
reads shapes."""

import collections
import traceback

import torch
from torch.overrides import TorchFunctionMode

from hypermem.geometry import PoincareBall
from hypermem.index import HyperbolicDistance, exact_topk
from hypermem.nn import HyperbolicMemory

_READS = {torch.Tensor.item, torch.Tensor.tolist, torch.Tensor.__bool__, torch.Tensor.__int__,
          torch.Tensor.__float__, torch.equal}


class _Count(TorchFunctionMode):
    """Counts host reads of tensor values (``.item()``, ``.tolist()``, ``bool()``, ``int()``,
    ``float()``, ``torch.equal``), leaving out the value check of a curvature tensor that
    :func:`hypermem.geometry.conversion.checked_curvature` makes on the CPU only."""

    def __init__(self):
        super().__init__()
        self.n = collections.Counter()

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if func in _READS and not any(f.filename.endswith("conversion.py") for f in traceback.extract_stack()):
            self.n[getattr(func, "__name__", str(func))] += 1
        return func(*args, **(kwargs or {}))


def _keys(n=300, d=6, seed=0):
    g = torch.Generator().manual_seed(seed)
    return 0.3 * torch.nn.functional.normalize(torch.randn(n, d, generator=g, dtype=torch.float64), dim=1)


def _count_curvature_reads(monkeypatch):
    calls = []
    prop = PoincareBall.curvature

    def counted(self):
        calls.append(1)
        return prop.fget(self)
    monkeypatch.setattr(PoincareBall, "curvature", property(counted))
    return calls


def test_a_learned_curvature_is_read_once_per_change_not_per_read(monkeypatch):
    mem = HyperbolicMemory(_keys(), None, learn_curvature=True, curvature=0.7, check_finite=False)
    q = 0.2 * _keys(4, seed=1)
    mem(q, k=5)  # builds the key cache
    calls = _count_curvature_reads(monkeypatch)
    for metric in ("hyperbolic", "shell"):
        mem.metric = metric
        mem(q, k=5)
        mem(q)
    assert calls == []  # was: every read (the cache's stamp), a top-k read 2-4 times
    with torch.no_grad():
        mem.ball.isp_c.add_(0.1)
    mem(q, k=5)
    assert len(calls) <= 1  # the new c, read once with the keys' check (torch.equal gone)


def test_a_training_step_with_a_learned_curvature_checks_the_keys_in_one_sync():
    mem = HyperbolicMemory(_keys(), None, learn_curvature=True, check_finite=False)
    opt = torch.optim.SGD(mem.parameters(), lr=0.05)
    q = 0.2 * _keys(4, seed=1)
    mem(q).read.sum().backward()
    opt.step()
    opt.zero_grad()
    with _Count() as c:
        mem(q)  # the step moved c and the keys: the cache is rebuilt
    assert c.n["equal"] == 0 and sum(c.n.values()) == 1, c.n  # was 5: c three times, torch.equal, the check


def test_the_cache_follows_an_optimizer_step_on_the_curvature_and_an_in_place_key_edit():
    keys = _keys()
    mem = HyperbolicMemory(keys, None, learn_curvature=True, curvature=1.0)
    q = 0.25 * _keys(5, seed=2)
    mem(q, k=4)
    opt = torch.optim.SGD([mem.ball.isp_c], lr=1.0)
    mem.ball.isp_c.grad = torch.tensor(-1.0, dtype=torch.float64)
    opt.step()  # in place on isp_c: its version moves, c goes from 1 to ~1.7
    c = mem.curvature
    assert abs(c - 1.0) > 1e-3
    fresh = HyperbolicMemory(mem.keys.detach().clone(), None, curvature=c)
    a, b = mem(q, k=4), fresh(q, k=4)
    assert torch.equal(a.indices, b.indices) and torch.allclose(a.distances, b.distances, rtol=1e-12)
    dirs, radius = mem.key_geometry()
    assert torch.allclose(radius, fresh.key_geometry()[1], rtol=1e-12)
    with torch.no_grad():
        mem.keys[7] = q[0]  # in place: bumps the keys' version
    assert mem(q[:1], k=1).indices.item() == 7
    assert torch.allclose(mem.key_geometry()[0][7], q[0] / q[0].norm())


def test_a_learned_curvature_reads_like_the_same_fixed_curvature():
    keys, q = _keys(), 0.2 * _keys(6, seed=3)
    for metric in ("hyperbolic", "shell"):
        learned = HyperbolicMemory(keys, None, curvature=0.6, learn_curvature=True, metric=metric, depth_bias=0.2)
        fixed = HyperbolicMemory(keys, None, curvature=learned.curvature, metric=metric, depth_bias=0.2)
        for k in (None, 7):
            a, b = learned(q, k=k), fixed(q, k=k)
            assert torch.equal(a.indices, b.indices)
            assert torch.allclose(a.read, b.read, rtol=1e-12, atol=1e-14)


def _reference(q, keys, k, dist, bias):
    """Top-k by a stable sort of all scores: descending score, ties by ascending index."""
    s = -dist(q @ keys.T, torch.arange(len(keys))) + (0 if bias is None else bias)
    vals, pos = torch.sort(s, dim=1, descending=True, stable=True)
    return vals[:, :k], pos[:, :k]


def _search(n, B, seed, ties, bias):
    g = torch.Generator().manual_seed(seed)
    keys = torch.nn.functional.normalize(torch.randn(n, 8, generator=g, dtype=torch.float64), dim=1)
    q = torch.nn.functional.normalize(torch.randn(B, 8, generator=g, dtype=torch.float64), dim=1)
    radius = torch.rand(n, generator=g, dtype=torch.float64) + 0.5
    if ties:  # a third of the slots equal, nearest to query 0: exact ties at every cut
        keys[::3], radius[::3], q[0] = keys[0], radius[0], keys[0]
    dist = HyperbolicDistance(1.0, torch.full((B,), 1.0, dtype=torch.float64), radius)
    b = None if bias is None else torch.where(torch.arange(n) < 3000, -torch.inf, bias * radius)
    return q, keys, dist, b


def test_the_chunked_search_reads_its_excluded_chunks_once_with_the_same_results():
    for ties in (False, True):
        q, keys, dist, b = _search(20000, 3, 0, ties, 0.3)
        with _Count() as c:
            s, i, _ = exact_topk(q, keys, 10, dist, b, None, chunk_elements=3 * 1024)
        with _Count() as c0:
            exact_topk(q, keys, 10, dist, None, None, chunk_elements=3 * 1024)
        # ~18 chunks: the bias's excluded chunks were one sync each, now one for all
        assert sum(c.n.values()) <= sum(c0.n.values()) + 1, (ties, c.n, c0.n)
        rs, ri = _reference(q, keys, 10, dist, b)
        assert torch.equal(i, ri) and torch.allclose(s, rs, rtol=1e-12)


def test_a_layer_on_meta_traces_shapes_with_check_finite_off():
    keys = _keys(5000, 8)
    for learn in (False, True):
        mem = HyperbolicMemory(keys, torch.zeros(5000, 3, dtype=torch.float64), check_finite=False,
                               learn_curvature=learn).to("meta")
        q = torch.empty(2, 8, dtype=torch.float64, device="meta")
        full, top = mem(q), mem(q, k=4)  # raised: Tensor.item() cannot be called on meta tensors
        assert full.read.shape == (2, 3) and full.indices.shape == (2, 5000)
        assert top.read.shape == (2, 3) and top.indices.shape == (2, 4) and top.read.device.type == "meta"
