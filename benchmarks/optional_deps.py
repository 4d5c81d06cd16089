"""One clear line when a benchmark's optional package is missing, before any work starts.

``require("poincare_memory", "pip install poincare-memory==0.1.4 (the bench extra)")`` imports
the module and returns it; where it does not import, the script stops with exit status 1 and
one line naming the package and the command that installs it (instead of a
``ModuleNotFoundError`` traceback after the data was built or a run folder made).  Scripts
whose package is only a reference column (``bench_search.py``, ``bench_hierarchy.py``,
``bench_scale.py``) skip that column instead and do not use this.
"""

from __future__ import annotations

import importlib
from types import ModuleType

POINCARE_MEMORY = "pip install poincare-memory==0.1.4 (or hypermem's bench extra)"
HIERARCHY_TRANSFORMERS = "pip install --no-deps hierarchy-transformers==0.1.1"


def require(module: str, install: str, *, script: str = "this benchmark") -> ModuleType:
    """Import ``module`` or stop with ``SystemExit`` (status 1) naming ``install``."""
    try:
        return importlib.import_module(module)
    except ImportError as e:
        missing = getattr(e, "name", None)
        why = "is not installed" if missing in (None, module) or module.startswith(f"{missing}.") \
            else f"does not import ({e})"
        raise SystemExit(f"{script} needs {module}, which {why}: {install}") from None
