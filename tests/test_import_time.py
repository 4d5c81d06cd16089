"""What ``import hypermem`` loads (issue 34, point 5): the store's user pays for the store.

Not a timed test: each check runs a fresh interpreter and asserts which heavy modules are in
``sys.modules`` (scipy.optimize through geoopt's optimizers, Lightning, transformers), so a
new eager import of one of them fails here, whatever the machine's load.
"""

from __future__ import annotations

import json
import subprocess
import sys

HEAVY = ("scipy.optimize", "lightning", "transformers", "sentence_transformers", "torchmetrics",
         "matplotlib", "pandas", "numba", "faiss", "psycopg")


def _run(code: str) -> dict:
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_import_and_first_search_load_no_heavy_module():
    got = _run(f"""
import json, sys
import hypermem
after_import = [m for m in {HEAVY!r} if m in sys.modules]
m = hypermem.Memory()
m.add("the cat sat on the mat")
m.add("a dog in the garden")
hits = m.search("cat", k=1)
after_search = [m for m in {HEAVY!r} if m in sys.modules]
from hypermem.geometry.deferred_import import is_deferred
print(json.dumps({{"import": after_import, "search": after_search, "top": hits[0].text,
                   "deferred": is_deferred("geoopt.optim")}}))
""")
    assert got["import"] == [] and got["search"] == []
    assert got["top"] == "the cat sat on the mat"
    assert got["deferred"] is True


def test_geoopt_optimizers_load_on_first_use():
    """The deferred module is geoopt's own: its optimizers work and step on the ball."""
    got = _run("""
import json, sys
import torch, hypermem, geoopt
before = "scipy.optimize" in sys.modules
ball = hypermem.PoincareBall()
p = geoopt.ManifoldParameter(torch.tensor([[0.1, 0.2]], dtype=torch.float64), manifold=ball)
opt = geoopt.optim.RiemannianSGD([p], lr=0.1)
ball.distance_to_origin(p).sum().backward()
opt.step()
from geoopt.optim import RiemannianAdam
from hypermem.geometry.deferred_import import is_deferred
print(json.dumps({"before": before, "after": "scipy.optimize" in sys.modules,
                  "cls": geoopt.optim.RiemannianSGD.__module__, "adam": RiemannianAdam.__name__,
                  "norm": float(p.detach().norm()), "deferred": is_deferred("geoopt.optim")}))
""")
    assert got["before"] is False and got["after"] is True
    assert got["cls"] == "geoopt.optim.rsgd" and got["adam"] == "RiemannianAdam"
    assert got["norm"] < (0.1 ** 2 + 0.2 ** 2) ** 0.5  # the step moved the point toward the origin
    assert got["deferred"] is False


def test_geoopt_imported_first_is_left_alone():
    got = _run("""
import json, sys
import geoopt
import hypermem
from hypermem.geometry.deferred_import import defer_submodule, is_deferred
print(json.dumps({"deferred": is_deferred("geoopt.optim"), "again": defer_submodule("geoopt", "optim"),
                  "scipy": "scipy.optimize" in sys.modules}))
""")
    assert got == {"deferred": False, "again": False, "scipy": True}


def test_hierarchy_names_stay_lazy_and_importable():
    got = _run("""
import json, sys
import hypermem
before = "hypermem.hierarchy" in sys.modules
from hypermem import sarkar_layout, Memory, PoincareBall, HashingEmbedder
print(json.dumps({"before": before, "after": "hypermem.hierarchy" in sys.modules,
                  "name": sarkar_layout.__name__}))
""")
    assert got == {"before": False, "after": True, "name": "sarkar_layout"}
