#!/usr/bin/env bash
# All 82,115 WordNet nouns in an hour: Poincaré dim 10 from the shadow layout, Hogwild Riemannian
# SGD on 2 workers, then exact rank polishing (the run of benchmarks/RESULTS.md, "The hour that
# meets the target").  Needs Debian's wordnet-base (/usr/share/wordnet).  About 60 minutes:
#   nohup experiments/nouns_hour/run.sh > nouns.log 2>&1 &
# Extra flags are passed on (e.g. --nouns-polish-passes 2).
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
PY="${PYTHON:-$ROOT/.venv/bin/python}"
exec "$PY" "$ROOT/benchmarks/bench_hierarchy.py" --only nouns --nouns --nouns-init shadow \
    --nouns-layout-shrink 1.5 --nouns-layout-max-shrink 0.6 \
    --nouns-warmup 8 --nouns-lr 0.5 --nouns-batch 16 --nouns-negatives 10 --nouns-workers 2 \
    --nouns-decay exponential --nouns-decay-after 1000 --nouns-final-lr-factor 0.01 \
    --nouns-eval-every 40 --nouns-eval-queries 4000 --nouns-epochs 3000 --nouns-max-seconds 3600 \
    --nouns-polish-seconds 2000 --nouns-polish-min-rank 5 --nouns-full-eval "$@"
