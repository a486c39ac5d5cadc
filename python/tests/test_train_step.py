"""One real DART train step on the tiny Qwen2-VL: π_old recomputation, DART's loss, AdamW, a
`save_pretrained` folder that transformers loads; NaN anywhere refuses the step with the weights kept."""

import math
import time
from pathlib import Path

import pytest
import torch
from transformers import AutoProcessor, Qwen2VLForConditionalGeneration, Qwen2VLProcessor

from dartflow_vlm.algorithms import LossConfig, step_advantages
from dartflow_vlm.errors import InvalidTrainInput, NonFiniteLossError
from dartflow_vlm.score import completion_logprobs, load
from dartflow_vlm.train_step import (
    StepSample,
    TrainConfig,
    make_optimizer,
    response_logprobs,
    train_step,
)

from .images import chat, screenshot

CONFIG = TrainConfig(learning_rate=1e-3, weight_decay=0.1)


def make_samples(
    model: Qwen2VLForConditionalGeneration, processor: Qwen2VLProcessor, n: int = 4
) -> list[StepSample]:
    """Two groups, a success and a failure each; responses of 8-32 tokens; behaviour logprobs = the
    model's own plus a shift, so TIS truncates some tokens and down-weights others."""
    g = torch.Generator().manual_seed(0)
    samples = []
    for i in range(n):
        messages = chat(screenshot(160 + 40 * (i % 2), 120), f"Click the red box {i}")
        length = [8, 32, 16, 24][i % 4]
        tokens = [int(t) for t in torch.randint(60, 400, (length,), generator=g).tolist()]
        own = completion_logprobs(model, processor, messages, tokens)[1]
        shift = 0.3 if i % 2 == 0 else -0.3
        samples.append(
            StepSample(
                messages=messages,
                response_token_ids=tokens,
                behaviour_logprobs=[x + shift for x in own],
                group_id=f"g{i // 2}",
                trajectory_id=f"t{i}",
                reward=float(i % 2),
            )
        )
    return samples


def weights(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def test_one_step_changes_weights_in_the_advantage_direction_and_saves_a_loadable_folder(
    models: dict[str, Path], tmp_path: Path
) -> None:
    model, processor = load(str(models["seed0"]))
    reference, _ = load(str(models["seed0"]))
    samples = make_samples(model, processor)
    before = weights(model)
    old = [response_logprobs(model, processor, s)[0].detach() for s in samples]

    out = tmp_path / "v1"
    started = time.perf_counter()
    result = train_step(
        model, processor, samples, CONFIG, make_optimizer(model, CONFIG), reference=reference, out_dir=out
    )
    seconds = time.perf_counter() - started
    m = result.metrics
    print(f"\ntrain step: {seconds:.2f}s total; metrics {m}")

    assert math.isfinite(m["loss"])
    assert m["ratioMean"] == pytest.approx(1.0, abs=1e-6)  # π_old recomputed with the same weights
    assert m["numSelected"] == 3  # floor(0.8 x 4) highest-entropy steps
    assert 0 < m["isWeightTruncatedFraction"] < 1  # the +0.3 / -0.3 behaviour shifts
    assert m["gradNorm"] > 0
    after = weights(model)
    changed = [k for k in before if not torch.equal(before[k], after[k])]
    assert len(changed) > len(before) // 2

    # The step moved log-probs in the advantages' direction: Σ_i A_i · mean_t Δlogp_it > 0. (Per sample
    # it need not hold: Adam's first step is a sign step and the samples share parameters.)
    new = [response_logprobs(model, processor, s)[0].detach() for s in samples]
    advantages = step_advantages(
        [s.group_id for s in samples], [s.trajectory_id for s in samples], [s.reward for s in samples]
    )
    gain = sum(float(a) * float((n - o).mean()) for a, n, o in zip(advantages, new, old, strict=True))
    assert gain > 0.01, gain

    # What the step did with each sample (the per-sample record's values), in the order given.
    assert len(result.samples) == len(samples)
    assert [r.advantage for r in result.samples] == pytest.approx([float(a) for a in advantages])
    assert sum(r.selected for r in result.samples) == m["numSelected"]
    assert m["entropyMean"] == pytest.approx(sum(r.entropy for r in result.samples) / len(samples))
    for r, s, o in zip(result.samples, samples, old, strict=True):
        assert r.logp_old == pytest.approx(float(o.double().sum()), rel=1e-6)
        assert s.behaviour_logprobs is not None
        assert r.logp_behaviour == pytest.approx(sum(s.behaviour_logprobs))
        # Token-level TIS (cap 1): the step's mean token weight, below 1 where some tokens were cut.
        assert 0 < r.is_weight <= 1
    assert min(r.is_weight for r in result.samples) < 1

    # The folder is a Hugging Face checkpoint with exactly the trained weights.
    assert (out / "model.safetensors").is_file()
    loaded = Qwen2VLForConditionalGeneration.from_pretrained(out, dtype=torch.float32)
    for k, v in loaded.state_dict().items():
        assert torch.equal(v, after[k]), k
    assert isinstance(AutoProcessor.from_pretrained(out), Qwen2VLProcessor)


def test_a_nan_behaviour_logprob_refuses_the_step_and_keeps_the_weights(
    models: dict[str, Path], tmp_path: Path
) -> None:
    model, processor = load(str(models["seed0"]))
    samples = make_samples(model, processor, 2)
    bad = samples[1]
    assert bad.behaviour_logprobs is not None
    samples[1] = StepSample(**{**bad.__dict__, "behaviour_logprobs": [math.nan, *bad.behaviour_logprobs[1:]]})
    before = weights(model)
    with pytest.raises(NonFiniteLossError, match="not finite") as err:
        train_step(model, processor, samples, CONFIG, make_optimizer(model, CONFIG), out_dir=tmp_path / "x")
    assert err.value.type == "NonFiniteLossError"
    assert err.value.non_retryable
    assert not (tmp_path / "x").exists()
    assert all(torch.equal(v, weights(model)[k]) for k, v in before.items())


def test_nan_weights_refuse_the_step(models: dict[str, Path]) -> None:
    model, processor = load(str(models["seed0"]))
    samples = make_samples(model, processor, 2)
    with torch.no_grad():
        model.lm_head.weight[0, 0] = math.nan  # a NaN reaches every logit through the softmax
    with pytest.raises(NonFiniteLossError):
        train_step(model, processor, samples, CONFIG, make_optimizer(model, CONFIG))


def test_without_a_reference_the_kl_term_is_off_and_bad_batches_are_refused(models: dict[str, Path]) -> None:
    model, processor = load(str(models["seed0"]))
    samples = make_samples(model, processor, 2)
    config = TrainConfig(learning_rate=1e-3, loss=LossConfig(kl_beta=0.1))
    assert train_step(model, processor, samples, config, make_optimizer(model, config)).metrics["kl"] == 0
    with pytest.raises(InvalidTrainInput, match="no step samples"):
        train_step(model, processor, [], config, make_optimizer(model, config))
    short = StepSample(**{**samples[0].__dict__, "behaviour_logprobs": [-1.0]})
    with pytest.raises(InvalidTrainInput, match="1 behaviour logprobs for 8 tokens"):
        train_step(model, processor, [short], config, make_optimizer(model, config))


def test_config_from_a_validated_trainer_object() -> None:
    from dartflow_vlm.validate import validate_train_step_input

    raw = {
        "campaignId": "c",
        "trainStep": 1,
        "fromVersion": 0,
        "groups": [
            {
                "groupId": "g",
                "taskId": "t",
                "trajectories": [
                    {"trajectoryId": "a", "manifestKey": "k", "reward": 1, "injectedFromPool": False}
                ],
            }
        ],
        "trainer": {"learningRate": 1e-6, "weightDecay": 0.1, "useTis": False},
        "maxStaleness": 1,
        "policy": {"seed": 0, "width": 1},
    }
    config = TrainConfig.from_trainer(validate_train_step_input(raw)["trainer"])
    assert (config.learning_rate, config.weight_decay, config.grad_clip) == (1e-6, 0.1, 2)
    assert config.loss == LossConfig(use_tis=False)
    with pytest.raises(InvalidTrainInput, match="entropyCoef"):
        TrainConfig.from_trainer({**validate_train_step_input(raw)["trainer"], "entropyCoef": 0.01})
    # RL steps use rlLearningRate when it is set; learningRate stays the behaviour-cloning rate.
    trainer = {"learningRate": 1e-6, "rlLearningRate": 5e-7}
    rl = TrainConfig.from_trainer(validate_train_step_input({**raw, "trainer": trainer})["trainer"])
    assert rl.learning_rate == 5e-7
