"""scripts/_setup_env.sh: one line per step with a rough duration, the demo's smaller set of
extras, and the stamp that makes test.sh after demo.sh install the union (issue 33, item 1).

The script runs with ``HYPERMEM_SETUP_DRY_RUN=1`` in a copy of the scripts and the
pyproject: it prints the steps it would take and installs nothing."""

import hashlib
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def copy(tmp_path):
    (tmp_path / "scripts").mkdir()
    for name in ("_setup_env.sh", "demo.sh", "test.sh"):
        shutil.copy(ROOT / "scripts" / name, tmp_path / "scripts" / name)
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    return tmp_path


def _plan(root: Path, extras: str) -> list[str]:
    env = {**os.environ, "HYPERMEM_SETUP_DRY_RUN": "1", "HYPERMEM_EXTRAS": extras, "HYPERMEM_SYSTEM": ""}
    out = subprocess.run(["bash", "-c", "source scripts/_setup_env.sh"], cwd=root, env=env, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip().splitlines()


def _venv_with_stamp(root: Path, extras: str | None) -> None:
    (root / ".venv" / "bin").mkdir(parents=True)
    python = root / ".venv" / "bin" / "python"  # this interpreter, which has torch (a link would lose its venv)
    python.write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')
    python.chmod(0o755)
    if extras is not None:
        digest = hashlib.sha256((root / "pyproject.toml").read_bytes()).hexdigest()[:16]
        (root / ".venv" / ".hypermem-installed").write_text(f"{digest} {extras}\n")


def _default_extras(script: str) -> set[str]:
    text = (ROOT / "scripts" / script).read_text()
    return set(re.search(r'HYPERMEM_EXTRAS="\$\{HYPERMEM_EXTRAS:-([\w,-]+)\}"', text).group(1).split(","))


def test_the_demo_installs_what_it_needs_and_not_the_dev_tools():
    demo, tests = _default_extras("demo.sh"), _default_extras("test.sh")
    assert demo == {"fast", "viz"}
    assert "dev" not in demo and demo < tests


def test_a_first_run_says_each_step_and_its_rough_duration(copy):
    lines = _plan(copy, "fast,viz")
    assert len(lines) == 2, lines
    assert re.fullmatch(r"\[setup\] creating \.venv with Python 3\.\d+\.\d+ \(about 10 s\)", lines[0])
    assert lines[1] == ("[setup] installing torch==2.13.0 and hypermem-torch[fast,viz] "
                        "(first time: about 1-8 min, ~1 GB, as fast as the wheels come; later: seconds)")


def test_test_sh_after_demo_sh_installs_the_union_and_demo_after_test_nothing(copy):
    _venv_with_stamp(copy, "fast,viz")
    assert _plan(copy, "fast,viz") == ["[setup] nothing to do"]
    lines = _plan(copy, "dev,fast,embed")
    assert len(lines) == 1 and lines[0].startswith("[setup] installing hypermem-torch[dev,embed,fast,viz] beside "
                                                   "torch==")
    (copy / ".venv" / ".hypermem-installed").write_text((copy / ".venv" / ".hypermem-installed").read_text()
                                                        .replace("fast,viz", "dev,embed,fast,viz"))
    assert _plan(copy, "fast,viz") == ["[setup] nothing to do"]


def test_a_changed_pyproject_reinstalls(copy):
    _venv_with_stamp(copy, "fast,viz")
    with open(copy / "pyproject.toml", "a") as f:
        f.write("\n# changed\n")
    assert _plan(copy, "fast,viz")[0].startswith("[setup] installing hypermem-torch[fast,viz] beside")
