"""One contract for every copy of each formula: checked against the ``hypermem.geometry`` home.

The arcosh distance, the shell distance, the retrieval score and the time weight each have
one home (``geometry.poincare.arcosh_distance`` / ``distance_arcosh``,
``geometry.poincare.shell_distance_from_half_chord``, ``retrieval.scoring.score_bias`` /
``combine``, ``temporal.policy_weights``).  Some tiers keep their own form where they must:
the search kernel's in-place shell distance, the closed-form and numba training steps, the
evaluation's rank key.  Every tier and copy is checked here against the float64 reference,
in float64 and float32, for points near the origin, in the middle of the ball and near the
boundary (the largest radius the dtype represents), at three curvatures.
"""

import math
from datetime import datetime, timedelta, timezone

import pytest
import torch

import hypermem
from hypermem import Memory, retrieval, temporal
from hypermem.geometry import PoincareBall, lorentz_distance
from hypermem.geometry import cones as geometry_cones
from hypermem.geometry import poincare as P
from hypermem.geometry.numerics import MIN_WEIGHT, arcosh1p, max_radius
from hypermem.hierarchy import cones as hierarchy_cones
from hypermem.hierarchy.compiled_sgd import compiled_epoch_available, softmax_sgd_epoch
from hypermem.hierarchy.evaluation import poincare_rank_key
from hypermem.hierarchy.fused import anchor_distance
from hypermem.hierarchy.fused_sgd import softmax_sgd_step
from hypermem.hierarchy.rank_polish import _RankState
from hypermem.hierarchy.relations import as_relations
from hypermem.index import HyperbolicDistance, MIPSIndex, ShellDistance, exact_topk
from hypermem.nn import HyperbolicMemory
from hypermem.nn.distance import all_distance, gathered_distance
from hypermem.retrieval import cones as retrieval_cones
from hypermem.retrieval import scoring
from hypermem.retrieval.scoring import combine, score_bias
from hypermem.temporal import Ebbinghaus, HalfLife, Product, ValidityWindow, policy_weights

DTYPES = (torch.float64, torch.float32)
CURVATURES = (1.0, 0.5, 2.0)
BANDS = ("origin", "middle", "boundary")
N, DIM = 48, 5

# Largest relative error of a tier against the float64 reference of its own inputs.  Near the
# boundary ``1 - c||x||^2`` keeps only the digits the dtype has left (float64: ~1e-10 of 1,
# float32: ~1e-3), which is also where the reference itself rounds.
RTOL = {(torch.float64, "origin"): 1e-12, (torch.float64, "middle"): 1e-12, (torch.float64, "boundary"): 2e-7,
        (torch.float32, "origin"): 2e-6, (torch.float32, "middle"): 2e-6, (torch.float32, "boundary"): 5e-5}


def radii(band: str, dtype: torch.dtype, c: float) -> tuple[float, float]:
    """Hyperbolic radii of a band for curvature ``c``."""
    top = max_radius(dtype)
    lo, hi = {"origin": (1e-6, 1e-3), "middle": (0.5, 3.0), "boundary": (top - 2.0, top - 0.01)}[band]
    return lo / math.sqrt(c), hi / math.sqrt(c)


def points(band, dtype, c, seed, n=N):
    g = torch.Generator().manual_seed(seed)
    u = torch.randn(n, DIM, generator=g, dtype=torch.float64)
    lo, hi = radii(band, dtype, c)
    r = lo + (hi - lo) * torch.rand(n, generator=g, dtype=torch.float64)
    return P.point_at(u, r, c).to(dtype)


def check(value, reference, dtype, band):
    value = torch.as_tensor(value).to(torch.float64)
    assert value.shape == reference.shape
    err = ((value - reference).abs() / reference.abs().clamp_min(1e-300)).max()
    assert float(err) <= RTOL[(dtype, band)], f"relative error {float(err):.3g}"


def unit(x):
    return x / x.norm(dim=-1, keepdim=True)


cases = pytest.mark.parametrize("dtype,band,c",
                                [(d, b, c) for d in DTYPES for b in BANDS for c in CURVATURES])


# ---------------------------------------------------------------------------- arcosh distance
@cases
def test_every_arcosh_distance_matches_geometry(dtype, band, c):
    x, y = points(band, dtype, c, 1), points(band, dtype, c, 2)
    ref = P.distance_arcosh(x.double(), y.double(), c)
    ball = PoincareBall(c)
    tiers = {
        "geometry.distance_arcosh": P.distance_arcosh(x, y, c),
        "geometry.distance": P.distance(x, y, c),
        "geometry.pairwise_distance": P.pairwise_distance(x, y, c).diagonal(),
        "PoincareBall.dist": ball.dist(x, y),
        "geometry.lorentz_distance": lorentz_distance(P.to_lorentz(x.double(), c), P.to_lorentz(y.double(), c),
                                                      c),
        "nn.all_distance": all_distance(x, y, "hyperbolic", c, 1.0).diagonal(),
        "nn.gathered_distance": gathered_distance(x, y.unsqueeze(1), "hyperbolic", c, 1.0)[:, 0],
        "hierarchy.fused.anchor_distance": anchor_distance(x, y.unsqueeze(1), c)[:, 0],
    }
    s = (unit(x) * unit(y)).sum(-1)
    g = HyperbolicDistance(c, P.distance_to_origin(x, c), P.distance_to_origin(y, c))
    tiers["index.HyperbolicDistance"] = g(s.unsqueeze(1), torch.arange(N)).diagonal()
    key = poincare_rank_key(c)(x, y).diagonal()
    tiers["hierarchy.evaluation rank key"] = arcosh1p(2.0 * c * key) / math.sqrt(c)
    for name, value in tiers.items():
        try:
            check(value, ref, dtype, band if "lorentz" not in name else "boundary")
        except AssertionError as exc:
            raise AssertionError(f"{name}: {exc}") from None


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("c", CURVATURES)
def test_rank_polish_pair_keys_rank_like_the_evaluation(dtype, c):
    x = points("middle", dtype, c, 3, n=12)
    pairs = [(i, j) for i in range(12) for j in range(12) if i != j and (i + j) % 3 == 0]
    rel = as_relations(pairs, nodes=list(range(12)))
    state = _RankState(x, rel, c)
    block = poincare_rank_key(c)(x, x)
    expect = block[rel.pairs[:, 0], rel.pairs[:, 1]]
    torch.testing.assert_close(state.key, expect, rtol=4 * torch.finfo(dtype).eps, atol=0.0)
    ref = P.distance_arcosh(x[rel.pairs[:, 0]].double(), x[rel.pairs[:, 1]].double(), c)
    check(arcosh1p(2.0 * c * state.key.double()) / math.sqrt(c), ref, dtype, "middle")


@pytest.mark.parametrize("backend", ["torch", "numpy"])
def test_mips_index_distances_match_geometry(backend):
    c = 0.5
    x, q = points("middle", torch.float64, c, 4), points("middle", torch.float64, c, 5, n=4)
    index = MIPSIndex(PoincareBall(c), backend=backend)
    index.build(x)
    dist, ind = index.search(q, k=3)
    ref = P.distance_arcosh(q.unsqueeze(1), x[ind], c)
    torch.testing.assert_close(dist.to(torch.float64), ref, rtol=1e-9, atol=1e-12)


# ---------------------------------------------------------------------------- shell distance
@cases
def test_every_shell_distance_matches_geometry(dtype, band, c):
    depth = sum(radii(band, dtype, c)) / 2
    x, y = points("middle", dtype, c, 6), points("middle", dtype, c, 7)
    ref = P.distance_arcosh(P.point_at(x.double(), depth, c), P.point_at(y.double(), depth, c), c)
    cos = (unit(x) * unit(y)).sum(-1)
    tiers = {
        "geometry.shell_distance": P.shell_distance(x, y, depth, c),
        "geometry.shell_distance_from_cosine": P.shell_distance_from_cosine(cos, depth, c),
        "index.ShellDistance": ShellDistance(c, depth)(cos.clone()),
        "nn.all_distance": all_distance(x, y, "shell", c, depth).diagonal(),
        "nn.gathered_distance": gathered_distance(x, y.unsqueeze(1), "shell", c, depth)[:, 0],
    }
    # Rounding the cosine costs ~ eps / (1 - cos) relative in sqrt(1 - cos); near the origin
    # and in the middle the shell distances are of order 1 and this dominates.
    for name, value in tiers.items():
        try:
            check(value, ref, dtype, band if dtype == torch.float64 else "boundary")
        except AssertionError as exc:
            raise AssertionError(f"{name}: {exc}") from None
    g = ShellDistance(c, depth)
    d = P.shell_distance_from_cosine(cos.double(), depth, c).to(dtype)
    assert bool((g.inverse(d) <= cos).all()), "ShellDistance.inverse must not exceed the cosine"


# ---------------------------------------------------------------------------- training steps
def reference_step(weight, u, cand, masked_out, lr, c):
    """Riemannian SGD on the summed softmax loss with autograd and geometry's distance."""
    w = weight.clone().requires_grad_(True)
    d = P.distance_arcosh(w[u].unsqueeze(1), w[cand], c)
    logp = torch.log_softmax((-d).masked_fill(masked_out, -math.inf), dim=1)
    loss = -logp[:, 0].sum()
    loss.backward()
    with torch.no_grad():
        out = P.project(weight - lr * P.egrad2rgrad(weight, w.grad, c), c)
    return out, float(loss.detach())


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("band", ["origin", "middle"])
@pytest.mark.parametrize("c", CURVATURES)
def test_training_steps_match_the_geometry_step(dtype, band, c):
    weight = points(band, dtype, c, 8, n=40)
    g = torch.Generator().manual_seed(9)
    u = torch.randperm(40, generator=g)[:8]
    cand = torch.randint(0, 40, (8, 6), generator=g)
    cand[:, 0] = (u + 1) % 40
    masked_out = cand == u.unsqueeze(1)
    lr = 0.05
    ref, ref_loss = reference_step(weight.double(), u, cand, masked_out, lr, c)
    tol = dict(rtol=1e-9, atol=1e-12) if dtype == torch.float64 else dict(rtol=2e-5, atol=1e-6)
    torch_w = weight.clone()
    loss = softmax_sgd_step(torch_w, u, cand, masked_out, lr, "poincare", c)
    torch.testing.assert_close(torch_w.double(), ref, **tol)
    assert float(loss) == pytest.approx(ref_loss, rel=1e-5)
    if compiled_epoch_available(weight):
        numba_w = weight.clone()
        loss = softmax_sgd_epoch(numba_w, u, cand, masked_out, lr, batch_size=8, curvature=c)
        torch.testing.assert_close(numba_w.double(), ref, **tol)
        assert loss == pytest.approx(ref_loss, rel=1e-5)


@pytest.mark.parametrize("dtype", DTYPES)
def test_fused_distance_gradient_matches_autograd(dtype):
    c = 2.0
    x, y = points("middle", dtype, c, 10, n=6), points("middle", dtype, c, 11, n=18).view(6, 3, DIM)
    gx, gy = (t.detach().double().clone().requires_grad_(True) for t in (x, y))
    P.distance_arcosh(gx.unsqueeze(1), gy, c).sum().backward()
    fx, fy = (t.detach().clone().requires_grad_(True) for t in (x, y))
    anchor_distance(fx, fy, c).sum().backward()
    tol = dict(rtol=1e-9, atol=1e-12) if dtype == torch.float64 else dict(rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(fx.grad.double(), gx.grad, **tol)
    torch.testing.assert_close(fy.grad.double(), gy.grad, **tol)


# ---------------------------------------------------------------------------- score and time
T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)
POLICIES = [HalfLife(48.0), Ebbinghaus(24.0, 0.5), Product(HalfLife(100.0), ValidityWindow(0.25))]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("metric", ["shell", "hyperbolic"])
@pytest.mark.parametrize("policy", POLICIES, ids=type)
def test_store_search_scores_are_the_combined_formula(dtype, metric, policy):
    now = T0 + timedelta(days=10)
    mem = Memory(decay=policy, metric=metric, time_coef=0.7, depth_bias=0.3, dtype=dtype, clock=lambda: now)
    root = mem.add("animals live on earth", t=T0)
    for i, text in enumerate(["dogs are loyal", "cats nap a lot", "wolves hunt in packs", "parrots talk"]):
        mem.add(text, parent=root, t=T0 + timedelta(days=i + 1), valid_until=T0 + timedelta(days=6))
    mem.search("dogs", k=2)  # counts accesses (Ebbinghaus weights them)
    hits = mem.search("a loyal dog", k=5, touch=False)
    q = mem.embed_query("a loyal dog").to(torch.float64)
    for h in hits:
        p = mem.point(h.id).to(torch.float64)
        ref_d = (P.shell_distance(q, p, mem.base_depth, mem.curvature) if metric == "shell"
                 else P.distance_arcosh(q, p, mem.curvature))
        rec = h.record
        times = torch.tensor([rec.t.timestamp()], dtype=torch.float64)
        vu = torch.tensor([rec.valid_until.timestamp() if rec.valid_until else math.inf], dtype=torch.float64)
        ref_w = policy_weights(policy, now, times, torch.tensor([float(rec.access_count)]), None, vu)
        rtol = 1e-9 if dtype == torch.float64 else 1e-5
        assert h.distance == pytest.approx(float(ref_d), rel=rtol, abs=rtol)
        assert h.time_weight == pytest.approx(float(ref_w), rel=1e-12)
        assert h.depth == pytest.approx(mem.depth(h.id), rel=1e-12)
        ref_s = combine([h.distance], [h.time_weight], [h.depth], time_coef=0.7, depth_bias=0.3)
        assert h.score == pytest.approx(float(ref_s), rel=rtol, abs=rtol)


@pytest.mark.parametrize("metric", ["shell", "hyperbolic"])
def test_nn_layer_scores_are_the_combined_formula(metric):
    now = T0 + timedelta(days=10)
    keys = points("middle", torch.float64, 1.0, 12, n=10)
    times = torch.tensor([(T0 + timedelta(hours=7 * i)).timestamp() for i in range(10)], dtype=torch.float64)
    importance = torch.linspace(0.2, 1.0, 10, dtype=torch.float64)
    layer = HyperbolicMemory(keys, None, metric=metric, temperature=0.5, timestamps=times,
                             importance=importance, decay=HalfLife(30.0), time_coef=0.6, depth_bias=0.2,
                             clock=lambda: now)
    w = (policy_weights(HalfLife(30.0), now, times) * importance).clamp_min(MIN_WEIGHT)
    torch.testing.assert_close(layer.time_weights(), w, rtol=0, atol=0)
    depth = P.distance_to_origin(keys)
    torch.testing.assert_close(layer.slot_bias(), score_bias(w, depth, 0.6, 0.2), rtol=1e-12, atol=1e-12)
    q = points("middle", torch.float64, 1.0, 13, n=3)
    scores, dist = layer.score_all(q)
    ref_d = (P.shell_distance(q.unsqueeze(1), keys, 1.0) if metric == "shell"
             else P.pairwise_distance(q, keys))
    torch.testing.assert_close(dist.detach(), ref_d, rtol=1e-9, atol=1e-12)
    ref_s = combine(ref_d / 0.5, w.expand(3, -1), depth.expand(3, -1), time_coef=0.6, depth_bias=0.2)
    torch.testing.assert_close(scores.detach(), ref_s, rtol=1e-9, atol=1e-12)
    # the top-k selection ranks by the same score (exact_topk over one matmul and the bias)
    top = layer.select(q, 4)
    torch.testing.assert_close(top, torch.argsort(-ref_s, dim=1, stable=True)[:, :4])


def test_exact_topk_ranks_by_minus_distance_plus_bias():
    x, q = points("middle", torch.float64, 1.0, 14, n=300), points("middle", torch.float64, 1.0, 15, n=5)
    bias = score_bias(torch.rand(300, dtype=torch.float64), P.distance_to_origin(x), 1.0, 0.3)
    g = ShellDistance(1.0, 1.0)
    scores, idx, dist = exact_topk(unit(q), unit(x), 7, g, bias, g.inverse, chunk_elements=1024,
                                   max_product=1.0)
    ref_d = P.shell_distance(q.unsqueeze(1), x, 1.0)
    ref = -ref_d + bias
    torch.testing.assert_close(idx, torch.argsort(-ref, dim=1, stable=True)[:, :7])
    torch.testing.assert_close(scores, torch.gather(ref, 1, idx), rtol=1e-12, atol=1e-12)


def test_min_weight_and_score_have_one_value():
    assert temporal.MIN_WEIGHT is scoring.MIN_WEIGHT is MIN_WEIGHT is hypermem.MIN_WEIGHT
    assert retrieval.combine is hypermem.combine is combine
    zero = combine([1.0], [0.0])
    assert float(zero) == pytest.approx(-1.0 + math.log(MIN_WEIGHT))


# ---------------------------------------------------------------------------- cones
def test_cone_formulas_have_one_home():
    for name in ("DEFAULT_K", "half_aperture", "cone_angle", "cone_energy", "in_cone"):
        assert getattr(retrieval_cones, name) is getattr(geometry_cones, name)
    assert hierarchy_cones.cone_energy is geometry_cones.cone_energy
    assert hierarchy_cones.DEFAULT_K == geometry_cones.DEFAULT_K
