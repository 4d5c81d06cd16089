"""Training a hierarchy encoder: losses by hand, the in-batch gradient equals HiT's triplet
form, lambda/threshold selection, batches, tasks, files, fit_hierarchy_encoder on a tiny tree."""

from __future__ import annotations

import json
import random

import geoopt
import pytest
import torch

pytest.importorskip("sentence_transformers")

from encoder_helpers import EDGES, NAMES, tiny_model_folder  # noqa: E402

from hypermem.data.hierarchy_files import HierarchyFileError, read_hierarchy  # noqa: E402
from hypermem.data.hierarchy_tasks import (  # noqa: E402
    EntityHierarchy,
    hop_distances,
    mixed_hop_task,
    multi_hop_task,
    unseen_entity_task,
)
from hypermem.embed.hierarchy_encoder import HierarchyEncoder  # noqa: E402
from hypermem.hierarchy.encoder_batches import EdgeBatches, EncoderBatch, closure_sets, levels  # noqa: E402
from hypermem.hierarchy.encoder_eval import (  # noqa: E402
    RANKING_LAMBDAS,
    PairTerms,
    choose_operating_point,
    choose_ranking_lambda,
)
from hypermem.hierarchy.encoder_losses import LossWeights, encoder_losses  # noqa: E402
from hypermem.hierarchy.encoder_step import TokenCache, batch_losses  # noqa: E402
from hypermem.hierarchy.encoder_training import check_ball_curvature, fit_hierarchy_encoder  # noqa: E402

torch.set_num_threads(1)
H = EntityHierarchy(dict(NAMES), list(EDGES), name="tiny")


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return tiny_model_folder(tmp_path_factory.mktemp("tiny"))


def _points():
    torch.manual_seed(3)
    return geoopt.PoincareBall(c=0.25).projx(torch.randn(5, 4, dtype=torch.float64) * 0.8)


def test_losses_against_hand_computation():
    pts, c = _points(), 0.25
    ball = geoopt.PoincareBall(c=c)
    child, parent = torch.tensor([0, 1]), torch.tensor([2, 3])
    neg = torch.tensor([[3, 4], [4, -1]])
    w = LossWeights(clustering_margin=1.0, centripetal_margin=0.3, contrastive=1.0, temperature=0.5, cone=1.0)
    out = encoder_losses(pts, child, parent, neg, torch.ones(2, 5, dtype=torch.bool), c, w)
    d = lambda i, j: ball.dist(pts[i], pts[j])  # noqa: E731
    trip = [torch.relu(d(0, 2) - d(0, 3) + 1), torch.relu(d(0, 2) - d(0, 4) + 1), torch.relu(d(1, 3) - d(1, 4) + 1)]
    assert float(out["clustering"]) == pytest.approx(float(sum(trip) / 3), rel=1e-6)
    cen = [torch.relu(ball.dist0(pts[2]) - ball.dist0(pts[0]) + 0.3), torch.relu(ball.dist0(pts[3]) - ball.dist0(pts[1]) + 0.3)]
    assert float(out["centripetal"]) == pytest.approx(float(sum(cen) / 2), rel=1e-6)
    logits0 = torch.stack([-d(0, j) / 0.5 for j in range(5)])
    logits1 = torch.stack([-d(1, j) / 0.5 for j in range(5)])
    con = (-(logits0.log_softmax(0)[2]) - logits1.log_softmax(0)[3]) / 2
    assert float(out["contrastive"]) == pytest.approx(float(con), rel=1e-6)
    assert out["cone"] >= 0 and torch.isfinite(out["loss"])
    want = out["clustering"] + out["centripetal"] + out["contrastive"] + out["cone"]
    assert float(out["loss"]) == pytest.approx(float(want))


def test_depth_loss_against_hand_computation():
    pts, c = _points(), 0.25
    ball = geoopt.PoincareBall(c=c)
    lv = torch.tensor([2, 1, -1, 0, 3])   # entity 2's level unknown: left out
    w = LossWeights(clustering=0.0, centripetal=0.0, centripetal_margin=0.3, depth=2.0)
    out = encoder_losses(pts, torch.tensor([0]), torch.tensor([1]), torch.tensor([[4]]), None, c, w, lv)
    r = torch.stack([ball.dist0(pts[i]) - 0.3 * lv[i] for i in (0, 1, 3, 4)])
    assert float(out["depth"]) == pytest.approx(float((r - r.mean()).abs().mean()), rel=1e-6)
    assert float(out["loss"]) == pytest.approx(2.0 * float(out["depth"]))
    # norms exactly one margin apart per level: no loss, whatever the common offset
    e = encoder_losses(torch.tensor([[1.0, 0.0], [2.3, 0.0], [3.6, 0.0]]), torch.tensor([1]), torch.tensor([0]),
                       torch.tensor([[2]]), None, None, LossWeights(centripetal_margin=1.3, depth=1.0),
                       torch.tensor([0, 1, 2]))
    assert float(e["depth"]) == pytest.approx(0.0, abs=1e-12)
    with pytest.raises(ValueError, match="levels"):
        encoder_losses(pts, torch.tensor([0]), torch.tensor([1]), torch.tensor([[4]]), None, c, w)


def test_calibration_loss_against_hand_computation():
    pts, c = _points(), 0.25
    ball = geoopt.PoincareBall(c=c)
    w = LossWeights(clustering=0.0, centripetal=0.0, calibration=3.0, calibration_margin=0.4, calibration_lambda=0.7)
    out = encoder_losses(pts, torch.tensor([0, 1]), torch.tensor([2, 3]), torch.tensor([[3, 4], [4, -1]]), None, c, w)
    D = lambda i, j: ball.dist(pts[i], pts[j]) + 0.7 * (ball.dist0(pts[j]) - ball.dist0(pts[i]))  # noqa: E731
    pos, neg = [D(0, 2), D(1, 3)], [D(0, 3), D(0, 4), D(1, 4)]   # across children: positive 0 against 1's negative
    want = sum(torch.relu(p - n + 0.4) for p in pos for n in neg) / 6
    assert float(out["calibration"]) == pytest.approx(float(want), rel=1e-6)
    assert float(out["loss"]) == pytest.approx(3.0 * float(want))
    e = encoder_losses(torch.tensor([[0.1, 0.0], [1.0, 0.0], [0.0, 5.0]]), torch.tensor([1]), torch.tensor([0]),
                       torch.tensor([[2]]), None, None, LossWeights(calibration=1.0, calibration_margin=0.5))
    assert float(e["calibration"]) == pytest.approx(0.0, abs=1e-12)  # the parent on its child's ray: D = 0


def test_siblings_loss_against_hand_computation():
    pts, c = _points(), 0.25
    ball = geoopt.PoincareBall(c=c)
    w = LossWeights(clustering=0.0, centripetal=0.0, siblings=2.0)
    # children 0 and 1 of parent 3, child 2 of parent 4 (no sibling: left out); 0 -> 3 twice (two rows)
    child, parent = torch.tensor([0, 1, 2, 0]), torch.tensor([3, 3, 4, 3])
    out = encoder_losses(pts, child, parent, torch.tensor([[4], [4], [3], [4]]), None, c, w)
    h = [ball.dist0(pts[i]) for i in (0, 1, 0)]
    mean = sum(h) / 3
    want = sum((x - mean).abs() for x in h) / 3
    assert float(out["siblings"]) == pytest.approx(float(want), rel=1e-6)
    assert float(out["loss"]) == pytest.approx(2.0 * float(want))
    twin = encoder_losses(torch.tensor([[3.0, 4.0], [0.0, 5.0], [1.0, 0.0]]), torch.tensor([0, 1]),
                          torch.tensor([2, 2]), torch.tensor([[1], [0]]), None, None, LossWeights(siblings=1.0))
    assert float(twin["siblings"]) == pytest.approx(0.0, abs=1e-12)  # R^d: both children at norm 5


def test_levels_are_hops_below_the_nearest_root():
    # 0 and 5 are roots; 4 is reached by 0-1-3-4 and by 0-2-4: its level is the shorter, 2
    edges = [(1, 0), (2, 0), (3, 1), (4, 3), (4, 2), (6, 5)]
    assert levels(edges, 8).tolist() == [0, 1, 1, 2, 2, 0, 1, -1]
    chain = [(i + 1, i) for i in range(5000)]   # deep: no recursion
    assert levels(chain, 5001)[-1].item() == 5000
    batch = next(EdgeBatches(edges, closure_sets(edges, 8), batch_size=8, children_per_parent=2, negatives=2,
                             hard_negatives=1).epoch(0))
    assert batch.levels.tolist() == [levels(edges, 8)[e].item() for e in batch.entities]


def test_euclidean_losses_use_euclidean_lengths():
    pts = _points()
    out = encoder_losses(pts, torch.tensor([0]), torch.tensor([1]), torch.tensor([[2]]), None, None,
                         LossWeights(clustering_margin=0.5, centripetal_margin=0.1))
    want = torch.relu((pts[0] - pts[1]).norm() - (pts[0] - pts[2]).norm() + 0.5)
    assert float(out["clustering"]) == pytest.approx(float(want))
    assert float(out["centripetal"]) == pytest.approx(float(torch.relu(pts[1].norm() - pts[0].norm() + 0.1)))


def test_in_batch_gradient_equals_hits_triplet_form(tiny):
    """Encoding each distinct entity once and indexing the triplets gives HiT's loss and
    gradient (each triplet's three texts encoded separately), dropout off."""
    enc = HierarchyEncoder.from_pretrained(str(tiny), "poincare")
    enc.model.eval()
    ids = sorted(NAMES)
    tokens = TokenCache(enc.model.tokenizer, [NAMES[e] for e in ids], enc.max_length)
    ix = {e: i for i, e in enumerate(ids)}
    triplets = [("dog", "mammal", "bird"), ("dog", "mammal", "oak"), ("cat", "mammal", "fish"), ("cat", "mammal", "car")]
    ents = sorted({ix[x] for t in triplets for x in t})
    pos = {e: j for j, e in enumerate(ents)}
    batch = EncoderBatch(ents, torch.tensor([pos[ix["dog"]], pos[ix["cat"]]]),
                         torch.tensor([pos[ix["mammal"]]] * 2),
                         torch.tensor([[pos[ix["bird"]], pos[ix["oak"]]], [pos[ix["fish"]], pos[ix["car"]]]]),
                         torch.ones(2, len(ents), dtype=torch.bool))
    w = LossWeights()
    ours = batch_losses(enc, tokens, batch, w)["loss"]
    ours.backward()
    g_ours = [p.grad.clone() for p in enc.model.parameters() if p.grad is not None]
    enc.model.zero_grad()
    emb = lambda texts: enc.forward_features(enc.tokenize(texts))  # noqa: E731
    a, p, n = (emb([t[k] for t in triplets]) for k in range(3))
    ball = geoopt.PoincareBall(c=enc.curvature)
    theirs = torch.relu(ball.dist(a, p) - ball.dist(a, n) + 5.0).mean() + \
        torch.relu(0.5 + ball.dist0(p) - ball.dist0(a)).mean()
    theirs.backward()
    g_theirs = [p.grad.clone() for p in enc.model.parameters() if p.grad is not None]
    assert float(ours.detach()) == pytest.approx(float(theirs.detach()), rel=1e-4)
    assert len(g_ours) == len(g_theirs)
    for x, y in zip(g_ours, g_theirs):
        torch.testing.assert_close(x, y, rtol=2e-3, atol=1e-6)


class _LineScorer:
    """Entities with a given distance to one child and given norms: s = -(d + lambda (h_p - h_c))."""

    dist = {"c": 0.0, "p": 2.0, "x": 1.0}
    norm = {"c": 1.0, "p": 0.0, "x": 5.0}

    def encode(self, texts):
        return torch.tensor([[list(self.dist).index(t)] for t in texts], dtype=torch.float64)

    def score_terms(self, q, c):
        names = list(self.dist)
        d = torch.tensor([self.dist[names[int(i)]] for i in c.reshape(-1)]).reshape(1, -1).expand(q.shape[0], -1)
        hp = torch.tensor([self.norm[names[int(i)]] for i in c.reshape(-1)]).reshape(1, -1).expand(q.shape[0], -1)
        hc = torch.tensor([self.norm[names[int(i)]] for i in q.reshape(-1)]).reshape(-1, 1).expand_as(d)
        return d, hc, hp


def test_the_ranking_lambda_is_the_smallest_that_ranks_the_parent_first():
    """c's parent p is farther than x (2 against 1) but nearer the origin (norm 0 against 5):
    lambda 0 ranks x first (MRR 1/2); from 0.25 on, p comes first (-2 + lambda > -1 - 4 lambda)."""
    names = {e: e for e in ("c", "p", "x")}
    lam, mrr = choose_ranking_lambda(_LineScorer(), names, [("c", "p")], candidates=10)
    assert mrr[0.0] == 0.5 and all(mrr[v] == 1.0 for v in RANKING_LAMBDAS[1:]) and lam == 0.25
    assert choose_ranking_lambda(_LineScorer(), names, [("c", "c")]) == (None, {})  # its parent is left out


def test_operating_point_is_the_best_f1():
    # positives have small distances and are deeper than their parents only with lambda > 0
    dist = torch.tensor([1.0, 1.0, 3.0, 3.0, 1.0, 5.0], dtype=torch.float64)
    hc = torch.tensor([2.0, 2.0, 2.0, 2.0, 0.0, 2.0], dtype=torch.float64)
    hp = torch.tensor([1.0, 1.0, 1.0, 1.0, 3.0, 1.0], dtype=torch.float64)
    labels = torch.tensor([1, 1, 1, 1, 0, 0], dtype=torch.bool)
    op = choose_operating_point(PairTerms(dist, hc, hp, labels), lambdas=(0.0, 1.0))
    assert op.f1 == pytest.approx(1.0) and op.centripetal_weight == 1.0
    s = PairTerms(dist, hc, hp, labels).scores(1.0)
    assert bool(((s > op.threshold) == labels).all())


def test_batches_cover_every_edge_once_and_never_use_ancestors_as_negatives():
    ids = sorted(NAMES)
    ix = {e: i for i, e in enumerate(ids)}
    edges = [(ix[c], ix[p]) for c, p in EDGES]
    anc = closure_sets(edges, len(ids))
    b = EdgeBatches(edges, anc, batch_size=6, children_per_parent=2, negatives=4, hard_negatives=2, seed=1)
    seen = []
    for batch in b.epoch(0):
        for i in range(len(batch)):
            c, p = batch.entities[int(batch.child[i])], batch.entities[int(batch.parent[i])]
            seen.append((c, p))
            negs = [batch.entities[j] for j in batch.negatives[i].tolist() if j >= 0]
            assert c not in negs and not (set(negs) & anc[c]) and negs
            assert bool(batch.candidates[i, int(batch.parent[i])]) and not bool(batch.candidates[i, int(batch.child[i])])
    assert sorted(seen) == sorted(edges)
    first = [x.entities for x in b.epoch(3)]
    assert first == [x.entities for x in b.epoch(3)] and first != [x.entities for x in b.epoch(4)]


def test_tasks_follow_hits_protocol():
    m = multi_hop_task(H, seed=0, eval_fraction=0.2, negatives=3)
    direct = set(EDGES)
    assert m.train_edges == list(H.edges)
    assert not set(m.val.positives) & direct and not set(m.val.positives) & set(m.test.positives)
    anc = H.ancestors()
    for (c, _), rnd, hard in zip(m.val.positives, m.val.random_negatives, m.val.hard_negatives):
        assert len(rnd) == 3 and not set(rnd) & (anc[c] | {c}) and not set(hard) & (anc[c] | {c})
    sib = {s for p in H.parents()["dog"] for s in H.children()[p]} - {"dog"}
    i = [c for c, _ in m.val.positives + m.test.positives].index("dog") if "dog" in \
        [c for c, _ in m.val.positives + m.test.positives] else None
    if i is not None:
        hard = (m.val.hard_negatives + m.test.hard_negatives)[i]
        assert set(hard[:len(sib)]) <= sib
    x = mixed_hop_task(H, seed=0, eval_fraction=0.2, negatives=3)
    assert set(x.train_edges) < direct and set(x.val.positives) & direct
    u = unseen_entity_task(H, seed=0, fraction=0.1, negatives=3)
    held = set(u.val_entities) | set(u.test_entities)
    assert held and not any(c in held or p in held for c, p in u.train_edges)
    assert all(c in held and p not in held for c, p in u.val.positives + u.test.positives)
    hops = hop_distances(H, ["poodle"])["poodle"]
    assert hops == {"dog": 1, "mammal": 2, "animal": 3, "entity": 4}


def test_hierarchy_files(tmp_path):
    (tmp_path / "e.tsv").write_text("child\tparent\ndog\tanimal\ncat\tanimal\n")
    (tmp_path / "n.jsonl").write_text('{"id": "dog", "name": "a dog"}\n{"id": "cat", "text": "a cat"}\n'
                                      '{"id": "animal", "name": "an animal"}\n')
    h = read_hierarchy(tmp_path / "e.tsv", tmp_path / "n.jsonl")
    assert h.edges == [("dog", "animal"), ("cat", "animal")] and h.names["cat"] == "a cat"
    (tmp_path / "cycle.tsv").write_text("a\tb\nb\ta\n")
    with pytest.raises(HierarchyFileError, match="cycle"):
        read_hierarchy(tmp_path / "cycle.tsv")
    (tmp_path / "bad.tsv").write_text("a\tb\tc\n")
    with pytest.raises(HierarchyFileError, match="bad.tsv:1"):
        read_hierarchy(tmp_path / "bad.tsv")
    (tmp_path / "e.jsonl").write_text('{"child": "a", "parent": ""}\n')
    with pytest.raises(HierarchyFileError, match="parent"):
        read_hierarchy(tmp_path / "e.jsonl")
    (tmp_path / "few.tsv").write_text("dog\ta dog\n")
    with pytest.raises(HierarchyFileError, match="no name"):
        read_hierarchy(tmp_path / "e.tsv", tmp_path / "few.tsv")


@pytest.mark.parametrize("geometry", ["poincare", "euclidean"])
def test_fit_on_a_tiny_tree(tiny, tmp_path, geometry):
    val = [("beagle", "dog"), ("tulip", "flower")]
    train = [e for e in EDGES if e not in val]
    enc = fit_hierarchy_encoder(train, NAMES, base=str(tiny), geometry=geometry, epochs=6, batch_size=8, lr=2e-3,
                                validate_every=4, validation_edges=val, out=str(tmp_path / "enc"), seed=1)
    hist = enc.config["history"]
    assert enc.geometry == geometry and enc.threshold is not None and len(hist) >= 3
    assert enc.metrics["val_f1"] == max(h["f1"] for h in hist)     # the best validation is kept
    back = HierarchyEncoder.load(tmp_path / "enc")
    assert back.threshold == pytest.approx(enc.threshold) and back.geometry == geometry
    assert enc.ranking_weight in RANKING_LAMBDAS and back.ranking_weight == enc.ranking_weight  # chosen, saved
    assert enc.metrics["val_ranking_lambda"] == enc.ranking_weight and 0 < enc.metrics["val_ranking_mrr"] <= 1
    saved = json.loads((tmp_path / "enc" / "hypermem_encoder.json").read_text())
    assert saved["config"]["steps"] == enc.config["steps"]
    with pytest.raises(TypeError, match="unknown setting"):
        fit_hierarchy_encoder(train, NAMES, base=str(tiny), epochs=1, batchsize=8)


def test_max_minutes_stops_in_time_with_validated_weights(tiny):
    enc = fit_hierarchy_encoder(EDGES, NAMES, base=str(tiny), epochs=10_000, max_minutes=0.05, batch_size=8,
                                validate_every=10**6)
    assert enc.config["steps"] < 10_000 * 4 and enc.config["history"] and enc.threshold is not None


@pytest.mark.parametrize("batch_size,per_parent", [(4, 2), (8, 4), (16, 8), (2, 8), (128, 8)])
def test_every_epoch_packs_exactly_len_batches_and_every_edge_once(batch_size, per_parent):
    """Lightning reads an epoch's length once: an epoch one batch short ended without its
    epoch-end validation, and a finished run looked stopped inside its last epoch."""
    rng = random.Random(batch_size)
    n = 300
    edges = [(i, rng.randrange(0, max(1, i // 3))) for i in range(1, n)]
    eb = EdgeBatches(edges, closure_sets(edges, n), batch_size=batch_size, children_per_parent=per_parent,
                     negatives=2, hard_negatives=1, seed=3)
    for epoch in range(4):
        batches = list(eb.epoch(epoch))
        assert len(batches) == len(eb)
        mapped = sorted((b.entities[c], b.entities[p]) for b in batches
                        for c, p in zip(b.child.tolist(), b.parent.tolist()))
        assert mapped == sorted(edges)


def test_a_curvature_no_folder_could_hold_is_refused_before_training(tiny, tmp_path):
    # the tiny encoder is 32-dimensional: a saved folder keeps c within [1e-3/32, 1e3/32]
    with pytest.raises(ValueError, match=r"curvature must be between 0.001/dim and 1000/dim for a 32-dimensional"):
        fit_hierarchy_encoder(EDGES, NAMES, base=str(tiny), epochs=1, batch_size=8, curvature=1e-6,
                              out=tmp_path / "enc")
    assert not (tmp_path / "enc").exists()
    assert check_ball_curvature(0.25, "poincare", 4) == 0.25
