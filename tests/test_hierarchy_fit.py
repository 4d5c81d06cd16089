"""Training: the fused distance, negative sampling, Poincaré vs Euclidean, cones (the SGD
steps themselves: test_hierarchy_sgd.py)."""

import math
import warnings

import pytest
import torch
from tree_helpers import balanced_isa

from hypermem.geometry.poincare import distance_arcosh
from hypermem.hierarchy import Relations, children_map, reconstruction, transitive_closure
from hypermem.hierarchy.cones import cone_score, inner_radius, poincare_isa_score
from hypermem.hierarchy.evaluation import link_prediction
from hypermem.hierarchy.fused import anchor_distance
from hypermem.hierarchy.ranking_loss import softmax_ranking_loss
from hypermem.hierarchy.sampling import NegativeSampler
from hypermem.hierarchy.splits import link_prediction_split, transitive_reduction
from hypermem.hierarchy.training import (
    fit_entailment_cones,
    fit_euclidean_embeddings,
    fit_poincare_embeddings,
    lr_factor,
)


@pytest.mark.parametrize("c", [1.0, 0.5])
def test_fused_distance_values_and_gradients(c):
    g = torch.Generator().manual_seed(0)
    u = ((torch.rand(4, 3, generator=g, dtype=torch.float64) - 0.5) * 0.9).requires_grad_()
    V = ((torch.rand(4, 6, 3, generator=g, dtype=torch.float64) - 0.5) * 0.9).requires_grad_()
    assert torch.allclose(anchor_distance(u, V, c), distance_arcosh(u[:, None], V, c), atol=1e-12)
    assert torch.autograd.gradcheck(lambda a, b: anchor_distance(a, b, c), (u, V))


def test_softmax_loss_masks_invalid_negatives():
    d_pos = torch.tensor([1.0, 2.0])
    d_neg = torch.tensor([[2.0, 0.0], [3.0, 3.0]])
    mask = torch.tensor([[True, False], [True, True]])
    loss = softmax_ranking_loss(d_pos, d_neg, mask, reduction="none")
    want0 = -torch.log(torch.exp(torch.tensor(-1.0)) / (torch.exp(torch.tensor(-1.0)) + torch.exp(torch.tensor(-2.0))))
    assert float(loss[0]) == pytest.approx(float(want0))


def test_sampler_never_returns_related_nodes():
    rel = Relations(balanced_isa(3, 3))
    s = NegativeSampler(rel, generator=torch.Generator().manual_seed(0))
    u = rel.pairs[:, 0]
    for unigram in (False, True):
        neg, ok = s.sample(u, 20, unigram=unigram)
        assert neg.shape == (u.shape[0], 20) and ok.float().mean() > 0.9
        assert not bool((rel.contains(u[:, None].expand_as(neg), neg) & ok).any())
        assert not bool(((neg == u[:, None]) & ok).any())


def test_compiled_sampler_draws_the_same_distribution():
    """sample_compiled: valid negatives only (never u, never related either way), the rest
    masked; reproducible from the generator; uniform and degree^0.75 frequencies match the
    torch sampler's."""
    pytest.importorskip("numba")
    rel = Relations(balanced_isa(3, 3))
    u = rel.pairs[:, 0].repeat(40)
    sym = rel.symmetric()
    freq = {}
    for how in ("torch", "compiled"):
        s = NegativeSampler(rel, generator=torch.Generator().manual_seed(0))
        draw = s.sample if how == "torch" else s.sample_compiled
        for unigram in (False, True):
            neg, ok = draw(u, 20, unigram=unigram)
            assert neg.shape == (u.shape[0], 20) and ok.dtype == torch.bool and ok.float().mean() > 0.9
            assert not bool((sym.contains(u[:, None].expand_as(neg), neg) & ok).any())
            assert not bool(((neg == u[:, None]) & ok).any())
            freq[how, unigram] = torch.bincount(neg[ok], minlength=rel.n).double() / int(ok.sum())
    for unigram in (False, True):
        assert float((freq["torch", unigram] - freq["compiled", unigram]).abs().max()) < 0.01
    hub, leaf = 1, rel.n - 1  # a level-1 node (high degree) and a leaf: degree^0.75 favours the hub
    ratio = {uni: float(freq["compiled", uni][hub] / freq["compiled", uni][leaf]) for uni in (False, True)}
    assert ratio[True] > 1.5 * ratio[False]
    a = NegativeSampler(rel, generator=torch.Generator().manual_seed(5)).sample_compiled(u[:50], 7)
    b = NegativeSampler(rel, generator=torch.Generator().manual_seed(5)).sample_compiled(u[:50], 7)
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])
    # with positives: the (B, 1 + k) candidate layout, the same negatives after column 0
    pos = rel.pairs[:50, 1]
    c = NegativeSampler(rel, generator=torch.Generator().manual_seed(5)).sample_compiled(u[:50], 7, positives=pos)
    assert c[0].shape == (50, 8) and torch.equal(c[0][:, 0], pos) and bool(c[1][:, 0].all())
    assert torch.equal(c[0][:, 1:], a[0]) and torch.equal(c[1][:, 1:], a[1])
    # a node related to every other one has no valid negative: all masked
    star = Relations([(i, 0) for i in range(1, 6)])
    neg, ok = NegativeSampler(star, generator=torch.Generator().manual_seed(0)).sample_compiled(
        torch.zeros(3, dtype=torch.int64), 4)
    assert not bool(ok.any())


def test_lr_schedule():
    assert lr_factor(0, 10, 2, 0.1, 0.01) == 0.1
    assert lr_factor(2, 10, 2, 0.1, 0.01) == 1.0
    assert lr_factor(9, 10, 2, 0.1, 0.01) == pytest.approx(0.01)
    assert [lr_factor(e, 10, 2, 0.1, 1.0) for e in range(10)] == [0.1, 0.1] + [1.0] * 8  # constant after


@pytest.fixture(scope="module")
def small_closure():
    return balanced_isa(4, 3)  # 85 nodes, 3 levels below the root


def test_poincare_beats_euclidean_in_two_dimensions(small_closure):
    kw = dict(dim=2, epochs=40, negatives=20, batch_size=64, seed=0, final_lr_factor=0.01)
    p_pts, p_rep = fit_poincare_embeddings(small_closure, burn_in=3, lr=1.0, **kw)
    e_pts, _ = fit_euclidean_embeddings(small_closure, **kw)
    rp = reconstruction(p_pts, small_closure, "poincare")
    re = reconstruction(e_pts, small_closure, "euclidean")
    assert p_rep.losses[-1] < p_rep.losses[0]
    assert all(float(x.norm()) < 1.0 for x in p_pts.values())
    assert rp.map > re.map + 0.2, (rp.map, re.map)
    assert rp.map > 0.6


def test_fit_options_and_errors(small_closure):
    pts, rep = fit_poincare_embeddings(small_closure, dim=3, epochs=3, optimizer="radam", dtype=torch.float32,
                                       eval_every=1, sparse=True)
    assert next(iter(pts.values())).dtype == torch.float32
    assert [h["epoch"] for h in rep.history] == [1, 2, 3] and "map" in rep.history[0]
    with pytest.raises(ValueError, match="optimizer"):
        fit_poincare_embeddings(small_closure, epochs=1, optimizer="sgd")
    with pytest.raises(ValueError, match="negatives"):
        fit_poincare_embeddings(small_closure, epochs=1, negatives=0)


def test_fit_starts_from_given_points(small_closure):
    """``init`` replaces the random start: the shadow layout of the tree is already a
    perfect reconstruction, and a few epochs of training from it keep it near perfect."""
    from hypermem.hierarchy.sarkar import sarkar_layout

    rel = Relations(small_closure)
    n_hypernyms = {u: 0 for pair in small_closure for u in pair}
    for u, _ in small_closure:
        n_hypernyms[u] += 1
    parent = {}  # the parent of u: its hypernym with the most hypernyms of its own
    for u, v in small_closure:
        if u not in parent or n_hypernyms[v] > n_hypernyms[parent[u]]:
            parent[u] = v
    tree = [(p, c) for c, p in parent.items()]
    lay = sarkar_layout(tree, dim=3, edge_length="isa")
    zero, _ = fit_poincare_embeddings(rel, dim=3, epochs=0, init=dict(lay))
    for n in rel.nodes:
        assert torch.allclose(zero[n], lay[n])
    assert reconstruction(zero, rel).mean_average_precision == pytest.approx(1.0)
    start = torch.stack([lay[n] for n in rel.nodes])
    pts, _ = fit_poincare_embeddings(rel, dim=3, epochs=5, lr=0.01, burn_in=0, init=start)
    assert reconstruction(pts, rel).mean_average_precision > 0.95
    random, _ = fit_poincare_embeddings(rel, dim=3, epochs=5, lr=0.01, burn_in=0)
    assert reconstruction(random, rel).mean_average_precision < 0.9
    with pytest.raises(KeyError, match="no point"):
        fit_poincare_embeddings(rel, dim=3, epochs=0, init={rel.nodes[0]: start[0]})
    with pytest.raises(ValueError, match="shape"):
        fit_poincare_embeddings(rel, dim=4, epochs=0, init=start)
    with pytest.raises(ValueError, match="non-finite"):
        fit_poincare_embeddings(rel, dim=3, epochs=0, init=start * float("nan"))


def test_init_beyond_the_margin_warns_and_a_shallower_layout_fits():
    """A spine 18 levels deep (three leaves hanging off each level) lays out beyond
    float64's radius: training from it projects the deepest points onto the margin (with a
    warning naming the cure), which merges their levels; the layout with larger shrink and
    max_shrink fits inside, and ranks better than the merged one."""
    from hypermem.hierarchy.shadows import shadow_layout

    edges = [(f"s{i}", f"s{i + 1}") for i in range(18)] + [(f"s{i}", f"leaf{i}_{k}") for i in range(18) for k in range(3)]
    rel = Relations([(c, a) for a, c in transitive_closure(children_map(edges)[0], "s0")])
    with pytest.warns(RuntimeWarning, match="beyond the radius"):
        deep = shadow_layout(edges, dim=3)
    assert deep.info["radius"] > deep.info["max_radius"]
    assert reconstruction(deep, rel).mean_rank == 1.0  # exact, but not representable for training
    with pytest.warns(RuntimeWarning, match=r"init: \d+ of 73 points lie beyond the ball's margin.*shrink"):
        merged, _ = fit_poincare_embeddings(rel, dim=3, epochs=0, init=dict(deep))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        shallow = shadow_layout(edges, dim=3, shrink=1.2, max_shrink=0.55)
        kept, _ = fit_poincare_embeddings(rel, dim=3, epochs=0, init=dict(shallow))
    assert shallow.info["radius"] < shallow.info["max_radius"]
    assert reconstruction(kept, rel).mean_rank < reconstruction(merged, rel).mean_rank - 2.0


def test_split_and_cones_beat_poincare_link_prediction(small_closure):
    rel = Relations(small_closure)
    basic = transitive_reduction(rel)
    assert int(basic.sum()) == 84  # the tree edges
    sp = link_prediction_split(rel, non_basic_fraction=0.5, val_fraction=0.2, test_fraction=0.2, seed=0)
    assert not bool(sp.train.contains(sp.test_pairs[sp.test_labels, 0], sp.test_pairs[sp.test_labels, 1]).any())
    assert not bool(rel.contains(sp.test_pairs[~sp.test_labels, 0], sp.test_pairs[~sp.test_labels, 1]).any())
    assert int((~sp.test_labels).sum()) == 10 * int(sp.test_labels.sum())
    pts, _ = fit_poincare_embeddings(sp.train, dim=3, epochs=25, batch_size=64, negatives=20, burn_in=3)
    P = torch.stack([pts[n] for n in sp.train.nodes])
    base = link_prediction(poincare_isa_score(P, sp.val_pairs), sp.val_labels,
                           poincare_isa_score(P, sp.test_pairs), sp.test_labels)
    def cone_f1(epochs):
        cp, rep = fit_entailment_cones(sp.train, dim=3, epochs=epochs, batch_size=64, init=P)
        C = torch.stack([cp[n] for n in sp.train.nodes])
        assert bool((C.norm(dim=1) >= inner_radius() - 1e-9).all())
        res = link_prediction(cone_score(C, sp.val_pairs), sp.val_labels, cone_score(C, sp.test_pairs),
                              sp.test_labels)
        return res, rep

    cones, rep = cone_f1(40)
    assert rep.losses[-1] < 0.5 * rep.losses[0]
    # with 29 test positives the F1 is too noisy to rank methods; benchmarks/bench_hierarchy.py
    # compares cones and the Poincaré baseline on the mammal split
    assert 0.25 < cones.f1 <= 1.0 and 0.25 < base.f1 <= 1.0, (cones, base)


def test_dense_and_sorted_membership_agree():
    import hypermem.hierarchy.relations as R

    rel = Relations(balanced_isa(3, 3))
    g = torch.Generator().manual_seed(0)
    u, v = torch.randint(0, rel.n, (2, 500), generator=g)
    u = torch.cat([u, rel.pairs[:, 0]])
    v = torch.cat([v, rel.pairs[:, 1]])
    dense = rel.contains(u, v)
    limit, R._DENSE_LIMIT = R._DENSE_LIMIT, 0
    try:
        sorted_ = Relations(balanced_isa(3, 3)).contains(u, v)
    finally:
        R._DENSE_LIMIT = limit
    assert torch.equal(dense, sorted_) and bool(dense[500:].all())


def test_seed_values_reach_the_reference_quality():
    """poincare-memory's documented values (100 epochs, lr 0.1, 10 negatives, 10 burn-in
    epochs at lr/10, batches of 64) mean the same schedule here (constant lr after the
    burn-in), and reach at least the reference's MAP on the same closure, for both
    geometries."""
    ref = pytest.importorskip("poincare_memory.hierarchy.rsgd")
    closure = balanced_isa(3, 4)  # 121 nodes, 360 pairs
    seed_values = dict(dim=5, epochs=100, lr=0.1, negatives=10, burn_in=10, burn_in_lr_factor=0.1,
                       batch_size=64, seed=0)
    pts, rep = fit_poincare_embeddings(closure, **seed_values)
    ref_pts, ref_rep = ref.fit_poincare_embeddings(closure, **seed_values)
    assert rep.settings["final_lr_factor"] == 1.0 and len(rep.losses) == len(ref_rep.losses) == 100
    ours = reconstruction(pts, closure, "poincare").map
    theirs = reconstruction({k: torch.from_numpy(x) for k, x in ref_pts.items()}, closure, "poincare").map
    assert ours >= theirs - 0.01, (ours, theirs)
    euclid = dict(dim=5, epochs=100, lr=0.05, negatives=10, batch_size=64, seed=0)
    e_pts, _ = fit_euclidean_embeddings(closure, **euclid)
    e_ref, _ = ref.fit_euclidean_embeddings(closure, **euclid)
    ours = reconstruction(e_pts, closure, "euclidean").map
    theirs = reconstruction({k: torch.from_numpy(x) for k, x in e_ref.items()}, closure, "euclidean").map
    assert ours >= theirs - 0.01, (ours, theirs)


@pytest.mark.parametrize("name", ["rsgd", "sarkar", "evaluation", "tree"])
def test_the_references_hierarchy_module_paths_import_from_hypermem(name):
    """``poincare_memory.hierarchy.<name>`` documents its functions under that path (the
    trainers in ``rsgd``): each has its namesake in ``hypermem.hierarchy.<name>``, and the
    trainers there are hypermem's own."""
    import importlib
    import inspect

    ref = importlib.import_module(f"poincare_memory.hierarchy.{name}")
    ours = importlib.import_module(f"hypermem.hierarchy.{name}")
    own = [n for n, obj in vars(ref).items() if not n.startswith("_") and (inspect.isfunction(obj) or
                                                                          inspect.isclass(obj))
           and obj.__module__ == ref.__name__]
    assert own and [n for n in own if not hasattr(ours, n)] == []
    if name == "rsgd":
        from hypermem.hierarchy.rsgd import TrainingReport, fit_euclidean_embeddings, fit_poincare_embeddings

        assert fit_poincare_embeddings is globals()["fit_poincare_embeddings"]
        assert fit_euclidean_embeddings is globals()["fit_euclidean_embeddings"]
        assert TrainingReport.__module__ == "hypermem.hierarchy.training"


def test_configs_are_frozen_and_fit_hierarchy_is_what_the_fit_functions_run(small_closure):
    import dataclasses

    from hypermem.hierarchy.objectives import ConeConfig, EuclideanConfig, PoincareConfig
    from hypermem.hierarchy.training import fit_hierarchy

    config = PoincareConfig(dim=3, epochs=3, burn_in=1)
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.lr = 1.0
    assert (EuclideanConfig().lr, EuclideanConfig().batch_size, ConeConfig().optimizer) == (0.05, 128, "radam")
    a, rep_a = fit_hierarchy(small_closure, config)
    b, rep_b = fit_poincare_embeddings(small_closure, dim=3, epochs=3, burn_in=1)
    assert rep_a.losses == rep_b.losses and rep_a.settings == rep_b.settings
    assert all(torch.equal(a[n], b[n]) for n in a)
    with pytest.raises(TypeError, match="config"):
        fit_hierarchy(small_closure, {"dim": 3})


def test_a_custom_loss_fn_trains_through_autograd(small_closure):
    from hypermem.hierarchy.model import HierarchyEmbedding
    from hypermem.hierarchy.objectives import cone_objective
    from hypermem.hierarchy.training import softmax_objective, train_embedding

    rel = Relations(small_closure)
    for loss_fn in (softmax_objective(rel, 5), cone_objective(rel, 4)):
        model = HierarchyEmbedding(rel.n, 3, init_range=0.3)
        calls = []
        rep = train_embedding(model, rel, epochs=2, lr=0.01, batch_size=16, loss_fn=loss_fn,
                              after_step=calls.append)
        assert len(rep.losses) == 2 and all(math.isfinite(x) for x in rep.losses)
        assert len(calls) == 2 * -(-len(rel) // 16) and calls[0] is model
    with pytest.raises(ValueError, match="negatives"):
        softmax_objective(rel, 0)
