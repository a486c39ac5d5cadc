"""Trajectories of the tiny Qwen2-VL in a real MinIO bucket, in the layout the env workers write
(manifest + steps.jsonl + a prompt object per step), with token ids sampled from the model itself and
the model's own per-token logprobs as the recorded vLLM ones (shifted, so TIS has work to do)."""

import hashlib
import json
import time
from pathlib import Path
from typing import Any

import torch

from dartflow_vlm.score import completion_logprobs, load
from dartflow_vlm.store import ObjectStore

from .images import chat, screenshot


def write_groups(
    store: ObjectStore,
    model_dir: Path,
    campaign_id: str,
    *,
    groups: int = 2,
    per_group: int = 2,
    policy_version: int = 0,
    seed: int = 0,
    source: str = "rollout",
) -> list[dict[str, Any]]:
    """TrainGroupRefs (activities/trainer/types.ts) of `groups` groups, one step per trajectory, reward
    1 for the first trajectory of each group and 0 for the others."""
    model, processor = load(str(model_dir))
    g = torch.Generator().manual_seed(seed)
    refs = []
    for gi in range(groups):
        trajectories = []
        for ti in range(per_group):
            tid = f"traj-{seed}-{gi}-{ti}"
            messages = chat(screenshot(160 + 40 * (ti % 2), 120), f"Click the red box {gi}")
            tokens = [int(t) for t in torch.randint(60, 400, (8 + 4 * ti,), generator=g).tolist()]
            own = completion_logprobs(model, processor, messages, tokens)[1]
            prompt = json.dumps({"schemaVersion": 1, "messages": messages}).encode()
            prompt_key = f"prompts/{hashlib.sha256(prompt).hexdigest()}.json"
            store.put_bytes(prompt_key, prompt, "application/json")
            now = int(time.time() * 1000)
            step = {
                "schemaVersion": 1,
                "trajectoryId": tid,
                "step": 0,
                "observationKey": "screenshots/none.png",
                "observationSize": {"width": 160, "height": 120},
                "action": {"type": "click", "x": 0.5, "y": 0.5},
                "actionText": "click(start_box='(80,60)')",
                "behaviourLogProb": sum(own),
                "tokenLogProbs": [x + (0.2 if ti % 2 else -0.2) for x in own],
                "responseTokenIds": tokens,
                "promptKey": prompt_key,
                "entropy": 1.0 + ti,
                "policyVersion": policy_version,
                "actionOk": True,
                "startedAt": now,
                "endedAt": now,
            }
            steps = json.dumps(step).encode()
            base = f"campaigns/{campaign_id}/trajectories/{tid}"
            steps_ref = store.put_bytes(f"{base}/steps.jsonl", steps, "application/x-ndjson")
            reward = 1.0 if ti == 0 else 0.0
            manifest = {
                "schemaVersion": 1,
                "trajectoryId": tid,
                "campaignId": campaign_id,
                "taskId": f"task-{gi}",
                "groupId": f"group-{seed}-{gi}",
                "seed": gi,
                "instruction": f"Click the red box {gi}",
                "reward": reward,
                "status": "ok",
                "numSteps": 1,
                "maxSteps": 5,
                "minPolicyVersion": policy_version,
                "maxPolicyVersion": policy_version,
                "stepsKey": steps_ref.key,
                "stepsSha256": steps_ref.sha256,
                "source": source,
                "envKind": "browser",
                "createdAt": now,
            }
            store.put_bytes(f"{base}/manifest.json", json.dumps(manifest).encode(), "application/json")
            trajectories.append(
                {
                    "trajectoryId": tid,
                    "manifestKey": f"{base}/manifest.json",
                    "reward": reward,
                    "injectedFromPool": False,
                }
            )
        refs.append({"groupId": f"group-{seed}-{gi}", "taskId": f"task-{gi}", "trajectories": trajectories})
    return refs
