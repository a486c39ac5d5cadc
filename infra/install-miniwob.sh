#!/usr/bin/env bash
# Idempotent install of the MiniWoB++ task pages: the PyPI wheel `miniwob`, pinned, unpacked with
# --no-deps into .tools/miniwob (git-ignored). dartflow needs only the wheel's static files
# (miniwob/html/miniwob/<task>.html and the shared runtime miniwob/html/core/); the Python side
# (gymnasium, selenium, …) is never imported, hence --no-deps. Nothing is vendored into the repository.
#
#   bash infra/install-miniwob.sh           install if missing (a no-op taking milliseconds when present)
#   bash infra/install-miniwob.sh --check   exit 0 when the pinned version is installed, 1 otherwise
#
#   DARTFLOW_MINIWOB_DIR   where the package goes (default: .tools/miniwob, where dartflow looks for it)
#
# Prints the html dir (…/miniwob/html) on its last line of stdout; the env reads the same dir
# (envs/browser/miniwob/package.ts), or DARTFLOW_MINIWOB_HTML when set.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
TARGET="${DARTFLOW_MINIWOB_DIR:-$ROOT/.tools/miniwob}"
MINIWOB_VERSION=1.1.0
HTML="$TARGET/miniwob/html"
STAMP="$TARGET/.dartflow-miniwob-version"

log() { echo "[infra/install-miniwob] $*" >&2; }
die() { echo "[infra/install-miniwob] ERROR: $*" >&2; exit 1; }

# Installed = the stamp names the pinned version and the runtime plus a task page are there. The stamp is
# written last, so an interrupted install never counts.
installed() {
  [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$MINIWOB_VERSION" ] \
    && [ -f "$HTML/core/core.js" ] && [ -f "$HTML/miniwob/click-button.html" ]
}

case "${1:-}" in
  --check)
    if installed; then log "miniwob==$MINIWOB_VERSION present in $TARGET"; echo "$HTML"; exit 0; fi
    log "miniwob==$MINIWOB_VERSION missing in $TARGET: run 'bash infra/install-miniwob.sh'"
    exit 1
    ;;
  "") ;;
  *) die "unknown argument '$1' (expected --check or nothing)" ;;
esac

if installed; then
  log "up to date: miniwob==$MINIWOB_VERSION in $TARGET"
  echo "$HTML"
  exit 0
fi

PY="$(command -v python3 || command -v python || true)"
[ -n "$PY" ] || die "no python3 on PATH (needed for pip)"
started=$SECONDS
log "installing miniwob==$MINIWOB_VERSION (--no-deps) into $TARGET"
rm -rf "$TARGET"
"$PY" -m pip install --quiet --disable-pip-version-check --root-user-action=ignore --no-deps --no-compile \
  --target "$TARGET" "miniwob==$MINIWOB_VERSION" \
  || die "pip install miniwob==$MINIWOB_VERSION failed (needs access to PyPI or a configured index)"
[ -f "$HTML/core/core.js" ] || die "the wheel has no miniwob/html/core/core.js (layout changed?)"
pages="$(find "$HTML/miniwob" -maxdepth 1 -name '*.html' | wc -l)"
echo "$MINIWOB_VERSION" >"$STAMP"
log "installed in $((SECONDS - started))s: $pages task pages under $HTML/miniwob"
echo "$HTML"
