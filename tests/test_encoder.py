"""HierarchyEncoder: scores, save/load (hypermem's folder and HiT's), refusals, the store."""

from __future__ import annotations

import json
import math
import shutil

import geoopt
import pytest
import torch

pytest.importorskip("sentence_transformers")

from encoder_helpers import EDGES, NAMES, tiny_model_folder  # noqa: E402

from hypermem.embed.encoder_folder import EncoderFolderError  # noqa: E402
from hypermem.embed.hierarchy_encoder import HierarchyEncoder  # noqa: E402
from hypermem.geometry.subsumption import (  # noqa: E402
    EXACT_DIFF_ELEMENTS,
    euclidean_subsumption_score,
    hit_subsumption_score,
    squared_distance,
)

torch.set_num_threads(1)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return tiny_model_folder(tmp_path_factory.mktemp("tiny"))


@pytest.fixture(scope="module")
def enc(tiny):
    return HierarchyEncoder.from_pretrained(str(tiny), "poincare")


def test_hit_score_matches_geoopt_and_broadcasts():
    torch.manual_seed(0)
    d, c = 16, 1 / 16
    ball = geoopt.PoincareBall(c=c)
    x = ball.projx(torch.randn(5, d, dtype=torch.float64) * 0.6)
    y = ball.projx(torch.randn(7, d, dtype=torch.float64) * 0.6)
    lam = 0.7
    s = hit_subsumption_score(x[:, None], y[None, :], c, lam)
    assert s.shape == (5, 7)
    want = -(ball.dist(x[:, None], y[None, :]) + lam * (ball.dist0(y)[None, :] - ball.dist0(x)[:, None]))
    torch.testing.assert_close(s, want, rtol=1e-6, atol=1e-6)   # geoopt: the gyrovector form
    e = euclidean_subsumption_score(x[:, None], y[None, :], lam)
    want_e = -((x[:, None] - y[None, :]).norm(dim=-1) + lam * (y.norm(dim=-1)[None] - x.norm(dim=-1)[:, None]))
    torch.testing.assert_close(e, want_e)
    assert float(hit_subsumption_score(x[0], x[0], c, 0.0)) == 0.0


def test_large_broadcast_takes_the_product_form_with_the_same_values():
    torch.manual_seed(1)
    x = torch.randn(300, 1, 300, dtype=torch.float64)
    y = torch.randn(1, 200, 300, dtype=torch.float64)
    assert 300 * 200 * 300 > EXACT_DIFF_ELEMENTS
    torch.testing.assert_close(squared_distance(x, y), (x - y).pow(2).sum(-1), rtol=1e-9, atol=1e-9)


def test_encode_embed_and_scores(enc):
    x = enc.encode(["dog", "animal", "oak"])
    assert x.dtype == torch.float32 and x.shape == (3, enc.dim)
    assert enc.curvature == pytest.approx(1 / enc.dim)
    assert bool((x.norm(dim=-1) < enc.dim ** 0.5).all())
    e = enc.embed(["dog"])
    assert e.dtype == torch.float64 and e.device.type == "cpu"
    torch.testing.assert_close(e.float(), x[:1])
    m = enc.subsumption_scores(x[:, None], x[None, :])
    assert m.shape == (3, 3)
    torch.testing.assert_close(enc.subsumption_scores(["dog", "oak"], ["animal", "animal"]),
                               torch.stack([m[0, 1], m[2, 1]]), rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match="pairwise"):
        enc.subsumption_scores(["dog"], ["animal", "oak"])
    a = x.numpy()   # points as NumPy arrays are points too, not texts
    torch.testing.assert_close(enc.subsumption_scores(a[:, None], a[None, :]), m)
    torch.testing.assert_close(enc.subsumption_scores(a[:1], a[1:]), m[0, 1:])
    with pytest.raises(ValueError, match="coordinates"):
        enc.subsumption_scores(torch.zeros(2, 3), x)
    with pytest.raises(ValueError, match="threshold"):
        enc.predict(["dog"], ["animal"])


def test_the_store_accepts_it(enc):
    from hypermem import Memory

    mem = Memory(embedder=enc)
    a = mem.add("animal")
    mem.add("dog", parent=a)
    assert mem.search("a dog", k=1)[0].record.text in ("dog", "animal")


def test_save_load_round_trip(enc, tmp_path):
    enc.centripetal_weight, enc.threshold = 0.8, -3.5
    enc.metrics = {"val_f1": 0.5}
    folder = enc.save(tmp_path / "e")
    back = HierarchyEncoder.load(folder)
    assert (back.geometry, back.dim, back.centripetal_weight, back.threshold) == ("poincare", enc.dim, 0.8, -3.5)
    assert back.metrics == {"val_f1": 0.5} and back.curvature == pytest.approx(enc.curvature)
    assert back.ranking_weight is None and back.ranking_lambda == 0.8  # no ranking lambda: the centripetal one
    enc.ranking_weight = 0.3
    back = HierarchyEncoder.load(enc.save(tmp_path / "e"))
    assert (back.ranking_weight, back.ranking_lambda, back.centripetal_weight) == (0.3, 0.3, 0.8)
    torch.testing.assert_close(back.encode(["dog", "a siamese cat"]), enc.encode(["dog", "a siamese cat"]))
    assert back.source == str((tmp_path / "e").resolve())
    before = sorted(p.name for p in (tmp_path / "e").rglob("*"))
    HierarchyEncoder.load(folder)
    assert sorted(p.name for p in (tmp_path / "e").rglob("*")) == before   # loading writes nothing


def test_the_twin_round_trip(tiny, tmp_path):
    twin = HierarchyEncoder.from_pretrained(str(tiny), "euclidean")
    assert twin.curvature is None
    x = twin.encode(["dog", "animal"])
    assert float(twin.subsumption_scores(x[0], x[1], centripetal_weight=0.0)) == pytest.approx(
        -float((x[0] - x[1]).norm()), rel=1e-5)
    back = HierarchyEncoder.load(twin.save(tmp_path / "t"))
    assert back.geometry == "euclidean" and back.curvature is None


@pytest.mark.parametrize("field, value, match", [
    ("geometry", "hyperbolic", "geometry"), ("dim", 7, "dim"), ("centripetal_weight", "1", "finite number"),
    ("threshold", float("nan"), "finite number"), ("version", 9, "version"), ("extra", 1, "unknown field"),
    ("curvature", -1.0, "positive"), ("max_length", 0, "max_length"),
    ("ranking_weight", "0.5", "finite number"), ("ranking_weight", float("inf"), "finite number"),
])
def test_every_field_is_checked(enc, tmp_path, field, value, match):
    folder = tmp_path / "e"
    enc.save(folder)
    cfg = json.loads((folder / "hypermem_encoder.json").read_text())
    cfg[field] = value
    (folder / "hypermem_encoder.json").write_text(json.dumps(cfg).replace("NaN", "NaN"))
    with pytest.raises(EncoderFolderError, match=match):
        HierarchyEncoder.load(folder)


def test_refuses_code_and_pickles(enc, tmp_path):
    folder = tmp_path / "e"
    enc.save(folder)
    modules = json.loads((folder / "modules.json").read_text())
    bad = [dict(modules[0]), dict(modules[1], type="mypkg.EvilModule")]
    (folder / "modules.json").write_text(json.dumps(bad))
    with pytest.raises(EncoderFolderError, match="EvilModule"):
        HierarchyEncoder.load(folder)
    (folder / "modules.json").write_text(json.dumps(modules))
    (folder / "model.safetensors").unlink()
    with pytest.raises(EncoderFolderError, match="safetensors"):
        HierarchyEncoder.load(folder)
    with pytest.raises(FileNotFoundError):
        HierarchyEncoder.load(tmp_path / "nowhere")


def test_a_small_head_saves_loads_and_its_folder_is_checked(tiny, tmp_path):
    # dim= adds a tanh head: points in [-1, 1]^dim inside the ball of curvature 1/dim
    torch.manual_seed(0)
    small = HierarchyEncoder.from_pretrained(str(tiny), "poincare", dim=5)
    x = small.encode(["dog", "a siamese cat", "animal"])
    assert small.dim == 5 and x.shape == (3, 5) and small.curvature == pytest.approx(0.2)
    assert float(x.abs().max()) <= 1.0 and float(x.norm(dim=1).max()) < 5 ** 0.5
    assert small.subsumption_scores(x[:2], x[2:]).shape == (2,)
    folder = tmp_path / "s"
    small.save(folder)
    back = HierarchyEncoder.load(folder)
    assert back.dim == 5 and back.curvature == pytest.approx(0.2)
    torch.testing.assert_close(back.encode(["dog", "a siamese cat", "animal"]), x)
    with pytest.raises(ValueError, match="dim must be an integer >= 2"):
        HierarchyEncoder.from_pretrained(str(tiny), "poincare", dim=1)

    head = folder / "2_Dense" / "config.json"
    good = json.loads(head.read_text())
    for field, value, match in [("activation_function", "os.system", "activation_function"),
                                ("out_features", -3, "out_features"), ("extra", 1, "unknown field"),
                                ("use_residual", True, "use_residual")]:
        head.write_text(json.dumps(dict(good, **{field: value})))
        with pytest.raises(EncoderFolderError, match=match):
            HierarchyEncoder.load(folder)
    head.write_text(json.dumps(good))
    (folder / "2_Dense" / "model.safetensors").rename(folder / "2_Dense" / "pytorch_model.bin")
    with pytest.raises(EncoderFolderError, match="safetensors"):
        HierarchyEncoder.load(folder)


def test_a_plain_normalising_model_is_not_an_encoder(tmp_path):
    from hypermem.embed.sentence_transformer import local_minilm_path

    with pytest.raises(EncoderFolderError, match="normalises"):
        HierarchyEncoder.load(local_minilm_path())


def test_a_folder_in_hits_layout_loads_as_its_ball(tiny, tmp_path):
    """HiT's save is a sentence-transformers folder of a transformer and a mean pooling, with
    its evaluator's results.tsv beside it."""
    folder = tmp_path / "hit"
    shutil.copytree(tiny, folder)
    (folder / "results.tsv").write_text("\tcentri_weight\tthreshold\tprecision\trecall\tf1\n"
                                        "epoch=0\t0.3\t-9.0\t0.5\t0.5\t0.5\nvalidation\t1.2\t-7.5\t0.8\t0.8\t0.8\n")
    enc = HierarchyEncoder.load(folder)
    assert enc.geometry == "poincare" and enc.curvature == pytest.approx(1 / enc.dim)
    assert (enc.centripetal_weight, enc.threshold) == (1.2, -7.5)


def test_a_folder_written_by_the_hierarchy_transformers_package(tiny, tmp_path):
    hit = pytest.importorskip("hierarchy_transformers")
    model = hit.HierarchyTransformer.from_pretrained(str(tiny))
    model.save(str(tmp_path / "hit"))
    enc = HierarchyEncoder.load(tmp_path / "hit")
    texts = ["dog", "animal"]
    theirs = model.encode(texts, convert_to_tensor=True)
    torch.testing.assert_close(enc.encode(texts), theirs.float(), rtol=1e-5, atol=1e-5)
    d_theirs = model.manifold.dist(theirs[0], theirs[1])
    lam = 0.4
    want = -(d_theirs + lam * (model.manifold.dist0(theirs[1]) - model.manifold.dist0(theirs[0])))
    got = enc.subsumption_scores(enc.encode(texts[:1]), enc.encode(texts[1:]), centripetal_weight=lam)
    assert float(got) == pytest.approx(float(want), rel=1e-4)
    assert math.isclose(enc.curvature, float(model.manifold.c), rel_tol=1e-6)   # geoopt keeps c in float32


def test_names_of_the_tiny_tree():
    assert len(EDGES) == 32 and set(NAMES) == {e for pair in EDGES for e in pair}


def test_all_pairs_inner_products_are_one_matrix_product():
    from hypermem.geometry.subsumption import broadcast_inner

    x, y = torch.randn(4, 1, 8, dtype=torch.float64), torch.randn(1, 6, 8, dtype=torch.float64)
    torch.testing.assert_close(broadcast_inner(x, y), (x * y).sum(-1))
    torch.testing.assert_close(broadcast_inner(y.transpose(0, 1), x.transpose(0, 1)), (x * y).sum(-1).T)
