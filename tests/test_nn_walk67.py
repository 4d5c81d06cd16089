"""Walk 67 of the nn layers: a grown / shrunk memory loads into a layer of its initial size
(plain ``load_state_dict`` and a Lightning resume, optimizer state included); ``memory_info_nce``
refuses an excluded target on both paths; ``BallEncoder`` names ``to_empty()``; ``index_of``'s
cached map never goes stale; generated ids are deterministic."""

from __future__ import annotations

import copy
import io

import geoopt
import pytest
import torch
import torch.nn.functional as F

from hypermem.nn import BallEncoder, HyperbolicMemory, memory_info_nce
from hypermem.nn.slot_ids import SlotIds

D = 4


def _keys(n: int, seed: int = 0, dtype=torch.float64) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return 0.5 * F.normalize(torch.randn(n, D, generator=g, dtype=dtype), dim=1)


def _queries(b: int = 3, seed: int = 1) -> torch.Tensor:
    return _keys(b, seed) * 0.8


def _layer(n: int, seed: int = 0, **kw) -> HyperbolicMemory:
    kw.setdefault("learn_values", True)
    return HyperbolicMemory(_keys(n, seed), torch.randn(n, 3, dtype=torch.float64), depth=torch.ones(n),
                            timestamps=torch.full((n,), 1.7e9), access_counts=torch.zeros(n),
                            importance=torch.ones(n), **kw)


def _trained_and_resized(n_add: int, n_remove: int):
    """A layer of 10 slots, one Adam step, then ``n_add`` slots appended and the first ``n_remove``
    removed (optimizer= passed); returns it and its optimizer."""
    m = _layer(10)
    opt = geoopt.optim.RiemannianAdam(m.parameters(), lr=1e-2)
    m(_queries(), k=3).read.sum().backward()
    opt.step()
    m.append(_keys(n_add, 5) * 0.5, torch.ones(n_add, 3, dtype=torch.float64), ids=[f"new{i}" for i in range(n_add)],
             optimizer=opt)
    m.remove(list(range(n_remove)), optimizer=opt)
    return m, opt


@pytest.mark.parametrize("n_add,n_remove", [(6, 1), (1, 6)])   # 15 and 5 slots into a layer of 10
@pytest.mark.parametrize("assign", [False, True])
def test_a_resized_memory_loads_into_a_fresh_layer_of_its_initial_size(n_add, n_remove, assign):
    m, opt = _trained_and_resized(n_add, n_remove)
    fresh = _layer(10, seed=3)
    keys, values = fresh.keys, fresh.values
    fresh.load_state_dict({k: v.clone() for k, v in m.state_dict().items()}, assign=assign)  # no shared storage
    assert len(fresh) == len(m) == 10 + n_add - n_remove
    if not assign:   # the same Parameter objects, resized in place
        assert fresh.keys is keys and fresh.values is values
    assert isinstance(fresh.keys, geoopt.ManifoldParameter)
    for name in ("keys", "values", "depth", "importance", "timestamps", "access_counts"):
        assert torch.equal(getattr(fresh, name), getattr(m, name)), name
    assert fresh.ids == m.ids and fresh.index_of(["new0", m.ids[0]]).tolist() == [m.ids.index("new0"), 0]
    # an optimizer built after the load takes the checkpoint's state, and steps
    o = geoopt.optim.RiemannianAdam(fresh.parameters(), lr=1e-2)
    o.load_state_dict(opt.state_dict())
    assert o.state[fresh.keys]["exp_avg"].shape == (len(m), D)
    assert torch.equal(o.state[fresh.keys]["exp_avg"], opt.state[m.keys]["exp_avg"])
    opt.load_state_dict(copy.deepcopy(opt.state_dict()))  # its step count a tensor too, as loaded in `o`
    for mem, op in ((m, opt), (fresh, o)):
        op.zero_grad()
        mem(_queries(), k=3).read.sum().backward()
        op.step()
    assert torch.allclose(fresh.keys, m.keys) and torch.allclose(fresh.values, m.values)


def test_meta_then_to_empty_then_load_takes_the_checkpoints_slot_count():
    m, _ = _trained_and_resized(4, 1)
    fresh = _layer(10, seed=3).to("meta")
    fresh.to_empty(device="cpu")
    fresh.load_state_dict(m.state_dict())
    assert len(fresh) == 13 and torch.equal(fresh.keys, m.keys) and fresh.ids == m.ids
    on_meta = _layer(10, seed=3).to("meta")
    on_meta.load_state_dict(m.state_dict(), assign=True)
    assert len(on_meta) == 13 and torch.equal(on_meta.keys, m.keys)
    assert torch.allclose(on_meta(_queries(), k=2).read, m(_queries(), k=2).read)


@pytest.mark.parametrize("break_it", ["drop timestamps", "short depth", "no ids", "values wider"])
def test_a_missing_or_inconsistent_slot_tensor_keeps_torchs_size_mismatch(break_it):
    m, _ = _trained_and_resized(3, 0)
    sd = m.state_dict()
    if break_it == "drop timestamps":
        del sd["timestamps"]
    elif break_it == "short depth":
        sd["depth"] = sd["depth"][:5]
    elif break_it == "no ids":
        del sd["_extra_state"]
    else:
        sd["values"] = torch.zeros(13, 4, dtype=torch.float64)
    fresh = _layer(10, seed=3)
    before = fresh.keys.detach().clone()
    with pytest.raises(RuntimeError, match="size mismatch for keys"):
        fresh.load_state_dict(sd, strict=False)
    assert len(fresh) == 10 and torch.equal(fresh.keys, before) and fresh.ids == [str(i) for i in range(10)]


def test_lightning_resumes_a_memory_grown_and_shrunk_in_a_training_hook(tmp_path):
    L = pytest.importorskip("lightning")

    class LM(L.LightningModule):
        def __init__(self):
            super().__init__()
            self.mem = HyperbolicMemory(_keys(10, dtype=torch.float32), torch.randn(10, 3), learn_values=True)
            self.seen: dict = {}

        def training_step(self, batch, _):
            (q,) = batch
            return self.mem(q, k=3).read.pow(2).sum()

        def on_train_batch_end(self, *_):
            opt = self.optimizers()
            if self.global_step == 3:
                self.mem.append(0.1 * _keys(3, 7, torch.float32), torch.ones(3, 3), ids=["a", "b", "c"], optimizer=opt)
            if self.global_step == 6:
                self.mem.remove([0, 1, 2, 3, 4], optimizer=opt)

        def on_train_start(self):
            opt = self.trainer.optimizers[0]
            st = opt.state.get(self.mem.keys)  # none before the first step; the checkpoint's on resume
            if st:
                self.seen = {"exp_avg": tuple(st["exp_avg"].shape), "step": int(st["step"]),
                             "same": any(p is self.mem.keys for g in opt.param_groups for p in g["params"])}

        def configure_optimizers(self):
            return geoopt.optim.RiemannianAdam(self.parameters(), lr=1e-2)

    data = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(0.8 * _keys(32, 2, torch.float32)), batch_size=4)
    kw = dict(accelerator="cpu", devices=1, logger=False, enable_checkpointing=False, enable_progress_bar=False,
              enable_model_summary=False, default_root_dir=tmp_path)
    first = LM()
    trainer = L.Trainer(max_steps=8, **kw)
    trainer.fit(first, data)
    assert len(first.mem) == 8
    ckpt = tmp_path / "a.ckpt"
    trainer.save_checkpoint(ckpt)
    resumed = LM()
    L.Trainer(max_steps=10, **kw).fit(resumed, data, ckpt_path=ckpt)
    assert resumed.seen == {"exp_avg": (8, D), "step": 8, "same": True}
    assert len(resumed.mem) == 8 and resumed.mem.ids[5:] == ["a", "b", "c"]
    assert resumed.mem.index_of(["c", "5"]).tolist() == [7, 0]
    loaded = LM.load_from_checkpoint(ckpt)
    assert len(loaded.mem) == 8 and torch.equal(loaded.mem.keys, first.mem.keys)


@pytest.mark.parametrize("k", [None, 3])
@pytest.mark.parametrize("two_d", [False, True])
def test_memory_info_nce_refuses_an_excluded_target_on_both_paths(k, two_d):
    mem = HyperbolicMemory(_keys(200), torch.randn(200, 4, dtype=torch.float64))
    ex = torch.full((8,), -1)
    ex[5] = 5
    if two_d:
        ex = torch.stack([torch.full((8,), 199), ex], 1)
    with pytest.raises(ValueError, match=r"targets row #5: the answer slot 5 is also in exclude"):
        memory_info_nce(mem, _keys(8, 4) * 0.7, torch.arange(8), k=k, exclude=ex)
    other = torch.full((8,), 150)
    assert torch.isfinite(memory_info_nce(mem, _keys(8, 4) * 0.7, torch.arange(8), k=k, exclude=other))


def test_ball_encoder_names_to_empty_after_meta_and_to_empty_without_a_load():
    enc = torch.nn.Sequential(BallEncoder(5, D))
    good = copy.deepcopy(enc.state_dict())
    enc.to("meta")
    enc.to_empty(device="cpu")
    with torch.no_grad():
        enc[0].linear.weight.fill_(float("nan"))
    with pytest.raises(ValueError, match=r"linear.weight(, linear.bias)?\): it may be uninitialised: it was allocated by "
                                         r"\.to_empty\(\)"):
        enc(torch.randn(2, 5))
    enc.load_state_dict(good)
    with torch.no_grad():
        enc[0].linear.weight.fill_(float("nan"))
    with pytest.raises(ValueError, match="a diverged optimizer step"):
        enc(torch.randn(2, 5))


def _check_map(m: HyperbolicMemory) -> None:
    assert m.index_of(list(m.ids)).tolist() == list(range(len(m)))


def test_index_of_caches_its_map_and_it_never_goes_stale():
    m = HyperbolicMemory(_keys(6), ids=list("abcdef"))
    assert isinstance(m.ids, SlotIds)
    _check_map(m)
    assert m.ids.rows() is m.ids.rows()           # built once, kept
    m.append(0.1 * _keys(2, 9), ids=["g", "h"])
    _check_map(m)
    m.remove(["a", "g"])
    _check_map(m)
    with pytest.raises(KeyError, match="'a'"):
        m.index_of("a")
    m.ids = ["p", "q", "r", "s", "t", "u"]
    _check_map(m)
    m.ids[0] = "z"
    m.ids.reverse()
    assert m.index_of("z").tolist() == [5]
    m.ids.reverse()
    m.ids.insert(0, m.ids.pop())
    _check_map(m)
    m.ids += []
    del m.ids[-1]
    m.ids.append("w")
    _check_map(m)
    other = HyperbolicMemory(_keys(6, 8), ids=list("ABCDEF"))
    _check_map(other)
    other.load_state_dict(m.state_dict())       # set_extra_state
    assert other.ids == m.ids
    _check_map(other)
    clone = copy.deepcopy(m)
    clone.ids[1] = "new"
    _check_map(clone)
    _check_map(m)
    buf = io.BytesIO()
    torch.save(m, buf)
    buf.seek(0)
    _check_map(torch.load(buf, weights_only=False))


def test_generated_ids_are_deterministic_whatever_the_seed():
    out = []
    for seed in (0, 1):
        torch.manual_seed(seed)
        m = HyperbolicMemory(_keys(3), ids=["0", "4", "x"])
        out.append(m.append(0.1 * _keys(3, 9)))
    assert out[0] == out[1] == ["3", "5", "6"]
