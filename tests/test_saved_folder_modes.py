"""Every file of a saved encoder or reranker folder gets ``0o666`` less the umask, the weights too:
safetensors writes ``model.safetensors`` through a private ``mkstemp`` file (``0o600``), which
kept a shared encoder folder unreadable to another user or service."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
import torch

pytest.importorskip("sentence_transformers")

from encoder_helpers import tiny_model_folder  # noqa: E402

from hypermem.embed import HierarchyEncoder, PlacementReranker  # noqa: E402
from hypermem.embed.file_modes import give_normal_modes  # noqa: E402

torch.set_num_threads(1)


@pytest.fixture
def umask():
    """Run the test under a given umask, restored afterwards."""
    old = os.umask(0o022)
    yield os.umask
    os.umask(old)


def modes(folder) -> dict[str, int]:
    return {str(p.relative_to(folder)): stat.S_IMODE(p.stat().st_mode) for p in folder.rglob("*") if p.is_file()}


def test_a_saved_encoder_folder_is_readable_by_others_under_umask_022(umask, tmp_path):
    enc = HierarchyEncoder.from_pretrained(str(tiny_model_folder(tmp_path / "tiny")), "poincare", dim=4)
    got = modes(Path(enc.save(tmp_path / "my-encoder")))
    assert "model.safetensors" in got and "2_Dense/model.safetensors" in got, got
    assert set(got.values()) == {0o644}, got


def test_umask_077_keeps_an_encoder_folder_private(umask, tmp_path):
    enc = HierarchyEncoder.from_pretrained(str(tiny_model_folder(tmp_path / "tiny")), "poincare")
    umask(0o077)
    got = modes(Path(enc.save(tmp_path / "private")))
    assert set(got.values()) == {0o600}, got


def test_a_saved_reranker_folder_is_readable_by_others_under_umask_022(umask, tmp_path):
    torch.manual_seed(0)
    got = modes(PlacementReranker().save(tmp_path / "rr"))
    assert "model.safetensors" in got
    assert set(got.values()) == {0o644}, got


def test_links_are_neither_followed_nor_changed(umask, tmp_path):
    outside = tmp_path / "outside.txt"
    outside.write_text("x")
    outside.chmod(0o600)
    folder = tmp_path / "f"
    folder.mkdir()
    (folder / "w").write_text("y")
    (folder / "w").chmod(0o600)
    (folder / "link").symlink_to(outside)
    give_normal_modes(folder)
    assert stat.S_IMODE((folder / "w").stat().st_mode) == 0o644
    assert stat.S_IMODE(outside.stat().st_mode) == 0o600
