import math

import pytest
import torch

from hypermem.geometry import PoincareBall
from hypermem.index import HyperbolicDistance, MIPSIndex, ShellDistance, exact_topk


def brute(Q, K, g, bias, k):
    sc = bias.unsqueeze(0) - g(Q @ K.T, torch.arange(K.shape[0]))
    return torch.topk(sc, k, dim=1)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("chunk", [1 << 10, 1 << 14, 1 << 22])
def test_exact_topk_with_pruning_equals_brute_force(dtype, chunk):
    g = torch.Generator().manual_seed(0)
    N, d, B, k = 6000, 16, 5, 7
    K = torch.nn.functional.normalize(torch.randn(N, d, generator=g, dtype=torch.float64), dim=1).to(dtype)
    Q = torch.nn.functional.normalize(torch.randn(B, d, generator=g, dtype=torch.float64), dim=1).to(dtype)
    bias = (torch.randn(N, generator=g, dtype=torch.float64) * 0.3).to(dtype)
    bias[::5] = -math.inf  # excluded keys never come back
    dist = ShellDistance(1.3, 1.0)
    s, i, dd = exact_topk(Q, K, k, dist, bias, dist.inverse, chunk_elements=chunk)
    s2, i2 = brute(Q, K, dist, bias, k)
    assert torch.equal(i, i2)
    torch.testing.assert_close(s, s2)
    assert torch.all(i % 5 != 0)
    torch.testing.assert_close(dd, bias[i] - s)


@pytest.mark.parametrize("bias_on", [False, True])
def test_a_large_batch_scores_a_small_first_chunk_in_full(bias_on):
    # A batch scores only a few times k keys per query in full (the first chunk), screens
    # every later chunk, and still returns the brute force's answer, ties by index.
    import hypermem.index.topk as topk

    g = torch.Generator().manual_seed(6)
    N, d, B, k = 5000, 12, 300, 5
    K = torch.nn.functional.normalize(torch.randn(N, d, generator=g, dtype=torch.float64), dim=1).float()
    K[3000:3004] = K[11]  # exact ties with an earlier key, in a later chunk
    Q = torch.nn.functional.normalize(torch.randn(B, d, generator=g, dtype=torch.float64), dim=1).float()
    Q[0] = K[11]
    bias = (torch.randn(N, generator=g) * 0.2) if bias_on else None
    if bias is not None:
        bias[3000:3004] = bias[11]
    dist = ShellDistance(1.0, 1.0)
    calls = []

    def counted(s, idx=None):
        calls.append(s.numel())
        return dist(s, idx)

    s, i, _ = exact_topk(Q, K, k, counted, bias, dist.inverse, chunk_elements=1 << 18, max_product=1.0)
    first = topk.first_chunk(min(N, (1 << 18) // B) // 64 * 64, k, B)
    assert first == 256 and calls[0] == B * first
    assert sum(calls) < B * N // 10
    sc = (torch.zeros(N) if bias is None else bias).unsqueeze(0) - dist(Q @ K.T)
    expected = torch.sort(-sc, dim=1, stable=True).indices[:, :k]  # ties in index order
    assert torch.equal(i, expected)
    assert i[0, :5].tolist() == [11, 3000, 3001, 3002, 3003] or bias is not None


def test_exact_topk_without_bias_hyperbolic_and_padding():
    g = torch.Generator().manual_seed(1)
    N, d = 50, 8
    K = torch.nn.functional.normalize(torch.randn(N, d, generator=g, dtype=torch.float64), dim=1)
    Q = torch.nn.functional.normalize(torch.randn(3, d, generator=g, dtype=torch.float64), dim=1)
    r = torch.rand(N, generator=g, dtype=torch.float64) * 3
    hd = HyperbolicDistance(1.0, torch.full((3,), 1.0, dtype=torch.float64), r)
    s, i, dist = exact_topk(Q, K, 60, hd, None, None, chunk_elements=64)
    assert s.shape == (3, 60) and torch.all(i[:, 50:] == -1) and torch.all(torch.isinf(s[:, 50:]))
    ball = PoincareBall()
    P = ball.point_at(K, r)
    q = ball.point_at(Q, 1.0)
    ref = torch.sort(ball.pairwise_distance(q, P), dim=1)
    torch.testing.assert_close(dist[:, :50], ref.values, rtol=1e-9, atol=1e-9)


def test_ties_sorted_by_index():
    K = torch.tensor([[1.0, 0.0]] * 6, dtype=torch.float64)
    Q = torch.tensor([[1.0, 0.0]], dtype=torch.float64)
    dist = ShellDistance(1.0, 1.0)
    _, i, _ = exact_topk(Q, K, 4, dist, torch.zeros(6, dtype=torch.float64), dist.inverse, chunk_elements=2)
    assert i.tolist() == [[0, 1, 2, 3]]


def test_ties_sorted_by_index_when_walking_in_bias_order():
    # Few distinct directions and biases: many exact ties in score, spread over chunks that
    # are visited in bias order, not index order; the answer still breaks ties by index.
    g = torch.Generator().manual_seed(3)
    N, B, k = 5000, 4, 25
    dirs = torch.nn.functional.normalize(torch.randn(3, 4, generator=g, dtype=torch.float64), dim=1)
    K = dirs[torch.randint(0, 3, (N,), generator=g)]
    Q = torch.nn.functional.normalize(torch.randn(B, 4, generator=g, dtype=torch.float64), dim=1)
    bias = torch.randint(0, 4, (N,), generator=g).to(torch.float64) * 0.5
    dist = ShellDistance(1.0, 1.0)
    s, i, _ = exact_topk(Q, K, k, dist, bias, dist.inverse, chunk_elements=1 << 10)
    sc = bias.unsqueeze(0) - dist(Q @ K.T)
    for q in range(B):
        expected = sorted(range(N), key=lambda j: (-float(sc[q, j]), j))[:k]
        assert i[q].tolist() == expected


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_single_query_walks_capped_chunks_in_index_order(monkeypatch, dtype):
    # One query never overflows the products budget, so it is not walked in bias order; a
    # store larger than CHUNK_ROWS is walked in index order, pruned after its first chunk by
    # each chunk's largest bias, and the answer is still the brute force's, ties by index.
    import hypermem.index.topk as topk

    calls = []
    monkeypatch.setattr(topk, "CHUNK_ROWS", 1024)
    g = torch.Generator().manual_seed(5)
    N, d, k = 9000, 8, 12
    K = torch.nn.functional.normalize(torch.randn(N, d, generator=g, dtype=torch.float64), dim=1)
    K[4000:4010] = K[17]  # exact ties across chunks
    K = K.to(dtype)
    Q = K[17:18].clone()
    bias = (torch.randn(N, generator=g, dtype=torch.float64) * 0.2).to(dtype)
    bias[4000:4010] = bias[17]
    bias[::7] = -math.inf
    dist = ShellDistance(1.0, 1.0)

    def counted(s, idx=None):
        calls.append(s.numel())
        return dist(s, idx)

    s, i, _ = exact_topk(Q, K, k, counted, bias, dist.inverse, max_product=1.0)
    sc = bias.unsqueeze(0) - dist(Q @ K.T)
    expected = sorted(range(N), key=lambda j: (-float(sc[0, j]), j))[:k]
    assert i[0].tolist() == expected
    torch.testing.assert_close(s[0], sc[0, expected])
    # only the first chunk is scored in full
    assert calls[0] == topk.first_chunk(1024, k) == 1024
    assert sum(calls) < N // 3  # the distance of most keys is never evaluated (the scan keeps k + TIE_PAD)


@pytest.mark.parametrize("q", [0.97, 0.9995])  # most groups pass (compare all) / few do
@pytest.mark.parametrize("width", [64 * 9, 64 * 9 + 5])
def test_screen_finds_exactly_the_passing_products(width, q):
    # The two-level screen (group maxima, then the passing groups) returns the same (row,
    # column) pairs, in the same row-major order, as comparing every product, including
    # products equal to the threshold and rows where nothing passes.
    from hypermem.index.topk import passing

    g = torch.Generator().manual_seed(3)
    sims = torch.randn(37, width, generator=g)
    s_min = torch.quantile(sims, q, dim=1)
    s_min[5] = math.inf
    sims[7, 100] = s_min[7]  # a tie at the threshold passes
    r, c, vals = passing(sims, s_min)
    want = (sims >= s_min.unsqueeze(1)).nonzero()
    assert r.numel() > 0 and 5 not in r.tolist()
    assert torch.equal(torch.stack([r, c], 1), want)
    assert torch.equal(vals, sims[r, c])


def test_bad_arguments():
    dist = ShellDistance(1.0, 1.0)
    with pytest.raises(ValueError, match="k must"):
        exact_topk(torch.zeros(1, 2), torch.zeros(3, 2), 0, dist)
    with pytest.raises(ValueError, match="agree"):
        exact_topk(torch.zeros(1, 2), torch.zeros(3, 4), 1, dist)
    with pytest.raises(ValueError, match="backend"):
        MIPSIndex(PoincareBall(), backend="annoy")
    with pytest.raises(RuntimeError, match="build"):
        MIPSIndex(PoincareBall()).search(torch.zeros(1, 2), 1)


@pytest.mark.parametrize("backend", ["torch", "numpy"])
def test_mips_index_exact_backends(backend):
    ball = PoincareBall(0.8)
    P = ball.random_points(500, 6, seed=0)
    q = ball.random_points(4, 6, seed=1)
    idx = MIPSIndex(ball, backend).build(P)
    assert len(idx) == 500 and idx.exact
    dist, ind = idx.search(q, 8)
    ref = torch.topk(-ball.pairwise_distance(q, P), 8)
    assert torch.equal(ind, ref.indices)
    torch.testing.assert_close(dist, -ref.values, rtol=1e-7, atol=1e-7)
    d1, i1 = idx.search(q[0], 3)
    assert i1.shape == (3,) and torch.equal(i1, ind[0, :3])


def test_mips_index_faiss_recall():
    pytest.importorskip("faiss")
    ball = PoincareBall()
    P = ball.random_points(2000, 8, max_hyperbolic_radius=1.0, seed=0)
    q = ball.random_points(20, 8, max_hyperbolic_radius=1.0, seed=1)
    idx = MIPSIndex(ball, "faiss", ef_search=128).build(P)
    assert not idx.exact
    _, ind = idx.search(q, 10)
    ref = torch.topk(-ball.pairwise_distance(q, P), 10).indices
    recall = sum(len(set(a.tolist()) & set(b.tolist())) for a, b in zip(ind, ref)) / ref.numel()
    assert recall > 0.8
