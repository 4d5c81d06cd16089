# Sourced by scripts/demo.sh and scripts/test.sh: make .venv ready, fast when it already is.
#   HYPERMEM_EXTRAS   extras to install (default set by the caller: demo.sh fast,viz; test.sh all)
#   HYPERMEM_SYSTEM   space-separated Debian packages to install when missing (best effort)
#   HYPERMEM_SETUP_DRY_RUN=1  print the steps it would take and stop (tests/test_setup_scripts.py)
# Each step prints one line with its rough duration before it starts; a set-up that did
# anything ends with one line of the time it took. On a terminal pip shows its own progress.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
PY="${PYTHON:-python3}"
VENV="$ROOT/.venv"
VPY="$VENV/bin/python"
DRY="${HYPERMEM_SETUP_DRY_RUN:-0}"
SETUP_T0=$(date +%s)
DID=0
step() { echo "[setup] $*"; DID=1; }
# pip: quiet off a terminal; on one, its progress bars (stdout stays the terminal). The
# "Location ... is ignored" lines of this machine's pip configuration are dropped, and so is
# setuptools' "Editable installation" notice about folders named like the package (a
# warnings filter on that message only: pip forwards it as a BuildBackendWarning).
pip_install() {
  local quiet=(-q)
  [ -t 1 ] && quiet=()
  PYTHONWARNINGS="ignore:Editable installation" "$VPY" -m pip install "${quiet[@]}" "$@" \
    2> >(grep -v "is ignored" >&2)
}
if [ ! -x "$VPY" ]; then
  step "creating .venv with $("$PY" --version 2>&1) (about 10 s)"
  if [ "$DRY" != 1 ]; then
    "$PY" -m venv "$VENV"
    pip_install --upgrade pip
  fi
fi
# torch is pinned in the same pip call as the package (an unpinned or separately resolved torch
# pulls a multi-GB CUDA build), with numpy in that call too: torch does not depend on numpy, and a
# torch installed before numpy prints "Failed to initialize NumPy" at every import.
TORCH_PIN="torch==2.13.0"
EXTRAS="${HYPERMEM_EXTRAS:-dev}"
# The stamp holds the pyproject's hash and the extras installed with it; an install is
# needed when the pyproject changed or an extra is missing (demo.sh after test.sh reuses
# test.sh's larger set instead of reinstalling; test.sh after demo.sh installs the union).
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
  if [ -x "$VPY" ] && "$VPY" -c "import torch" >/dev/null 2>&1; then  # keep the torch already there
    TORCH_PIN="torch==$("$VPY" -c 'import torch; print(torch.__version__.split("+")[0])')"
    step "installing hypermem-torch[$ALL] beside $TORCH_PIN (about 1-3 min)"
  else
    step "installing $TORCH_PIN and hypermem-torch[$ALL] (first time: about 1-8 min, ~1 GB, as fast as the wheels come; later: seconds)"
  fi
  if [ "$DRY" != 1 ]; then
    pip_install "$TORCH_PIN" numpy -e ".[$ALL]"
    step "checking the install (about 5 s)"
    "$VPY" -c "import hypermem" || { echo "[setup] hypermem did not install"; exit 1; }
    "$VPY" -W error -c "import numpy, torch; torch.from_numpy(numpy.zeros(1))" \
      || { echo "[setup] torch cannot see numpy; reinstall with: $VPY -m pip install numpy"; exit 1; }
    echo "$HASH $ALL" > "$STAMP"
  fi
fi
# Optional system packages (WordNet database, Chromium for page tests): best effort.
for pkg in ${HYPERMEM_SYSTEM:-}; do
  case "$pkg" in
    wordnet-base) have=$([ -f /usr/share/wordnet/data.noun ] && echo 1 || echo 0) ;;
    chromium) have=$(command -v chromium >/dev/null 2>&1 && echo 1 || echo 0) ;;
    *) have=$(dpkg -s "$pkg" >/dev/null 2>&1 && echo 1 || echo 0) ;;
  esac
  if [ "$have" = 0 ] && command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
    step "installing $pkg with apt (about 10-60 s)"
    [ "$DRY" = 1 ] && continue
    if [ ! -f "$VENV/.apt-updated" ]; then
      (apt-get update -qq >/dev/null 2>&1 && touch "$VENV/.apt-updated") || true
    fi
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$pkg" >/dev/null 2>&1 \
      || echo "[setup] could not install $pkg; tests that need it will skip"
  fi
done
if [ "$DRY" = 1 ]; then
  [ "$DID" = 0 ] && echo "[setup] nothing to do"
  exit 0
fi
if [ "$DID" = 1 ]; then
  SETUP_S=$(( $(date +%s) - SETUP_T0 ))
  echo "[setup] ready in $((SETUP_S / 60)) min $((SETUP_S % 60)) s"
fi
export PATH="$VENV/bin:$PATH"
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_HUB_DISABLE_PROGRESS_BARS=1
