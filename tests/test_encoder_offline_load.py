"""Loading a base model by name is strictly local: ``local_files_only=True`` per call (the process's
``HF_HUB_OFFLINE`` untouched), and an unknown name fails at once with one line naming the setting
and what loads offline -- no hub requests, no "Retrying in Ns"."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

pytest.importorskip("sentence_transformers")


class _Refused(OSError):
    pass


def _spy(monkeypatch):
    """Replace ``SentenceTransformer`` with a recorder that finds nothing (as an unknown name does)."""
    import sentence_transformers

    calls = []

    def fake(*args, **kwargs):
        calls.append(kwargs)
        raise _Refused("not in the cache")

    monkeypatch.setattr(sentence_transformers, "SentenceTransformer", fake)
    return calls


def test_the_encoder_loads_its_base_with_local_files_only_and_leaves_the_environment(monkeypatch):
    from hypermem.embed.hierarchy_encoder import HierarchyEncoder

    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    calls = _spy(monkeypatch)
    with pytest.raises(OSError) as exc:
        HierarchyEncoder.from_pretrained("no-such-model-xyz")
    assert calls and all(c.get("local_files_only") is True for c in calls)
    assert "HF_HUB_OFFLINE" not in os.environ
    msg = str(exc.value)
    assert "\n" not in msg and "base='no-such-model-xyz'" in msg and "all-MiniLM-L6-v2" in msg


def test_the_embedder_loads_with_local_files_only(monkeypatch):
    from hypermem.embed.sentence_transformer import SentenceTransformerEmbedder

    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    calls = _spy(monkeypatch)
    with pytest.raises(OSError, match=r"model_name='no-such-model-xyz'.*nothing is downloaded"):
        SentenceTransformerEmbedder("no-such-model-xyz")
    assert calls and all(c.get("local_files_only") is True for c in calls)
    assert "HF_HUB_OFFLINE" not in os.environ
    with pytest.raises(ValueError, match="nothing is downloaded at run time"):
        SentenceTransformerEmbedder("no-such-model-xyz", local_files_only=False)


def test_an_unknown_name_without_hf_hub_offline_makes_no_request(tmp_path):
    """HF_HUB_OFFLINE unset and the hub unreachable: before, 5 retries per file ("Retrying in Ns")."""
    env = {k: v for k, v in os.environ.items() if k not in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")}
    env.update(HF_ENDPOINT="http://127.0.0.1:9", HF_HOME=str(tmp_path / "hf"), OMP_NUM_THREADS="1")
    code = ("from hypermem.embed.hierarchy_encoder import HierarchyEncoder\n"
            "try:\n    HierarchyEncoder.from_pretrained('all-mpnet')\n"
            "except OSError as e:\n    print('ERR', e)\n")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert "Retrying" not in out.stderr and "127.0.0.1" not in out.stderr + out.stdout, out.stderr[-2000:]
    assert out.stdout.startswith("ERR base='all-mpnet': no such folder")
    assert "the local Hugging Face cache holds no model" in out.stdout
