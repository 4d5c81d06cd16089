"""Walk 72 (an SRE running hypermem as a service): warnings that flooded logs or became
tracebacks, and the console script's first seconds (Ctrl-C, ``--version``)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import warnings
from datetime import datetime, timedelta, timezone
from importlib import metadata
from pathlib import Path

import pytest

from hypermem import HashingEmbedder, Memory
from hypermem.cli import main as cli_main

T0 = datetime(2025, 1, 1, tzinfo=timezone.utc)


def _console_script() -> metadata.EntryPoint:
    """The ``hypermem`` console script as pyproject.toml's ``[project.scripts]`` names it (read
    there: an old ``hypermem_torch.egg-info`` beside the sources can shadow the installed metadata)."""
    try:
        import tomllib
    except ImportError:  # Python 3.10
        tomllib = pytest.importorskip("tomli")
    pyproject = Path(__file__).resolve().parents[1] / "pyproject.toml"
    value = tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]["scripts"]["hypermem"]
    return metadata.EntryPoint(name="hypermem", value=value, group="console_scripts")


def _run_script(prelude: str, *args: str) -> subprocess.CompletedProcess:
    """Run the console script as pip's wrapper does (``from module import attr; sys.exit(attr())``),
    after ``prelude``."""
    ep = _console_script()
    code = f"import sys\n{prelude}\nfrom {ep.module} import {ep.attr} as run\nsys.argv[1:] = {list(args)!r}\nsys.exit(run())\n"
    env = dict(os.environ, OMP_NUM_THREADS="1")
    env.pop("HYPERMEM_DEBUG", None)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)


# ------------------------------------------------------------- 2. the at_time warning, once a store
def test_the_at_time_warning_is_given_once_a_store_not_on_every_search():
    """Each past search warned again, with a new count each time (Python's default filter shows
    each new text): 200 requests put 200 warnings in a service's log."""
    mem = Memory(embedder=HashingEmbedder(dim=16))
    mem.add("root")
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("default")
        for i in range(20):
            mem.add(f"fact {i}", t=T0 + timedelta(days=400), valid_from=T0 + timedelta(days=i))
            mem.search("fact", k=50, at_time=T0 + timedelta(days=35))
    texts = [str(w.message) for w in got if "recorded after it" in str(w.message)]
    assert len(texts) == 1 and "at_time left out 1 memory" in texts[0] and "once a store" in texts[0]
    other = Memory(embedder=HashingEmbedder(dim=16))     # another store is told on its own
    other.add("fact", t=T0 + timedelta(days=400), valid_from=T0)
    with pytest.warns(UserWarning, match="recorded after it"):
        other.search("fact", k=5, at_time=T0 + timedelta(days=35))


# ------------------------------------------------------------- 3. a warning made an error: one line
def test_the_cli_under_warnings_as_errors_prints_one_error_line(tmp_path, capsys):
    """PYTHONWARNINGS=error made the at_time warning a 29-line traceback (status 1); docs/cli.md
    promises one line."""
    mem = Memory(embedder=HashingEmbedder(dim=16))
    mem.add("late fact", t=datetime(2025, 6, 1, tzinfo=timezone.utc), valid_from=datetime(2024, 1, 1, tzinfo=timezone.utc))
    path = str(tmp_path / "asof.db")
    mem.save(path)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        status = cli_main(["search", path, "fact", "--at", "2024-06-01"])
    err = capsys.readouterr().err.strip().splitlines()
    assert status == 1 and len(err) == 1
    assert err[0].startswith("hypermem search: error: at_time left out 1 memory") and "UserWarning" in err[0]


# ------------------------------------------------------------- 4. the console script's first seconds
def test_ctrl_c_while_the_package_loads_exits_130_without_a_traceback():
    """A Ctrl-C while ``import hypermem`` ran (torch, geoopt: seconds) came before main's handler:
    a traceback and status 1.  The SIGINT arrives here at a fixed point, when torch is imported."""
    prelude = """import os, signal
class CtrlC:
    def find_spec(self, name, path=None, target=None):
        if name == "torch":
            os.kill(os.getpid(), signal.SIGINT)
        return None
sys.meta_path.insert(0, CtrlC())"""
    done = _run_script(prelude, "stats", "no-such.db")
    assert (done.returncode, done.stderr, done.stdout) == (128 + signal.SIGINT, "", "")


def test_version_is_answered_without_importing_torch(capsys):
    done = _run_script("", "--version")
    assert done.returncode == 0 and done.stderr == ""
    with pytest.raises(SystemExit):
        cli_main(["--version"])                  # the package's own answer: the same line
    assert done.stdout == capsys.readouterr().out
    check = _run_script("import atexit\natexit.register(lambda: print('torch' in sys.modules))", "--version")
    assert check.stdout.splitlines()[-1] == "False"


# ------------------------------------------------------------- 5. import hypermem without an HTTP client
def test_import_hypermem_imports_neither_huggingface_hub_nor_safetensors():
    code = "import sys, hypermem; print(sorted(m for m in ('huggingface_hub', 'safetensors', 'httpx') if m in sys.modules))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          env=dict(os.environ, OMP_NUM_THREADS="1"))
    assert done.returncode == 0 and done.stdout.strip() == "[]"


def test_the_load_errors_still_name_the_libraries_errors():
    safetensors = pytest.importorskip("safetensors")
    from hypermem.embed.module_checks import load_errors

    errors = load_errors()
    assert safetensors.SafetensorError in errors and ValueError in errors and OSError in errors
