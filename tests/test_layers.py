"""The package's import contracts ([tool.importlinter] in pyproject.toml): layers, no
import cycles (imports inside functions included), private modules kept private."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LINT = Path(sys.executable).with_name("lint-imports")


@pytest.mark.skipif(not LINT.exists(), reason="import-linter is not installed (the dev extra)")
def test_import_contracts_hold():
    out = subprocess.run([str(LINT), "--no-cache"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-2000:]
    assert "3 kept, 0 broken" in out.stdout


def test_a_layer_violation_is_caught(tmp_path):
    """The contract is live: a store module importing the training layer breaks it."""
    if not LINT.exists():
        pytest.skip("import-linter is not installed (the dev extra)")
    pkg = tmp_path / "hypermem"
    for sub in ("store", "train", "geometry"):
        (pkg / sub).mkdir(parents=True)
        (pkg / sub / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    (pkg / "store" / "bad.py").write_text("def f():\n    from ..train import x\n")
    (tmp_path / ".importlinter").write_text(
        "[importlinter]\nroot_package = hypermem\n\n[importlinter:contract:layers]\nname = layers\n"
        "type = layers\ncontainers = hypermem\nlayers =\n    train\n    store\n    geometry\n")
    out = subprocess.run([str(LINT), "--no-cache"], cwd=tmp_path, capture_output=True, text=True, timeout=300,
                         env={"PYTHONPATH": str(tmp_path), "PATH": "/usr/bin:/bin"})
    assert out.returncode == 1, out.stdout
    assert "hypermem.store.bad -> hypermem.train" in out.stdout


def test_ruff_is_clean():
    """The lint rules of [tool.ruff] hold for the package, tests, benchmarks and experiments."""
    ruff = Path(sys.executable).with_name("ruff")
    if not ruff.exists():
        pytest.skip("ruff is not installed (the dev extra)")
    out = subprocess.run([str(ruff), "check", "--no-cache", "hypermem", "tests", "benchmarks", "experiments",
                          "scripts", "examples"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout[-4000:]


MAX_LINES = 500


def test_every_source_file_reads_in_one_sitting():
    """No Python file of the package, tests, benchmarks, experiments, scripts or examples is
    longer than 500 lines (the project's rule: one concept a file)."""
    long = {}
    for folder in ("hypermem", "tests", "benchmarks", "experiments", "scripts", "examples"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            n = len(path.read_text(encoding="utf-8").splitlines())
            if n > MAX_LINES:
                long[str(path.relative_to(ROOT))] = n
    assert not long, f"files over {MAX_LINES} lines: {long}"
