"""The VLM trainer's activities (dartflow_vlm.activities) on the tiny Qwen2-VL against the real MinIO
that `npm test` starts (skipped when none answers): a train step writes an hf.json checkpoint that
transformers loads, the ledger entry, idempotency (retry, crash between checkpoint and ledger, an
in-flight claim of the same step), LoRA with optimizer state carried to the next step, behaviour
cloning from demonstrations, and the typed refusals."""

import hashlib
import json
import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch
from peft import PeftModel
from safetensors.torch import load_file
from transformers import AutoProcessor, Qwen2VLForConditionalGeneration

from dartflow_vlm import checkpoints, keys
from dartflow_vlm.activities import TrainerDeps, run_behaviour_clone, run_train_step
from dartflow_vlm.errors import CheckpointMismatchError, CheckpointUnavailableError, InvalidTrainInput
from dartflow_vlm.models import PolicySetup
from dartflow_vlm.samples import load_samples
from dartflow_vlm.store import ObjectStore, S3Settings, StorageUnavailableError
from dartflow_vlm.validate import problems

from .trajectories import write_groups

TRAINER = {"learningRate": 1e-2, "klBeta": 0.05}


@pytest.fixture(scope="module")
def store() -> Iterator[ObjectStore]:
    s = ObjectStore(S3Settings.from_env(), f"pytest-vlm-{uuid.uuid4().hex[:10]}")
    try:
        s.ensure_bucket()
    except StorageUnavailableError as err:
        pytest.skip(f"no MinIO: {err}")
    yield s
    s.remove_prefix("")
    s.remove_bucket()
    s.close()


def deps(store: ObjectStore, models: dict[str, Path], tmp_path: Path, lora: int = 0) -> TrainerDeps:
    return TrainerDeps(store, PolicySetup(models["seed0"], lora_rank=lora, lora_alpha=8), tmp_path / "work")


def step_input(campaign: str, groups: list[dict[str, Any]], step: int = 1, head: int = 0) -> dict[str, Any]:
    return {
        "campaignId": campaign,
        "trainStep": step,
        "fromVersion": head,
        "groups": groups,
        "trainer": TRAINER,
        "maxStaleness": 1,
        "policy": {"seed": 0, "width": 1},
    }


def versions(store: ObjectStore, campaign: str) -> list[int]:
    return sorted(v for v, s in checkpoints.list_versions(store, campaign).items() if s.complete)


def sample_records(store: ObjectStore, campaign: str, step: int) -> list[str]:
    """Every per-sample record object of train step `step` (any attempt)."""
    prefix = f"{keys.train_samples_prefix(campaign)}step-{step:06d}-"
    return sorted(store.list(prefix))


def named_rows(store: ObjectStore, ledger: dict[str, Any]) -> list[dict[str, Any]]:
    """The rows of the record the ledger entry names, read through its sha256 and checked."""
    ref = ledger["samples"]
    data = store.get_bytes(ref["key"], ref["sha256"])
    assert hashlib.sha256(data).hexdigest() == ref["sha256"]
    assert len(data) == ref["bytes"]
    rows = [json.loads(line) for line in data.decode().split("\n")] if data else []
    assert len(rows) == ref["rows"]
    for row in rows:
        assert problems("train-sample-record", row) == []
    return rows


def download(store: ObjectStore, campaign: str, version: int, dest: Path) -> Path:
    return checkpoints.download(store, checkpoints.read_hf_manifest(store, campaign, version), dest)


def test_train_step_writes_a_loadable_checkpoint_and_a_ledger_entry_once(
    store: ObjectStore, models: dict[str, Path], tmp_path: Path
) -> None:
    campaign = f"c-{uuid.uuid4().hex[:8]}"
    groups = write_groups(store, models["seed0"], campaign)
    d = deps(store, models, tmp_path)
    result = run_train_step(d, step_input(campaign, groups))
    assert problems("train-step-result", result) == []
    assert result["version"] == 1
    assert not result["reused"]
    assert result["manifestKey"] == keys.hf_manifest(campaign, 1)
    ledger = json.loads(store.get_bytes(result["ledgerKey"]))
    assert problems("ledger-entry", ledger) == []
    assert ledger["toVersion"] == 1
    assert len(ledger["consumed"]) == 4

    folder = download(store, campaign, 1, tmp_path / "v1")
    trained = Qwen2VLForConditionalGeneration.from_pretrained(folder)
    base = Qwen2VLForConditionalGeneration.from_pretrained(models["seed0"])
    changed = [k for k, v in trained.state_dict().items() if not torch.equal(v, base.state_dict()[k])]
    assert changed, "the step changed the weights"
    manifest = checkpoints.read_hf_manifest(store, campaign, 1)
    assert manifest["kind"] == "full"
    assert manifest["parentVersion"] == 0
    assert manifest["ledgerKey"] == result["ledgerKey"]
    assert "optimizerState" in manifest

    # The per-sample record: written under the attempt's claim tag, named by the ledger entry.
    claim = json.loads(store.get_bytes(keys.hf_claim(campaign, 1)))
    assert ledger["samples"]["key"] == keys.train_samples(campaign, 1, claim["attempt"])
    assert sample_records(store, campaign, 1) == [ledger["samples"]["key"]]
    rows = named_rows(store, ledger)
    assert len(rows) == ledger["metrics"]["samples"], "one row per trained step sample"
    consumed = {c["trajectoryId"] for c in ledger["consumed"]}
    assert {r["trajectoryId"] for r in rows} == consumed
    assert len({(r["trajectoryId"], r["step"]) for r in rows}) == len(rows)
    selected = sum(r["selected"] for r in rows)
    assert 0 < selected < len(rows)
    assert selected / len(rows) == pytest.approx(ledger["metrics"]["selectedFraction"])
    assert all(r["logpBehaviour"] is not None and 0 < r["isWeight"] <= 1 for r in rows)
    assert all(r["staleness"] == 0 for r in rows)

    again = run_train_step(d, step_input(campaign, groups))
    assert again == {**result, "reused": True}
    assert versions(store, campaign) == [1]
    assert sample_records(store, campaign, 1) == [ledger["samples"]["key"]], "a retry writes no record"


def test_a_checkpoint_uploaded_before_a_crash_is_adopted_and_an_in_flight_claim_is_never_written_into(
    store: ObjectStore, models: dict[str, Path], tmp_path: Path
) -> None:
    campaign = f"c-{uuid.uuid4().hex[:8]}"
    groups = write_groups(store, models["seed0"], campaign, groups=1)
    ledger_key = keys.ledger_entry(campaign, 1)
    # Another attempt of step 1 claimed v1 and is still uploading (or died): this attempt takes v2.
    assert checkpoints.claim_version(store, campaign, 1, 0, ledger_key, "other")
    result = run_train_step(deps(store, models, tmp_path), step_input(campaign, groups))
    assert (result["version"], result["reused"]) == (2, False)
    assert versions(store, campaign) == [2]
    first = json.loads(store.get_bytes(result["ledgerKey"]))
    assert sample_records(store, campaign, 1) == [first["samples"]["key"]]
    assert named_rows(store, first)

    # Step 2: an attempt wrote its per-sample record, uploaded v3 and crashed before its ledger entry;
    # the retry adopts v3, names the crashed attempt's record (the training behind v3) and removes its own.
    ledger2 = keys.ledger_entry(campaign, 2)
    crashed_rows = [{**r, "advantage": 0.5} for r in named_rows(store, first)]
    crashed_ref = store.put_bytes(
        keys.train_samples(campaign, 2, "crashed"),
        "\n".join(json.dumps(r, separators=(",", ":")) for r in crashed_rows).encode(),
    )
    assert checkpoints.claim_version(store, campaign, 3, 2, ledger2, "crashed")
    checkpoints.upload(
        store,
        campaign_id=campaign,
        version=3,
        parent=2,
        kind="full",
        folder=download(store, campaign, 2, tmp_path / "v2"),
        optimizer_file=None,
        ledger_key=ledger2,
        metrics={"loss": 0.5},
    )
    retry_input = {**step_input(campaign, groups, step=2, head=2), "maxStaleness": 2}
    retry = run_train_step(deps(store, models, tmp_path), retry_input)
    assert (retry["version"], retry["reused"], retry["metrics"]) == (3, True, {"loss": 0.5})
    assert versions(store, campaign) == [2, 3]
    entry2 = json.loads(store.get_bytes(ledger2))
    assert {k: entry2["samples"][k] for k in ("key", "sha256", "bytes")} == {
        "key": crashed_ref.key,
        "sha256": crashed_ref.sha256,
        "bytes": crashed_ref.bytes,
    }
    assert named_rows(store, entry2) == crashed_rows
    assert sample_records(store, campaign, 2) == [crashed_ref.key], "the retry removed its own record"


def test_lora_steps_carry_the_adapter_and_its_optimizer_state(
    store: ObjectStore, models: dict[str, Path], tmp_path: Path
) -> None:
    campaign = f"c-{uuid.uuid4().hex[:8]}"
    groups = write_groups(store, models["seed0"], campaign, groups=1)
    d = deps(store, models, tmp_path, lora=4)
    first = run_train_step(d, step_input(campaign, groups))
    manifest = checkpoints.read_hf_manifest(store, campaign, first["version"])
    assert manifest["kind"] == "lora"
    names = {f["name"] for f in manifest["files"]}
    assert {"adapter_config.json", "adapter_model.safetensors"} <= names
    folder = download(store, campaign, 1, tmp_path / "lora1")
    base = Qwen2VLForConditionalGeneration.from_pretrained(models["seed0"])
    PeftModel.from_pretrained(base, folder)  # transformers + peft load it unmodified
    opt = tmp_path / "opt.safetensors"
    assert checkpoints.fetch_optimizer(store, manifest, opt) is not None
    moments = load_file(str(opt))
    assert any(k.startswith("exp_avg.") and "lora_" in k for k in moments)

    groups2 = write_groups(store, models["seed0"], campaign, groups=1, policy_version=1, seed=1)
    second = run_train_step(d, {**step_input(campaign, groups2, step=2, head=1), "referenceVersion": 0})
    assert second["version"] == 2
    opt2 = tmp_path / "opt2.safetensors"
    checkpoints.fetch_optimizer(store, checkpoints.read_hf_manifest(store, campaign, 2), opt2)
    steps = {k: float(v) for k, v in load_file(str(opt2)).items() if k.startswith("step.")}
    assert set(steps.values()) == {2.0}, "the second step continued the first step's moments"

    # A full-weight worker refuses the adapter as its starting point.
    with pytest.raises(CheckpointMismatchError, match="lora checkpoint"):
        run_train_step(deps(store, models, tmp_path), step_input(campaign, groups2, step=3, head=2))


def test_behaviour_clone_from_demonstrations(
    store: ObjectStore, models: dict[str, Path], tmp_path: Path
) -> None:
    campaign = f"c-{uuid.uuid4().hex[:8]}"
    demos = write_groups(store, models["seed0"], campaign, groups=1, source="demo")
    raw = {
        "campaignId": campaign,
        "trainStep": 1,
        "fromVersion": 0,
        "demos": demos,
        "epochs": 2,
        "learningRate": 1e-2,
        "policy": {"seed": 0, "width": 1},
    }
    result = run_behaviour_clone(deps(store, models, tmp_path), raw)
    assert result["version"] == 1
    assert result["metrics"]["optimizerSteps"] == 2
    assert result["metrics"]["bcLoss"] > 0
    assert "samples" not in json.loads(store.get_bytes(result["ledgerKey"])), "BC writes no record"
    assert sample_records(store, campaign, 1) == []


def test_bad_inputs_are_typed_refusals_naming_the_problem(
    store: ObjectStore, models: dict[str, Path], tmp_path: Path
) -> None:
    campaign = f"c-{uuid.uuid4().hex[:8]}"
    groups = write_groups(store, models["seed0"], campaign, groups=1)
    d = deps(store, models, tmp_path)
    with pytest.raises(InvalidTrainInput, match=r"trainStep: .*minimum"):
        run_train_step(d, {**step_input(campaign, groups), "trainStep": 0})
    with pytest.raises(InvalidTrainInput, match=r"trainer\.epochs"):
        run_train_step(d, {**step_input(campaign, groups), "trainer": {**TRAINER, "epochs": 2}})
    with pytest.raises(InvalidTrainInput, match=r"trainer\.targetKl is 0\.05; .*set trainer\.targetKl=null"):
        run_train_step(d, {**step_input(campaign, groups), "trainer": {**TRAINER, "targetKl": 0.05}})
    with pytest.raises(InvalidTrainInput, match=r"demoAnchorCoef is 0\.5; .*set trainer\.demoAnchorCoef=0"):
        run_train_step(d, {**step_input(campaign, groups), "trainer": {**TRAINER, "demoAnchorCoef": 0.5}})
    with pytest.raises(CheckpointUnavailableError, match=r"current checkpoint v4 .* is missing"):
        run_train_step(d, step_input(campaign, groups, head=4))

    # A checkpoint of another architecture than the base.
    other = tmp_path / "other"
    shutil.copytree(models["seed0"], other)
    config = json.loads((other / "config.json").read_text())
    config.setdefault("text_config", {})["num_hidden_layers"] = 3
    (other / "config.json").write_text(json.dumps(config))
    assert checkpoints.claim_version(store, campaign, 5, 0, "x", "t")
    checkpoints.upload(
        store,
        campaign_id=campaign,
        version=5,
        parent=0,
        kind="full",
        folder=other,
        optimizer_file=None,
        ledger_key="x",
        metrics={},
    )
    with pytest.raises(CheckpointMismatchError, match="num_hidden_layers"):
        run_train_step(d, step_input(campaign, groups, step=2, head=5))

    # A step record whose logprobs do not fit its tokens: the group is skipped, nothing is left.
    steps_key = json.loads(store.get_bytes(groups[0]["trajectories"][0]["manifestKey"]))["stepsKey"]
    manifest_key = groups[0]["trajectories"][0]["manifestKey"]
    step = json.loads(store.get_bytes(steps_key))
    step["tokenLogProbs"] = step["tokenLogProbs"][:-1]
    ref = store.put_bytes(steps_key, json.dumps(step).encode())
    manifest = json.loads(store.get_bytes(manifest_key))
    store.put_bytes(manifest_key, json.dumps({**manifest, "stepsSha256": ref.sha256}).encode())
    with pytest.raises(InvalidTrainInput, match="gone or corrupt"):
        run_train_step(d, step_input(campaign, groups, step=3))

    # A damaged hf.json anywhere in the chain refuses the step before training.
    store.put_bytes(keys.hf_manifest(campaign, 5), b"{not json")
    with pytest.raises(CheckpointUnavailableError, match="not valid JSON"):
        run_train_step(d, step_input(campaign, groups, step=4))


def test_an_all_failed_group_trains_with_a_pooled_demonstration_in_place_of_a_failure(
    store: ObjectStore, models: dict[str, Path], tmp_path: Path
) -> None:
    """DART §3.4 c as the campaign sends it (workflows/logic/campaign-state.ts selectTrainBatch): the
    failed rollouts of a group plus the pooled success injected in place of one of them, here a
    pre-collected `uitars-oracle` demonstration (source `demo`, sampled by no policy version of this
    line). As the TypeScript trainer (activities/trainer/samples.ts, train-step.ts): the injected sample is
    exempt from the staleness bound, has no behaviour log-probs (IS weight 1), and counts in its group's
    GRPO statistics as the group's only success."""
    campaign = f"c-{uuid.uuid4().hex[:8]}"
    [group] = write_groups(store, models["seed0"], campaign, groups=1, per_group=3)
    failed = [{**t, "reward": 0.0} for t in group["trajectories"][1:]]
    [pooled] = write_groups(
        store, models["seed0"], campaign, groups=1, per_group=1, source="demo", seed=1, policy_version=7
    )
    injected = {**pooled["trajectories"][0], "injectedFromPool": True}
    assert injected["reward"] == 1.0
    batch = [{**group, "trajectories": [*failed, injected]}]
    loaded = load_samples(store, AutoProcessor.from_pretrained(models["seed0"]), batch)
    by_id = {s.sample.trajectory_id: s for s in loaded.samples}
    demo = by_id[injected["trajectoryId"]]
    assert demo.injected_from_pool
    assert demo.sample.behaviour_logprobs is None, "a demonstration: IS weight 1"
    assert demo.sample.group_id == group["groupId"], "its statistics are those of the group it joined"
    assert all(by_id[t["trajectoryId"]].sample.behaviour_logprobs is not None for t in failed)

    d = deps(store, models, tmp_path)
    result = run_train_step(d, step_input(campaign, batch))
    assert result["metrics"]["staleSteps"] == 0, "the pooled success is exempt from the staleness bound"
    assert result["metrics"]["skippedSteps"] == 0
    ledger = json.loads(store.get_bytes(result["ledgerKey"]))
    assert [c["injectedFromPool"] for c in ledger["consumed"]] == [False, False, True]
    assert [c["reward"] for c in ledger["consumed"]] == [0.0, 0.0, 1.0]
    rows = {r["trajectoryId"]: r for r in named_rows(store, ledger)}
    assert rows[injected["trajectoryId"]]["logpBehaviour"] is None, "a demonstration: no behaviour log-prob"
    assert rows[injected["trajectoryId"]]["isWeight"] == 1
    assert rows[injected["trajectoryId"]]["advantage"] > 0, "the group's only success"
    assert all(rows[t["trajectoryId"]]["advantage"] < 0 for t in failed)

    # The same trajectory not injected is an ordinary sample of version 7: outside the bound.
    as_online = [{**group, "trajectories": [*failed, {**injected, "injectedFromPool": False}]}]
    again = run_train_step(d, step_input(campaign, as_online, step=2, head=1))
    assert again["metrics"]["staleSteps"] == 1
