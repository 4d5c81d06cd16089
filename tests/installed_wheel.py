"""Session fixtures: the wheel built from a copy of the sources and a fresh virtual environment
outside the checkout with it installed (used by tests/test_wheel.py and tests/test_notebooks.py,
so the wheel is built and installed once per test run).

The fresh environment gets the wheel with ``--no-deps``; its dependencies (torch,
Lightning...) come from this interpreter's site-packages through a ``.pth`` line.  A folder
named in a ``.pth`` file is added to ``sys.path`` but is not itself a site folder, so the
checkout's editable-install finder there is never activated: ``hypermem`` is the wheel's.
"""

import shutil
import site
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def run_checked(cmd, cwd, env=None, timeout=900):
    out = subprocess.run([str(c) for c in cmd], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert out.returncode == 0, f"{cmd} failed ({out.returncode}):\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}"
    return out


@pytest.fixture(scope="session")
def wheel(tmp_path_factory):
    """Build the wheel from a copy of the sources (the checkout gets no build/ folder); the
    build log comes with it."""
    work = tmp_path_factory.mktemp("wheel")
    src = work / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(ROOT / name, src / name)
    shutil.copytree(ROOT / "hypermem", src / "hypermem", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    dist = work / "dist"
    code = f"from setuptools import build_meta; print(build_meta.build_wheel({str(dist)!r}))"
    out = run_checked([sys.executable, "-c", code], cwd=src)
    return dist / out.stdout.strip().splitlines()[-1], out.stdout + out.stderr


@pytest.fixture(scope="session")
def venv(wheel, tmp_path_factory):
    """A fresh venv outside the checkout with the wheel installed; returns its bin folder."""
    env_dir = tmp_path_factory.mktemp("venv") / "env"
    run_checked([sys.executable, "-m", "venv", env_dir], cwd=env_dir.parent)
    py = env_dir / "bin" / "python"
    run_checked([py, "-m", "pip", "install", "-q", "--no-deps", "--no-index", wheel[0]], cwd=env_dir.parent)
    purelib = Path(run_checked([py, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                        cwd=env_dir.parent).stdout.strip())
    deps = [p for p in site.getsitepackages() if Path(p).is_dir()] + [sysconfig.get_paths()["purelib"]]
    (purelib / "zz_hypermem_test_deps.pth").write_text("\n".join(dict.fromkeys(deps)) + "\n")
    return env_dir / "bin"
