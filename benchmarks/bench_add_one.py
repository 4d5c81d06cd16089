"""One memory per ``add()`` call, as an agent adds: hypermem against poincare-memory 0.1.4.

``HashingEmbedder(dim=256)``, an in-memory store, 200 warm-up adds, then 2,800 timed adds as
roots or all under one ``parent=``; "embed" is 1,000 single ``embed([text])`` calls of stored
texts, "over" the add less the embed.  Wall (``perf_counter``) and CPU (``process_time``)
clocks; the best of 3 stores by "over".  Run each side in its own process and interleave::

    OMP_NUM_THREADS=1 python benchmarks/bench_add_one.py ref   # poincare-memory
    OMP_NUM_THREADS=1 PYTHONPATH=. python benchmarks/bench_add_one.py hm
"""

from __future__ import annotations

import argparse
import time
import warnings

from optional_deps import POINCARE_MEMORY, require

TEXTS = [f"note {i} about topic {i % 97} and thing {i % 13}" for i in range(3000)]


def run(memory_cls, embedder_cls, parent: bool, clock) -> tuple[float, float]:
    emb = embedder_cls(dim=256)
    m = memory_cls(embedder=emb)
    ids = [m.add(t) for t in TEXTS[:200]]
    p = ids[5] if parent else None
    t0 = clock()
    for t in TEXTS[200:]:
        m.add(t, parent=p)
    per_add = (clock() - t0) / 2800
    t0 = clock()
    for t in TEXTS[:1000]:
        emb.embed([t])
    return per_add, (clock() - t0) / 1000


def main(which: str) -> None:
    warnings.simplefilter("ignore")
    if which == "ref":
        require("poincare_memory", POINCARE_MEMORY, script="bench_add_one.py ref")
        from poincare_memory import HashingEmbedder, Memory
    else:
        from hypermem import HashingEmbedder, Memory
    out = []
    for parent in (False, True):
        for name, clock in (("wall", time.perf_counter), ("cpu", time.process_time)):
            a, e = min((run(Memory, HashingEmbedder, parent, clock) for _ in range(3)), key=lambda x: x[0] - x[1])
            out.append(f"{'parent' if parent else 'root'}/{name} add {a * 1e3:.3f} embed {e * 1e3:.3f} "
                       f"over {(a - e) * 1e3:.3f} ms")
    print(which, " | ".join(out))


def _parse(argv: list[str] | None = None) -> str:
    ap = argparse.ArgumentParser(
        description=__doc__.splitlines()[0],
        epilog="Run each side in its own process and interleave the runs.")
    ap.add_argument("which", nargs="?", default="hm", choices=("hm", "ref"),
                    help="hm: hypermem (the default, needs hypermem importable, e.g. PYTHONPATH=.); "
                         "ref: poincare-memory 0.1.4")
    return ap.parse_args(argv).which


if __name__ == "__main__":
    main(_parse())
