"""The inputs a new user gives hypermem.nn by accident: NumPy / torch integers as ``k``, a ``k``
above the number of slots, NaN and inf queries and features (issue 33, item 5)."""

import numpy as np
import pytest
import torch

from hypermem.geometry import PoincareBall
from hypermem.nn import BallEncoder, BallEncoderConfig, HyperbolicMemory, memory_info_nce
from hypermem.nn.dense_topk import dense_topk, exclusion_mask

pytestmark = pytest.mark.usefixtures("one_thread")
BALL = PoincareBall()


def _memory(n=10, d=4):
    keys = BALL.random_points(n, d, 2.0, seed=0, dtype=torch.float64)
    return HyperbolicMemory(keys, torch.randn(n, 3, dtype=torch.float64), temperature=0.5)


def _queries(b=3, d=4):
    return BALL.random_points(b, d, 1.5, seed=1, dtype=torch.float64)


@pytest.mark.parametrize("k", [np.int64(3), np.int32(3), torch.tensor(3), torch.tensor(3, dtype=torch.int32)])
def test_numpy_and_torch_integers_are_integers(k):
    mem, q = _memory(), _queries()
    assert torch.equal(mem(q, k=k).indices, mem(q, k=3).indices)
    assert torch.equal(mem.select(q, k), mem.select(q, 3))


@pytest.mark.parametrize("k", [0, -1, 2.0, True, torch.tensor(2.0), torch.tensor([2]), torch.tensor(True), "3"])
def test_what_is_not_a_positive_integer_is_refused(k):
    with pytest.raises(ValueError, match="k must be a positive integer or None"):
        _memory()(_queries(), k=k)


def test_k_above_the_number_of_slots_is_refused_k_equal_to_it_is_read():
    mem, q = _memory(n=10), _queries()
    with pytest.raises(ValueError, match=r"k=11 is more than the memory's 10 slots.*k=None"):
        mem(q, k=11)
    with pytest.raises(ValueError, match="more than the memory's 10 slots"):
        mem.select(q, np.int64(12))
    full, top = mem(q, k=None), mem(q, k=10)
    assert top.indices.shape == (3, 10)
    assert torch.allclose(full.read, top.read)
    # exclusions may still leave fewer than k slots: those entries are -1 with weight 0
    out = mem(q, k=10, exclude=torch.tensor([0, 1, 2]))
    assert int((out.indices < 0).sum()) == 3 and float(out.weights.detach()[out.indices < 0].abs().sum()) == 0.0
    target = torch.tensor([0, 1, 2])
    assert torch.isfinite(memory_info_nce(mem, q, target, k=9))


@pytest.mark.parametrize("bad, word", [(float("nan"), "NaN"), (float("inf"), "inf"), (-float("inf"), "inf")])
@pytest.mark.parametrize("k", [None, 2])
def test_a_nan_or_inf_query_is_named_as_such(bad, word, k):
    mem, q = _memory(), _queries()
    q[1, 2] = bad
    with pytest.raises(ValueError, match=rf"query #1 has {word} coordinates"):
        mem(q, k=k)
    with pytest.raises(ValueError, match=rf"query #1 has {word} coordinates"):
        mem.score_all(q)


def test_a_query_outside_the_ball_says_its_norm():
    mem, q = _memory(), _queries()
    q[2] = torch.tensor([0.9, 0.9, 0.0, 0.0], dtype=torch.float64)
    with pytest.raises(ValueError, match=r"query #2 is not inside the Poincaré ball of curvature 1 \(norm 1.27279"):
        mem(q, k=2)


@pytest.mark.parametrize("depth", [None, 1.5, "learned"])
def test_ball_encoder_refuses_nan_features_naming_the_row(depth):
    enc = BallEncoder(5, 4, depth=depth, dtype=torch.float64)
    x = torch.randn(4, 5, dtype=torch.float64)
    assert torch.isfinite(enc(x)).all()
    x[2, 0] = float("nan")
    with pytest.raises(ValueError, match="feature row #2 has NaN coordinates"):
        enc(x)
    x[2, 0] = float("inf")
    with pytest.raises(ValueError, match="feature row #2 has inf coordinates"):
        enc(x)


def test_ball_encoder_names_weights_that_hold_nan_and_can_be_told_not_to_check():
    enc = BallEncoder(5, 4)
    with torch.no_grad():
        enc.linear.weight[1, 1] = float("nan")
    with pytest.raises(ValueError, match=r"BallEncoder weights hold NaN or inf \(linear.weight\)"):
        enc(torch.randn(2, 5))
    quiet = BallEncoder(5, 4, check_finite=False)
    x = torch.randn(2, 5)
    x[0, 0] = float("nan")
    assert torch.isnan(quiet(x)[0]).all()
    assert BallEncoderConfig(in_features=5, out_features=4, check_finite=False).build().check_finite is False


def test_dense_topk_masks_exclusions_and_pads_with_minus_one():
    scores = torch.tensor([[3.0, 1.0, 2.0, -float("inf")], [0.0, 5.0, 4.0, 1.0]])
    ex = torch.tensor([[0, -1], [1, 2]])
    assert exclusion_mask(ex, 4).tolist() == [[True, False, False, False], [False, True, True, False]]
    assert dense_topk(scores, 4, ex).tolist() == [[2, 1, -1, -1], [3, 0, -1, -1]]
    assert dense_topk(scores, 6).tolist() == [[0, 2, 1, -1, -1, -1], [1, 2, 3, 0, -1, -1]]
