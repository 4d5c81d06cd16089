#!/usr/bin/env python
"""Speed and memory of HyperbolicMemory's top-k read (forward + backward) vs the exact top-k
search alone.

    .venv/bin/python benchmarks/bench_nn.py                      # 1,000,000 slots, dim 64, batch 256, k 32
    .venv/bin/python benchmarks/bench_nn.py --slots 200000 --repeats 1 --metrics shell

Time: the median over ``--repeats`` runs (after one warm-up) of

* ``search``: the exact chunked top-k selection alone (``HyperbolicMemory.select``, no
  gradient; the store's :func:`hypermem.index.exact_topk`);
* ``read fwd+bwd``: ``mem(queries, k).read.sum().backward()`` with trainable keys, values and
  temperature (the selection included).

Both are also reported in CPU seconds of the process (``time.process_time``, all threads):
on a machine shared with other jobs the wall times stretch with the load, the CPU times
much less, and the ratio of either is the figure of merit.

Memory: the peak resident memory *added* by one forward+backward, measured from the
kernel's high-water mark (``VmHWM`` in ``/proc/self/status``, reset through
``/proc/self/clear_refs``; CPU) or ``torch.cuda.max_memory_allocated`` (CUDA), in a fresh
process per setting, at two slot counts: frozen keys (gradients to the queries and the
temperature), trainable keys and values with sparse gradients (``sparse_grad=True``), and
with dense gradients (the keys' gradient is a dense ``(N, d)`` tensor, so it grows with ``N``
by construction).  Prints a Markdown table and writes ``runs/bench_nn.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time
import warnings
from datetime import date
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _status() -> dict[str, int]:
    text = Path("/proc/self/status").read_text()
    return {k: int(re.search(k + r":\s+(\d+)", text).group(1)) * 1024 for k in ("VmRSS", "VmHWM")}


def _reset_peak() -> None:
    Path("/proc/self/clear_refs").write_text("5")


def build(n, d, metric, device, learn, sparse, seed=0):
    import torch

    from hypermem.geometry import PoincareBall
    from hypermem.nn import HyperbolicMemory

    ball = PoincareBall()
    keys = ball.random_points(n, d, 4.0, seed=seed, dtype=torch.float32, device=device)
    g = torch.Generator().manual_seed(seed + 1)
    values = torch.randn(n, d, generator=g).to(device)
    mem = HyperbolicMemory(keys, values, metric=metric, learn_keys=learn, learn_values=learn, sparse_grad=sparse)
    del keys, values
    return mem, ball


def queries(ball, b, d, device):
    import torch

    return ball.random_points(b, d, 2.0, seed=7, dtype=torch.float32, device=device).requires_grad_()


def sync(device):
    import torch

    if str(device).startswith("cuda"):
        torch.cuda.synchronize()


def time_one(args) -> dict:
    import torch

    mem, ball = build(args.slots, args.dim, args.metric, args.device, True, False)
    q = queries(ball, args.batch, args.dim, args.device)
    search, read, search_cpu, read_cpu = [], [], [], []
    for rep in range(args.repeats + 1):
        sync(args.device)
        t, c = time.perf_counter(), time.process_time()
        mem.select(q, args.k)
        sync(args.device)
        t_search, c_search = time.perf_counter() - t, time.process_time() - c
        mem.zero_grad(set_to_none=True)
        q.grad = None
        sync(args.device)
        t, c = time.perf_counter(), time.process_time()
        mem(q, k=args.k).read.sum().backward()
        sync(args.device)
        t_read, c_read = time.perf_counter() - t, time.process_time() - c
        if rep:  # the first round warms up (key geometry cache, allocator)
            search.append(t_search)
            read.append(t_read)
            search_cpu.append(c_search)
            read_cpu.append(c_read)
    s, r = statistics.median(search), statistics.median(read)
    sc, rc = statistics.median(search_cpu), statistics.median(read_cpu)
    return {"search_s": s, "read_fwd_bwd_s": r, "ratio": r / s, "search_cpu_s": sc, "read_fwd_bwd_cpu_s": rc,
            "cpu_ratio": rc / sc, "threads": torch.get_num_threads()}


def memory_one(args) -> dict:
    import torch

    learn = args.grad != "frozen"
    mem, ball = build(args.slots, args.dim, args.metric, args.device, learn, args.grad == "sparse")
    q = queries(ball, args.batch, args.dim, args.device)
    cuda = str(args.device).startswith("cuda")
    mem(q, k=args.k).read.sum().backward()  # warm-up: key geometry cache, lazy inits
    mem.zero_grad(set_to_none=True)
    q.grad = None
    sync(args.device)

    def mark() -> int:  # current usage; resets the peak
        if cuda:
            torch.cuda.reset_peak_memory_stats()
            return torch.cuda.memory_allocated()
        _reset_peak()
        return _status()["VmRSS"]

    def peak_since(base: int) -> int:
        sync(args.device)
        return (torch.cuda.max_memory_allocated() if cuda else _status()["VmHWM"]) - base

    base = mark()
    out = mem(q, k=args.k)
    peak_fwd = peak_since(base)
    base = mark()
    out.read.sum().backward()
    peak_bwd = peak_since(base)
    return {"peak_forward_MiB": peak_fwd / 2**20, "peak_backward_MiB": peak_bwd / 2**20}


def child(args) -> None:
    import torch

    warnings.filterwarnings("ignore")
    if args.threads:
        torch.set_num_threads(args.threads)
    res = time_one(args) if args.what == "time" else memory_one(args)
    print("RESULT " + json.dumps(res), flush=True)


def run_child(args, **over) -> dict:
    cmd = [sys.executable, __file__, "--child"]
    opts = vars(args) | over
    for key in ("what", "slots", "dim", "batch", "k", "metric", "device", "repeats", "grad", "threads"):
        cmd += [f"--{key}", str(opts[key])]
    env = dict(os.environ, MALLOC_MMAP_THRESHOLD_="131072", PYTHONPATH=str(ROOT))
    out = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
    for line in out.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[7:])
    raise RuntimeError(f"benchmark child failed:\n{out.stderr[-3000:]}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--slots", type=int, default=1_000_000)
    p.add_argument("--memory-slots", type=int, nargs=2, default=None,
                   help="the two slot counts of the memory check (default: slots/4 and slots)")
    p.add_argument("--dim", type=int, default=64)
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--k", type=int, default=32)
    p.add_argument("--metrics", nargs="+", default=["shell", "hyperbolic"])
    p.add_argument("--device", default=None, help="cpu, cuda (default: cpu, and cuda too when present)")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    p.add_argument("--parts", nargs="+", choices=["time", "memory"], default=["time", "memory"],
                   help="what to measure (default: both)")
    p.add_argument("--out", default=str(ROOT / "runs" / "bench_nn.json"))
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--what", default="time", help=argparse.SUPPRESS)
    p.add_argument("--metric", default="shell", help=argparse.SUPPRESS)
    p.add_argument("--grad", default="frozen", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        child(args)
        return
    import torch

    devices = [args.device] if args.device else ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
    two = args.memory_slots or [args.slots // 4, args.slots]
    rows, mem_rows = [], []
    print(f"# bench_nn {date.today()}: batch {args.batch}, k {args.k}, dim {args.dim}, float32, "
          f"{args.repeats} repeats (median)", flush=True)
    if "time" in args.parts:
        print("\n| device | metric | slots | threads | search (s) | read fwd+bwd (s) | ratio | search CPU (s) | "
              "read fwd+bwd CPU (s) | CPU ratio |\n|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for dev in devices if "time" in args.parts else ():
        for metric in args.metrics:
            r = run_child(args, what="time", metric=metric, device=dev)
            rows.append({"device": dev, "metric": metric, "slots": args.slots, **r})
            print(f"| {dev} | {metric} | {args.slots:,} | {r['threads']} | {r['search_s']:.3f} | "
                  f"{r['read_fwd_bwd_s']:.3f} | {r['ratio']:.2f} | {r['search_cpu_s']:.3f} | "
                  f"{r['read_fwd_bwd_cpu_s']:.3f} | {r['cpu_ratio']:.2f} |", flush=True)
    if "memory" in args.parts:
        print("\n| device | gradients | slots | peak forward (MiB) | peak backward (MiB) |\n|---|---|---:|---:|---:|")
    for dev in devices if "memory" in args.parts else ():
        for grad in ("frozen", "sparse", "dense"):
            for n in two:
                r = run_child(args, what="memory", metric=args.metrics[0], device=dev, grad=grad, slots=n)
                mem_rows.append({"device": dev, "grad": grad, "slots": n, **r})
                print(f"| {dev} | {grad} | {n:,} | {r['peak_forward_MiB']:.1f} | {r['peak_backward_MiB']:.1f} |",
                      flush=True)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"date": str(date.today()), "settings": {k: v for k, v in vars(args).items()
                                                                        if k not in ("child", "what", "grad", "metric")},
                               "time": rows, "memory": mem_rows}, indent=2))
    print(f"\nwrote {out}")


if __name__ == "__main__":
    main()
