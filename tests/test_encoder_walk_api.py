"""HierarchyEncoder as a tester training on their own hierarchy met it: loading the wrong path,
generators of texts, points outside the ball, NaN weights, batch sizes, saving over other files,
an unknown base model (a tiny model built in the test)."""

from __future__ import annotations

import math
import re

import pytest
import torch

pytest.importorskip("sentence_transformers")

from encoder_helpers import tiny_model_folder  # noqa: E402

from hypermem.embed.encoder_folder import EncoderFolderError  # noqa: E402
from hypermem.embed.hierarchy_encoder import HierarchyEncoder  # noqa: E402

torch.set_num_threads(1)


@pytest.fixture(scope="module")
def enc(tmp_path_factory):
    return HierarchyEncoder.from_pretrained(str(tiny_model_folder(tmp_path_factory.mktemp("tiny"))), "poincare")


def test_loading_a_run_folder_a_checkpoint_or_a_tsv_says_what_to_load(enc, tmp_path):
    run = tmp_path / "runs" / "x" / "version_0"
    (run / "checkpoints").mkdir(parents=True)
    (run / "checkpoints" / "last.ckpt").write_bytes(b"PK\x03\x04 a pickle")
    (run / "hparams.yaml").write_text("{}\n")
    with pytest.raises(EncoderFolderError, match="a training run's folder without an exported encoder"):
        HierarchyEncoder.load(run)
    enc.save(run / "encoder")
    with pytest.raises(EncoderFolderError) as exc:
        HierarchyEncoder.load(run)
    assert str(exc.value) == (f"{run}: a training run's folder, not an encoder folder; load the encoder it "
                              f"exported: HierarchyEncoder.load({str(run / 'encoder')!r})")
    with pytest.raises(EncoderFolderError, match=re.escape(f"HierarchyEncoder.load({str(run / 'encoder')!r})")):
        HierarchyEncoder.load(run.parent)                           # runs/x: the newest run's encoder
    with pytest.raises(EncoderFolderError) as exc:
        HierarchyEncoder.load(run / "checkpoints" / "last.ckpt")
    assert str(exc.value).startswith(f"{run / 'checkpoints' / 'last.ckpt'}: a Lightning checkpoint, not an encoder "
                                     f"folder; load the encoder its run exported: HierarchyEncoder.load(")
    (tmp_path / "edges.tsv").write_text("dog\tanimal\n")
    with pytest.raises(EncoderFolderError, match=r"edges.tsv: a file, not an encoder folder; HierarchyEncoder.load "
                                                 r"takes the folder that HierarchyEncoder.save"):
        HierarchyEncoder.load(tmp_path / "edges.tsv")
    with pytest.raises(FileNotFoundError, match="no such encoder folder"):
        HierarchyEncoder.load(tmp_path / "nothing")
    assert HierarchyEncoder.load(run / "encoder").dim == enc.dim


def test_texts_from_generators_are_scored(enc):
    want = enc.subsumption_scores(["dog", "cat"], ["animal", "animal"])
    got = enc.subsumption_scores((t for t in ["dog", "cat"]), iter(["animal", "animal"]))
    assert got.shape == (2,)
    torch.testing.assert_close(got, want)
    with pytest.raises(ValueError, match="got 2 children and 1 parents"):
        enc.subsumption_scores((t for t in ["dog", "cat"]), (t for t in ["animal"]))


def test_points_outside_the_ball_nan_points_and_weights_are_refused(enc):
    x = enc.encode(["dog", "animal"])
    radius = math.sqrt(enc.dim)
    outside = x[1:] / x[1:].norm() * radius * 1.5
    with pytest.raises(ValueError, match=rf"inside the ball of radius {radius:.4g} \(sqrt\(dim\)\): one has norm"):
        enc.subsumption_scores(x[:1], outside)
    with pytest.raises(ValueError, match="points must be finite"):
        enc.subsumption_scores(x[:1], torch.full_like(x[1:], float("nan")))
    with pytest.raises(ValueError, match="centripetal_weight must be a finite number, got nan"):
        enc.subsumption_scores(x[:1], x[1:], centripetal_weight=float("nan"))
    assert torch.isfinite(enc.subsumption_scores(x[:1], x[1:], centripetal_weight=0.5)).all()
    for bad in (0, -1, 1.5, True):
        with pytest.raises(ValueError, match=f"batch_size must be a positive integer .*got {bad!r}"):
            enc.encode(["a"], batch_size=bad)
    assert enc.encode(["a", "b"], batch_size=1).shape == (2, enc.dim)


def test_save_refuses_a_file_or_a_folder_of_other_files(enc, tmp_path):
    (tmp_path / "userdir").mkdir()
    (tmp_path / "userdir" / "notes.txt").write_text("mine")
    with pytest.raises(FileExistsError, match="the folder holds other files and no hypermem_encoder.json"):
        enc.save(tmp_path / "userdir")
    assert sorted(p.name for p in (tmp_path / "userdir").iterdir()) == ["notes.txt"]   # nothing mixed in
    (tmp_path / "edges.tsv").write_text("dog\tanimal\n")
    with pytest.raises(FileExistsError, match="edges.tsv'.*it is a file"):
        enc.save(tmp_path / "edges.tsv")
    folder = enc.save(tmp_path / "enc")           # a new folder, then saved over: an encoder folder
    enc.save(folder)
    (tmp_path / "empty").mkdir()
    assert HierarchyEncoder.load(enc.save(tmp_path / "empty")).dim == enc.dim


def test_an_unknown_base_says_what_base_takes():
    from hypermem.hierarchy import fit_hierarchy_encoder

    with pytest.raises(OSError) as exc:
        fit_hierarchy_encoder([("dog", "animal"), ("cat", "animal")], {"dog": "dog", "cat": "cat", "animal": "animal"},
                              base="no-such-model", validation_edges=[("cat", "animal")], negatives=1, hard_negatives=0)
    assert str(exc.value).startswith("base='no-such-model': no such folder and no model of that name in the local "
                                     "Hugging Face cache, and nothing is downloaded at run time; offline there are "
                                     "'all-MiniLM-L6-v2' (bundled) and sentence-transformers folders")
