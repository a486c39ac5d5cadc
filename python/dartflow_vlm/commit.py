"""Commits a VLM train step exactly once, also while two attempts of it are alive (a worker presumed dead
after a heartbeat timeout keeps running while Temporal's retry trains elsewhere): the rules of
activities/trainer/commit.ts, with one difference forced by the hf.json layout.

commit.ts puts an attempt's weights under attempt-unique keys and claims the version with the manifest's
conditional PUT. An hf.json checkpoint's files have fixed keys (`v<N>/hf/<name>`, what vLLM downloads),
so here the claim is a separate object written first:

1. The version. Every version is listed; an `hf.json` that already carries this step's ledgerKey is the
   step's checkpoint (an earlier or concurrent attempt's) and is adopted. Otherwise the attempt claims
   max + 1 with a conditional PUT of `v<N>/hf-claim.json`, and only then uploads the files and writes
   hf.json. A refused claim lists again and decides again. A claim of this same step without hf.json
   (another attempt is uploading, or died) is not waited for or taken over: this attempt claims the next
   number, so no two attempts ever write into one version's files.
2. The commit record: the ledger entry, written with a conditional PUT. The attempt whose PUT is refused
   returns the entry that won; if it had uploaded a checkpoint the entry does not point at, it removes it
   (hf.json first), so nothing may mistake a losing attempt's weights for the step's output. Its claim
   stays as a tombstone: version numbers are never reused.

The per-sample record (one TrainSampleRecord row per trained step sample) is written by every attempt
before it claims a version, at `train-samples/step-<n>-<attempt>.jsonl` with the attempt tag its
`hf-claim.json` carries (commit.ts tags it like the attempt's weights). The ledger entry names (key +
sha256) the record of the attempt whose checkpoint it commits, whichever attempt writes the entry (an
adopted checkpoint's is found through its claim's tag); an attempt whose record the committed entry does
not name removes it. So the record a ledger entry names describes the training behind its checkpoint.
"""

import hashlib
import json
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import checkpoints, keys
from .samples import SkippedGroup
from .store import CorruptObjectError, ObjectNotFoundError, ObjectStore
from .validate import problems

# Rounds of "list, then claim max + 1" before giving up (each lost round means another version landed).
MAX_VERSION_CLAIMS = 8


class VersionClaimError(Exception):
    """Retryable: other writers kept adding versions faster than this step could claim one."""


@dataclass
class StepOutcome:
    campaign_id: str
    train_step: int
    from_version: int
    kind: str
    folder: Path
    optimizer_file: Path | None
    metrics: dict[str, float]
    groups: Sequence[dict[str, Any]]
    min_versions: dict[str, int]
    staleness: Callable[[int], int]
    is_weight: dict[str, float]
    skipped: list[SkippedGroup] = field(default_factory=list)
    started_at: int | None = None
    # One TrainSampleRecord row per trained step sample (written before the version claim); None for
    # behaviour cloning.
    samples: list[dict[str, Any]] | None = None


def result_of(entry: dict[str, Any], ledger_key: str, reused: bool) -> dict[str, Any]:
    return {
        "version": entry["toVersion"],
        "manifestKey": keys.hf_manifest(entry["campaignId"], entry["toVersion"]),
        "ledgerKey": ledger_key,
        "metrics": entry["metrics"],
        "reused": reused,
    }


def read_ledger(store: ObjectStore, campaign_id: str, train_step: int) -> dict[str, Any] | None:
    key = keys.ledger_entry(campaign_id, train_step)
    if not store.exists(key):
        return None
    try:
        entry = json.loads(store.get_bytes(key))
    except ValueError as err:
        raise CorruptObjectError(key, f"not valid JSON ({err})") from err
    found = problems("ledger-entry", entry)
    if found:
        raise CorruptObjectError(key, f"does not match its schema: {found[0]}")
    result: dict[str, Any] = entry
    return result


def read_committed(store: ObjectStore, campaign_id: str, train_step: int) -> dict[str, Any] | None:
    """The step's result if an earlier attempt committed it."""
    entry = read_ledger(store, campaign_id, train_step)
    return result_of(entry, keys.ledger_entry(campaign_id, train_step), True) if entry else None


def complete_manifests(store: ObjectStore, campaign_id: str) -> dict[int, dict[str, Any]]:
    """Every hf.json of the campaign, read and checked (a damaged one refuses the step before training)."""
    states = checkpoints.list_versions(store, campaign_id)
    return {
        v: checkpoints.read_hf_manifest(store, campaign_id, v)
        for v, s in sorted(states.items())
        if s.complete
    }


def _settle_version(
    store: ObjectStore, o: StepOutcome, ledger_key: str, attempt: str
) -> tuple[dict[str, Any], bool]:
    for _ in range(MAX_VERSION_CLAIMS):
        states = checkpoints.list_versions(store, o.campaign_id)
        for v, s in sorted(states.items()):
            if s.complete:
                m = checkpoints.read_hf_manifest(store, o.campaign_id, v)
                if m.get("ledgerKey") == ledger_key:
                    return m, False
        version = max([0, o.from_version, *states]) + 1
        if not checkpoints.claim_version(store, o.campaign_id, version, o.from_version, ledger_key, attempt):
            continue
        manifest = checkpoints.upload(
            store,
            campaign_id=o.campaign_id,
            version=version,
            parent=o.from_version,
            kind=o.kind,
            folder=o.folder,
            optimizer_file=o.optimizer_file,
            ledger_key=ledger_key,
            metrics=o.metrics,
        )
        return manifest, True
    raise VersionClaimError(
        f"train step {o.train_step} of campaign {o.campaign_id}: lost the claim for a new checkpoint version "
        f"{MAX_VERSION_CLAIMS} times in a row; is another process writing checkpoints of this campaign?"
    )


def serialize_samples(rows: Sequence[dict[str, Any]]) -> bytes:
    """The record's bytes as storage/object-store.ts serializeJsonLines writes them (compact JSON, one row a
    line, no trailing newline), each row checked against the generated `train-sample-record` schema."""
    for i, row in enumerate(rows):
        found = problems("train-sample-record", row)
        if found:
            raise ValueError(f"internal: per-sample record row {i} does not match its schema: {found[0]}")
    return "\n".join(json.dumps(r, separators=(",", ":"), allow_nan=False) for r in rows).encode()


def _put_samples(store: ObjectStore, o: StepOutcome, attempt: str) -> dict[str, Any] | None:
    if o.samples is None:
        return None
    ref = store.put_bytes(
        keys.train_samples(o.campaign_id, o.train_step, attempt),
        serialize_samples(o.samples),
        "application/x-ndjson",
    )
    return {**ref.to_json(), "rows": len(o.samples)}


def _claim_attempt(store: ObjectStore, campaign_id: str, version: int) -> str | None:
    """The attempt tag of the claim of `version` (the attempt that uploaded its files), if readable."""
    try:
        claim = json.loads(store.get_bytes(keys.hf_claim(campaign_id, version)))
    except (ObjectNotFoundError, CorruptObjectError, ValueError):
        return None
    attempt = claim.get("attempt") if isinstance(claim, dict) else None
    return attempt if isinstance(attempt, str) and attempt else None


def _samples_of_checkpoint(
    store: ObjectStore,
    o: StepOutcome,
    checkpoint: dict[str, Any],
    attempt: str,
    own: dict[str, Any] | None,
) -> dict[str, Any] | None:
    """The per-sample record of the attempt that trained `checkpoint`: this attempt's own, or (adopting
    another attempt's checkpoint) the one that attempt wrote before its claim. None when there is none
    (no readable claim, or a writer that wrote no record, or the record is gone or damaged)."""
    tag = _claim_attempt(store, o.campaign_id, checkpoint["version"])
    if tag is None:
        return None
    if tag == attempt:
        return own
    try:
        key = keys.train_samples(o.campaign_id, o.train_step, tag)
        data = store.get_bytes(key)
    except (ObjectNotFoundError, CorruptObjectError, ValueError):
        return None
    text = data.decode("utf-8", errors="replace")
    return {
        "bucket": store.bucket,
        "key": key,
        "sha256": hashlib.sha256(data).hexdigest(),
        "bytes": len(data),
        "rows": 0 if not text else len(text.split("\n")),
    }


def _ledger_entry(
    o: StepOutcome, checkpoint: dict[str, Any], samples: dict[str, Any] | None = None
) -> dict[str, Any]:
    skipped_ids = {k.group_id for k in o.skipped}
    entry: dict[str, Any] = {
        "schemaVersion": 1,
        "campaignId": o.campaign_id,
        "trainStep": o.train_step,
        "fromVersion": o.from_version,
        "toVersion": checkpoint["version"],
        "consumed": [
            {
                "trajectoryId": t["trajectoryId"],
                "manifestKey": t["manifestKey"],
                "groupId": g["groupId"],
                "reward": t["reward"],
                "staleness": o.staleness(o.min_versions.get(t["trajectoryId"], o.from_version)),
                "injectedFromPool": t["injectedFromPool"],
            }
            for g in o.groups
            if g["groupId"] not in skipped_ids
            for t in g["trajectories"]
        ],
        "isWeight": o.is_weight,
        # The checkpoint's metrics, not this attempt's: an attempt that adopts another's checkpoint
        # reports what that checkpoint was trained with.
        "metrics": checkpoint.get("metrics", {}),
        "createdAt": int(time.time() * 1000),
    }
    if o.skipped:
        entry["skipped"] = [k.to_json() for k in o.skipped]
    if samples is not None:
        entry["samples"] = samples
    if o.started_at is not None:
        entry["startedAt"] = o.started_at
    return entry


def commit_train_step(store: ObjectStore, o: StepOutcome) -> dict[str, Any]:
    """Writes the step's checkpoint and ledger entry once; every attempt returns the one committed result."""
    committed = read_committed(store, o.campaign_id, o.train_step)
    if committed:
        return committed
    ledger_key = keys.ledger_entry(o.campaign_id, o.train_step)
    attempt = uuid.uuid4().hex[:12]
    # Before the claim: once a claim names this attempt, its record exists for whoever commits.
    own = _put_samples(store, o, attempt)

    def drop_own_unless(named: dict[str, Any] | None) -> None:
        # An attempt's record the committed entry does not name describes training nobody kept.
        if own is not None and (named is None or named.get("key") != own["key"]):
            store.remove(own["key"])

    manifest, claimed_here = _settle_version(store, o, ledger_key, attempt)
    entry = _ledger_entry(o, manifest, _samples_of_checkpoint(store, o, manifest, attempt, own))
    found = problems("ledger-entry", entry)
    if found:
        raise ValueError(f"internal: the ledger entry does not match its schema: {found[0]}")
    if store.put_if_absent(ledger_key, json.dumps(entry).encode()):
        drop_own_unless(entry.get("samples"))
        return result_of(entry, ledger_key, not claimed_here)
    winner = read_ledger(store, o.campaign_id, o.train_step)
    assert winner is not None
    own_won = claimed_here and winner["toVersion"] == manifest["version"]
    if claimed_here and not own_won:
        checkpoints.remove(store, manifest)
    drop_own_unless(winner.get("samples"))
    return result_of(winner, ledger_key, not own_won)
