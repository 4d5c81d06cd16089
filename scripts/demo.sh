#!/usr/bin/env bash
# The main job on an embedded default; creates .venv and installs what it needs when missing.
#   ./scripts/demo.sh [hypermem demo args...]
HYPERMEM_EXTRAS="${HYPERMEM_EXTRAS:-fast,viz}"   # numba epochs, the TensorBoard disk picture; no dev tools
HYPERMEM_SYSTEM="${HYPERMEM_SYSTEM:-}"
source "$(dirname "$0")/_setup_env.sh"
exec "$VPY" -m hypermem.cli demo "$@"
