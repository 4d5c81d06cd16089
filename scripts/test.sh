#!/usr/bin/env bash
# Run the whole test suite; creates .venv and installs what the tests need when missing.
#   ./scripts/test.sh [pytest args...]
HYPERMEM_EXTRAS="${HYPERMEM_EXTRAS:-dev,fast,embed,ann,viz,pandas,bench,langchain,llama-index,langgraph,postgres,mcp}"
HYPERMEM_SYSTEM="${HYPERMEM_SYSTEM:-wordnet-base chromium}"
# HYPERMEM_TEST_WORKERS: pytest-xdist workers (default 2, a file's tests on one worker; 0: one
# process). The suite keeps about one core busy in one process: two halve its time on 2 cores.
# Each worker's torch and BLAS on one thread (the tests that want more set their own).
source "$(dirname "$0")/_setup_env.sh"
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}"
exec "$VPY" -m pytest -q -n "${HYPERMEM_TEST_WORKERS:-2}" --dist loadfile "$@"
