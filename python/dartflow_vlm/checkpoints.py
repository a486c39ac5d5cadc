"""VLM checkpoints in MinIO, in the layout rollout/vllm/hf-checkpoint.ts reads: the files of a Hugging
Face folder under `v<N>/hf/<file>` and the manifest `v<N>/hf.json` (every file with bytes and sha256),
written last, so its presence means the version exists.

The trainer adds, without changing what the vLLM role reads:
- `v<N>/hf-claim.json`, written only if absent before any file of v<N>: the one attempt that owns the
  number (the files have fixed names, so two attempts must never upload into one version);
- `v<N>/hf-optimizer.safetensors`, the AdamW moments (outside `hf/`: vLLM never downloads them);
- extra manifest fields `ledgerKey`, `metrics`, `optimizerState` (zod's z.object ignores unknown
  keys, so the TypeScript reader accepts them): which train step made the version, with what.
"""

import json
import re
import shutil
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from . import keys
from .store import CorruptObjectError, ObjectNotFoundError, ObjectRef, ObjectStore
from .validate import problems


def check_hf_manifest(raw: Any, key: str, campaign_id: str, version: int) -> dict[str, Any]:
    """HfCheckpointManifestSchema (rollout/vllm/hf-checkpoint.ts, generated contract
    `hf-checkpoint-manifest`), plus what JSON Schema cannot say (the zod refinements: unique, not
    dots-only file names) and that it describes this version; CorruptObjectError naming the field."""
    found = problems("hf-checkpoint-manifest", raw)
    if found:
        raise CorruptObjectError(key, found[0])
    if raw["campaignId"] != campaign_id or raw["version"] != version:
        raise CorruptObjectError(key, f"version: describes {raw['campaignId']} v{raw['version']}")
    names: set[str] = set()
    for i, f in enumerate(raw["files"]):
        if re.fullmatch(r"\.+", f["name"]) or f["name"] in names:
            raise CorruptObjectError(key, f"files.{i}.name: dots-only or repeated")
        names.add(f["name"])
    return cast(dict[str, Any], raw)


def read_hf_manifest(store: ObjectStore, campaign_id: str, version: int) -> dict[str, Any]:
    key = keys.hf_manifest(campaign_id, version)
    data = store.get_bytes(key)
    try:
        raw = json.loads(data)
    except ValueError as err:
        raise CorruptObjectError(key, f"not valid JSON ({err})") from err
    return check_hf_manifest(raw, key, campaign_id, version)


def download(store: ObjectStore, manifest: dict[str, Any], dest: Path) -> Path:
    """Every file of the manifest into `dest`, each checked (bytes, sha256) on the way; the folder is
    renamed into place only when all matched. An existing `dest` made from the same manifest is reused
    (the manifest is stored in it as the last file written)."""
    marker = dest / ".dartflow-hf.json"
    wanted = json.dumps(manifest["files"], sort_keys=True)
    if marker.exists() and marker.read_text(encoding="utf-8") == wanted:
        return dest
    tmp = dest.with_name(f"{dest.name}.partial-{uuid.uuid4().hex[:8]}")
    tmp.mkdir(parents=True)
    try:
        for f in manifest["files"]:
            key = keys.hf_file(manifest["campaignId"], manifest["version"], f["name"])
            store.get_file(key, tmp / f["name"], f["sha256"], f["bytes"])
        (tmp / marker.name).write_text(wanted, encoding="utf-8")
        shutil.rmtree(dest, ignore_errors=True)
        tmp.rename(dest)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return dest


@dataclass(frozen=True)
class VersionState:
    claimed: bool = False  # hf-claim.json exists
    complete: bool = False  # hf.json exists


def list_versions(store: ObjectStore, campaign_id: str) -> dict[int, VersionState]:
    """Every version number a campaign has used, with what exists of it. Any object under `v<N>/`
    (an embedded manifest too) makes N used: numbers are never reused."""
    out: dict[int, VersionState] = {}
    for key in store.list(keys.checkpoint_prefix(campaign_id)):
        m = keys.VERSION_IN_KEY.search(key)
        if not m:
            continue
        v = int(m.group(1))
        s = out.get(v, VersionState())
        if key.endswith("/hf-claim.json"):
            s = VersionState(claimed=True, complete=s.complete)
        elif key.endswith("/hf.json"):
            s = VersionState(claimed=s.claimed, complete=True)
        out[v] = s
    return out


def claim_version(
    store: ObjectStore, campaign_id: str, version: int, parent: int, ledger_key: str, attempt: str
) -> bool:
    body = {
        "schemaVersion": 1,
        "campaignId": campaign_id,
        "version": version,
        "parentVersion": parent,
        "ledgerKey": ledger_key,
        "attempt": attempt,
        "createdAt": int(time.time() * 1000),
    }
    return store.put_if_absent(keys.hf_claim(campaign_id, version), json.dumps(body).encode())


def upload(
    store: ObjectStore,
    *,
    campaign_id: str,
    version: int,
    parent: int,
    kind: str,
    folder: Path,
    optimizer_file: Path | None,
    ledger_key: str,
    metrics: dict[str, float],
) -> dict[str, Any]:
    """Uploads a claimed version: files, optimizer state, then hf.json (only if absent). Returns the
    manifest that holds the version afterwards (the caller owns the claim, so it is this one)."""
    files = []
    for path in sorted(p for p in folder.iterdir() if not p.name.startswith(".")):
        if path.is_dir():
            raise ValueError(f"{path}: sub-folders are not supported in a checkpoint folder")
        ref = store.put_file(keys.hf_file(campaign_id, version, path.name), path)
        files.append({"name": path.name, "bytes": ref.bytes, "sha256": ref.sha256})
    manifest: dict[str, Any] = {
        "schemaVersion": 1,
        "format": "hf-safetensors-folder",
        "campaignId": campaign_id,
        "version": version,
        "parentVersion": parent,
        "kind": kind,
        "files": files,
        "createdAt": int(time.time() * 1000),
        "ledgerKey": ledger_key,
        "metrics": {k: v for k, v in metrics.items() if _finite(v)},
    }
    if optimizer_file is not None:
        ref = store.put_file(keys.hf_optimizer(campaign_id, version), optimizer_file)
        manifest["optimizerState"] = ref.to_json()
    key = keys.hf_manifest(campaign_id, version)
    check_hf_manifest(manifest, key, campaign_id, version)
    if not store.put_if_absent(key, json.dumps(manifest).encode()):
        # Only the claim holder uploads; a manifest already here is this attempt's own lost answer.
        return read_hf_manifest(store, campaign_id, version)
    return manifest


def remove(store: ObjectStore, manifest: dict[str, Any]) -> None:
    """Removes a version's manifest first (the version stops existing), then its objects. The claim
    stays: a version number is never reused."""
    c, v = manifest["campaignId"], manifest["version"]
    store.remove(keys.hf_manifest(c, v))
    for f in manifest["files"]:
        store.remove(keys.hf_file(c, v, f["name"]))
    if "optimizerState" in manifest:
        store.remove(manifest["optimizerState"]["key"])


def fetch_optimizer(store: ObjectStore, manifest: dict[str, Any], dest: Path) -> Path | None:
    ref = manifest.get("optimizerState")
    if not isinstance(ref, dict):
        return None
    store.get_file(ref["key"], dest, ref["sha256"], ref["bytes"])
    return dest


def _finite(x: float) -> bool:
    return isinstance(x, int | float) and x == x and abs(x) != float("inf")


__all__ = [
    "ObjectNotFoundError",
    "ObjectRef",
    "VersionState",
    "check_hf_manifest",
    "claim_version",
    "download",
    "fetch_optimizer",
    "list_versions",
    "read_hf_manifest",
    "remove",
    "upload",
]
