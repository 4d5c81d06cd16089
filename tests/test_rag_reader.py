"""The latent-retrieval reader (hypermem.nn.LatentRetrievalReader) and the WordNet reader task."""

import math

import pytest
import torch
import torch.nn.functional as F

from experiments.rag.data import build_rag_data
from experiments.rag.reader_task import (
    SYSTEMS,
    ReaderData,
    class_metrics,
    macro_f1,
    run_reader_task,
    strict_correct,
)
from hypermem.embed import HashingEmbedder
from hypermem.nn import BallEncoder, CosineKeys, HyperbolicMemory, LatentRetrievalReader, PairReader
from hypermem.nn.latent_reader import full_select, marginal_log_probs


def _hyperbolic(n=12, d=4, dtype=torch.float64, seed=0):
    g = torch.Generator().manual_seed(seed)
    keys = 0.6 * F.normalize(torch.randn(n, d, generator=g, dtype=dtype), dim=1) * torch.rand(n, 1, generator=g,
                                                                                                dtype=dtype)
    values = torch.randn(n, 3, generator=g, dtype=dtype)
    return HyperbolicMemory(keys, values, metric="hyperbolic", temperature=0.7, dtype=dtype)


def _cosine(n=12, d=4, seed=0, depth=False):
    g = torch.Generator().manual_seed(seed)
    mem = CosineKeys(torch.randn(n, d, generator=g), temperature=0.3, values=torch.randn(n, 3, generator=g),
                     depth=torch.randint(0, 4, (n,), generator=g).float() if depth else None)
    if depth:  # a pull that depends on the query, so the top-k differs from the cosine's
        with torch.no_grad():
            mem.depth_head.weight.normal_(0.0, 3.0, generator=g)
    return mem


@pytest.mark.parametrize("kind", ["hyperbolic", "cosine", "cosine+depth"])
def test_marginal_equals_brute_force_sum(kind):
    torch.manual_seed(1)
    mem = _hyperbolic() if kind == "hyperbolic" else _cosine(depth=kind == "cosine+depth")
    dt = mem.keys.dtype
    reader = PairReader(5, 3, n_classes=4, hidden=6).to(dt)
    model = LatentRetrievalReader(mem, reader, k=5)
    x = torch.randn(3, 5, dtype=dt)
    q = 0.3 * F.normalize(torch.randn(3, 4, dtype=dt), dim=1)
    exclude = torch.tensor([0, 2, 11])
    out = model(q, x, exclude)
    if kind == "hyperbolic":  # the full-score selection picks the same slots as the memory's search
        assert torch.equal(full_select(mem)(q, 5, exclude), out.indices)
    assert not bool((out.indices == exclude.view(-1, 1)).any())
    for b in range(3):
        scores = mem.score_slots(q[b:b + 1], out.indices[b:b + 1])[0][0]
        every = mem.score_slots(q[b:b + 1], torch.arange(len(mem)).view(1, -1))[0][0]
        assert int(out.indices[b, 0]) == int(every.masked_fill(torch.arange(len(mem)) == exclude[b],
                                                                -math.inf).argmax())
        pz = torch.softmax(scores, 0)
        total = torch.zeros(4, dtype=dt)
        for j, z in enumerate(out.indices[b].tolist()):
            total += pz[j] * torch.softmax(reader(x[b:b + 1], model.slot_values()[z:z + 1])[0], 0)
        assert torch.allclose(out.log_probs[b].exp(), total, atol=1e-6)
    assert torch.allclose(out.log_probs.exp().sum(1), torch.ones(3, dtype=dt), atol=1e-6)
    assert torch.allclose(marginal_log_probs(out.log_prior, out.log_likelihood), out.log_probs)


def _query_model(dtype=torch.float64, learn_values=None, see_score=False):
    torch.manual_seed(2)
    mem = _hyperbolic(dtype=dtype)
    mem.keys.requires_grad_(True)
    enc = BallEncoder(5, 4, curvature=mem.ball, depth=0.8, dtype=dtype)
    reader = PairReader(5, 3 + int(see_score), n_classes=4).to(dtype)
    return mem, enc, LatentRetrievalReader(mem, reader, k=4, learn_values=learn_values, see_score=see_score)


@pytest.mark.parametrize("learn_values,see_score", [(None, False), ("copy", False), ("zero", True)])
def test_query_map_and_keys_learn_only_through_the_read_weights(learn_values, see_score):
    mem, enc, model = _query_model(learn_values=learn_values, see_score=see_score)
    x = torch.randn(6, 5, dtype=torch.float64)
    y = torch.tensor([0, 1, 2, 3, 0, 1])
    out = model(enc(x), x)
    F.nll_loss(out.log_probs, y).backward()
    assert enc.linear.weight.grad.abs().sum() > 0 and mem.keys.grad.abs().sum() > 0
    if learn_values is not None:  # a key-value memory: the answer loss teaches the slots read their values
        read = torch.unique(out.indices)
        assert model.values.grad[read].abs().sum(1).gt(0).all()
        assert float(model.values.grad[[j for j in range(len(mem)) if j not in read.tolist()]].abs().sum()) == 0.0
    enc.zero_grad()
    mem.keys.grad = None
    model.zero_grad()
    out = model(enc(x), x)
    F.nll_loss(marginal_log_probs(out.log_prior.detach(), out.log_likelihood), y).backward()
    assert enc.linear.weight.grad is None or float(enc.linear.weight.grad.abs().sum()) == 0.0
    assert mem.keys.grad is None or float(mem.keys.grad.abs().sum()) == 0.0
    assert model.reader.values.weight.grad.abs().sum() > 0  # the reader still learns


def test_learned_values_start_from_the_slots_or_zero():
    mem = _hyperbolic()
    reader = PairReader(5, 3, n_classes=4).double()
    copy = LatentRetrievalReader(mem, reader, k=2, learn_values="copy")
    assert isinstance(copy.values, torch.nn.Parameter) and torch.equal(copy.values.detach(), mem.values)
    assert copy.values.data_ptr() != mem.values.data_ptr()
    zero = LatentRetrievalReader(mem, reader, k=2, learn_values="zero")
    assert float(zero.values.detach().abs().sum()) == 0.0 and zero.values.shape == mem.values.shape
    with pytest.raises(ValueError, match="learn_values"):
        LatentRetrievalReader(mem, reader, k=2, learn_values="yes")


def test_repr_and_state_dict_round_trip():
    keys = CosineKeys(torch.eye(4), temperature=0.5, values=torch.eye(4), learn_keys=False)
    model = LatentRetrievalReader(keys, PairReader(4, 5, n_classes=3), k=2, learn_values="zero", see_score=True)
    text = repr(model)
    assert "k=2, learn_values='zero', see_score=True" in text
    assert "slots=4, dim=4, value_dim=4, learn_keys=False, depth_pull=False" in text
    with torch.no_grad():
        model.values.add_(torch.randn(4, 4))
    twin = LatentRetrievalReader(CosineKeys(torch.eye(4), temperature=0.5, values=torch.eye(4), learn_keys=False),
                                 PairReader(4, 5, n_classes=3), k=2, learn_values="zero", see_score=True)
    twin.load_state_dict(model.state_dict())
    x = torch.randn(3, 4)
    assert torch.equal(model(x, x).log_probs, twin(x, x).log_probs)


def test_depth_pull_changes_the_read_towards_shallow_slots():
    mem = CosineKeys(torch.tensor([[1.0, 0.0], [0.8, 0.6], [0.0, 1.0]]), temperature=1.0,
                     values=torch.eye(3), depth=torch.tensor([3.0, 0.0, 1.0]))
    q = torch.tensor([[1.0, 0.1]])
    assert mem.select(q, 1).tolist() == [[0]]  # beta = 0 at the start: the cosine's choice
    with torch.no_grad():
        mem.depth_head.bias.fill_(-1.0)  # beta < 0 pulls towards shallow slots
    assert mem.select(q, 1).tolist() == [[1]]
    scores = mem.score_slots(q, torch.tensor([[0, 1, 2]]))[0]
    assert torch.allclose(scores, mem.score_all(q)[0])
    assert torch.equal(scores.argmax(1), mem.select(q, 1)[:, 0])


def test_finite_difference_with_fixed_topk():
    mem, enc, model = _query_model()
    x = torch.randn(4, 5, dtype=torch.float64)
    y = torch.tensor([0, 1, 2, 3])
    idx = model(enc(x), x).indices.detach()

    def loss():
        return F.nll_loss(model(enc(x), x, indices=idx).log_probs, y)

    loss().backward()
    W = enc.linear.weight
    grad = W.grad.clone()
    eps = 1e-6
    with torch.no_grad():
        for i, j in [(0, 0), (1, 3), (3, 2), (2, 4)]:
            W[i, j] += eps
            up = float(loss())
            W[i, j] -= 2 * eps
            down = float(loss())
            W[i, j] += eps
            assert (up - down) / (2 * eps) == pytest.approx(float(grad[i, j]), rel=1e-5, abs=1e-8)


def test_memory_without_values_needs_them():
    mem = HyperbolicMemory(0.3 * torch.eye(4))
    with pytest.raises(ValueError, match="values"):
        LatentRetrievalReader(mem, PairReader(4, 4, 2), k=2)
    LatentRetrievalReader(mem, PairReader(4, 4, 2), k=2, values=torch.eye(4))


def test_ties_count_against_the_answer_and_macro_f1():
    lp = torch.log(torch.tensor([[0.5, 0.5, 0.0], [0.2, 0.7, 0.1], [0.6, 0.3, 0.1]]))
    assert strict_correct(lp, torch.tensor([0, 1, 0])).tolist() == [False, True, True]
    assert strict_correct(lp, torch.tensor([1, 1, 1])).tolist() == [False, True, False]
    pred, y = torch.tensor([0, 0, 1, 2]), torch.tensor([0, 1, 1, 1])
    # class 0: tp 1 fp 1 fn 0 -> 2/3; class 1: tp 1 fp 0 fn 2 -> 0.5; class 2: tp 0 fp 1 -> 0
    assert macro_f1(pred, y) == pytest.approx((2 / 3 + 0.5 + 0.0) / 3)


def test_reader_task_end_to_end_small():
    rag = build_rag_data("mammal.n.01", n_test=40, n_val=40, embedder=HashingEmbedder(dim=16), cache=False)
    top = {c: i for i, c in enumerate(sorted(set(range(rag.n_slots)) - {0}))}
    branch = []  # class = the depth-1 branch of each node (a synthetic, tree-shaped label)
    parent = rag.slot_parent.tolist()
    for s in range(rag.n_slots):
        while s > 0 and parent[s] > 0:
            s = parent[s]
        branch.append(top.get(s, 0) % 5)
    names = {n: i for i, n in enumerate(rag.slot_names)}

    def label(n):
        return branch[names[n]] if n in names else 0

    data = ReaderData(rag, torch.tensor(branch), torch.tensor([label(n) for n in rag.val_names]),
                      torch.tensor([label(n) for n in rag.test_names]), n_classes=5)
    cfg = {"reader": {"hidden": 8}, "memory": {"k": 4}, "train": {"steps": 4, "batch": 64, "val_every": 2}}
    out = run_reader_task(cfg, seed=0, data=data, log=None)
    assert set(out["results"]) == set(SYSTEMS)
    for r in out["results"].values():
        assert 0.0 <= r["test"]["accuracy"] <= 1.0 and r["steps_run"] <= 4 and r["trainable_params"] > 0
    m = class_metrics(out["models"][SYSTEMS[2]], rag.test_emb, data.test_y)
    assert m == out["results"][SYSTEMS[2]]["test"]
