"""Walk 72, a locked-down container: another user's unreadable store, no temporary folder, a
read-only working folder for ``hypermem demo``.

The suite runs as root here, and root reads and writes every file: where a test needs a file
or folder this process may not read or write, it is made so for real (``chmod``) when the
suite runs as another user, and simulated otherwise by an ``os.access`` that answers as the
permission bits would for a user who owns neither.  The real cross-user open runs under
``setpriv`` as ``nobody`` where that user can start this Python, and is skipped (saying why)
elsewhere.
"""

from __future__ import annotations

import errno
import importlib.abc
import importlib.util
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import textwrap
import types
from pathlib import Path

import pytest
import torch

import hypermem.demo
from hypermem import HashingEmbedder, Memory
from hypermem.cli import main
from hypermem.store.backends.durable import StorageError
from hypermem.store.backends.sqlite_open import explain
from hypermem.store.persistence import MemoryFileError

REPO = Path(__file__).resolve().parents[1]


def _line(path) -> str:
    return (f"this process may not read {str(path)!r} (permission denied): run as its owner, or have the owner "
            f"make it readable (chmod/umask)")


def _deny(monkeypatch, paths, modes: int) -> None:
    """``os.access`` refuses ``modes`` on ``paths`` (root passes every permission check)."""
    real, denied = os.access, {os.path.abspath(p) for p in paths}

    def access(path, mode, *args, **kwargs):
        if isinstance(path, (str, os.PathLike)) and os.path.abspath(path) in denied and mode & modes:
            return False
        return real(path, mode, *args, **kwargs)

    monkeypatch.setattr(os, "access", access)


def _stores(folder: Path) -> tuple[Path, Path]:
    snap, durable = folder / "snap.db", folder / "agent.db"
    mem = Memory(embedder=HashingEmbedder(dim=16))
    mem.add("the user prefers tea")
    mem.save(snap)
    with Memory.open(durable, embedder=HashingEmbedder(dim=16)) as db:
        db.add("the user prefers tea")
    return snap, durable


# ---------------------------------------------------------------------------- 1. another user's 0600 store
def test_another_users_unreadable_store_is_named_as_such(tmp_path, monkeypatch):
    shared = tmp_path / "shared"
    shared.mkdir()
    snap, durable = _stores(shared)
    before = {p.name: p.read_bytes() for p in shared.iterdir()}
    if os.geteuid() != 0:
        for p in (snap, durable):
            p.chmod(0)
        shared.chmod(0o555)
    else:   # as the bits of another user's 0600 files in their 0755 folder answer
        _deny(monkeypatch, [snap, durable], os.R_OK | os.W_OK)
        _deny(monkeypatch, [shared], os.W_OK)
    try:
        with pytest.raises(StorageError) as ro:
            Memory.open(durable, read_only=True)
        with pytest.raises(StorageError) as rw:
            Memory.open(durable)
        with pytest.raises(MemoryFileError) as load:
            Memory.load(snap)
    finally:
        shared.chmod(0o755)
        for p in (snap, durable):
            p.chmod(0o600)
    assert str(ro.value) == f"SQLite storage {str(durable)!r}: {_line(durable)}"
    assert str(rw.value) == f"SQLite storage {str(durable)!r}: {_line(durable)}; nothing was opened"
    assert str(load.value) == _line(snap)
    for exc in (ro, rw, load):
        assert "read_only=True" not in str(exc.value) and "\n" not in str(exc.value)
    assert {p.name: p.read_bytes() for p in shared.iterdir()} == before   # no -wal / -shm left, nothing changed


def test_a_read_only_handle_is_never_told_to_open_read_only(tmp_path, monkeypatch):
    folder = tmp_path / "locked"
    folder.mkdir()
    path = folder / "agent.db"
    path.write_bytes(b"")
    _deny(monkeypatch, [folder, path], os.W_OK)
    exc = sqlite3.OperationalError("unable to open database file")
    exc.sqlite_errorcode = 14   # SQLITE_CANTOPEN
    assert "open it with read_only=True" in explain(exc, str(path))   # a writable handle may be told
    text = explain(exc, str(path), read_only=True)
    assert "is not writable (permission denied)" in text and "read_only=True" not in text
    _deny(monkeypatch, [path], os.R_OK)
    assert explain(exc, str(path), read_only=True) == f"unable to open database file: {_line(path)}"


def test_the_real_cross_user_open(tmp_path):
    """As ``nobody``, on a store root wrote with mode 0600 (skipped where that cannot run)."""
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        pytest.skip("needs root and setpriv to open the store as another user (nobody)")
    folder = Path(tempfile.mkdtemp(prefix="hm-walk72-"))   # tmp_path's parents are 0700: nobody may not enter
    try:
        folder.chmod(0o755)
        snap, durable = _stores(folder)
        for p in (snap, durable):
            p.chmod(0o600)
        script = textwrap.dedent(f"""
            from hypermem import Memory
            print("HYPERMEM-RAN")
            for call in (lambda: Memory.open({str(durable)!r}, read_only=True), lambda: Memory.open({str(durable)!r}),
                         lambda: Memory.load({str(snap)!r})):
                try:
                    call()
                    print("opened")
                except Exception as exc:
                    print(type(exc).__name__, exc)
            import contextlib, io
            from hypermem.cli.main import main
            err = io.StringIO()
            with contextlib.redirect_stderr(err):
                rc = main(["search", {str(durable)!r}, "x"])
            print("CLI", rc, err.getvalue().strip())
        """)
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1",
               "HOME": "/nonexistent"}
        done = subprocess.run(["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", sys.executable,
                               "-c", script], capture_output=True, text=True, env=env, cwd="/", timeout=120)
        if "HYPERMEM-RAN" not in done.stdout:
            pytest.skip(f"nobody cannot start this Python with hypermem: {done.stderr.strip()[-300:]}")
        lines = done.stdout.splitlines()[1:]
        assert lines == [f"StorageError SQLite storage {str(durable)!r}: {_line(durable)}",
                         f"StorageError SQLite storage {str(durable)!r}: {_line(durable)}; nothing was opened",
                         f"MemoryFileError {_line(snap)}",
                         f"CLI 1 hypermem search: error: {_line(durable)}"], done.stdout + done.stderr
        assert sorted(p.name for p in folder.iterdir()) == ["agent.db", "snap.db"]
    finally:
        shutil.rmtree(folder, ignore_errors=True)


# ---------------------------------------------------------------------------- 2. no temporary folder
_NONE = "No usable temporary directory found in ['/nonexistent/tmp', '/tmp', '/var/tmp']"


def _no_temp_folder(*args, **kwargs):
    raise FileNotFoundError(errno.ENOENT, _NONE)


class _ImportNeedsTemp(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """``sentence_transformers`` whose import asks for a temporary folder, as torch._dynamo does."""

    def find_spec(self, name, path=None, target=None):
        return importlib.util.spec_from_loader(name, self) if name == "sentence_transformers" else None

    def create_module(self, spec):
        return None

    def exec_module(self, module):
        tempfile.gettempdir()


@pytest.fixture
def no_temp_folder(monkeypatch):
    monkeypatch.setattr(tempfile, "gettempdir", _no_temp_folder)
    monkeypatch.delitem(sys.modules, "sentence_transformers", raising=False)
    monkeypatch.setattr(sys, "meta_path", [_ImportNeedsTemp(), *sys.meta_path])


def test_minilm_without_a_temp_folder_names_the_cause_and_tmpdir(no_temp_folder):
    from hypermem import SentenceTransformerEmbedder

    with pytest.raises(FileNotFoundError) as err:
        SentenceTransformerEmbedder()
    text = str(err.value)
    assert "needs a writable temporary folder" in text and _NONE in text
    assert text.endswith("set TMPDIR to a writable folder") and "\n" not in text
    assert err.value.__suppress_context__   # no chained traceback from inside torch


class SentenceTransformerEmbedder:
    """A stand-in that saves a store whose spec names the bundled MiniLM (the class name and
    model name are what the spec records), without loading the model."""

    model_name = "sentence-transformers/all-MiniLM-L6-v2"
    dim = 384

    def embed(self, texts):
        return HashingEmbedder(dim=384).embed(texts)


def test_the_cli_says_the_same_in_one_line(no_temp_folder, tmp_path, capsys):
    path = tmp_path / "rag.db"
    mem = Memory(embedder=SentenceTransformerEmbedder())
    mem.add("the user prefers tea")
    mem.save(path)
    assert main(["search", str(path), "a drink", "-k", "1"]) != 0
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "set TMPDIR to a writable folder" in err, err


def test_sentence_transformer_embedder_repr(monkeypatch):
    import hypermem.embed.sentence_transformer as st

    class Model:
        device = torch.device("cpu")

        def get_sentence_embedding_dimension(self):
            return 384

    monkeypatch.setitem(sys.modules, "sentence_transformers", types.ModuleType("sentence_transformers"))
    monkeypatch.setattr(st, "load_sentence_transformer", lambda *a, **k: Model())
    assert repr(st.SentenceTransformerEmbedder(batch_size=32)) == (
        "SentenceTransformerEmbedder(model_name='sentence-transformers/all-MiniLM-L6-v2', dim=384, batch_size=32, "
        "device='cpu')")


# ---------------------------------------------------------------------------- 3. hypermem demo, read-only cwd
@pytest.fixture
def no_training(monkeypatch):
    calls = []
    monkeypatch.setattr(hypermem.demo, "run_demo", lambda *a, **k: calls.append(a) or {"html": None})
    monkeypatch.setattr(hypermem.demo, "build_mammals_memory", lambda *a, **k: calls.append(a))
    return calls


def test_demo_refuses_an_unwritable_runs_folder_before_training(tmp_path, monkeypatch, capsys, no_training):
    cwd, out = tmp_path / "ro", tmp_path / "data" / "out"
    cwd.mkdir()
    (tmp_path / "data").mkdir()
    _deny(monkeypatch, [cwd], os.W_OK)
    monkeypatch.chdir(cwd)
    assert main(["demo", "--out", str(out), "--epochs", "1", "--no-progress"]) != 0
    err = capsys.readouterr().err
    assert f"--runs runs: this process may not write in {cwd} (where {cwd / 'runs'} would be created)" in err
    assert "give --runs a writable folder" in err and len(err.strip().splitlines()) == 1
    assert main(["demo", "--out", str(cwd / "out"), "--runs", str(out.parent / "runs")]) != 0
    assert "--out " in capsys.readouterr().err
    assert no_training == [] and not out.exists()   # nothing trained, no empty --out left
    # the Python API checks the same before it creates out_dir or trains
    with pytest.raises(PermissionError, match="runs_dir runs: this process may not write"):
        hypermem.demo.run_mammals_demo(out, epochs=1, progress=False, echo=lambda _: None)
    assert no_training == [] and not out.exists()


def test_demo_without_a_temp_folder_says_tmpdir_before_training(tmp_path, monkeypatch, capsys, no_training):
    monkeypatch.setattr(tempfile, "gettempdir", _no_temp_folder)
    out = tmp_path / "out"
    assert main(["demo", "--out", str(out), "--runs", str(tmp_path / "runs"), "--no-progress"]) != 0
    err = capsys.readouterr().err.strip()
    assert "needs a writable temporary folder" in err and err.endswith("set TMPDIR to a writable folder")
    assert no_training == [] and not out.exists()
