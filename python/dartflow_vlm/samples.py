"""Trajectory references → the step samples a VLM train step trains on (activities/trainer/samples.ts
for the VLM policy).

A VLM step record carries, besides the fields of schemas/records.ts StepRecord:
- `responseTokenIds`: the exact token ids vLLM generated (DART trains on these, never on re-tokenized
  text: text pieces lose partial UTF-8 bytes and tokenization is not unique);
- `promptKey`: the key of a JSON object `{"schemaVersion": 1, "messages": [...]}` holding the OpenAI
  messages vLLM sampled from (system prompt, history, base64 screenshots as sent);
- `tokenLogProbs` (already in StepRecord): vLLM's per-token logprobs, for TIS.
A step without them cannot be re-scored and is skipped (counted); a demonstration (manifest source
`demo`) may omit `responseTokenIds`: its `actionText` is tokenized and ended with `<|im_end|>`.

As the TypeScript loader: a group whose manifest, steps or prompt object is missing or corrupt is left
out whole (a GRPO group is only meaningful complete) and recorded; an unreachable MinIO propagates
(StorageUnavailableError: the step is retried).
"""

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from transformers import Qwen2VLProcessor

from .store import CorruptObjectError, ObjectNotFoundError, ObjectStore
from .train_step import StepSample
from .validate import problems


@dataclass(frozen=True)
class LoadedSample:
    sample: StepSample
    policy_version: int
    injected_from_pool: bool


@dataclass
class SkippedGroup:
    group_id: str
    trajectory_id: str
    key: str
    reason: str

    def to_json(self) -> dict[str, str]:
        return {
            "groupId": self.group_id,
            "trajectoryId": self.trajectory_id,
            "key": self.key,
            "reason": self.reason,
        }


@dataclass
class LoadedBatch:
    samples: list[LoadedSample] = field(default_factory=list)
    skipped_steps: int = 0
    # trajectoryId → oldest step version (the ledger's staleness)
    min_versions: dict[str, int] = field(default_factory=dict)
    skipped_groups: list[SkippedGroup] = field(default_factory=list)
    # why steps were skipped, for the error when nothing is trainable
    skip_reasons: dict[str, int] = field(default_factory=dict)


def _json(store: ObjectStore, key: str, sha256: str | None = None) -> Any:
    data = store.get_bytes(key, sha256)
    try:
        return json.loads(data)
    except ValueError as err:
        raise CorruptObjectError(key, f"not valid JSON ({err})") from err


def _checked(contract: str, value: Any, key: str) -> Any:
    found = problems(contract, value)
    if found:
        raise CorruptObjectError(key, f"does not match its schema: {found[0]}")
    return value


def _prompt(store: ObjectStore, key: str, cache: dict[str, list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """The prompt record's messages (vlm/prompt-record.ts PromptRecordSchema, generated contract)."""
    if key not in cache:
        raw = _checked("prompt-record", _json(store, key), key)
        cache[key] = raw["messages"]
    return cache[key]


def demo_token_ids(processor: Qwen2VLProcessor, text: str) -> list[int]:
    """A demonstration's response as the model would end it: the text's tokens, then <|im_end|>."""
    tokenizer = processor.tokenizer
    ids = [int(t) for t in tokenizer(text, add_special_tokens=False)["input_ids"]]
    end = tokenizer.convert_tokens_to_ids("<|im_end|>")
    return [*ids, int(end)] if isinstance(end, int) and end >= 0 else ids


def load_samples(
    store: ObjectStore,
    processor: Qwen2VLProcessor,
    groups: Sequence[dict[str, Any]],
    *,
    on_progress: Callable[[dict[str, int]], None] = lambda _: None,
) -> LoadedBatch:
    out = LoadedBatch()
    prompts: dict[str, list[dict[str, Any]]] = {}
    loaded_trajectories = 0
    for done, group in enumerate(groups, start=1):
        mine: list[LoadedSample] = []
        versions: dict[str, int] = {}
        reasons: dict[str, int] = {}
        trajectory_id = group["trajectories"][0]["trajectoryId"]
        try:
            for ref in group["trajectories"]:
                trajectory_id = ref["trajectoryId"]
                manifest = _checked(
                    "trajectory-manifest", _json(store, ref["manifestKey"]), ref["manifestKey"]
                )
                steps_key = manifest["stepsKey"]
                text = store.get_bytes(steps_key, manifest["stepsSha256"]).decode("utf-8")
                lines = text.split("\n") if text else []
                versions[trajectory_id] = manifest["minPolicyVersion"]
                demo = manifest["source"] == "demo"
                for i, line in enumerate(lines):
                    try:
                        step = json.loads(line)
                    except ValueError as err:
                        raise CorruptObjectError(
                            steps_key, f"line {i + 1} is not valid JSON ({err})"
                        ) from err
                    _checked("step-record", step, f"{steps_key} line {i + 1}")
                    sample = _step_sample(store, processor, step, ref, group, demo, prompts, steps_key, i)
                    if isinstance(sample, str):
                        reasons[sample] = reasons.get(sample, 0) + 1
                        continue
                    mine.append(LoadedSample(sample, step["policyVersion"], ref["injectedFromPool"]))
                loaded_trajectories += 1
                on_progress(
                    {"groupsDone": done - 1, "groups": len(groups), "trajectoriesLoaded": loaded_trajectories}
                )
        except (ObjectNotFoundError, CorruptObjectError) as err:
            key = err.key
            out.skipped_groups.append(SkippedGroup(group["groupId"], trajectory_id, key, str(err)[:300]))
            on_progress(
                {"groupsDone": done, "groups": len(groups), "trajectoriesLoaded": loaded_trajectories}
            )
            continue
        out.samples.extend(mine)
        out.min_versions.update(versions)
        out.skipped_steps += sum(reasons.values())
        for k, n in reasons.items():
            out.skip_reasons[k] = out.skip_reasons.get(k, 0) + n
        on_progress({"groupsDone": done, "groups": len(groups), "trajectoriesLoaded": loaded_trajectories})
    return out


def _step_sample(
    store: ObjectStore,
    processor: Qwen2VLProcessor,
    step: dict[str, Any],
    ref: dict[str, Any],
    group: dict[str, Any],
    demo: bool,
    prompts: dict[str, list[dict[str, Any]]],
    steps_key: str,
    line: int,
) -> StepSample | str:
    """The step's sample, or why it cannot be one (a reason string, counted as a skipped step)."""
    prompt_key = step.get("promptKey")
    if not isinstance(prompt_key, str) or not prompt_key:
        return "no promptKey"
    ids = step.get("responseTokenIds")
    if ids is None and demo:
        ids = demo_token_ids(processor, step["actionText"])
    if not (isinstance(ids, list) and ids and all(isinstance(t, int) and t >= 0 for t in ids)):
        return "no responseTokenIds"
    behaviour: list[float] | None = None
    if not demo:
        behaviour = step.get("tokenLogProbs")
        if behaviour is None:
            return "no tokenLogProbs"
        if len(behaviour) != len(ids):
            raise CorruptObjectError(
                steps_key,
                f"line {line + 1}: {len(behaviour)} tokenLogProbs for {len(ids)} responseTokenIds",
            )
    return StepSample(
        messages=_prompt(store, prompt_key, prompts),
        response_token_ids=[int(t) for t in ids],
        behaviour_logprobs=[float(x) for x in behaviour] if behaviour is not None else None,
        group_id=group["groupId"],
        trajectory_id=ref["trajectoryId"],
        reward=float(ref["reward"]),
        step=int(step["step"]),
    )
