"""The package works wherever it is installed: build the wheel, install it into a fresh
virtual environment outside the checkout, and run the demo and the trainer from a
temporary folder (no checkout paths, no editable install).

The wheel and the environment are the session fixtures of ``installed_wheel.py`` (the
notebooks run there too, in ``test_notebooks.py``).
"""

import os
import subprocess
import zipfile
from pathlib import Path

import pytest
from installed_wheel import ROOT, run_checked

pytestmark = pytest.mark.slow


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
    out = run_checked([venv / "python", "-c", "import hypermem, hypermem.configs as c; print(hypermem.__file__); "
                "print(c.config_path('mammals_poincare'))"], cwd=tmp_path, env=_env(tmp_path))
    module, config = out.stdout.split()
    assert Path(module).is_relative_to(venv.parent) and Path(config).is_relative_to(venv.parent)
    assert not Path(module).is_relative_to(ROOT)


def test_demo_runs_from_an_installed_wheel(venv, tmp_path):
    out = run_checked([venv / "hypermem", "demo", "--epochs", "2", "--no-progress"], cwd=tmp_path, env=_env(tmp_path))
    assert "reconstruction of the" in out.stdout and "Failed to initialize NumPy" not in out.stdout + out.stderr
    assert (tmp_path / "out" / "hypermem-demo" / "mammals.db").is_file()
    assert (tmp_path / "out" / "hypermem-demo" / "mammals.html").is_file()
    run_checked([venv / "hypermem", "demo", "--dataset", "events", "-o", "site/mem"], cwd=tmp_path, env=_env(tmp_path))
    assert (tmp_path / "site" / "mem.db").is_file() and (tmp_path / "site" / "mem.html").is_file()


def test_train_by_config_name_from_an_installed_wheel(venv, tmp_path):
    run_checked([venv / "hypermem", "train", "--config", "mammals_poincare", "--trainer.max_epochs=1",
          "--trainer.enable_progress_bar=false"], cwd=tmp_path, env=_env(tmp_path))
    assert list((tmp_path / "runs").rglob("events.out.tfevents.*"))


def test_the_bare_wheel_runs_the_demo_and_skips_the_picture_with_a_note(bare_venv, wheel, tmp_path):
    """`pip install torch==2.13.0 hypermem_torch-*.whl`, no extras: the demo trains, saves and
    writes the inspector; the TensorBoard disk picture is skipped with one line (issue 33, item 2)."""
    from installed_wheel import required_distributions

    need = required_distributions(wheel[0])
    assert {"torch", "geoopt", "lightning", "tensorboard"} <= need and not {"matplotlib", "pytest"} & need
    for module in ("matplotlib", "numba", "sentence_transformers", "pandas"):
        out = subprocess.run([str(bare_venv / "python"), "-c", f"import {module}"], cwd=tmp_path, env=_env(tmp_path),
                             capture_output=True, text=True, timeout=120)
        assert out.returncode != 0 and "No module named" in out.stderr, module
    out = run_checked([bare_venv / "hypermem", "demo", "--epochs", "2", "--no-progress", "-o", "demo"], cwd=tmp_path,
                      env=_env(tmp_path))
    notes = [line for line in out.stderr.splitlines() if "matplotlib" in line]
    assert notes == ["note: matplotlib is not installed, so TensorBoard gets no Poincaré-disk picture "
                     "(pip install 'hypermem-torch[viz]')"], out.stderr[-2000:]
    assert "reconstruction of the" in out.stdout
    assert (tmp_path / "demo.db").is_file() and (tmp_path / "demo.html").is_file()  # -o names the files


FILED_SCRIPT = r"""
from hypermem import Memory
m = Memory()
m.add("animal", id="animal")
try:
    m.add("a dog", parent="auto")
except ValueError as exc:
    print("refused:", "holds no tree" in str(exc), len(m))
m.add_many([{"text": "dog", "id": "dog", "parent": "animal"}, {"text": "cat", "id": "cat", "parent": "animal"},
            {"text": "dog breed poodle", "id": "poodle", "parent": "dog"}])
i = m.add("dog breed beagle", parent="auto")
print("parent:", m.parent(i), m.get(i).meta["auto_parent"]["by"])
print("ancestors:", [h.id for h in m.search("dog breed husky", mode="ancestors", k=2)])
m.save("filed.db")
print("reloaded:", Memory.load("filed.db").parent(i))
"""


def test_the_bare_wheel_places_text_in_a_filed_store(bare_venv, tmp_path):
    """From the bare wheel: a store with declared parents places a text by its neighbours' vote
    (the hashing embedder, no encoder), refuses "auto" in a flat store, and keeps the choice."""
    out = run_checked([bare_venv / "python", "-c", FILED_SCRIPT], cwd=tmp_path, env=_env(tmp_path))
    lines = dict(line.split(": ", 1) for line in out.stdout.strip().splitlines())
    assert lines["refused"] == "True 1"
    parent = lines["parent"].split()[0]
    assert lines["parent"].endswith(" vote") and parent in ("dog", "poodle", "animal")
    assert lines["reloaded"] == parent and lines["ancestors"].startswith("[")
    # a placement reranker needs the embed extra: one line that says which
    out = subprocess.run([str(bare_venv / "hypermem"), "fit-reranker", "filed.db", "--out", "rr"], cwd=tmp_path,
                         env=_env(tmp_path), capture_output=True, text=True, timeout=300)
    assert out.returncode == 1 and 'pip install "hypermem-torch[embed]"' in out.stderr, out.stderr[-2000:]
    assert len(out.stderr.strip().splitlines()) == 1 and not (tmp_path / "rr").exists()
