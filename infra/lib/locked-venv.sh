# Shared by infra/install-vlm.sh and infra/install-osworld.sh: a Python venv kept equal to a pip-freeze
# lock file. Source it after setting:
#   NAME      log prefix (e.g. install-vlm)          VENV   where the venv goes
#   LOCK      the lock file                          PY     the Python that builds the venv
#   MIN_PY    minimum Python version, e.g. "3, 11"   WHY    who needs that Python (for the error)
# then call `locked_venv_main "$@"`; the script defines `relock_venv`, which builds $VENV from scratch by
# its own route and writes $LOCK (it may use log, die, PIP, VPY, and must end with `finish`).
#
#   (no argument)  sync the venv to the lock (seconds when it already matches)
#   --check        exit 0 when the venv matches the lock, 1 otherwise (installs nothing)
#   --relock       relock_venv
#
# The venv matches the lock when the last successful sync recorded the lock's current hash (a sync
# deletes the record before it starts, so an interrupted one never counts). Syncing installs the lock
# with --no-deps (every transitive dependency is in it) and removes what the lock does not list, so the
# venv equals the lock rather than a superset of it.

log() { echo "[infra/$NAME] $*"; }
die() { echo "[infra/$NAME] ERROR: $*" >&2; exit 1; }

STAMP="$VENV/.dartflow-lock.sha256"
VPY="$VENV/bin/python"
PIP=("$VPY" -m pip --disable-pip-version-check)
started=$SECONDS

lock_hash() { sha256sum "$LOCK" | cut -d' ' -f1; }

up_to_date() {
  [ -f "$LOCK" ] && [ -x "$VPY" ] && [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$(lock_hash)" ] \
    && "$VPY" -c '' 2>/dev/null
}

# A .pth file puts python/ on the venv's path, so `-m dartflow_…` works from any directory without
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

sync_venv() {
  [ -f "$LOCK" ] || die "$LOCK is missing; run with --relock to create it"
  if up_to_date; then
    write_pth
    log "up to date: $VENV matches $(basename "$LOCK") (sha256 $(lock_hash | cut -c1-12))"
    return 0
  fi
  if [ ! -x "$VPY" ]; then
    log "creating venv $VENV with $("$PY" --version 2>&1)"
    "$PY" -m venv "$VENV"
  fi
  rm -f "$STAMP" # an interrupted sync must not look finished
  log "installing $(grep -cvE '^\s*(#|$)' "$LOCK") pinned packages from $(basename "$LOCK") (--no-deps; minutes the first time)"
  "${PIP[@]}" install --quiet --no-deps -r "$LOCK"
  local extra
  extra="$(comm -23 <("${PIP[@]}" freeze --all --exclude-editable | sed 's/==.*//' | tr 'A-Z_' 'a-z-' | sort -u) \
                    <(grep -vE '^\s*(#|$)' "$LOCK" | sed 's/==.*//' | tr 'A-Z_' 'a-z-' | sort -u))"
  if [ -n "$extra" ]; then
    log "removing packages not in the lock: $(echo "$extra" | tr '\n' ' ')"
    # shellcheck disable=SC2086
    "${PIP[@]}" uninstall --quiet -y $extra
  fi
  finish
}

locked_venv_main() {
  local mode="sync"
  case "${1:-}" in
    --relock) mode="relock" ;;
    --check) mode="check" ;;
    "") ;;
    *) die "unknown argument '$1' (expected --check, --relock or nothing)" ;;
  esac
  command -v "$PY" >/dev/null 2>&1 || die "no $PY on PATH"
  "$PY" -c "import sys; sys.exit(0 if sys.version_info >= ($MIN_PY) else 1)" \
    || die "$PY is $("$PY" --version 2>&1); $WHY"
  case "$mode" in
    check)
      if up_to_date; then log "up to date: $VENV matches $(basename "$LOCK")"; exit 0; fi
      log "$VENV does not match $(basename "$LOCK"): run 'bash infra/$NAME.sh'"
      exit 1
      ;;
    relock) relock_venv ;;
    sync) sync_venv ;;
  esac
}
