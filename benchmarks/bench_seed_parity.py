#!/usr/bin/env python
"""Seed parity: hypermem and poincare-memory with poincare-memory's documented values.

One process, the WordNet mammal closure shipped in :mod:`hypermem.data.wordnet`
(1,180 synsets, 6,540 pairs), and the reference's defaults on both sides:

* Poincaré: ``fit_poincare_embeddings(closure, dim=10, epochs=100, lr=0.1, negatives=10,
  burn_in=10, burn_in_lr_factor=0.1, batch_size=64, seed=0)``;
* Euclidean: ``fit_euclidean_embeddings(closure, dim=10, epochs=100, lr=0.05,
  negatives=10, batch_size=64, seed=0)``.

Each side gets one warm-up call (numba compiles or loads its kernels), then ``--repeats``
timed calls, interleaved (hypermem, reference, hypermem, ...) so that load from other
jobs on a shared machine hits both alike.  Reported: the median wall clock of the call,
the ratio of the medians, and the reconstruction MAP / mean rank of the points of each
side (hypermem's evaluator for both; ``--ref-eval`` also runs the reference's evaluator
on both sets of points, which agrees).  ``--quality-seeds N`` also trains both sides
once with each of the seeds ``1 .. N-1`` (untimed) and reports the MAP over all ``N``
seeds (mean, min, max), since one seed's difference can be noise.  With ``--defaults``
hypermem's own default call ``fit_poincare_embeddings(closure, dim=10)`` is measured once
as well; ``--decayed`` also trains hypermem once with ``final_lr_factor=0.01`` (a linear
decay to ``lr/100`` after the burn-in, hypermem's default before 2026-12-01) with the
reference's Poincaré values and, with ``--defaults``, with hypermem's defaults.

Usage::

    .venv/bin/python benchmarks/bench_seed_parity.py --repeats 3 [--json out.json]

Threads: ``--threads`` for torch and (set before NumPy loads) the BLAS/OpenMP pools.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import statistics
import sys
import time
import warnings

from optional_deps import POINCARE_MEMORY, require

SEED_VALUES = {
    "poincare": dict(dim=10, epochs=100, lr=0.1, negatives=10, burn_in=10, burn_in_lr_factor=0.1,
                     batch_size=64, seed=0),
    "euclidean": dict(dim=10, epochs=100, lr=0.05, negatives=10, batch_size=64, seed=0),
}


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=3, help="timed calls per side after the warm-up")
    ap.add_argument("--geometries", nargs="*", choices=sorted(SEED_VALUES), default=["poincare", "euclidean"])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--ref-eval", action="store_true", help="also score both sides with the reference's evaluator")
    ap.add_argument("--quality-seeds", type=int, default=1, help="MAP over seeds 0 .. N-1 (the extra ones untimed)")
    ap.add_argument("--defaults", action="store_true", help="also time hypermem's default call once")
    ap.add_argument("--decayed", action="store_true", help="also train hypermem with final_lr_factor=0.01")
    ap.add_argument("--json", help="write the results here")
    return ap.parse_args(argv)


def main(argv=None) -> dict:
    args = parse_args(argv)
    require("poincare_memory", POINCARE_MEMORY, script="bench_seed_parity.py")
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "NUMBA_NUM_THREADS"):
        os.environ.setdefault(var, str(args.threads))
    warnings.filterwarnings("ignore", category=DeprecationWarning)
    import numpy as np
    import torch

    torch.set_num_threads(args.threads)
    import poincare_memory
    import poincare_memory.hierarchy.evaluation as ref_eval
    import poincare_memory.hierarchy.rsgd as ref

    import hypermem
    from hypermem.data.wordnet import load_mammals
    from hypermem.hierarchy.evaluation import reconstruction
    from hypermem.hierarchy.training import fit_euclidean_embeddings, fit_poincare_embeddings

    closure = list(load_mammals().closure)
    ours = {"poincare": fit_poincare_embeddings, "euclidean": fit_euclidean_embeddings}
    theirs = {"poincare": ref.fit_poincare_embeddings, "euclidean": ref.fit_euclidean_embeddings}

    def score(points, geometry):
        pts = {k: torch.as_tensor(np.asarray(v)) for k, v in points.items()}
        r = reconstruction(pts, closure, geometry)
        return r.mean_average_precision, r.mean_rank

    def ref_score(points, geometry):
        if geometry == "poincare":
            from poincare_memory.geometry import PoincareBall

            dist = PoincareBall().distance
        else:
            def dist(x, y):
                return np.linalg.norm(np.asarray(x) - np.asarray(y), axis=-1)
        r = ref_eval.reconstruction({k: np.asarray(v, dtype=np.float64) for k, v in points.items()}, closure, dist)
        return r.mean_average_precision, r.mean_rank

    out = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
           "machine": f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}",
           "threads": args.threads, "repeats": args.repeats, "torch": torch.__version__,
           "hypermem": getattr(hypermem, "__version__", "?"), "poincare_memory": poincare_memory.__version__,
           "load_before": os.getloadavg()[0], "results": {}}
    for geometry in args.geometries:
        values = SEED_VALUES[geometry]
        sides = {"hypermem": ours[geometry], "reference": theirs[geometry]}
        times = {name: [] for name in sides}
        quality = {}
        for fit in sides.values():  # warm-up
            fit(closure, **values)
        for _ in range(args.repeats):
            for name, fit in sides.items():
                t0 = time.perf_counter()
                points, _ = fit(closure, **values)
                times[name].append(time.perf_counter() - t0)
                q = score(points, geometry)
                if name in quality and abs(quality[name][0] - q[0]) > 1e-12:
                    print(f"note: {name} {geometry} MAP changed between repeats: {quality[name][0]} -> {q[0]}")
                quality[name] = q
                if args.ref_eval and f"{name}_ref_eval" not in quality:
                    quality[f"{name}_ref_eval"] = ref_score(points, geometry)
                print(f"{geometry:9s} {name:9s} {times[name][-1]:7.2f} s  MAP {q[0]:.4f}  mean rank {q[1]:.3f}",
                      flush=True)
        med = {name: statistics.median(t) for name, t in times.items()}
        maps = {name: [quality[name][0]] for name in sides}
        for seed in range(1, args.quality_seeds):
            for name, fit in sides.items():
                points, _ = fit(closure, **{**values, "seed": seed})
                maps[name].append(score(points, geometry)[0])
        if args.quality_seeds > 1:
            for name, m in maps.items():
                print(f"{geometry:9s} {name:9s} MAP over seeds 0-{args.quality_seeds - 1}: mean {statistics.mean(m):.4f}"
                      f" (min {min(m):.4f}, max {max(m):.4f})", flush=True)
        out["results"][geometry] = {"values": values, "times": times, "median_s": med,
                                    "ratio": med["reference"] / med["hypermem"], "quality": quality,
                                    "map_by_seed": maps}
        print(f"{geometry}: median hypermem {med['hypermem']:.2f} s, reference {med['reference']:.2f} s, "
              f"ratio {med['reference'] / med['hypermem']:.1f}x; MAP hypermem {quality['hypermem'][0]:.4f}, "
              f"reference {quality['reference'][0]:.4f}", flush=True)
    extra = {}
    if args.defaults:
        extra["hypermem_defaults"] = dict(dim=10)
    if args.decayed:
        extra["hypermem_seed_values_decayed"] = dict(SEED_VALUES["poincare"], final_lr_factor=0.01)
        if args.defaults:
            extra["hypermem_defaults_decayed"] = dict(dim=10, final_lr_factor=0.01)
    for label, kwargs in extra.items():
        t0 = time.perf_counter()
        points, _ = fit_poincare_embeddings(closure, **kwargs)
        seconds = time.perf_counter() - t0
        q = score(points, "poincare")
        out["results"][label] = {"kwargs": kwargs, "seconds": seconds, "quality": q}
        print(f"{label}: {seconds:.2f} s  MAP {q[0]:.4f}  mean rank {q[1]:.3f}", flush=True)
    out["load_after"] = os.getloadavg()[0]
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(out, fh, indent=1)
        print(f"results: {os.path.abspath(args.json)}")
    return out


if __name__ == "__main__":
    main(sys.argv[1:])
