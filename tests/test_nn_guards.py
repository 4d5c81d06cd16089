"""``load_state_dict`` refuses what the constructors refuse (defect 5 of the fuzzing report), and
``memory_info_nce`` on an empty batch is an error, not NaN (defect 12)."""

import math

import pytest
import torch

from hypermem.geometry import PoincareBall
from hypermem.nn import BallEncoder, HyperbolicMemory, make_ball, memory_info_nce

K = torch.tensor([[0.1, 0.2, 0.0], [-0.3, 0.1, 0.2], [0.0, -0.2, 0.4]], dtype=torch.float64)
V = torch.arange(12, dtype=torch.float64).reshape(3, 4)
NAN = math.nan


def layer(**kw):
    return HyperbolicMemory(K, V, depth=torch.ones(3), importance=torch.ones(3), timestamps=torch.zeros(3),
                            access_counts=torch.zeros(3), valid_from=torch.zeros(3), **kw)


BAD = [
    ("values", torch.full_like(V, NAN)),
    ("values", torch.full_like(V, math.inf)),
    ("log_temperature", torch.tensor(NAN, dtype=torch.float64)),
    ("log_temperature", torch.tensor(-math.inf, dtype=torch.float64)),
    ("depth", torch.tensor([1.0, NAN, 1.0], dtype=torch.float64)),
    ("importance", torch.tensor([1.0, 0.0, 1.0], dtype=torch.float64)),
    ("importance", torch.tensor([1.0, -2.0, 1.0], dtype=torch.float64)),
    ("timestamps", torch.tensor([0.0, NAN, 0.0], dtype=torch.float64)),
    ("access_counts", torch.tensor([0.0, math.inf, 0.0], dtype=torch.float64)),
    ("ball.isp_c", torch.tensor(NAN, dtype=torch.float64)),
    ("ball.isp_c", torch.tensor(-1000.0, dtype=torch.float64)),  # softplus gives curvature 0
    ("ball.isp_c", torch.tensor(math.inf, dtype=torch.float64)),
]


@pytest.mark.parametrize("learn_curvature", [False, True])
@pytest.mark.parametrize("key,value", BAD, ids=lambda v: v if isinstance(v, str) else str(v.flatten()[1 % v.numel()].item()))
def test_load_state_dict_refuses_what_the_constructor_refuses(key, value, learn_curvature):
    mem = layer(learn_curvature=learn_curvature)
    before = {k: v.clone() for k, v in mem.state_dict().items()}
    sd = mem.state_dict()
    sd[key] = value
    sd["keys"] = K * 0.5  # a good change next to the bad one: nothing may be loaded
    with pytest.raises(ValueError, match=f"state_dict\\['{key}'\\]"):
        mem.load_state_dict(sd)
    for k, v in mem.state_dict().items():
        assert torch.equal(v, before[k]), f"{k} changed by a refused load"


def test_load_state_dict_takes_good_tensors_and_open_windows():
    src, dst = layer(temperature=0.5), layer()
    sd = src.state_dict()
    sd["valid_from"] = torch.full((3,), -math.inf, dtype=torch.float64)  # an open window is not an error
    sd["values"] = V + 1
    dst.load_state_dict(sd)
    assert torch.equal(dst.values, V + 1) and float(dst.temperature.detach()) == pytest.approx(0.5)


def test_a_loaded_bad_value_is_named_like_the_constructor_names_it():
    with pytest.raises(ValueError, match="values has non-finite values"):
        HyperbolicMemory(K, torch.full_like(V, NAN))
    mem = layer()
    sd = mem.state_dict()
    sd["values"] = torch.full_like(V, NAN)
    with pytest.raises(ValueError, match=r"state_dict\['values'\] has non-finite values"):
        mem.load_state_dict(sd)


@pytest.mark.parametrize("learnable", [False, True])
@pytest.mark.parametrize("isp", [NAN, -1000.0, math.inf, -math.inf, -80.0])
def test_a_ball_refuses_a_curvature_it_would_not_build(isp, learnable):
    ball = make_ball(0.5, learnable) if learnable else PoincareBall(0.5)
    with pytest.raises(ValueError, match=r"state_dict\['isp_c'\].*curvature"):
        ball.load_state_dict({"isp_c": torch.tensor(isp, dtype=torch.float64)})
    assert ball.curvature == pytest.approx(0.5)


def test_an_encoder_refuses_a_nan_curvature_by_name():
    enc = BallEncoder(4, 3, dtype=torch.float64)
    sd = enc.state_dict()
    sd["ball.isp_c"] = torch.tensor(NAN, dtype=torch.float64)
    with pytest.raises(ValueError, match=r"state_dict\['ball.isp_c'\]"):
        enc.load_state_dict(sd)


# ---------------------------------------------------------------------------- defect 12
@pytest.mark.parametrize("k", [None, 2])
def test_memory_info_nce_on_an_empty_batch(k):
    mem = HyperbolicMemory(K)
    q, t = K[:0], torch.tensor([], dtype=torch.long)
    with pytest.raises(ValueError, match="empty batch"):
        memory_info_nce(mem, q, t, k=k)
    loss = memory_info_nce(mem, q, t, k=k, reduction="sum")
    assert float(loss) == 0.0
    loss.backward()
    assert not bool(mem.keys.grad.any()) and float(mem.log_temperature.grad) == 0.0
    assert memory_info_nce(mem, q, t, k=k, reduction="none").shape == (0,)
