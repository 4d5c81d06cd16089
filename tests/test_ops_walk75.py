"""Walk 75 (an operator's minimal container): numba without a writable cache, ``hypermem mcp``
with stdin closed, and the MCP server's log on a non-terminal stderr."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import warnings

import numpy as np
import pytest


# ---------------------------------------------------------------------- 1. numba cannot cache
def _sum_of_squares(x):
    s = 0.0
    for v in x:
        s += v * v
    return s


class NoLocator:
    """A numba cache locator that finds no folder, as all of numba's do where none is writable."""

    @classmethod
    def from_function(cls, py_func, source_path):
        return None


def test_a_kernel_compiles_without_the_cache_when_numba_can_write_none(monkeypatch):
    """A non-root user with a read-only (or no) HOME, the package installed by root: numba finds
    no folder for its cache ("cannot cache function ...: no locator available") and training
    died.  Emulated with a cache locator that finds no folder (NUMBA_CACHE_LOCATOR_CLASSES; root can
    write anywhere): the kernel is
    compiled without the cache, gives the same result, and says so once, naming NUMBA_CACHE_DIR."""
    pytest.importorskip("numba")
    from numba.core import config

    from hypermem.hierarchy.lazy_jit import lazy_njit

    if not hasattr(config, "CACHE_LOCATOR_CLASSES"):
        pytest.skip("this numba has no NUMBA_CACHE_LOCATOR_CLASSES")
    monkeypatch.setattr(config, "CACHE_LOCATOR_CLASSES", f"{__name__}.NoLocator")   # numba's own setting
    x = np.arange(5, dtype=np.float64)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        fast = lazy_njit(_sum_of_squares)
        assert fast(x) == _sum_of_squares(x) == 30.0
        assert fast(x + 1) == 55.0
    lines = [str(w.message) for w in seen if "NUMBA_CACHE_DIR" in str(w.message)]
    assert len(lines) == 1 and "\n" not in lines[0]


# ---------------------------------------------------------------------- 2. hypermem mcp with stdin closed
def _mcp(tmp_path, redirect: str):
    """``hypermem mcp --store tmp_path/agent.db --embedder hashing`` under sh, with ``redirect``."""
    cmd = f'exec "$0" -m hypermem.cli mcp --store "$1" --embedder hashing {redirect}'
    return subprocess.run(["sh", "-c", cmd, sys.executable, str(tmp_path / "agent.db")], capture_output=True,
                          text=True, timeout=120, env=dict(os.environ, HYPERMEM_DEBUG=""))


def test_mcp_with_stdin_closed_says_so_in_one_line(tmp_path):
    """``hypermem mcp --store x.db <&-`` (a supervisor that closes stdin): the SDK's stdio
    transport failed with a traceback (``'NoneType' object has no attribute 'buffer'``)."""
    pytest.importorskip("mcp")
    got = _mcp(tmp_path, "<&-")
    assert got.returncode == 1, got.stderr
    assert got.stderr.splitlines() == [got.stderr.strip()], got.stderr
    assert got.stderr.startswith("hypermem mcp: error: stdin is closed: the stdio server reads"), got.stderr
    assert "--http" in got.stderr
    assert not (tmp_path / "agent.db").exists()    # refused before the store is opened (or created)


def test_mcp_with_stdout_closed_says_so_in_one_line(monkeypatch, tmp_path, capsys):
    """Python starts with ``sys.stdout = None`` where fd 1 is closed (``hypermem mcp >&-``)."""
    pytest.importorskip("mcp")
    from hypermem.cli.main import main

    monkeypatch.setattr(sys, "stdin", io.StringIO(""))
    monkeypatch.setattr(sys, "stdout", None)
    assert main(["mcp", "--store", str(tmp_path / "agent.db"), "--embedder", "hashing"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("hypermem mcp: error: stdout is closed: the stdio server answers") and err.count("\n") == 1
    assert not (tmp_path / "agent.db").exists()


def test_serve_refuses_a_closed_stdin_before_building_the_server(monkeypatch, tmp_path):
    pytest.importorskip("mcp")
    from hypermem.integrations import mcp_server

    monkeypatch.setattr(sys, "stdin", None)
    with mcp_server.open_store(str(tmp_path / "agent.db"), None) as db:
        with pytest.raises(ValueError, match="^stdin is closed: the stdio server reads"):
            mcp_server.serve(db, signals=False)
        monkeypatch.setattr(sys, "stdin", io.StringIO(""))   # replaced in-process: left to the SDK
        mcp_server.check_stdio()


# ---------------------------------------------------------------------- 3. the server's log, one line a record
def test_two_failed_calls_are_two_lines_in_a_non_terminal_log(tmp_path):
    """On a stderr that is not a terminal (a container's log collector), the SDK's RichHandler
    wrapped each record at 80 columns over several lines, with a right-aligned ``server.py:453``;
    docs/mcp.md promises one line per failure.  The SDK's set-up (its level, its records) stays."""
    pytest.importorskip("mcp")
    proc = subprocess.Popen([sys.executable, "-m", "hypermem.cli", "mcp", "--store", str(tmp_path / "agent.db"),
                             "--embedder", "hashing"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=dict(os.environ, TERM="dumb", HYPERMEM_DEBUG="",
                                                             COLUMNS="80"))

    def call(i: int, method: str, params: dict) -> None:
        proc.stdin.write(json.dumps({"jsonrpc": "2.0", "id": i, "method": method, "params": params}).encode() + b"\n")
        proc.stdin.flush()
        assert json.loads(proc.stdout.readline())["id"] == i

    try:
        call(1, "initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                               "clientInfo": {"name": "t", "version": "0"}})
        proc.stdin.write(b'{"jsonrpc": "2.0", "method": "notifications/initialized"}\n')
        call(2, "tools/call", {"name": "forget", "arguments": {"id": "no-such-memory-id-" + "x" * 60}})
        call(3, "tools/call", {"name": "recall", "arguments": {"query": "tea", "mode": "subtree", "root": "nope"}})
    finally:
        proc.stdin.close()
        err = proc.stderr.read().decode()
        proc.wait(60)
    lines = err.splitlines()
    assert len(lines) == 2, err
    assert "Tool 'forget' failed" in lines[0] and "x" * 60 + "'" in lines[0] and "INFO" in lines[0], err
    assert "Tool 'recall' failed" in lines[1] and "unknown memory id 'nope'" in lines[1], err
