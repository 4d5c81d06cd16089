#!/usr/bin/env bash
# Run the whole test suite; creates .venv and installs what the tests need when missing.
#   ./scripts/test.sh [pytest args...]
HYPERMEM_EXTRAS="${HYPERMEM_EXTRAS:-dev,fast,embed,ann,viz,pandas,bench,langchain,llama-index,langgraph,postgres,mcp}"
HYPERMEM_SYSTEM="${HYPERMEM_SYSTEM:-wordnet-base chromium}"
source "$(dirname "$0")/_setup_env.sh"
exec "$VPY" -m pytest -q "$@"
