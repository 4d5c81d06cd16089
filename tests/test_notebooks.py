"""Every notebook in notebooks/ runs from top to bottom without an error (so they never rot).

The kernel is this interpreter (a ``python3`` kernelspec written to a temporary
JUPYTER_PATH folder that points at ``sys.executable``), whatever ``python`` is on PATH.
"""

import json
import os
import sys
from pathlib import Path

import pytest

NOTEBOOKS = sorted((Path(__file__).resolve().parents[1] / "notebooks").glob("*.ipynb"))


@pytest.fixture(scope="module")
def kernel_env(tmp_path_factory):
    spec_dir = tmp_path_factory.mktemp("jupyter")
    kernel = spec_dir / "kernels" / "python3"
    kernel.mkdir(parents=True)
    (kernel / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "Python 3 (hypermem tests)", "language": "python"}))
    old = {k: os.environ.get(k) for k in ("JUPYTER_PATH", "HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE",
                                          "OMP_NUM_THREADS", "PYTHONWARNINGS")}
    os.environ["JUPYTER_PATH"] = str(spec_dir) + (os.pathsep + old["JUPYTER_PATH"] if old["JUPYTER_PATH"] else "")
    os.environ.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", OMP_NUM_THREADS="1",
                      PYTHONWARNINGS="ignore::DeprecationWarning")
    yield
    for k, v in old.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebook_runs(path, kernel_env, tmp_path):
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    pytest.importorskip("ipykernel")
    nb = nbformat.read(path, as_version=4)
    client = nbclient.NotebookClient(nb, kernel_name="python3", timeout=600,
                                     resources={"metadata": {"path": str(tmp_path)}})
    client.execute()  # raises CellExecutionError, naming the cell, on any error
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])]
    assert not [o for o in outputs if o.get("output_type") == "error"]


def test_the_quickstart_is_there():
    assert "quickstart.ipynb" in [p.name for p in NOTEBOOKS]
