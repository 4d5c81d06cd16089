"""What a migrating user's walk found in the loaders' words (stop 66): a file of the other
kind, an empty file and a read-only file system each named for what they are."""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from hypermem import HashingEmbedder, Memory
from hypermem.episodic import MemoryStorage
from hypermem.store.backends import sqlite_open
from hypermem.store.load_checks import MemoryFileError

ROOT = Path(__file__).resolve().parents[1]


def test_an_episodic_file_loaded_as_a_store_names_the_loader_that_reads_it(tmp_path):
    s = MemoryStorage()
    s.instantiate("((^you reply-to.v E1) ** E3)", importance=0.8)
    s.save(tmp_path / "epi.db")
    with pytest.raises(MemoryFileError, match=r"episodic memory file of MemoryStorage\.save.*MemoryStorage\.load"):
        Memory.load(tmp_path / "epi.db")


def test_an_empty_file_is_called_empty(tmp_path):
    (tmp_path / "x.db").write_bytes(b"")
    with pytest.raises(MemoryFileError, match=r"is empty \(no tables\)"):
        Memory.load(tmp_path / "x.db")
    with pytest.raises(MemoryFileError, match=r"is empty \(no tables\)"):
        MemoryStorage.load(tmp_path / "x.db")


def test_a_read_only_file_system_is_named_as_such(tmp_path, monkeypatch):
    """The words for SQLite's 'cannot open' when the folder's file system is mounted read-only
    (statvfs's ST_RDONLY), where os.access alone reads as a permission problem."""
    exc = sqlite3.OperationalError("unable to open database file")
    exc.sqlite_errorcode = 14  # SQLITE_CANTOPEN
    path = str(tmp_path / "y.db")
    assert "read-only file system" not in sqlite_open.explain(exc, path)

    class Flags:
        f_flag = os.ST_RDONLY

    monkeypatch.setattr(sqlite_open.os, "statvfs", lambda folder: Flags())
    text = sqlite_open.explain(exc, path)
    assert "is on a read-only file system" in text and "permission" not in text


MOUNTED = """
import os, sys
sys.path.insert(0, {root!r})
from hypermem import HashingEmbedder, Memory
try:
    Memory.open("/tmp/hm-rofs/y.db", embedder=HashingEmbedder(dim=16))
except Exception as exc:
    print("refused:", exc)
"""


def _in_a_mount_namespace(shell: str, script: str) -> str:
    """The stdout of ``shell`` run as root of a new user and mount namespace (``unshare -Urm``),
    where ``$HM_SCRIPT`` holds ``script``; skipped where such namespaces are not available."""
    if shutil.which("unshare") is None or subprocess.run(["unshare", "-Urm", "true"], capture_output=True).returncode:
        pytest.skip("user namespaces (util-linux's unshare) are not available here")
    run = subprocess.run(["unshare", "-Urm", "sh", "-c", shell], capture_output=True, text=True, timeout=120,
                         env=dict(os.environ, OMP_NUM_THREADS="1", HM_SCRIPT=script.format(root=str(ROOT))))
    assert run.returncode == 0, run.stderr[-2000:]
    return run.stdout


def test_memory_open_on_a_real_read_only_mount():
    out = _in_a_mount_namespace("mkdir -p /tmp/hm-rofs && mount -t tmpfs -o ro tmpfs /tmp/hm-rofs && "
                                f"{sys.executable} -c \"$HM_SCRIPT\"", MOUNTED)
    assert "refused:" in out and "is on a read-only file system" in out, out
    assert "permission denied" not in out


def test_a_store_file_still_loads(tmp_path):
    mem = Memory(embedder=HashingEmbedder(dim=16))
    mem.add("hello", id="a")
    mem.save(tmp_path / "m.db")
    assert Memory.load(tmp_path / "m.db", embedder=HashingEmbedder(dim=16)).get("a").text == "hello"


def test_tree_shows_terminal_controls_and_bidi_overrides_as_escapes():
    """docs/migrating.md, *Ids*: a stored text cannot clear the screen or disguise itself in
    ``Memory.tree()`` (the command line's ``tree`` prints the same lines)."""
    mem = Memory(embedder=HashingEmbedder(dim=16))
    a = mem.add("ignore \x1b[2J rtl \u202e gnp.exe", id="a\x07")
    mem.add("child\nline", parent=a, id="b")
    text = mem.tree()
    assert text.splitlines() == ["ignore \\x1b[2J rtl \\u202e gnp.exe  [a\\x07 d=1.00]", "└── child line  [b d=1.50]"]
    assert not any(ch in text for ch in "\x1b\x07\u202e")


MCP_ON_READ_ONLY = """
import sys
sys.path.insert(0, {root!r})
from hypermem import HashingEmbedder, Memory
from hypermem.integrations.mcp_server import open_store
if sys.argv[1] == "make":
    with Memory.open("/tmp/hm-rofs2/s.db", embedder=HashingEmbedder(dim=16)) as mem:
        mem.add("hello")
else:
    try:
        open_store("/tmp/hm-rofs2/s.db", embedder=None)
    except Exception as exc:
        print("refused:", exc)
"""


def test_the_mcp_server_on_a_read_only_mount_advises_a_copy_not_a_writable_folder():
    pytest.importorskip("mcp")
    out = _in_a_mount_namespace("mkdir -p /tmp/hm-rofs2 && mount -t tmpfs tmpfs /tmp/hm-rofs2 && "
                                f"{sys.executable} -c \"$HM_SCRIPT\" make && mount -o remount,ro /tmp/hm-rofs2 && "
                                f"{sys.executable} -c \"$HM_SCRIPT\" serve", MCP_ON_READ_ONLY)
    assert "is on a read-only file system" in out and "serve the copy" in out, out
    assert "make the folder writable" not in out
