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


def new_venv_with(env_dir: Path, wheel_path: Path) -> Path:
    """A fresh venv at ``env_dir`` with the wheel installed (``--no-deps``); returns its python.
    The venv gets no pip of its own (ensurepip costs seconds): this interpreter's pip installs
    into it with ``--python``."""
    run_checked([sys.executable, "-m", "venv", "--without-pip", env_dir], cwd=env_dir.parent)
    py = env_dir / "bin" / "python"
    run_checked([sys.executable, "-m", "pip", "--python", py, "install", "-q", "--no-deps", "--no-index", wheel_path],
                cwd=env_dir.parent)
    return py


@pytest.fixture(scope="session")
def wheel(tmp_path_factory):
    """Build the wheel from a copy of the sources (the checkout gets no build/ folder); the
    build log comes with it."""
    work = tmp_path_factory.mktemp("wheel")
    src = work / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md", "LICENSE", "_hypermem_console.py"):
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
    py = new_venv_with(env_dir, wheel[0])
    purelib = Path(run_checked([py, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                        cwd=env_dir.parent).stdout.strip())
    deps = [p for p in site.getsitepackages() if Path(p).is_dir()] + [sysconfig.get_paths()["purelib"]]
    (purelib / "zz_hypermem_test_deps.pth").write_text("\n".join(dict.fromkeys(deps)) + "\n")
    return env_dir / "bin"


def required_distributions(wheel_path: Path) -> set[str]:
    """The distributions a bare ``pip install <wheel>`` brings: the wheel's ``Requires-Dist``
    without an extra, and theirs, transitively (as installed in this interpreter), normalised."""
    import zipfile
    from email.parser import Parser
    from importlib import metadata

    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    with zipfile.ZipFile(wheel_path) as zf:
        name = next(n for n in zf.namelist() if n.endswith(".dist-info/METADATA"))
        meta = Parser().parsestr(zf.read(name).decode())
    todo = [(line, ("",)) for line in meta.get_all("Requires-Dist") or []]
    seen: set[tuple[str, str]] = set()  # (distribution, extra) pairs already followed
    while todo:
        line, extras = todo.pop()
        req = Requirement(line)
        if req.marker is not None and not any(req.marker.evaluate({"extra": e}) for e in extras):
            continue  # an extra's requirement that was not asked for, or another platform's
        dist = canonicalize_name(req.name)
        wanted = [e for e in ("", *sorted(req.extras)) if (dist, e) not in seen]
        if not wanted:
            continue
        seen.update((dist, e) for e in wanted)
        try:
            todo.extend((child, tuple(wanted)) for child in metadata.requires(req.name) or [])
        except metadata.PackageNotFoundError:
            pass
    return {dist for dist, _ in seen}


def _top_name(entry: str) -> str:
    """The import name a site-packages entry provides (``foo``, ``foo.py``, ``foo.cpython-311-x86_64-linux-gnu.so``)."""
    return entry.split(".")[0]


@pytest.fixture(scope="session")
def bare_venv(wheel, tmp_path_factory):
    """A fresh venv with the wheel and only what ``pip install torch==2.13.0 <wheel>`` would
    install, without a download: a folder of links to this interpreter's site-packages entries
    of the distributions in the wheel's required closure (:func:`required_distributions`), and
    to no other (no matplotlib, sentence-transformers, faiss, pandas, numba, pytest, ...), is
    on the venv's path.  Returns the bin folder."""
    from importlib import metadata

    from packaging.utils import canonicalize_name

    root = tmp_path_factory.mktemp("bare")
    env_dir, deps = root / "env", root / "deps"
    py = new_venv_with(env_dir, wheel[0])
    purelib = Path(run_checked([py, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               cwd=root).stdout.strip())
    allowed = required_distributions(wheel[0])
    blocked = {top for top, dists in metadata.packages_distributions().items()
               if not any(canonicalize_name(d) in allowed for d in dists)}
    deps.mkdir()
    for site_dir in dict.fromkeys([*site.getsitepackages(), sysconfig.get_paths()["purelib"]]):
        for entry in sorted(Path(site_dir).iterdir()) if Path(site_dir).is_dir() else []:
            name = entry.name
            if name.endswith(".dist-info"):
                keep = canonicalize_name(name[:-len(".dist-info")].rsplit("-", 1)[0]) in allowed
            else:
                keep = not (name.endswith(".pth") or name.startswith(("__editable__", "__pycache__"))
                            or _top_name(name) in blocked or name.startswith("hypermem"))
            if keep and not (deps / name).exists():
                (deps / name).symlink_to(entry)
    (purelib / "zz_hypermem_test_deps.pth").write_text(f"{deps}\n")
    return env_dir / "bin"
