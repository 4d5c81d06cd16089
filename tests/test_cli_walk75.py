"""Ctrl-C in a CLI command (walk 75): ``python -m hypermem.cli`` and the console script's entry
both stop with status 130, one short ``interrupted`` line on stderr, no traceback, and no output
stored (an ``import`` reading stdin writes nothing, not a partial memory)."""

from __future__ import annotations

import signal
import subprocess
import sys
import time

import pytest
from test_cli_pipe import _env

from hypermem.cli.main import main

# the child imports the command line first (its seconds of loading are not what is tested here),
# says so, then runs the command as `python -m hypermem.cli` (runpy) or the console script does
_AS_MODULE = ("import sys, runpy, hypermem.cli.main; print('ready', flush=True); sys.argv = ['hypermem', *sys.argv[1:]]; "
              "runpy.run_module('hypermem.cli', run_name='__main__', alter_sys=True)")
_AS_SCRIPT = "import sys, hypermem.cli.main, _hypermem_console; print('ready', flush=True); sys.exit(_hypermem_console.main())"


@pytest.mark.parametrize("entry", [_AS_MODULE, _AS_SCRIPT], ids=["python-m", "console-script"])
def test_ctrl_c_during_a_stdin_import_is_130_one_line_and_nothing_stored(entry, tmp_path):
    out = tmp_path / "out.db"
    proc = subprocess.Popen([sys.executable, "-c", entry, "import", "-", str(out), "--dim", "8"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=_env(), cwd=tmp_path, restore_signals=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.default_int_handler))
    try:
        assert proc.stdout.readline() == "ready\n", proc.stderr.read()[-2000:]
        proc.stdin.write('{"id": "a", "text": "alpha"}\n')   # stdin stays open: the import is still reading
        proc.stdin.flush()
        time.sleep(0.5)
        proc.send_signal(signal.SIGINT)
        rest, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, err[-2000:]
    assert "Traceback" not in err and err.strip() == "hypermem import: interrupted", err[-2000:]
    assert "wrote" not in rest and sorted(p.name for p in tmp_path.iterdir()) == []


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
