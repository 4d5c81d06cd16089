"""The package works wherever it is installed: build the wheel, install it into a fresh
virtual environment outside the checkout, and run the demo and the trainer from a
temporary folder (no checkout paths, no editable install).

The fresh environment gets the wheel with ``--no-deps``; its dependencies (torch,
Lightning...) come from this interpreter's site-packages through a ``.pth`` line.  A folder
named in a ``.pth`` file is added to ``sys.path`` but is not itself a site folder, so the
checkout's editable-install finder there is never activated: ``hypermem`` is the wheel's.
"""

import os
import shutil
import site
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]


def _run(cmd, cwd, env=None, timeout=900):
    out = subprocess.run([str(c) for c in cmd], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert out.returncode == 0, f"{cmd} failed ({out.returncode}):\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}"
    return out


@pytest.fixture(scope="module")
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
    out = _run([sys.executable, "-c", code], cwd=src)
    return dist / out.stdout.strip().splitlines()[-1], out.stdout + out.stderr


@pytest.fixture(scope="module")
def venv(wheel, tmp_path_factory):
    """A fresh venv outside the checkout with the wheel installed; returns its bin folder."""
    env_dir = tmp_path_factory.mktemp("venv") / "env"
    _run([sys.executable, "-m", "venv", env_dir], cwd=env_dir.parent)
    py = env_dir / "bin" / "python"
    _run([py, "-m", "pip", "install", "-q", "--no-deps", "--no-index", wheel[0]], cwd=env_dir.parent)
    purelib = Path(_run([py, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                        cwd=env_dir.parent).stdout.strip())
    deps = [p for p in site.getsitepackages() if Path(p).is_dir()] + [sysconfig.get_paths()["purelib"]]
    (purelib / "zz_hypermem_test_deps.pth").write_text("\n".join(dict.fromkeys(deps)) + "\n")
    return env_dir / "bin"


def _env(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV"))}
    env.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", OMP_NUM_THREADS="1", HOME=str(tmp_path),
               PYTHONWARNINGS="ignore::DeprecationWarning")
    return env


def test_the_wheel_has_the_license_the_configs_and_a_clean_build_log(wheel):
    path, log = wheel
    assert "project.license" not in log and "SetuptoolsDeprecationWarning" not in log
    names = zipfile.ZipFile(path).namelist()
    assert "hypermem_torch-0.1.0.dist-info/licenses/LICENSE" in names
    assert "hypermem/configs/mammals_poincare.yaml" in names
    assert any(n.startswith("hypermem/data/mammals_closure") for n in names)
    meta = zipfile.ZipFile(path).read("hypermem_torch-0.1.0.dist-info/METADATA").decode()
    assert "License-Expression: MIT" in meta


def test_installed_hypermem_is_the_wheels_not_the_checkout(venv, tmp_path):
    out = _run([venv / "python", "-c", "import hypermem, hypermem.configs as c; print(hypermem.__file__); "
                "print(c.config_path('mammals_poincare'))"], cwd=tmp_path, env=_env(tmp_path))
    module, config = out.stdout.split()
    assert Path(module).is_relative_to(venv.parent) and Path(config).is_relative_to(venv.parent)
    assert not Path(module).is_relative_to(ROOT)


def test_demo_runs_from_an_installed_wheel(venv, tmp_path):
    out = _run([venv / "hypermem", "demo", "--epochs", "2", "--no-progress"], cwd=tmp_path, env=_env(tmp_path))
    assert "reconstruction of the" in out.stdout and "Failed to initialize NumPy" not in out.stdout + out.stderr
    assert (tmp_path / "out" / "hypermem-demo" / "mammals.db").is_file()
    assert (tmp_path / "out" / "hypermem-demo" / "mammals.html").is_file()
    _run([venv / "hypermem", "demo", "--dataset", "events", "-o", "site/mem"], cwd=tmp_path, env=_env(tmp_path))
    assert (tmp_path / "site" / "mem.db").is_file() and (tmp_path / "site" / "mem.html").is_file()


def test_train_by_config_name_from_an_installed_wheel(venv, tmp_path):
    _run([venv / "hypermem", "train", "--config", "mammals_poincare", "--trainer.max_epochs=1",
          "--trainer.enable_progress_bar=false"], cwd=tmp_path, env=_env(tmp_path))
    assert list((tmp_path / "runs").rglob("events.out.tfevents.*"))


def test_every_notebook_runs_on_the_installed_wheel(venv, tmp_path):
    from test_notebooks import NOTEBOOKS, kernel_for, run_notebook

    with kernel_for(venv / "python", tmp_path / "jupyter"):
        for path in NOTEBOOKS:
            folder = tmp_path / path.stem
            folder.mkdir()
            outputs = run_notebook(path, folder)
            assert not [o for o in outputs if o.get("output_type") == "error"], path.name
            text = "".join(o.get("text", "") for o in outputs if o.get("output_type") == "stream")
            assert "Failed to initialize NumPy" not in text, path.name
