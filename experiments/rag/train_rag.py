#!/usr/bin/env python
"""Train and evaluate the end-to-end RAG model through the hyperbolic memory, side by side
with the baselines (see experiments/rag/comparison.py).

    .venv/bin/python experiments/rag/train_rag.py --config experiments/rag/rag_wordnet.yaml
    .venv/bin/python experiments/rag/train_rag.py --set data.root=mammal.n.01 --set data.n_test=200 --set out=runs/rag_mammals

Every choice (the step kept by early stopping) is made on the validation leaves; the test leaves
are scored once at the end. Prints the table (test metrics, validation MRR beside), writes
<out>/results.json, <out>/results.md and TensorBoard logs under <out>/tb (tensorboard --logdir
<out>/tb; val/* are validation curves). For several seeds with intervals:
benchmarks/bench_rag.py --compare.
"""

from __future__ import annotations

import argparse
import os
import sys
import warnings
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
if sys.path and Path(sys.path[0] or ".").resolve() == HERE:
    sys.path.pop(0)  # this folder: its data.py must not shadow a top-level module of that name
sys.path.insert(0, str(ROOT))  # the checkout: experiments/ is not installed
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")

from experiments.rag.comparison import results_table, run_comparison  # noqa: E402


def parse_value(text: str):
    """``--set`` values are YAML scalars: numbers, true/false, null, strings."""
    return yaml.safe_load(text)


def apply_set(cfg: dict, assignment: str) -> None:
    key, sep, value = assignment.partition("=")
    if not sep:
        raise SystemExit(f"--set needs key=value, got {assignment!r}")
    node = cfg
    parts = key.split(".")
    for p in parts[:-1]:
        node = node.setdefault(p, {})
    node[parts[-1]] = parse_value(value)


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--config", default=str(HERE / "rag_wordnet.yaml"))
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="override a config key")
    args = p.parse_args(argv)
    cfg = yaml.safe_load(Path(args.config).read_text()) or {}
    for a in args.set:
        apply_set(cfg, a)
    warnings.filterwarnings("ignore", message=".*torch.jit.script.*")
    warnings.filterwarnings("ignore", message=".*LeafSpec.*")
    summary = run_comparison(cfg)
    print()
    print(results_table(summary))


if __name__ == "__main__":
    main()
