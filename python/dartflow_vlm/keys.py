"""Object keys, as storage/keys.ts lays them out (one layout, so every role agrees), plus the two keys
only the VLM trainer writes: a version claim and the optimizer state next to an hf.json checkpoint.

Both extra keys sit beside `hf.json` and are not `manifest.json`: the TypeScript listCheckpoints reads
those as the embedded policy's manifests, and the vLLM role reads only `hf.json` and `hf/<file>`.
"""

import re

_SAFE = re.compile(r"[^A-Za-z0-9._=-]")


def safe_segment(value: str, what: str = "id") -> str:
    """storage/keys.ts safeSegment: one key segment, no separators or traversal, at most 200 chars."""
    if not isinstance(value, str) or not value:
        raise ValueError(f"{what} must be a non-empty string")
    cleaned = _SAFE.sub("_", value)[:200]
    if re.fullmatch(r"\.+", cleaned):
        raise ValueError(f'{what} "{value}" is not a valid key segment')
    return cleaned


def _pad(n: int) -> str:
    return str(n).zfill(6)


def _campaign(campaign_id: str) -> str:
    return f"campaigns/{safe_segment(campaign_id, 'campaignId')}"


def checkpoint_prefix(campaign_id: str) -> str:
    return f"{_campaign(campaign_id)}/checkpoints/"


def version_prefix(campaign_id: str, version: int) -> str:
    return f"{checkpoint_prefix(campaign_id)}v{_pad(version)}/"


def hf_manifest(campaign_id: str, version: int) -> str:
    return f"{version_prefix(campaign_id, version)}hf.json"


def hf_file(campaign_id: str, version: int, name: str) -> str:
    return f"{version_prefix(campaign_id, version)}hf/{safe_segment(name, 'file name')}"


def hf_claim(campaign_id: str, version: int) -> str:
    """Written (only if absent) before a version's files: the one attempt that owns the number."""
    return f"{version_prefix(campaign_id, version)}hf-claim.json"


def hf_optimizer(campaign_id: str, version: int) -> str:
    """AdamW moments of the trained parameters; outside hf/ so vLLM never downloads or loads them."""
    return f"{version_prefix(campaign_id, version)}hf-optimizer.safetensors"


def ledger_entry(campaign_id: str, train_step: int) -> str:
    return f"{_campaign(campaign_id)}/ledger/step-{_pad(train_step)}.json"


def train_samples_prefix(campaign_id: str) -> str:
    return f"{_campaign(campaign_id)}/train-samples/"


def train_samples(campaign_id: str, train_step: int, attempt: str) -> str:
    """storage/keys.ts trainSamples: a train step's per-sample record (TrainSampleRecord rows, JSON Lines),
    one per attempt (`attempt`: the tag the attempt's `hf-claim.json` carries); the ledger entry names the
    one of the attempt whose checkpoint it commits. Outside ledger/, whose readers take every object there
    for a ledger entry."""
    return (
        f"{train_samples_prefix(campaign_id)}step-{_pad(train_step)}-{safe_segment(attempt, 'attempt')}.jsonl"
    )


VERSION_IN_KEY = re.compile(r"/checkpoints/v(\d+)/")
