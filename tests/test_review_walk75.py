"""Review of walk 75: copy.copy under the store's lock, private_rng on mps and across threads, a
custom decay policy's NaN weight."""

from __future__ import annotations

import copy
import math
import threading

import pytest
import torch

from hypermem import Memory
from hypermem.hierarchy import torch_state
from hypermem.hierarchy.torch_state import private_rng
from hypermem.temporal import HalfLife, Product, policy_weights

WAIT = 0.3   # seconds a thread is given to do what it must not do (no duration is asserted)


def _in_thread(fn) -> tuple[threading.Thread, threading.Event, list]:
    done, out = threading.Event(), []

    def run():
        try:
            out.append(fn())
        except BaseException as exc:  # handed to the test
            out.append(exc)
        done.set()

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t, done, out


# ---------------------------------------------------------------------------- 1. copy.copy and the lock
def test_copy_waits_for_a_write_that_holds_the_lock():
    """A copy started while a writer holds ``mem.state.lock`` waits for the write: it copies the
    store after it (the write's record included), never halfway."""
    mem = Memory()
    mem.add_many([{"text": f"note {i}", "id": f"n{i}"} for i in range(3)])
    with mem.state.lock:   # a writer in the middle of its write
        t, done, out = _in_thread(lambda: copy.copy(mem))
        assert not done.wait(WAIT), "copy.copy went ahead while a write held the store's lock"
        mem.add("late", id="late")
    t.join(30)
    (c,) = out
    assert isinstance(c, Memory)
    assert len(c) == 4 and c.state.n == len(c.state.ids) == 4
    assert c.get("late").text == "late"
    c.add("only in the copy", id="own")
    assert "own" not in mem.state.ids and len(mem) == 4


# ---------------------------------------------------------------------------- 2. private_rng on mps
class _MpsModule:
    """torch.mps's RNG API as an Apple-silicon build has it: one generator, no ``current_device``,
    no ``default_generators``."""

    def __init__(self) -> None:
        self.state, self.seeds = torch.tensor([42], dtype=torch.uint8), []

    def get_rng_state(self, device="mps"):
        return self.state.clone()

    def set_rng_state(self, state, device="mps"):
        self.state = state.clone()

    def manual_seed(self, n):
        self.seeds.append(n)
        self.state = torch.tensor([n], dtype=torch.uint8)


def test_private_rng_on_mps_seeds_and_restores_its_one_generator(monkeypatch):
    fake, real = _MpsModule(), torch.get_device_module
    monkeypatch.setattr(torch, "get_device_module", lambda kind=None: fake if str(kind) == "mps" else real(kind))
    cpu = torch.get_rng_state()
    with private_rng("mps") as seed:
        seed(5)
        assert fake.seeds == [5] and fake.state.tolist() == [5]
        inside = torch.rand(1)
    assert fake.state.tolist() == [42], "the mps generator's state is the caller's again"
    assert torch.equal(torch.get_rng_state(), cpu)
    torch.manual_seed(5)
    assert torch.equal(torch.rand(1), inside)
    torch.set_rng_state(cpu)
    assert torch_state._accelerator("mps") == ("mps", [0])
    assert torch_state._accelerator("mps:0") == ("mps", [0])


# ---------------------------------------------------------------------------- 5. fits in two threads
def test_fits_in_two_threads_run_one_after_the_other_and_keep_the_callers_state():
    """Fit A holds private_rng; fit B, started meanwhile in another thread, waits for A to end, so
    that each sees and restores the caller's generator and thread count (before: B saved A's
    seeded state and restored it last)."""
    threads = torch.get_num_threads()
    cpu = torch.get_rng_state()
    try:
        torch.set_num_threads(2)
        torch.manual_seed(1234)
        caller = torch.get_rng_state()
        a_in, a_release, a_out, b_trying, b_in = (threading.Event() for _ in range(5))
        seen = {}

        def fit_a():
            with private_rng("cpu", threads=1) as seed:
                seed(7)
                a_in.set()
                a_release.wait(30)
            a_out.set()

        def fit_b():
            b_trying.set()
            with private_rng("cpu", threads=1) as seed:
                seen["b_entry_threads"] = torch.get_num_threads()
                b_in.set()
                seed(99)
                a_out.wait(30)   # B leaves after A (before the lock: B restored A's seeded state last)

        ta, _, out_a = _in_thread(fit_a)
        assert a_in.wait(30)
        tb, _, out_b = _in_thread(fit_b)
        assert b_trying.wait(30)
        assert not b_in.wait(WAIT), "a second fit ran while the first held the generators"
        a_release.set()
        ta.join(30)
        tb.join(30)
        assert out_a == [None] and out_b == [None]
        assert b_in.is_set()
        assert torch.get_num_threads() == 2
        assert torch.equal(torch.get_rng_state(), caller)
    finally:
        torch.set_num_threads(threads)
        torch.set_rng_state(cpu)


def test_a_fit_that_raises_lets_the_next_fit_run():
    threads = torch.get_num_threads()

    def failing_fit():
        with private_rng("cpu", threads=1) as seed:
            seed(3)
            raise ValueError("boom")

    t, done, out = _in_thread(failing_fit)
    t.join(30)
    assert isinstance(out[0], ValueError)
    t, done, out = _in_thread(_one_fit)
    assert done.wait(30), "a fit after one that raised waits for ever"
    assert out == [True]
    assert torch.get_num_threads() == threads


def _one_fit() -> bool:
    with private_rng("cpu") as seed, private_rng("cpu") as inner:   # nested in one thread: no deadlock
        seed(1)
        inner(2)
    return True


# ---------------------------------------------------------------------------- 3. a custom policy's NaN weight
class _Boost:
    """A custom policy with weights above 1 (clamped to 1, with a warning)."""

    def weight(self, now, times, access_counts, valid_from, valid_until):
        return torch.full_like(times, 3.0)


class _BoostAnd:
    def __init__(self, bad: float) -> None:
        self.bad = bad

    def weight(self, now, times, access_counts, valid_from, valid_until):
        w = torch.full_like(times, 3.0)
        w[1] = self.bad
        return w


TIMES = torch.tensor([1.7e9, 1.7e9 - 10, 1.7e9 - 20], dtype=torch.float64)


def test_weights_above_1_are_still_clamped_with_a_warning():
    with pytest.warns(UserWarning, match="_Boost returned weights above 1"):
        assert policy_weights(_Boost(), 1.7e9, TIMES).tolist() == [1.0, 1.0, 1.0]


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_a_non_finite_weight_of_a_custom_policy_is_an_error_naming_it(bad):
    """One NaN used to make ``max`` NaN, so the weights above 1 went unclamped and unwarned (3.0
    reached the scores) beside a NaN score."""
    with pytest.raises(ValueError, match=r"_BoostAnd returned 1 non-finite weight\(s\) of 3 .*position 1"):
        policy_weights(_BoostAnd(bad), 1.7e9, TIMES)
    if bad > -math.inf:   # a Product floors its product at MIN_WEIGHT: -inf becomes MIN_WEIGHT there
        with pytest.raises(ValueError, match="a Product with the custom decay policy _BoostAnd"):
            policy_weights(Product(HalfLife(24), _BoostAnd(bad)), 1.7e9, TIMES)


def test_a_search_with_a_nan_weight_is_an_error_not_a_nan_score():
    mem = Memory(decay=_BoostAnd(math.nan))
    mem.add_many([{"text": f"cats {i}"} for i in range(3)])
    with pytest.raises(ValueError, match="_BoostAnd returned 1 non-finite weight"):
        mem.search("cats", k=3)


def test_on_an_accelerator_the_clamp_holds_despite_a_nan(monkeypatch):
    """Off the CPU there is no host read (no sync): weights above 1 are clamped all the same."""
    monkeypatch.setattr(torch.compiler, "is_compiling", lambda: True)   # the no-sync path, as on a device
    w = policy_weights(_BoostAnd(math.nan), 1.7e9, TIMES)
    assert w[0].item() == 1.0 and w[2].item() == 1.0 and math.isnan(w[1].item())


# ---------------------------------------------------------------------------- 4. a loader's embedder checked first
class _Emb:
    dim = 8

    def embed(self, texts):
        return torch.randn(len(texts), 8, dtype=torch.float64, generator=torch.Generator().manual_seed(0))


class _FloatDim(_Emb):
    dim = 8.0   # a YAML / JSON config value


def test_loaders_name_the_embedder_not_the_file(tmp_path):
    """``Memory.load`` wrapped the embedder's ValueError as the file's "invalid config"
    (MemoryFileError); every loader now refuses it as ``Memory(embedder=...)`` does."""
    mem = Memory(embedder=_Emb())
    mem.add_many([{"text": f"t{i}"} for i in range(3)])
    snap, js, db = tmp_path / "s.hmem", tmp_path / "s.json", tmp_path / "live.db"
    mem.save(snap)
    mem.to_json(js)
    Memory.open(db, embedder=_Emb()).close()
    with pytest.raises(ValueError) as direct:
        Memory(embedder=_FloatDim())
    loaders = {"load": lambda e: Memory.load(snap, embedder=e), "from_json": lambda e: Memory.from_json(js, embedder=e),
               "open": lambda e: Memory.open(db, embedder=e)}
    for name, load in loaders.items():
        with pytest.raises(ValueError) as got:
            load(_FloatDim())
        assert type(got.value) is ValueError and str(got.value) == str(direct.value), name
        with pytest.raises(TypeError, match="embedder must have a dim attribute and an embed"):
            load(object())   # was "dimension mismatch ... has dim=None", blaming the file
    assert len(Memory.load(snap, embedder=_Emb())) == 3
