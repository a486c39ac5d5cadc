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
STAMP="$VENV/.dartflow-lock.sha256"
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

log() { echo "[infra/install-osworld] $*"; }
die() { echo "[infra/install-osworld] ERROR: $*" >&2; exit 1; }

RELOCK=0
CHECK=0
case "${1:-}" in
  --relock) RELOCK=1 ;;
  --check) CHECK=1 ;;
  "") ;;
  *) die "unknown argument '$1' (expected --check, --relock or nothing)" ;;
esac

PY="${DARTFLOW_OSWORLD_PYTHON:-python3}"
command -v "$PY" >/dev/null 2>&1 || die "no $PY on PATH (set DARTFLOW_OSWORLD_PYTHON)"
"$PY" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 10) else 1)' \
  || die "$PY is $("$PY" --version 2>&1); desktop-env $DESKTOP_ENV_VERSION needs Python >= 3.10"

VPY="$VENV/bin/python"
PIP=("$VPY" -m pip --disable-pip-version-check)
started=$SECONDS

lock_hash() { sha256sum "$LOCK" | cut -d' ' -f1; }

# The venv matches the lock when the last successful sync recorded the lock's current hash (a sync
# deletes the record before it starts, so an interrupted one never counts).
up_to_date() {
  [ -f "$LOCK" ] && [ -x "$VPY" ] && [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$(lock_hash)" ] \
    && "$VPY" -c '' 2>/dev/null
}

# A .pth file puts python/ on the venv's path, so `-m dartflow_osworld` works from any directory without
# installing dartflow's own code as a package (which would put it into the freeze).
write_pth() {
  local site
  site="$("$VPY" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
  echo "$ROOT/python" >"$site/dartflow-python.pth"
}

finish() {
  write_pth
  lock_hash >"$STAMP"
  log "venv ready in $((SECONDS - started))s: $VENV ($(du -sh "$VENV" | cut -f1))"
}

if [ "$CHECK" = 1 ]; then
  if up_to_date; then log "up to date: $VENV matches $(basename "$LOCK")"; exit 0; fi
  log "$VENV does not match $(basename "$LOCK"): run 'bash infra/install-osworld.sh'"
  exit 1
fi

if [ "$RELOCK" = 0 ]; then
  [ -f "$LOCK" ] || die "$LOCK is missing; run with --relock to create it"
  if up_to_date; then
    write_pth
    log "up to date: $VENV matches $(basename "$LOCK") (sha256 $(lock_hash | cut -c1-12))"
    exit 0
  fi
  if [ ! -x "$VPY" ]; then
    log "creating venv $VENV with $("$PY" --version 2>&1)"
    "$PY" -m venv "$VENV"
  fi
  rm -f "$STAMP" # an interrupted sync must not look finished
  log "installing $(grep -cvE '^\s*(#|$)' "$LOCK") pinned packages from $(basename "$LOCK") (--no-deps; about a minute the first time)"
  "${PIP[@]}" install --quiet --no-deps -r "$LOCK"
  # Remove what the lock no longer lists, so the venv equals the lock rather than a superset of it.
  extra="$(comm -23 <("${PIP[@]}" freeze --all --exclude-editable | sed 's/==.*//' | tr 'A-Z_' 'a-z-' | sort -u) \
                    <(grep -vE '^\s*(#|$)' "$LOCK" | sed 's/==.*//' | tr 'A-Z_' 'a-z-' | sort -u))"
  if [ -n "$extra" ]; then
    log "removing packages not in the lock: $(echo "$extra" | tr '\n' ' ')"
    # shellcheck disable=SC2086
    "${PIP[@]}" uninstall --quiet -y $extra
  fi
  finish
  exit 0
fi

# --- --relock: from a fresh venv ---------------------------------------------------------------------
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
