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
# torch is pinned in the same pip call as the package (an unpinned or separately resolved torch
# pulls a multi-GB CUDA build), with numpy in that call too: torch does not depend on numpy, and a
# torch installed before numpy prints "Failed to initialize NumPy" at every import.
TORCH_PIN="torch==2.13.0"
EXTRAS="${HYPERMEM_EXTRAS:-dev}"
# The stamp holds the pyproject's hash and the extras installed with it; an install is
# needed when the pyproject changed or an extra is missing (demo.sh after test.sh reuses
# test.sh's larger set instead of reinstalling).
STAMP="$VENV/.hypermem-installed"
HASH="$(sha256sum pyproject.toml | cut -c1-16)"
HAVE=""
if [ -f "$STAMP" ] && [ "$(cut -d' ' -f1 "$STAMP")" = "$HASH" ]; then
  HAVE="$(cut -s -d' ' -f2 "$STAMP")"
fi
NEED=0
for extra in ${EXTRAS//,/ }; do
  case ",$HAVE," in *",$extra,"*) ;; *) NEED=1 ;; esac
done
if [ ! -f "$STAMP" ] || [ "$NEED" = 1 ]; then
  ALL="$(echo "$HAVE,$EXTRAS" | tr ',' '\n' | sed '/^$/d' | sort -u | paste -sd, -)"
  echo "[setup] installing hypermem-torch[$ALL]"
  if "$VPY" -c "import torch" >/dev/null 2>&1; then  # keep the torch already there
    TORCH_PIN="torch==$("$VPY" -c 'import torch; print(torch.__version__.split("+")[0])')"
  fi
  "$VPY" -m pip install -q "$TORCH_PIN" numpy -e ".[$ALL]" 2>&1 | grep -v "is ignored" || true
  "$VPY" -c "import hypermem" || { echo "[setup] hypermem did not install"; exit 1; }
  "$VPY" -W error -c "import numpy, torch; torch.from_numpy(numpy.zeros(1))" \
    || { echo "[setup] torch cannot see numpy; reinstall with: $VPY -m pip install numpy"; exit 1; }
  echo "$HASH $ALL" > "$STAMP"
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
