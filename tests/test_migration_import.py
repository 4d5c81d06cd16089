"""Coming from poincare-memory: ``import hypermem`` works under ``python -W
error::DeprecationWarning`` (geoopt's ``@torch.jit.script`` warnings are silenced around its
import, and only there)."""

import subprocess
import sys


def test_import_hypermem_under_deprecation_warnings_as_errors():
    done = subprocess.run([sys.executable, "-W", "error::DeprecationWarning", "-c", "import hypermem"],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]


def test_other_deprecation_warnings_of_the_import_still_show():
    # the filter is scoped to geoopt's import: a warning raised afterwards is not swallowed
    code = ("import warnings, hypermem\n"
            "warnings.warn('`torch.jit.script` is deprecated', DeprecationWarning)")
    done = subprocess.run([sys.executable, "-W", "error::DeprecationWarning", "-c", code],
                          capture_output=True, text=True)
    assert done.returncode != 0 and "DeprecationWarning" in done.stderr
