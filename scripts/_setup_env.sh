# Sourced by scripts/demo.sh and scripts/test.sh: make .venv ready, fast when it already is.
#   HYPERMEM_EXTRAS   extras to install (default set by the caller)
#   HYPERMEM_SYSTEM   space-separated Debian packages to install when missing (best effort)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
PY="${PYTHON:-python3}"
VENV="$ROOT/.venv"
if [ ! -x "$VENV/bin/python" ]; then
  echo "[setup] creating .venv"
  "$PY" -m venv "$VENV"
  "$VENV/bin/python" -m pip install -q --upgrade pip
fi
VPY="$VENV/bin/python"
# torch first, pinned to the local CPU wheel (an unpinned torch pulls a multi-GB CUDA build).
if ! "$VPY" -c "import torch" >/dev/null 2>&1; then
  echo "[setup] installing torch==2.13.0"
  "$VPY" -m pip install -q torch==2.13.0
fi
EXTRAS="${HYPERMEM_EXTRAS:-dev}"
STAMP="$VENV/.hypermem-installed"
WANT="$(cat pyproject.toml | sha256sum | cut -c1-16)-$EXTRAS"
if [ ! -f "$STAMP" ] || [ "$(cat "$STAMP")" != "$WANT" ]; then
  echo "[setup] installing hypermem-torch[$EXTRAS]"
  TORCH_VERSION="$("$VPY" -c 'import torch; print(torch.__version__.split("+")[0])')"
  "$VPY" -m pip install -q "torch==$TORCH_VERSION" -e ".[$EXTRAS]" 2>&1 | grep -v "is ignored" || true
  "$VPY" -c "import hypermem" || { echo "[setup] hypermem did not install"; exit 1; }
  echo "$WANT" > "$STAMP"
fi
# Optional system packages (WordNet database, Chromium for page tests): best effort.
for pkg in ${HYPERMEM_SYSTEM:-}; do
  case "$pkg" in
    wordnet-base) have=$([ -f /usr/share/wordnet/data.noun ] && echo 1 || echo 0) ;;
    chromium) have=$(command -v chromium >/dev/null 2>&1 && echo 1 || echo 0) ;;
    *) have=$(dpkg -s "$pkg" >/dev/null 2>&1 && echo 1 || echo 0) ;;
  esac
  if [ "$have" = 0 ] && command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
    echo "[setup] installing $pkg (apt)"
    if [ ! -f "$VENV/.apt-updated" ]; then
      (apt-get update -qq >/dev/null 2>&1 && touch "$VENV/.apt-updated") || true
    fi
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$pkg" >/dev/null 2>&1 \
      || echo "[setup] could not install $pkg; tests that need it will skip"
  fi
done
export PATH="$VENV/bin:$PATH"
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_HUB_DISABLE_PROGRESS_BARS=1
