"""`hypermem ... | head -1`: when the reader of the output goes away, every subcommand stops
quietly with status 141 (128 + SIGPIPE, as a Unix tool ended by SIGPIPE), not with
"error: [Errno 32] Broken pipe" (hypermem.cli.main.main)."""

from __future__ import annotations

import io
import os
import shlex
import subprocess
import sys

import pytest

from hypermem import Memory
from hypermem.cli.main import main
from hypermem.embed import HashingEmbedder

HYPERMEM = [sys.executable, "-m", "hypermem.cli"]


@pytest.fixture(scope="module")
def notes(tmp_path_factory):
    """A memory whose tree is far longer than a pipe's buffer (64 KiB)."""
    path = tmp_path_factory.mktemp("pipe") / "notes.db"
    mem = Memory(embedder=HashingEmbedder(dim=16))
    mem.add("all notes", id="root")
    mem.add_many([{"text": f"note number {i}, " * 4, "id": f"n{i}", "parent": "root"} for i in range(3000)])
    mem.save(path)
    return path


def _env():
    return {**os.environ, "PYTHONPATH": os.getcwd() + os.pathsep + os.environ.get("PYTHONPATH", "")}


def test_tree_into_head_stops_quietly(notes):
    cmd = f"{shlex.join([*HYPERMEM, 'tree', str(notes)])} | head -1; echo \"status=${{PIPESTATUS[0]}}\" >&2"
    out = subprocess.run(["bash", "-c", cmd], capture_output=True, text=True, timeout=120, env=_env())
    assert out.stdout.startswith("all notes") and out.stdout.count("\n") == 1
    assert out.stderr.strip() == "status=141", out.stderr[-2000:]


@pytest.mark.parametrize("args", [["tree", "{db}"], ["stats", "{db}"], ["stats", "{db}", "--json"],
                                  ["search", "{db}", "note number 7", "-k", "3"], ["export", "{db}", "/dev/stdout", "--format", "csv"],
                                  ["--help"]])
def test_every_subcommand_into_a_closed_pipe_says_nothing(notes, args):
    # the reader is gone before the first byte: even a short output (flushed only at exit) meets it
    read, write = os.pipe()
    os.close(read)
    try:
        out = subprocess.run([*HYPERMEM, *(a.format(db=notes) for a in args)], stdout=write,
                             stderr=subprocess.PIPE, text=True, timeout=120, env=_env())
    finally:
        os.close(write)
    if args == ["--help"]:   # argparse's own output, before any command runs: argparse drops the error
        assert out.returncode in (0, 141)
    else:
        assert out.returncode == 141, out.stderr[-2000:]
    assert "Broken pipe" not in out.stderr and "Exception ignored" not in out.stderr, out.stderr[-2000:]
    assert "Traceback" not in out.stderr, out.stderr[-2000:]


class _ClosedPipe(io.StringIO):
    def write(self, text):
        raise BrokenPipeError(32, "Broken pipe")


def test_in_process_a_broken_pipe_is_status_141_and_no_error_line(notes, monkeypatch, capsys):
    monkeypatch.setattr(sys, "stdout", _ClosedPipe())
    assert main(["tree", str(notes)]) == 141
    assert capsys.readouterr().err == ""


def test_other_os_errors_still_print_their_line(tmp_path, capsys):
    assert main(["tree", str(tmp_path / "missing.db")]) == 1
    assert "hypermem tree: error:" in capsys.readouterr().err
