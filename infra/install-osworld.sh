#!/usr/bin/env bash
# Idempotent install of the OSWorld sidecar's Python environment into .tools/osworld-venv: OSWorld's
# `desktop-env` package (its task setup controller, getters and metric functions) plus only the
# dependencies those modules import, at the exact versions in python/requirements-osworld.lock.
#
#   bash infra/install-osworld.sh            sync the venv to the lock (seconds when it already matches)
#   bash infra/install-osworld.sh --check    exit 0 when the venv matches the lock, 1 otherwise (installs nothing)
#   bash infra/install-osworld.sh --relock   rebuild the venv from the direct requirements below, rewrite the lock
#
#   DARTFLOW_OSWORLD_PYTHON   Python >= 3.10 to build the venv with (default: python3)
#   DARTFLOW_OSWORLD_VENV     where the venv goes (default: .tools/osworld-venv, where dartflow looks for it)
#
# Why --no-deps: desktop-env 1.0.2 declares ~70 requirements (torch 2.5, transformers 4.35, easyocr,
# librosa, cloud SDKs, …) for its agents, providers and every metric. The sidecar needs its setup
# controller and the getters/metrics it can import, so --relock installs desktop-env with --no-deps and
# then only DIRECT_REQUIREMENTS; the lock is a pip freeze of that venv and syncing installs it with
# --no-deps (every transitive dependency is in it). Metric modules left out on purpose (they need
# torch/easyocr, scikit-image/opencv or librosa/acoustid): docs, gimp, vlc — see docs/osworld.md.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${DARTFLOW_OSWORLD_VENV:-$ROOT/.tools/osworld-venv}"
LOCK="$ROOT/python/requirements-osworld.lock"
DESKTOP_ENV_VERSION=1.0.2
# What desktop_env.controllers.setup, .controllers.python, evaluators/getters/* and the supported
# evaluators/metrics/* modules import (found by importing each module in a bare venv), with desktop-env's
# own version bounds where it states them, plus the sidecar's dev tools.
DIRECT_REQUIREMENTS=(
  "numpy>=1.26,<2" "pandas>=2.2,<2.3" "Pillow~=11.0.0" "pytz~=2024.1"
  requests requests-toolbelt python-dotenv playwright pydrive
  lxml cssselect xmltodict openpyxl formulas tldextract rapidfuzz PyYAML
  pdfplumber PyPDF2 pypdf pymupdf borb python-docx python-pptx beautifulsoup4 mutagen ImageHash
  pytest ruff mypy
)

NAME=install-osworld
PY="${DARTFLOW_OSWORLD_PYTHON:-python3}"
MIN_PY="3, 10"
WHY="desktop-env $DESKTOP_ENV_VERSION needs Python >= 3.10 (set DARTFLOW_OSWORLD_PYTHON)"
# shellcheck source=lib/locked-venv.sh
source "$ROOT/infra/lib/locked-venv.sh"

# --relock: from a fresh venv.
relock_venv() {
  log "relock: creating a fresh venv $VENV with $("$PY" --version 2>&1)"
  rm -rf "$VENV"
  "$PY" -m venv "$VENV"
  log "installing ${#DIRECT_REQUIREMENTS[@]} direct requirements"
  "${PIP[@]}" install --quiet "${DIRECT_REQUIREMENTS[@]}"
  log "installing desktop-env==$DESKTOP_ENV_VERSION with --no-deps"
  "${PIP[@]}" install --quiet --no-deps "desktop-env==$DESKTOP_ENV_VERSION"
  {
    echo "# dartflow OSWorld sidecar environment (.tools/osworld-venv), written by 'bash infra/install-osworld.sh --relock'."
    echo "# A pip freeze of a venv with desktop-env==$DESKTOP_ENV_VERSION installed --no-deps plus only what its setup"
    echo "# controller, getters and supported metric modules import (DIRECT_REQUIREMENTS in the script)."
    echo "# Syncs install it with 'pip install --no-deps -r'. Python: $("$VPY" --version 2>&1)"
    "${PIP[@]}" freeze --all --exclude-editable
  } >"$LOCK.tmp"
  mv "$LOCK.tmp" "$LOCK"
  log "wrote $LOCK ($(grep -cvE '^\s*(#|$)' "$LOCK") packages)"
  finish
}

locked_venv_main "$@"
