"""Every ``>>>`` example in the package's docstrings runs and prints what it says."""

from __future__ import annotations

import doctest
import importlib
import pkgutil
import warnings

import pytest

import hypermem

MODULES = sorted(m.name for m in pkgutil.walk_packages(hypermem.__path__, "hypermem.")
                 if not m.name.endswith("__main__"))


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples_run(name, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # an example that writes a file writes it here
    try:
        module = importlib.import_module(name)
    except ImportError as exc:  # an optional extra (e.g. postgres) that is not installed
        pytest.skip(f"{name} needs an extra: {exc}")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE, report=True)
    assert result.failed == 0, f"{result.failed} of {result.attempted} examples failed in {name}"
