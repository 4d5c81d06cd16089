"""Coming from poincare-memory, walk 69: a custom embedder's defaults, the add_many hint of an
in-memory hashing store, search's error for a non-text query, reconstruction ties, file modes,
the search CLI's lines, versions and reprs (docs/migrating.md)."""

from __future__ import annotations

import math
import os
import stat
import warnings
from datetime import datetime, timedelta, timezone

import numpy as np
import poincare_memory as ref
import pytest

import hypermem
from hypermem import HalfLife, HashingEmbedder, Memory
from hypermem.cli import main
from hypermem.store.add_hint import AddManyHint, OneByOne
from hypermem.store.query_checks import QueryTypeError

NOW = datetime(2025, 1, 10, 12, tzinfo=timezone.utc)
TEXTS = ["the cat sat on the mat", "dogs chase cats", "quantum physics lecture", "cat food recipe",
         "mat cleaning tips", "the weather is sunny", "cat cat cat", "physics of cats"]


def _custom(lib):
    """A user's own embedder, as the reference's users write it: hashing behind a callable."""
    h = lib.HashingEmbedder(dim=64)
    return lib.CallableEmbedder(lambda texts: np.asarray(h.embed(list(texts))), 64)


def _fill(mem):
    for i, t in enumerate(TEXTS):
        mem.add(t, id=f"m{i}", t=NOW - timedelta(hours=10 * i))
    return mem


def _ranked(mem, q, **kw):
    return [(r.record.id, float(r.score)) for r in mem.search(q, k=len(TEXTS), touch=False, **kw)]


def _same(a, b):
    return [i for i, _ in a] == [i for i, _ in b] and all(math.isclose(x, y, abs_tol=1e-6) for (_, x), (_, y) in zip(a, b))


def test_a_custom_embedder_ranks_as_the_reference_with_time_coef_1_and_hybrid_0():
    kw = {"decay": HalfLife(hours=24), "clock": lambda: NOW, "inherit": 0.0}
    theirs = _fill(ref.Memory(embedder=_custom(ref), decay=ref.HalfLife(hours=24), clock=lambda: NOW, inherit=0.0))
    default = _fill(Memory(embedder=_custom(hypermem), **kw))
    assert default.hybrid == 0.3 and default.time_coef != 1.0           # hypermem's defaults differ ...
    assert not _same(_ranked(theirs, "cat"), _ranked(default, "cat"))
    seed = _fill(Memory(embedder=_custom(hypermem), time_coef=1.0, hybrid=0, **kw))
    for q in ("cat", "physics", "mat"):                                 # ... these two arguments give the seed's
        assert _same(_ranked(theirs, q), _ranked(seed, q)), q
    hashing = _fill(Memory(embedder=HashingEmbedder(dim=64), **kw))     # the hashing embedder keeps them
    assert hashing.hybrid == 0.0 and hashing.time_coef == 1.0


def test_a_reference_file_saved_with_a_custom_embedder_loads_with_the_lexical_term_on(tmp_path):
    theirs = _fill(ref.Memory(embedder=_custom(ref), decay=ref.HalfLife(hours=24), clock=lambda: NOW, inherit=0.0))
    theirs.save(str(tmp_path / "custom.db"))
    mem = Memory.load(tmp_path / "custom.db", embedder=_custom(hypermem), clock=lambda: NOW)
    assert mem.time_coef == 1.0 and mem.hybrid == 0.3                   # the file's time_coef, hypermem's hybrid
    assert not _same(_ranked(theirs, "cat"), _ranked(mem, "cat"))
    assert _same(_ranked(theirs, "cat"), _ranked(mem, "cat", hybrid=0))
    mem.hybrid = 0.0
    assert _same(_ranked(theirs, "mat"), _ranked(mem, "mat"))


def _fake_clock(monkeypatch, step):
    """Each call of ``OneByOne.clock`` (twice per add: start, end) moves ``step`` seconds on."""
    now = [0.0]

    def clock():
        now[0] += step
        return now[0]
    monkeypatch.setattr(OneByOne, "clock", staticmethod(clock))


def test_an_in_memory_hashing_store_is_never_hinted_even_under_warnings_as_errors(monkeypatch):
    _fake_clock(monkeypatch, 0.004)  # 4 ms an add (hashing in memory measures 1.8-3 ms): 8 s in all
    mem = Memory()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for i in range(2000):
            mem.add(f"note {i} about topic {i % 50}", id=f"a{i}", parent=(f"a{i // 10}" if i >= 10 else None))
    assert len(mem) == 2000 and not mem.one_by_one.told


def test_a_durable_hashing_store_is_hinted_and_the_hint_blames_the_commits(monkeypatch, tmp_path):
    with Memory.open(tmp_path / "a.db", embedder=HashingEmbedder(dim=16)) as mem:
        mem.one_by_one.commit_calls = 40   # 500 by default (store.add_hint)
        with pytest.warns(AddManyHint) as got:
            for i in range(45):
                mem.add(f"note {i}")
    text = str(got[0].message)
    assert len(got) == 1 and "commits of this durable store are what cost" in text
    assert "gains from batching" not in text and "hypermem.store.AddManyHint" in text


def test_an_in_memory_store_with_a_slow_embedder_is_still_hinted_about_the_embedder(monkeypatch):
    _fake_clock(monkeypatch, 0.03)  # 30 ms an add, an embedding model's cost
    mem = Memory(embedder=_custom(hypermem))
    with pytest.warns(AddManyHint) as got:
        for i in range(80):
            mem.add(f"note {i}")
    text = str(got[0].message)
    assert "(one embedder call each)" in text and "gains from batching" in text and "commit" not in text


def test_the_run_is_judged_by_its_embedder_and_count_in_memory_and_on_a_durable_store():
    cheap, durable, h = OneByOne(), OneByOne(commits=True), HashingEmbedder(dim=16)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for n in range(3000):                                           # 9 ms an add, 27 s: still never
            cheap.start()
            cheap.record(0.009 * n, 0.009 * (n + 1), h)
    assert not cheap.told
    with pytest.warns(AddManyHint):
        for n in range(600):
            durable.start()   # the hint is given here, at the start of the add after the rule was met
            durable.record(0.009 * n, 0.009 * (n + 1), h)
    assert durable.told and durable.count == 500


@pytest.mark.parametrize("durable", [False, True])
def test_a_non_text_query_is_the_references_value_error_and_still_a_type_error(tmp_path, durable):
    theirs = ref.Memory()
    theirs.add("x")
    with pytest.raises(ValueError):
        theirs.search(42)
    mem = Memory.open(tmp_path / "a.db") if durable else Memory()
    mem.add("x")
    msg = "a query must be text or a point (tensor, array, list), got int"
    for call in (lambda: mem.search(42), lambda: mem.search_batch(["x", 42])):
        with pytest.raises(ValueError) as got:
            call()
        assert isinstance(got.value, TypeError) and type(got.value) is QueryTypeError and str(got.value) == msg
    with pytest.raises(TypeError, match="got object"):
        mem.search(object())


def test_a_negative_k_is_an_error_where_the_reference_returns_nothing():
    theirs, mem = ref.Memory(), Memory()
    theirs.add("dogs")
    mem.add("dogs")
    assert theirs.search("dogs", k=-1) == []
    with pytest.raises(ValueError, match="k must be an integer >= 1, got -1"):
        mem.search("dogs", k=-1)


def test_reconstruction_ties_count_for_the_related_node():
    """The reference's sarkar layout puts a's parent r and a's child a1 at distance exactly 1 from a:
    its stable argsort ranks r (first in the mapping) above a1 (AP 0.833 for a), hypermem counts
    the tie for a1 (AP 1)."""
    tree = {"r": ["a", "b"], "a": ["a1", "a2"], "b": ["b1"]}
    pts = {k: np.asarray(v) for k, v in ref.sarkar_layout([(p, c) for p, cs in tree.items() for c in cs], tau=1.0).items()}
    closure = ref.transitive_closure(tree, "r")
    ball = ref.PoincareBall(1.0)
    assert ball.distance(pts["a"], pts["r"]) == ball.distance(pts["a"], pts["a1"]) == 1.0
    theirs = ref.reconstruction(pts, closure, ball.distance)
    ours = hypermem.reconstruction(pts, closure, ball.distance)
    assert round(theirs.mean_average_precision, 3) == 0.944 and ours.mean_average_precision == 1.0
    assert theirs.mean_rank == ours.mean_rank == 1.0


def test_both_libraries_write_files_0o644_under_umask_022(tmp_path):
    old = os.umask(0o022)
    try:
        theirs, mem = ref.Memory(), Memory()
        theirs.add("x")
        mem.add("x")
        theirs.save(str(tmp_path / "ref.db"))
        theirs.to_json(str(tmp_path / "ref.json"))
        mem.save(tmp_path / "ours.db")
        mem.to_json(tmp_path / "ours.json")
        for name in ("ref.db", "ref.json", "ours.db", "ours.json"):
            assert stat.S_IMODE((tmp_path / name).stat().st_mode) == 0o644, name
        os.chmod(tmp_path / "ref.db", 0o640)
        theirs.save(str(tmp_path / "ref.db"))                            # the reference's replaced .db: the umask's
        assert stat.S_IMODE((tmp_path / "ref.db").stat().st_mode) == 0o644
    finally:
        os.umask(old)


def test_the_search_cli_line_differs_from_the_references(tmp_path, capsys):
    theirs = ref.Memory()
    theirs.add("animals", id="a")
    theirs.add("dogs bark", parent="a", id="d")
    theirs.save(str(tmp_path / "m.db"))
    from poincare_memory.cli import main as ref_main
    assert ref_main(["search", str(tmp_path / "m.db"), "dogs", "-k", "1"]) == 0
    assert capsys.readouterr().out.split() == ["-0.940", "d=", "0.94", "w=1.000", "depth=1.50", "d", "dogs", "bark"]
    assert main(["search", str(tmp_path / "m.db"), "dogs", "-k", "1"]) == 0
    assert capsys.readouterr().out.split() == ["1.", "-0.940", "time_weight=1.000", "depth=1.50", "dogs", "bark", "[d]"]


def test_versions_and_reprs_are_hypermems_own(tmp_path):
    assert ref.__version__ == "0.1.4" and hypermem.__version__ == "0.1.0"
    assert hypermem.__version__ < "0.1.4"                              # a migrated version check fails
    assert repr(ref.HalfLife(hours=48)) == "HalfLife(hours=48)" and repr(HalfLife(hours=48)) == "HalfLife(hours=48.0)"
    mem = Memory()
    mem.add("dogs", id="d")
    assert repr(mem.search("dogs", touch=False)[0]).startswith("SearchResult(id='d', score=")
    assert repr(mem).startswith("Memory(n=1, dim=256, curvature=1, metric='shell', decay=NoDecay(), dtype=")
    theirs = ref.Memory()
    theirs.add("dogs", id="d")
    assert repr(theirs.search("dogs")[0]).startswith("SearchResult(record=MemoryRecord(id='d'")
    theirs.save(str(tmp_path / "ref.db"))
    mem.save(tmp_path / "ours.db")
    assert (tmp_path / "ours.db").stat().st_size > (tmp_path / "ref.db").stat().st_size
