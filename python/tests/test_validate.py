"""Activity inputs and records are validated against the schemas generated from the zod schemas.
(test/vlm-infra/schemas-fresh.test.ts checks the same inputs get the same verdicts from zod.)"""

import copy
import math
from typing import Any

import pytest

from dartflow_vlm.errors import InvalidTrainInput
from dartflow_vlm.validate import (
    CONTRACTS,
    problems,
    schema,
    validate_behaviour_clone_input,
    validate_train_step_input,
)


def train_step_input() -> dict[str, Any]:
    return {
        "campaignId": "c1",
        "trainStep": 3,
        "fromVersion": 2,
        "groups": [
            {
                "groupId": "g1",
                "taskId": "t1",
                "trajectories": [
                    {"trajectoryId": "a", "manifestKey": "k/a", "reward": 1, "injectedFromPool": False},
                    {"trajectoryId": "b", "manifestKey": "k/b", "reward": 0, "injectedFromPool": True},
                ],
            }
        ],
        "trainer": {"learningRate": 1e-6, "weightDecay": 0.1},
        "maxStaleness": 1,
        "allowedVersions": [2, 1],
        "policy": {"seed": 0, "width": 1},
    }


def test_every_contract_schema_loads_and_is_valid_json_schema() -> None:
    for name in CONTRACTS:
        assert schema(name)["type"] == "object", name


def test_a_valid_input_gets_zods_defaults() -> None:
    parsed = validate_train_step_input(train_step_input())
    assert parsed["referenceVersion"] == 0
    assert parsed["minStepMs"] == 0
    trainer = parsed["trainer"]
    assert trainer["learningRate"] == 1e-6  # given values stay
    assert (trainer["clipLow"], trainer["clipHigh"], trainer["dualClip"]) == (0.1, 0.28, 10)
    assert (trainer["tisCap"], trainer["klBeta"], trainer["entropyTopFraction"]) == (1, 0.1, 0.8)


@pytest.mark.parametrize(
    ("mutate", "field"),
    [
        (lambda x: x.pop("campaignId"), "campaignId"),
        (lambda x: x.update(trainStep=0), "trainStep"),
        (lambda x: x.update(fromVersion=1.5), "fromVersion"),
        (lambda x: x.update(groups=[]), "groups"),
        (lambda x: x["groups"][0]["trajectories"][0].update(reward=math.nan), r"groups\.0\.trajectories\.0"),
        (lambda x: x["groups"][0]["trajectories"][1].update(reward=math.inf), r"groups\.0\.trajectories\.1"),
        (lambda x: x["trainer"].update(clipLow=2), "trainer.clipLow"),
        (lambda x: x["trainer"].update(unknownKnob=1), "trainer"),  # strict: unknown fields are errors
        (lambda x: x["groups"][0].update(taskId=""), "groups.0.taskId"),
        (lambda x: x["policy"].update(width=True), "policy.width"),  # a bool is not an integer
    ],
)
def test_bad_inputs_are_refused_naming_the_field(mutate: Any, field: str) -> None:
    raw = train_step_input()
    mutate(raw)
    with pytest.raises(InvalidTrainInput, match=f"invalid trainStep input: {field}") as err:
        validate_train_step_input(raw)
    assert err.value.non_retryable
    assert err.value.type == "InvalidTrainInput"


def test_lineage_must_start_at_the_head() -> None:
    raw = train_step_input()
    raw["allowedVersions"] = [1, 2]
    with pytest.raises(InvalidTrainInput, match="must start with fromVersion 2"):
        validate_train_step_input(raw)


def test_validation_does_not_modify_its_input() -> None:
    raw = train_step_input()
    before = copy.deepcopy(raw)
    validate_train_step_input(raw)
    assert raw == before


def test_behaviour_clone_input() -> None:
    raw = {
        "campaignId": "c1",
        "trainStep": 1,
        "fromVersion": 0,
        "demos": train_step_input()["groups"],
        "epochs": 2,
        "learningRate": 1e-5,
        "policy": {"seed": 0, "width": 1},
    }
    assert validate_behaviour_clone_input(raw)["minibatchSize"] == 64
    raw["epochs"] = 0
    with pytest.raises(InvalidTrainInput, match="epochs"):
        validate_behaviour_clone_input(raw)


def test_records_the_trainer_reads() -> None:
    step = {
        "schemaVersion": 1,
        "trajectoryId": "a",
        "step": 0,
        "observationKey": "screenshots/x.png",
        "observationSize": {"width": 320, "height": 200},
        "action": None,
        "actionText": "click(start_box='(1,2)')",
        "behaviourLogProb": -3.5,
        "tokenLogProbs": [-1.0, -2.5],
        "entropy": 0.7,
        "policyVersion": 2,
        "actionOk": False,
        "startedAt": 1,
        "endedAt": 2,
    }
    assert problems("step-record", step) == []
    step["tokenLogProbs"] = [-1.0, math.nan]
    assert problems("step-record", step) == ["tokenLogProbs.1: not a finite number (nan)"]
    step["schemaVersion"] = 2
    assert any(p.startswith("schemaVersion:") for p in problems("step-record", step))


def test_the_vlm_fields_of_a_step_record() -> None:
    step = {
        "schemaVersion": 1,
        "trajectoryId": "a",
        "step": 0,
        "observationKey": "screenshots/x.png",
        "observationSize": {"width": 320, "height": 200},
        "action": None,
        "actionText": "Thought: …",
        "behaviourLogProb": -3.5,
        "tokenLogProbs": [-1.0, -2.5],
        "entropy": 0.7,
        "policyVersion": 2,
        "actionOk": False,
        "startedAt": 1,
        "endedAt": 2,
        "responseTokenIds": [17, 4],
        "promptKey": "prompts/" + "a" * 64 + ".json",
    }
    assert problems("step-record", step) == []
    assert any(
        p.startswith("responseTokenIds.1:")
        for p in problems("step-record", {**step, "responseTokenIds": [1, -2]})
    )
    assert any(p.startswith("promptKey:") for p in problems("step-record", {**step, "promptKey": ""}))


def test_prompt_records() -> None:
    image = {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}}
    record: dict[str, Any] = {
        "schemaVersion": 1,
        "messages": [
            {"role": "system", "content": "You are a helpful assistant."},
            {"role": "user", "content": [{"type": "text", "text": "Click"}, image]},
            {"role": "assistant", "content": "Action: wait()"},
        ],
    }
    assert problems("prompt-record", record) == []
    remote = copy.deepcopy(record)
    remote["messages"][1]["content"][1]["image_url"]["url"] = "http://example.com/a.png"
    assert any(p.startswith("messages.1.content") for p in problems("prompt-record", remote))
    assert any(p.startswith("messages:") for p in problems("prompt-record", {**record, "messages": []}))


def hf_manifest() -> dict[str, Any]:
    return {
        "schemaVersion": 1,
        "format": "hf-safetensors-folder",
        "campaignId": "c1",
        "version": 3,
        "parentVersion": 2,
        "kind": "full",
        "files": [{"name": "config.json", "bytes": 10, "sha256": "0" * 64}],
        "createdAt": 1,
        "ledgerKey": "campaigns/c1/ledger/step-000003.json",
        "metrics": {"loss": 0.5},
        "optimizerState": {"bucket": "dartflow", "key": "k/opt", "sha256": "1" * 64, "bytes": 5},
    }


def test_hf_manifests_are_checked_against_the_generated_schema() -> None:
    from dartflow_vlm.checkpoints import check_hf_manifest
    from dartflow_vlm.store import CorruptObjectError

    assert check_hf_manifest(hf_manifest(), "k", "c1", 3)["version"] == 3
    bad = hf_manifest()
    bad["files"][0]["sha256"] = "XYZ"
    with pytest.raises(CorruptObjectError, match=r"files\.0\.sha256"):
        check_hf_manifest(bad, "k", "c1", 3)
    with pytest.raises(CorruptObjectError, match=r"metrics\.loss: not a finite number"):
        check_hf_manifest({**hf_manifest(), "metrics": {"loss": math.inf}}, "k", "c1", 3)
    with pytest.raises(CorruptObjectError, match="describes c1 v3"):
        check_hf_manifest(hf_manifest(), "k", "c1", 4)
    twice = hf_manifest()
    twice["files"].append(dict(twice["files"][0]))
    with pytest.raises(CorruptObjectError, match=r"files\.1\.name: dots-only or repeated"):
        check_hf_manifest(twice, "k", "c1", 3)
