#!/usr/bin/env python
"""Eager against ``torch.compile`` for a BallEncoder -> HyperbolicMemory -> Linear training step.

    .venv/bin/python benchmarks/bench_nn_compile.py                       # CPU, one thread
    .venv/bin/python benchmarks/bench_nn_compile.py --device cuda --threads 0

One step is ``loss = cross_entropy(head(memory(encoder(x), k).read), y); loss.backward()``
with trainable keys, values, temperature, encoder and head.  For each slot count and each
read (``k=None``: softmax over every slot; ``k``: the exact top-k read) it reports the cold
compile (the first compiled step, tracing and code generation included), then the median
over ``--repeats`` steps of eager and of compiled, in wall and process CPU time (on a shared
machine the wall times stretch with the load, the CPU times much less).  Compiled, the
top-k selection is a dense ``topk`` over all ``N`` scores (``HyperbolicMemory.select``); eager,
the store's pruned chunked search: the two differ most at large ``N``.  Prints a Markdown
table.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import torch
from torch import nn

from hypermem.geometry import poincare as P
from hypermem.nn import BallEncoder, HyperbolicMemory


class Model(nn.Module):
    def __init__(self, slots: int, dim: int, features: int, k: int | None, device: str):
        super().__init__()
        g = torch.Generator().manual_seed(0)
        keys = P.point_at(torch.randn(slots, dim, generator=g), torch.rand(slots, generator=g) * 2 + 0.5)
        self.k = k
        self.encoder = BallEncoder(features, dim, depth="learned", device=device)
        self.memory = HyperbolicMemory(keys, torch.randn(slots, 16, generator=g), learn_values=True,
                                       depth_bias=0.1, device=device)
        self.head = nn.Linear(16, 10, device=device)

    def forward(self, x):
        return self.head(self.memory(self.encoder(x), k=self.k).read)


def _sync(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def _step(model, x, y, device) -> tuple[float, float]:
    w, c = time.perf_counter(), time.process_time()
    nn.functional.cross_entropy(model(x), y).backward()
    _sync(device)
    return time.perf_counter() - w, time.process_time() - c


def run(slots: int, k: int | None, args) -> dict:
    torch.manual_seed(0)
    x = torch.randn(args.batch, args.features, device=args.device)
    y = torch.randint(0, 10, (args.batch,), device=args.device)
    eager = Model(slots, args.dim, args.features, k, args.device)
    other = Model(slots, args.dim, args.features, k, args.device)
    other.load_state_dict(eager.state_dict())
    compiled = torch.compile(other, fullgraph=True)
    torch._dynamo.reset()
    out = {"slots": slots, "k": k}
    out["cold"] = _step(compiled, x, y, args.device)
    _step(eager, x, y, args.device)  # warm-up
    for name, model in (("eager", eager), ("compiled", compiled)):
        times = [_step(model, x, y, args.device) for _ in range(args.repeats)]
        out[name] = (statistics.median(t[0] for t in times), statistics.median(t[1] for t in times))
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--slots", type=int, nargs="+", default=[1_000, 100_000])
    p.add_argument("--dim", type=int, default=16)
    p.add_argument("--features", type=int, default=32)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--k", type=int, default=16)
    p.add_argument("--repeats", type=int, default=20)
    p.add_argument("--device", default="cpu")
    p.add_argument("--threads", type=int, default=1, help="torch threads (0: leave the default)")
    args = p.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    print(f"torch {torch.__version__}, {args.device}, threads {torch.get_num_threads()}, batch {args.batch}, "
          f"dim {args.dim}, repeats {args.repeats}, load {os.getloadavg()[0]:.1f}")
    print("| slots | read | cold compile s | eager ms (CPU ms) | compiled ms (CPU ms) | eager / compiled |")
    print("|---:|---|---:|---:|---:|---:|")
    for slots in args.slots:
        for k in (None, args.k):
            if k is None and slots > 200_000:
                continue  # a full read is O(batch x N) with gradient: for small memories
            r = run(slots, k, args)
            (ew, ec), (cw, cc) = r["eager"], r["compiled"]
            read = "full" if k is None else f"top-{k}"
            print(f"| {slots:,} | {read} | {r['cold'][0]:.1f} | {1e3 * ew:.2f} ({1e3 * ec:.2f}) | "
                  f"{1e3 * cw:.2f} ({1e3 * cc:.2f}) | {ew / cw:.2f}x |", flush=True)


if __name__ == "__main__":
    main()
