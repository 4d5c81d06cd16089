"""Ctrl-C in a CLI command (walk 75): ``python -m hypermem.cli`` and the console script's entry
both stop with status 130, one short ``interrupted`` line on stderr, no traceback, and no output
stored (an ``import`` reading stdin writes nothing, not a partial memory)."""

from __future__ import annotations

import signal
import subprocess
import sys
import threading

from test_cli_pipe import _env

from hypermem.cli.main import main

# One child runs both entries in turn, `python -m hypermem.cli` (runpy) and the console script's
# main, with the command line imported first (its seconds of loading are not what is tested here):
# one load of torch, not two.  Its stdin is fd 0 read through a raw file that says "reading" on
# stdout before each read, the parent's cue for Ctrl-C: no sleep, and the signal comes while the
# import is reading, after a first line was read.
_CHILD = r"""
import io, os, runpy, sys
import hypermem.cli.main, _hypermem_console

class Announcing(io.RawIOBase):
    def readable(self):
        return True

    def readinto(self, b):
        print("reading", flush=True)
        data = os.read(0, len(b))
        b[:len(data)] = data
        return len(data)

def as_module(argv):
    sys.argv = ["hypermem", *argv]
    try:
        runpy.run_module("hypermem.cli", run_name="__main__", alter_sys=True)
    except SystemExit as exc:
        return exc.code

for name, entry in (("python-m", as_module), ("console-script", _hypermem_console.main)):
    sys.stdin = io.TextIOWrapper(io.BufferedReader(Announcing()), encoding="utf-8")
    status = entry(["import", "-", name + ".db", "--dim", "8"])
    print(f"{name} status {status}", flush=True)
    print("--", file=sys.stderr, flush=True)
"""


def test_ctrl_c_during_a_stdin_import_is_130_one_line_and_nothing_stored(tmp_path):
    proc = subprocess.Popen([sys.executable, "-c", _CHILD], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=_env(), cwd=tmp_path, restore_signals=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.default_int_handler))
    watchdog = threading.Timer(120, proc.kill)   # a child that never answers ends the readline()s below
    watchdog.start()
    try:
        for name in ("python-m", "console-script"):
            assert proc.stdout.readline() == "reading\n", proc.stderr.read()[-2000:] if proc.poll() else name
            proc.stdin.write('{"id": "a", "text": "alpha"}\n')   # stdin stays open: the import reads on
            proc.stdin.flush()
            assert proc.stdout.readline() == "reading\n", name
            proc.send_signal(signal.SIGINT)
            assert proc.stdout.readline() == f"{name} status 130\n", name   # no "wrote" line before it
        rest, err = proc.communicate(timeout=120)
    finally:
        watchdog.cancel()
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0 and rest == "", err[-2000:]
    assert "Traceback" not in err and err == "hypermem import: interrupted\n--\n" * 2, err[-2000:]
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_in_process_ctrl_c_names_the_command(tmp_path, monkeypatch, capsys):
    from hypermem.cli import parser

    def stats_interrupted(args):
        raise KeyboardInterrupt

    monkeypatch.setattr(parser, "cmd_stats", stats_interrupted)
    assert main(["stats", str(tmp_path / "m.db")]) == 130
    captured = capsys.readouterr()
    assert captured.err == "hypermem stats: interrupted\n" and captured.out == ""


def test_a_stop_signal_names_itself(tmp_path, monkeypatch, capsys):
    from hypermem.cli import parser
    from hypermem.cli.stop_signals import Stopped

    def stats_stopped(args):
        raise Stopped(signal.SIGTERM)

    monkeypatch.setattr(parser, "cmd_stats", stats_stopped)
    assert main(["stats", str(tmp_path / "m.db")]) == 143
    assert capsys.readouterr().err == "hypermem stats: stopped by SIGTERM\n"
