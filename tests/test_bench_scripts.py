"""Every benchmark script answers ``--help`` with its usage and exit status 0 without starting
work, and a missing optional package stops a script with one line naming what to install
before any work (walk 74: ``bench_ann_batch.py --help`` ran the 100k benchmark,
``bench_save_peak.py --help`` crashed, four scripts ended in a bare ModuleNotFoundError).

The scripts run in this process (``runpy.run_path`` as ``__main__``), not one subprocess each:
most of the cost is importing torch and hypermem, paid once.  Work is caught where it starts:
a ``Memory`` built or opened, a subprocess run, or a file written in the working directory.
"""

from __future__ import annotations

import os
import runpy
import subprocess
import sys
from pathlib import Path

import pytest

import hypermem

BENCH = Path(__file__).resolve().parents[1] / "benchmarks"
SCRIPTS = sorted(p.name for p in BENCH.glob("*.py") if 'if __name__ == "__main__":' in p.read_text())


class WorkStarted(AssertionError):
    pass


def _no_work(*args, **kwargs):
    raise WorkStarted("the script started work")


@pytest.fixture
def script_env(monkeypatch, tmp_path):
    """Run a script from an empty working directory, with the benchmarks folder importable,
    os.environ restored afterwards and the usual first steps of work made to fail."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(BENCH))
    monkeypatch.setattr(hypermem.Memory, "__init__", _no_work)
    monkeypatch.setattr(hypermem.Memory, "open", _no_work)
    monkeypatch.setattr(subprocess, "run", _no_work)
    monkeypatch.setattr(subprocess, "Popen", _no_work)
    saved = dict(os.environ)
    yield tmp_path
    os.environ.clear()
    os.environ.update(saved)


def run_script(monkeypatch, name: str, *args: str) -> SystemExit | None:
    monkeypatch.setattr(sys, "argv", [str(BENCH / name), *args])
    try:
        runpy.run_path(str(BENCH / name), run_name="__main__")
    except SystemExit as e:
        return e
    return None


def test_the_scripts_are_found():
    assert len(SCRIPTS) > 25
    assert {"bench_ann_batch.py", "bench_save_peak.py", "bench_search.py"} <= set(SCRIPTS)
    assert "hit_baseline.py" not in SCRIPTS


@pytest.mark.parametrize("name", SCRIPTS)
def test_help_prints_usage_and_starts_nothing(name, script_env, monkeypatch, capsys):
    stop = run_script(monkeypatch, name, "--help")
    out = capsys.readouterr()
    if stop is not None and stop.code not in (0, None) and "pip install" in str(stop.code):
        return                          # an import-time optional package is missing: the clear line
    assert stop is not None, f"{name} --help returned without exiting (it ran)"
    assert stop.code in (0, None), (name, stop.code, out.err[-2000:])
    assert "usage:" in out.out and name in out.out, out.out[:500]
    assert list(script_env.iterdir()) == [], f"{name} --help wrote files"


def test_save_peak_keeps_its_child_and_open_modes(script_env, monkeypatch):
    """RESULTS.md's commands (``bench_save_peak.py 100000``, ``--open 100000 FOLDER``) and the
    internal ``--child OP N FOLDER`` still parse to the same calls."""
    sys.path.insert(0, str(BENCH))
    try:
        ns = runpy.run_path(str(BENCH / "bench_save_peak.py"))
    finally:
        sys.path.remove(str(BENCH))
    calls = []
    monkeypatch.setattr(subprocess, "run", lambda cmd, check: calls.append(cmd[2:]))
    ns["main"].__globals__["_child"] = lambda op, n, folder: calls.append(("child", op, n, folder))
    ns["main"](["--child", "save", "1200", "F"])
    ns["main"](["--open", "1500", str(script_env)])
    ns["main"](["700"])
    assert calls[0] == ("child", "save", 1200, "F")
    assert calls[1:3] == [["--child", "build-durable", "1500", str(script_env)],
                          ["--child", "open", "1500", str(script_env)]]
    assert [c[:3] for c in calls[3:]] == [["--child", op, "700"] for op in ("save", "load", "build-durable", "open")]


def test_missing_reference_package_is_one_line_before_work(script_env, monkeypatch):
    monkeypatch.setitem(sys.modules, "poincare_memory", None)      # import poincare_memory -> ImportError
    stop = run_script(monkeypatch, "bench_seed_parity.py", "--repeats", "1")
    assert stop is not None and stop.code != 0
    msg = str(stop.code)
    assert "\n" not in msg and "pip install poincare-memory==0.1.4" in msg, msg


def test_hit_without_its_package_stops_before_the_run_folder(script_env, monkeypatch):
    monkeypatch.setitem(sys.modules, "hierarchy_transformers", None)
    out = script_env / "enc"
    stop = run_script(monkeypatch, "bench_encoder.py", "--edges", "e.tsv", "--names", "n.tsv",
                      "--system", "hit", "-o", str(out))
    assert stop is not None and stop.code != 0
    assert "pip install --no-deps hierarchy-transformers" in str(stop.code)
    assert not out.exists()                                         # no empty run folder left behind


def test_require_names_a_dependency_that_fails_inside_the_package(monkeypatch):
    monkeypatch.syspath_prepend(str(BENCH))
    from optional_deps import require

    assert require("json", "pip install nothing").dumps([]) == "[]"
    monkeypatch.setitem(sys.modules, "hypermem_no_such_dep", None)
    with pytest.raises(SystemExit, match=r"x\.py needs hypermem_no_such_dep, which is not installed: pip install y"):
        require("hypermem_no_such_dep", "pip install y", script="x.py")
