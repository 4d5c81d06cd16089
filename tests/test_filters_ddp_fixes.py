"""Walk fixes: ``$gt $gte $lt $lte`` refuse ``None`` and bools up front (the store, PostgreSQL's
translation, the adapters' compiler); a bad data file under ``hypermem train`` with DDP is one
error, read before the other processes start."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from hypermem import HashingEmbedder, Memory
from hypermem.store.filters import FilterError, compile_filter, to_postgres

# --------------------------------------------------------------------------------- filters


@pytest.mark.parametrize("op", ["$gt", "$gte", "$lt", "$lte"])
@pytest.mark.parametrize("x, shown", [(None, "NoneType None"), (True, "bool True"), (False, "bool False")])
def test_an_ordered_comparison_refuses_none_and_bools_naming_operator_and_operand(op, x, shown):
    words = rf"filter operator \{op} for (\S*\.)?score compares numbers or strings .*got {shown}$"
    with pytest.raises(FilterError, match=words):
        compile_filter({"score": {op: x}})
    with pytest.raises(FilterError, match=words):
        to_postgres({"score": {op: x}})
    with pytest.raises(FilterError, match=words):   # nested, under a combinator: the same check
        compile_filter({"$or": [{"kind": "a"}, {"$not": {"score": {op: x}}}]})


def test_memory_search_refuses_them_before_any_search_and_eq_ne_keep_none_and_bools():
    mem = Memory(embedder=HashingEmbedder(dim=32))
    mem.add_many([{"text": "a", "meta": {"score": 2, "flag": True, "gone": None}},
                  {"text": "b", "meta": {"score": 0, "flag": False}}])
    for x in (None, True):
        with pytest.raises(FilterError, match=r"\$gt for score .*got "):
            mem.search("x", k=5, filters={"score": {"$gt": x}})
    assert [r.text for r in mem.search("x", k=5, filters={"flag": {"$eq": True}})] == ["a"]
    assert [r.text for r in mem.search("x", k=5, filters={"flag": {"$ne": True}})] == ["b"]
    assert [r.text for r in mem.search("x", k=5, filters={"gone": {"$eq": None}})] == ["a"]
    assert sorted(r.text for r in mem.search("x", k=5, filters={"gone": {"$ne": None}})) == ["b"]
    assert [r.text for r in mem.search("x", k=5, filters={"score": {"$gt": 1}})] == ["a"]


def test_the_adapters_compiler_refuses_them_too_also_on_time_fields():
    common = pytest.importorskip("hypermem.integrations._common")
    for spec in ({"score": {"$lt": None}}, {"t": {"$gte": True}}, {"valid_until": {"$lte": None}}):
        with pytest.raises(FilterError, match=r"compares numbers or strings"):
            common.compile_filter(spec)
        with pytest.raises(FilterError, match=r"compares numbers or strings"):
            common.store_filter(spec)


def test_the_operand_is_checked_once_per_filter_not_per_row(monkeypatch):
    from hypermem.store import filters as F

    calls = []
    real = F._check_operand
    monkeypatch.setattr(F, "_check_operand", lambda *a: (calls.append(a), real(*a))[1])
    pred = F.compile_filter({"score": {"$gt": 1}})
    assert [pred({"score": s}) for s in range(5)] == [False, False, True, True, True]
    assert len(calls) == 1


# ------------------------------------------------------------------ a bad data file under DDP

BAD_EDGES = "b\ta\nc a\n"   # the second line has no tab


def test_the_data_modules_read_a_users_file_when_made_before_any_process_starts(tmp_path):
    pytest.importorskip("lightning")
    from hypermem.train.encoder_data import EncoderDataModule
    from hypermem.train.hierarchy_data import HierarchyDataModule

    bad = tmp_path / "edges.tsv"
    bad.write_text(BAD_EDGES)
    with pytest.raises(ValueError, match="every line needs two tab-separated names"):
        HierarchyDataModule(dataset=str(bad))
    with pytest.raises(ValueError, match=r"edges\.tsv"):
        EncoderDataModule(hierarchy="files", edges=str(bad), task="none")
    with pytest.raises(FileNotFoundError):
        HierarchyDataModule(dataset=str(tmp_path / "missing.tsv"))
    with pytest.raises(FileNotFoundError):
        EncoderDataModule(hierarchy="files", edges=str(tmp_path / "missing.tsv"), task="none")
    good = tmp_path / "good.tsv"
    good.write_text("b\ta\nc\ta\nd\tb\n")
    dm = HierarchyDataModule(dataset=str(good), batch_size=2, negatives=2)
    dm.setup("fit")
    assert sorted(dm.nodes) == ["a", "b", "c", "d"]
    edm = EncoderDataModule(hierarchy="files", edges=str(good), task="none", batch_size=2, negatives=2,
                            hard_negatives=1)
    edm.setup("fit")
    assert sorted(edm.ids) == ["a", "b", "c", "d"] and len(edm.batches) > 0


@pytest.mark.slow
def test_a_bad_data_file_under_two_process_ddp_prints_one_error(tmp_path):
    pytest.importorskip("lightning")
    from train_helpers import CONFIG

    (tmp_path / "edges.tsv").write_text(BAD_EDGES)
    (tmp_path / "tiny.yaml").write_text(CONFIG)
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONWARNINGS": "ignore"}
    cmd = [sys.executable, "-m", "hypermem.cli", "train", "fit", "--config", "tiny.yaml", "--trainer.strategy=ddp",
           "--trainer.devices=2", "--trainer.accelerator=cpu", "--trainer.max_epochs=1"]
    proc = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=240)
    assert proc.returncode != 0
    out = proc.stdout + proc.stderr
    assert out.count("every line needs two tab-separated names") == 1, out[-3000:]
    assert not list(Path(tmp_path).rglob("version_*"))
