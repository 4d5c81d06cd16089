"""Walk 73 (multi-tenant SaaS): one HashingEmbedder shared by stores and threads, and a closed
durable store that must not answer from the rows it held when it was closed."""

from __future__ import annotations

import random
import sys
import threading

import pytest
import torch

from hypermem import HashingEmbedder, Memory
from hypermem.store.backends.storage_errors import StorageError


class _ResetWhileHashing(HashingEmbedder):
    """Runs other embeds (as another thread sharing the embedder would) while the first call
    that hashes ``trigger`` is hashing: they fill the token cache past ``cache_size`` and reset it."""

    def __init__(self, *args, trigger: str, others: list[list[str]], **kwargs):
        super().__init__(*args, **kwargs)
        self.trigger, self.others, self.other_rows = "w:" + trigger, others, []

    def hash_features(self, features):
        out = super().hash_features(features)
        if self.others and self.trigger in features:
            others, self.others = self.others, []
            self.other_rows += [self.embed(texts) for texts in others]
        return out


@pytest.mark.parametrize("texts", [["alpha delta"], ["alpha delta", "gamma delta epsilon", "beta"]])
def test_a_cache_reset_while_a_call_adds_tokens_changes_none_of_its_rows(texts):
    ref = HashingEmbedder(dim=32)
    others = [["xray"], ["yankee zulu"]]  # the first fills the cache past 3 tokens, the second resets it
    emb = _ResetWhileHashing(dim=32, cache_size=3, trigger="delta", others=others)
    emb.embed(["alpha beta gamma"])  # 3 tokens cached: "alpha" is known, "delta" is new
    rows = emb.embed(texts)
    assert emb.other_rows, "the hook ran"
    assert torch.equal(rows, ref.embed(texts))
    for got, o in zip(emb.other_rows, others):
        assert torch.equal(got, ref.embed(o))
    assert torch.equal(emb.embed(texts), ref.embed(texts))  # and the cache it left is sound


def test_threads_sharing_one_embedder_get_the_rows_of_one_at_a_time():
    emb, ref = HashingEmbedder(dim=32, cache_size=40), HashingEmbedder(dim=32)
    batches = [[[" ".join(f"t{s}w{rng.randrange(400)}" for _ in range(rng.choice([2, 30])))
                 for _ in range(rng.choice([1, 6]))] for _ in range(150)]
               for s, rng in ((s, random.Random(s)) for s in range(3))]
    got: dict[int, list] = {}
    errors: list[BaseException] = []

    def work(s):
        try:
            got[s] = [emb.embed(b) for b in batches[s]]
        except BaseException as exc:  # noqa: BLE001 (reported below)
            errors.append(exc)

    before = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # threads switch within embed(), between a look-up and its use
    try:
        threads = [threading.Thread(target=work, args=(s,)) for s in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        sys.setswitchinterval(before)
    assert not errors, errors[:3]
    wrong = sum(not torch.equal(r, ref.embed(b)) for s in range(3) for r, b in zip(got[s], batches[s]))
    assert wrong == 0


def test_a_shared_embedder_pickles_and_copies_without_its_lock():
    import copy
    import pickle

    emb = HashingEmbedder(dim=16, cache_size=10)
    emb.embed(["one two three"])
    for twin in (pickle.loads(pickle.dumps(emb)), copy.deepcopy(emb)):
        assert twin == emb
        assert torch.equal(twin.embed(["one four"]), emb.embed(["one four"]))


# ---------------------------------------------------------------------------- a closed store

_READS = {
    "len": lambda m, a, b: len(m),
    "in": lambda m, a, b: a in m,
    "not in": lambda m, a, b: "nope" in m,
    "iter": lambda m, a, b: list(m),
    "ids": lambda m, a, b: m.ids,
    "points": lambda m, a, b: m.points,
    "depths": lambda m, a, b: m.depths,
    "children": lambda m, a, b: m.children(a),
    "parent": lambda m, a, b: m.parent(b),
    "ancestors": lambda m, a, b: m.ancestors(b),
    "level": lambda m, a, b: m.level(b),
    "point": lambda m, a, b: m.point(a),
    "roots": lambda m, a, b: m.roots(),
    "tree": lambda m, a, b: m.tree(),
    "to_dataframe": lambda m, a, b: m.to_dataframe(),
    "time_weights": lambda m, a, b: m.time_weights(),
    "with": lambda m, a, b: m.__enter__(),
}


@pytest.fixture
def closed_store(tmp_path):
    m = Memory.open(tmp_path / "t.db", embedder=HashingEmbedder(dim=16))
    a = m.add("alpha tea")
    b = m.add("beta coffee", parent=a)
    return m, a, b


@pytest.mark.parametrize("read", list(_READS))
def test_every_read_of_a_closed_store_raises(closed_store, read):
    m, a, b = closed_store
    assert _READS[read](m, a, b) is not None  # open: it answers
    m.close()
    with pytest.raises(StorageError, match="closed"):
        _READS[read](m, a, b)


def test_a_store_closed_through_its_storage_or_a_with_block_answers_nothing(tmp_path, closed_store):
    m, a, _ = closed_store
    m.storage.close()
    with pytest.raises(StorageError, match="closed"):
        len(m)
    with Memory.open(tmp_path / "w.db", embedder=HashingEmbedder(dim=16)) as w:
        w.add("gamma")
        assert len(w) == 1
    with pytest.raises(StorageError, match="closed"):
        len(w)
    with pytest.raises(StorageError, match="closed"), w:
        pass
    assert "storage closed" in repr(m) and "n=2" in repr(m)  # repr still describes it
    m.close()  # closing again is no error


def test_an_in_process_store_has_no_close():
    m = Memory(embedder=HashingEmbedder(dim=16))
    a = m.add("alpha")
    m.close()
    with m as same:
        assert same is m and len(m) == 1 and a in m and m.ids == [a]
