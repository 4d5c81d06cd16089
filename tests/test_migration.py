"""Coming from poincare-memory: the reference's calls, run against hypermem.

Each test is one point of the migration: the code a user of the NumPy library
``poincare-memory`` 0.1.4 already has (NumPy arrays in, NumPy arrays out through
``np.asarray``), with only the import changed, and what hypermem answers.  The reference
itself is installed for the side-by-side checks (``import poincare_memory``).
"""

import math
import os
import stat
import subprocess
import sys
import warnings
from datetime import datetime, timedelta, timezone

import numpy as np
import poincare_memory as ref
import pytest
import torch

import hypermem
from hypermem import (
    HalfLife,
    Memory,
    PoincareBall,
    ValidityWindow,
    in_cone,
    reconstruction,
    sarkar_layout,
    transitive_closure,
)
from hypermem.cli import main
from hypermem.viz import to_dict

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)
RNG = np.random.default_rng(0)
P64 = RNG.normal(size=(40, 6)) * 0.15
Q64 = RNG.normal(size=(40, 6)) * 0.15


def test_every_top_level_name_of_the_reference_imports_from_hypermem():
    missing = [name for name in ref.__all__ if not hasattr(hypermem, name)]
    assert missing == []
    from hypermem import (  # noqa: F401
        fit_euclidean_embeddings,
        fit_poincare_embeddings,
        lorentz_distance,
        max_safe_depth,
        to_mips_vectors,  # noqa: F401
    )
    # the hierarchy functions load on first use: a plain import pulls in neither them nor Lightning
    code = ("import sys, hypermem; print(sorted(m for m in ('lightning', 'pytorch_lightning', 'hypermem.hierarchy') "
            "if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


# the module paths the reference documents, with each name it documents there
DOCUMENTED_PATHS = {
    "geometry.poincare": ["PoincareBall"],
    "geometry.lorentz": ["lorentz_distance", "to_mips_vectors", "mips_scores"],
    "embed.base": ["Embedder", "HashingEmbedder", "CallableEmbedder", "SentenceTransformerEmbedder"],
    "embed.projection": ["BallProjector"],
    "store.records": ["MemoryRecord", "SearchResult"],
    "viz.export": ["disk_coordinates", "structural_coordinates", "to_dict"],
    "viz.html": ["render_html"],
    "index": ["MIPSIndex"],
}


@pytest.mark.parametrize("module", sorted(DOCUMENTED_PATHS))
def test_the_references_documented_module_paths_import_from_hypermem(module):
    import importlib
    ours, theirs = importlib.import_module(f"hypermem.{module}"), importlib.import_module(f"poincare_memory.{module}")
    for name in DOCUMENTED_PATHS[module]:
        assert hasattr(theirs, name), name   # the table above is the reference's
        assert getattr(ours, name) is getattr(hypermem, name, getattr(ours, name)), name


def test_table_rows_carry_the_references_t_key():
    m, r = hypermem.Memory(), ref.Memory()
    m.add("x")
    r.add("x")
    mine, theirs = m.table()[0], r.table()[0]
    assert set(theirs) <= set(mine)
    assert mine["t"] == mine["time"] and datetime.fromisoformat(mine["t"]).tzinfo is not None
    assert "importlib" not in dir(hypermem)


def test_numpy_float32_in_gives_float32_out():
    ball, rball = PoincareBall(), ref.PoincareBall()
    p32, q32 = P64.astype(np.float32), Q64.astype(np.float32)
    for name in ("distance", "distance_arcosh", "mobius_add", "pairwise_distance"):
        got = np.asarray(getattr(ball, name)(p32, q32))
        want = getattr(rball, name)(p32, q32)
        assert got.dtype == want.dtype == np.float32, name
        np.testing.assert_allclose(got, want, rtol=2e-4, atol=2e-5)
    for name in ("distance_to_origin", "conformal_factor", "to_lorentz", "logmap0", "expmap0", "project"):
        assert np.asarray(getattr(ball, name)(p32)).dtype == np.float32, name
    assert np.asarray(ball.distance(P64, Q64)).dtype == np.float64


def test_ball_projector_places_float32_embeddings_as_float64_points_like_the_reference():
    from hypermem import BallProjector

    emb = RNG.normal(size=(5, 8)).astype(np.float32)  # what sentence-transformers returns
    ours = np.asarray(BallProjector(PoincareBall()).at_depth(emb, 12.0))
    theirs = ref.BallProjector(ref.PoincareBall()).at_depth(emb, 12.0)
    assert ours.dtype == theirs.dtype == np.float64
    np.testing.assert_allclose(ours, theirs, rtol=1e-12)
    np.testing.assert_allclose(np.asarray(PoincareBall().distance_to_origin(ours)), 12.0, rtol=1e-9)


def test_pairwise_distance_diagonal_is_zero_and_nearby_distances_keep_their_digits():
    ball, rball = PoincareBall(), ref.PoincareBall()
    assert np.array_equal(np.diag(np.asarray(ball.pairwise_distance(P64, P64))), np.zeros(40))
    near = P64 + 1e-7
    ours = np.diag(np.asarray(ball.pairwise_distance(P64, near)))
    exact = np.asarray(ball.distance_arcosh(P64, near))  # from the coordinate differences
    assert np.max(np.abs(ours - exact) / exact) < 1e-12
    np.testing.assert_allclose(ours, np.diag(rball.pairwise_distance(P64, near)), rtol=1e-9)
    # float32: 1e-3 apart, within float32's rounding of the inputs (the matmul form erred by ~1e-3)
    p32 = P64.astype(np.float32)
    n32 = (P64 + 1e-3).astype(np.float32)
    got = np.diag(np.asarray(ball.pairwise_distance(p32, n32))).astype(np.float64)
    want = np.asarray(ball.distance_arcosh(p32.astype(np.float64), n32.astype(np.float64)))
    assert np.max(np.abs(got - want) / want) < 1e-5
    assert np.array_equal(np.diag(np.asarray(ball.pairwise_distance(p32, p32))), np.zeros(40, dtype=np.float32))


def test_conformal_factor_keeps_the_last_axis():
    lam = np.asarray(PoincareBall().conformal_factor(P64))
    assert lam.shape == (40, 1)
    np.testing.assert_allclose(lam, ref.PoincareBall().conformal_factor(P64), rtol=1e-12)
    assert (lam * P64).shape == P64.shape  # multiplies vectors row by row, as before
    assert PoincareBall().lambda_x(P64).shape == (40,)  # geoopt's name keeps geoopt's shape


def test_reconstruction_with_the_references_distance_callable():
    children = {"animal": ["dog", "cat"], "dog": ["puppy"], "cat": []}
    closure = [(v, u) for u, v in transitive_closure(children, "animal")]  # (hyponym, hypernym)
    points = {k: np.asarray(v) for k, v in sarkar_layout(transitive_closure(children, "animal")[:3]).items()}
    rball = ref.PoincareBall()
    got = reconstruction(points, closure, rball.distance)  # the callable returns NumPy arrays
    want = ref.reconstruction(points, closure, rball.distance)
    assert got.map == pytest.approx(want.mean_average_precision)
    assert got.mean_rank == pytest.approx(want.mean_rank)


def test_the_undefined_cone_near_the_origin_contains_every_point():
    ball, rball = PoincareBall(), ref.PoincareBall()
    from poincare_memory.retrieval.cones import half_aperture as ref_half_aperture

    from hypermem.retrieval.cones import half_aperture

    near_origin = np.array([[0.01, 0.0, 0.0]])
    anywhere = np.asarray(ball.random_points(25, 3, seed=1))
    assert float(half_aperture(near_origin, ball)) == math.pi == float(ref_half_aperture(near_origin, rball)[0])
    assert np.asarray(in_cone(near_origin, anywhere, ball)).all()
    assert np.array_equal(np.asarray(in_cone(near_origin, anywhere, ball)), ref.in_cone(near_origin, anywhere, rball))


def test_to_dict_records_the_layout_used():
    mem = Memory()
    a = mem.add("animals")
    mem.add("dogs", parent=a)
    assert to_dict(mem)["config"]["layout"] == "structural"
    assert to_dict(mem, layout="projection")["config"]["layout"] == "projection"


def test_one_ball_geoopt_names_and_hypermem_names_agree():
    ball = PoincareBall()
    deep = np.asarray(ball.point_at(np.array([1.0, 0.0]), 20.0))
    origin = np.zeros(2)
    assert float(ball.distance(deep, origin)) == pytest.approx(20.0, rel=1e-9)
    assert float(ball.dist(deep, origin)) == float(ball.distance(deep, origin))  # geoopt's name: 16.81 before
    assert float(ball.dist0(deep)) == float(ball.distance_to_origin(deep))
    x, y = P64[:3], Q64[:3]
    np.testing.assert_allclose(np.asarray(ball.geodesic(x, y, 0.3)), ref.PoincareBall().geodesic(x, y, 0.3),
                               rtol=1e-10)  # the reference's argument order
    np.testing.assert_allclose(np.asarray(ball.geodesic(0.3, x, y)), np.asarray(ball.geodesic(x, y, 0.3)))
    assert ball.sqrt_c == 1.0 and ball.radius == 1.0 and float(ball.c) == 1.0


def test_hypermem_demo_dash_o_writes_stem_db_and_html(tmp_path, capsys):
    stem = tmp_path / "site" / "memory"
    stem.parent.mkdir()
    assert main(["demo", "--dataset", "events", "-o", str(stem)]) == 0
    assert (tmp_path / "site" / "memory.db").is_file() and (tmp_path / "site" / "memory.html").is_file()
    assert len(Memory.load(tmp_path / "site" / "memory.db")) > 0
    assert main(["demo", "--dataset", "events", "-o", str(stem), "--out", str(tmp_path)]) == 1
    assert "either -o STEM or --out" in capsys.readouterr().err


def test_shipped_configs_are_found_by_name():
    from hypermem.configs import available, config_path

    assert "mammals_poincare" in available()
    assert config_path("mammals_poincare").is_file()
    assert config_path("mammals_poincare") == config_path("mammals_poincare.yaml")


def _events_store(**kw):
    mem = Memory(decay=HalfLife(hours=72), clock=lambda: T0 + timedelta(days=10), **kw)
    animal = mem.add("animals live on earth", t=T0)
    mem.add("dogs are loyal animals", parent=animal, t=T0 + timedelta(days=2))
    mem.add("wolves hunt in packs", parent=animal, t=T0 + timedelta(days=1), valid_until=T0 + timedelta(days=3))
    return mem, animal


def test_search_at_a_past_time_sees_only_what_existed_then():
    mem, _ = _events_store()
    then = T0 + timedelta(days=1, hours=12)
    texts = [r.record.text for r in mem.search("dogs", k=5, at_time=then)]
    assert texts and "dogs are loyal animals" not in texts  # created on day 2
    assert len(mem.search("dogs", k=5)) == 3  # now: all of them


def test_valid_only_leaves_out_memories_whose_validity_ended():
    mem, _ = _events_store(time_coef=1.0)
    mem.decay = ValidityWindow()
    assert "wolves hunt in packs" in [r.record.text for r in mem.search("wolves", k=5)]  # kept, tiny weight
    assert "wolves hunt in packs" not in [r.record.text for r in mem.search("wolves", k=5, valid_only=True)]
    past = mem.search("wolves", k=5, valid_only=True, at_time=T0 + timedelta(days=2, hours=1))
    assert "wolves hunt in packs" in [r.record.text for r in past]  # still valid on day 2


def test_cone_search_needs_a_cone_constrained_store():
    mem, animal = _events_store()
    with pytest.warns(UserWarning, match="cone_constrained=True"):
        assert mem.search("hunting", mode="cone", root=animal) == []
    mem, animal = _events_store(cone_constrained=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        hits = mem.search("hunting", mode="cone", root=animal)
    assert {r.record.text for r in hits} == {"dogs are loyal animals", "wolves hunt in packs"}


def test_naive_datetimes_are_taken_as_utc():
    naive, aware = Memory(), Memory()
    naive.add("x", id="x", t=datetime(2026, 1, 1, 12, 0))
    aware.add("x", id="x", t=datetime(2026, 1, 1, 12, 0, tzinfo=timezone.utc))
    assert naive.get("x").t == aware.get("x").t
    assert "naive" in Memory.add.__doc__ and "UTC" in Memory.add.__doc__


def test_blank_text_says_so_plainly():
    with pytest.raises(ValueError, match=r"^add\(\): text is blank: a memory's text must be a non-empty string$"):
        Memory().add("")
    with pytest.raises(ValueError, match=r"^item #1: text is blank"):
        Memory().add_many([{"text": "fine"}, {"text": "   "}])


def test_saved_files_follow_the_umask(tmp_path):
    mem, _ = _events_store()
    old = os.umask(0o022)
    try:
        mem.save(tmp_path / "m.db")
        mem.to_json(tmp_path / "m.json")
        mem.inspect(tmp_path / "m.html")
        assert main(["export", str(tmp_path / "m.db"), str(tmp_path / "t.csv")]) == 0
        for name in ("m.db", "m.json", "m.html", "t.csv"):
            assert stat.S_IMODE((tmp_path / name).stat().st_mode) == 0o644, name
        os.chmod(tmp_path / "m.db", 0o600)  # a replaced file keeps its mode
        mem.save(tmp_path / "m.db")
        assert stat.S_IMODE((tmp_path / "m.db").stat().st_mode) == 0o600
        os.umask(0o077)
        mem.save(tmp_path / "private.db")
        assert stat.S_IMODE((tmp_path / "private.db").stat().st_mode) == 0o600
    finally:
        os.umask(old)


def test_file_names_mean_their_format(tmp_path, capsys):
    mem, _ = _events_store()
    with pytest.raises(ValueError, match=r"SQLite.*to_json"):
        mem.save(tmp_path / "m.json")
    assert not (tmp_path / "m.json").exists()
    mem.save(tmp_path / "m.db")
    assert main(["export", str(tmp_path / "m.db"), str(tmp_path / "out.txt")]) == 1
    assert "name the file .json or .csv" in capsys.readouterr().err and not (tmp_path / "out.txt").exists()
    assert main(["export", str(tmp_path / "m.db"), str(tmp_path / "out.txt"), "--format", "json"]) == 0
    assert len(Memory.from_json(tmp_path / "out.txt")) == len(mem)


@pytest.mark.skipif(torch.cuda.is_available(), reason="the machine has CUDA")
def test_cuda_without_cuda_is_a_clear_error():
    with pytest.raises(ValueError, match="CUDA is not available"):
        Memory(device="cuda")


def test_use_index_before_build_index_builds_it():
    mem, _ = _events_store()
    exact = [r.record.id for r in mem.search("dogs", k=3, touch=False)]
    assert [r.record.id for r in mem.search("dogs", k=3, use_index=True, touch=False)] == exact


def test_tree_text_is_the_references_with_the_depth(tmp_path):
    """`tree()` prints `text  [id d=depth]` as poincare-memory does, line for line (issue 33, item 7)."""
    ours, theirs = Memory(), ref.Memory()
    for m in (ours, theirs):
        a = m.add("animals live on earth", id="a")
        d = m.add("dogs are loyal animals", parent=a, id="d")
        m.add("puppies are young dogs and a very long sentence about them", parent=d, id="p")
        m.add("cats purr", parent=a, id="c")
    assert ours.tree() == theirs.tree() and "[d d=1.50]" in ours.tree()
    assert ours.tree(root="d", max_text=12) == theirs.tree(root="d", max_text=12)


def test_generated_ids_are_16_hex_characters_and_12_character_ids_load(tmp_path):
    """hypermem's generated ids are 16 hex characters (the reference's 12, 48 bits, collide with
    probability ~0.2% among a million ids written by several processes to one durable store;
    docs/migrating.md); a reference file's 12-character ids and our 16-character ones both load."""
    mem = Memory()
    new = mem.add("x")
    assert len(new) == 16 and int(new, 16) >= 0
    r = ref.Memory()
    old = r.add("animals")
    r.add("dogs", parent=old)
    r.save(str(tmp_path / "ref.db"))
    loaded = Memory.load(tmp_path / "ref.db")
    assert len(old) == 12 and old in loaded and loaded.get(old).text == "animals"
    mem.add("y", parent=new)
    mem.save(tmp_path / "ours.db")
    back = Memory.load(tmp_path / "ours.db")
    assert back.tree() == mem.tree() and back.children(new)
