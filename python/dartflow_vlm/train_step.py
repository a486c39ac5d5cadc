"""One DART train step of a VLM policy in PyTorch (reference/dart-spec.md §4): the computation of the
`trainStep` activity without its storage and Temporal parts.

    samples (prompt messages with screenshots, the sampled response token ids, vLLM's token logprobs,
             group / trajectory / reward)
    → step-wise GRPO advantages
    → π_old token log-probs and entropies recomputed with the current weights (rho starts at 1, §4.3)
    → top-80 % high-entropy step selection over the whole batch (§4.5)
    → π_ref token log-probs for the k3 KL (when a reference model is given)
    → DART's loss (algorithms.dart_loss), accumulated one step sample at a time over a fixed
      normaliser (the number of selected samples), so memory does not grow with the batch
    → global-norm gradient clip, one AdamW step → `save_pretrained` folder (safetensors + processor
      files: vLLM and transformers load it unmodified).

Besides the metrics it returns what it did with each step sample (SampleStats: advantage, selection,
π_old entropy and log-prob, behaviour log-prob, the IS weight the loss used), the rows of the per-sample
record the activity writes (schemas/records.ts TrainSampleRecordSchema).

NaN or ∞ in an input, the loss or the gradients raises NonFiniteLossError before the optimiser
touches the weights. Under torch.distributed (FSDP, one process per rank with its share of the batch)
the advantages, the entropy selection and the normaliser are global and every rank ends with the same
weights; the metrics and the per-sample results are of the whole batch (gathered from every rank). Every
rank must hold as many samples (each forward and backward is a collective): `shard` pads the batch with
`padding` copies, which run through the model but get no advantage, are never selected and are left
out of the metrics and results.
"""

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from torch import Tensor, nn
from torch.distributed.tensor import DTensor
from transformers import Qwen2VLForConditionalGeneration, Qwen2VLProcessor

from .algorithms import (
    LossConfig,
    NonFiniteValueError,
    StatisticsOver,
    dart_loss,
    high_entropy_mask,
    masked_sample_mean,
    step_advantages,
    token_entropy,
    truncated_is_weight,
)
from .errors import InvalidTrainInput, NonFiniteLossError
from .score import prompt_inputs


@dataclass(frozen=True)
class StepSample:
    """One step of a trajectory as DART trains on it (§4.1)."""

    messages: list[dict[str, Any]]  # the OpenAI messages vLLM sampled from (base64 screenshots)
    response_token_ids: list[int]  # the exact ids vLLM generated
    behaviour_logprobs: list[float] | None  # vLLM's per-token logprobs; None: not recorded (w = 1)
    group_id: str
    trajectory_id: str
    reward: float
    step: int = 0  # the step's index in its trajectory (StepRecord.step)
    # A copy that only keeps FSDP ranks in step (see `shard`): no advantage, never selected, not reported.
    padding: bool = False


def shard(samples: Sequence[StepSample], rank: int, world: int) -> list[StepSample]:
    """Rank `rank`'s contiguous share of the batch, padded at the end to a multiple of `world` with
    `padding` copies, so every rank holds as many samples and the ranks' shares in rank order, without
    the padding, are the batch in its order (what train_step's gathered results follow)."""
    if world <= 1:
        return list(samples)
    if not samples:
        raise InvalidTrainInput("no step samples")
    share = -(-len(samples) // world)
    padded = list(samples) + [
        replace(samples[i % len(samples)], padding=True) for i in range(share * world - len(samples))
    ]
    return padded[rank * share : (rank + 1) * share]


@dataclass(frozen=True)
class SampleStats:
    """What one train step did with one step sample (a TrainSampleRecord row without trajectory and
    staleness, which the activity knows): in the order of the `samples` given to train_step."""

    advantage: float  # step-wise GRPO advantage
    selected: bool  # kept by the high-entropy selection (always True when it is off)
    entropy: float  # mean token entropy under π_old: what the selection ranked
    logp_old: float  # Σ_t log π_old(token_t): the step's summed token log-prob under π_old
    logp_behaviour: float | None  # Σ_t of vLLM's recorded logprobs; None when none were recorded (demos)
    # The truncated IS weight the loss used. TIS here is per token (min(π_old/π_vLLM, C) for each token),
    # so this is the step's mean token weight (1 when use_tis is off; min(1, C) without behaviour logprobs).
    is_weight: float


@dataclass(frozen=True)
class TrainConfig:
    """The optimiser and selection fields of schemas/config.ts TrainerSchema, plus the loss's."""

    learning_rate: float = 1e-6
    adam_beta1: float = 0.9
    adam_beta2: float = 0.999
    weight_decay: float = 0.0
    grad_clip: float = 2.0
    entropy_top_fraction: float = 0.8
    use_entropy_selection: bool = True
    # Population of a group's advantage mean/std: every step sample (DART) or each trajectory once.
    advantage_statistics: StatisticsOver = "steps"
    loss: LossConfig = LossConfig()  # noqa: RUF009 (frozen dataclass: an immutable default)

    @classmethod
    def from_trainer(cls, trainer: dict[str, Any]) -> "TrainConfig":
        """From a validated `trainer` object of the activity input (defaults applied, camelCase)."""
        if trainer.get("entropyCoef", 0) != 0:
            raise InvalidTrainInput("entropyCoef > 0 is not supported by the VLM trainer (DART uses 0)")
        # RL steps use rlLearningRate when set (the behaviour-cloning warm start keeps learningRate).
        rl_rate = trainer.get("rlLearningRate")
        return cls(
            learning_rate=trainer["learningRate"] if rl_rate is None else rl_rate,
            adam_beta1=trainer["adamBeta1"],
            adam_beta2=trainer["adamBeta2"],
            weight_decay=trainer["weightDecay"],
            grad_clip=trainer["gradClip"],
            entropy_top_fraction=trainer["entropyTopFraction"],
            use_entropy_selection=trainer["useEntropySelection"],
            advantage_statistics=(
                "trajectories" if trainer.get("advantageStatistics") == "trajectories" else "steps"
            ),
            loss=LossConfig(
                clip_low=trainer["clipLow"],
                clip_high=trainer["clipHigh"],
                dual_clip=trainer["dualClip"],
                tis_cap=trainer["tisCap"],
                kl_beta=trainer["klBeta"],
                use_tis=trainer["useTis"],
                use_kl=trainer["useKl"],
                use_clip=trainer["useClip"],
            ),
        )


@dataclass(frozen=True)
class StepResult:
    metrics: dict[str, float]
    out_dir: Path | None
    # One per step sample of the batch, in order (under torch.distributed: every rank's, padding left out).
    samples: list[SampleStats] = field(default_factory=list)


Heartbeat = Callable[[dict[str, Any]], None]


def make_optimizer(model: nn.Module, config: TrainConfig) -> torch.optim.AdamW:
    return torch.optim.AdamW(
        model.parameters(),
        lr=config.learning_rate,
        betas=(config.adam_beta1, config.adam_beta2),
        weight_decay=config.weight_decay,
    )


def response_logprobs(
    model: nn.Module, processor: Qwen2VLProcessor, sample: StepSample
) -> tuple[Tensor, Tensor]:
    """(log p(token_t | prompt, tokens_<t), entropy of that distribution) for each response token, [T]
    each, on the CPU whatever the model's device; differentiable unless called under no_grad. The same
    teacher forcing as score.py."""
    device = next(model.parameters()).device
    inputs = {k: v.to(device) for k, v in prompt_inputs(processor, sample.messages).items()}
    prompt_ids = inputs["input_ids"]
    completion = torch.tensor([sample.response_token_ids], dtype=prompt_ids.dtype, device=device)
    input_ids = torch.cat([prompt_ids, completion], dim=1)
    extra = {k: v for k, v in inputs.items() if k not in ("input_ids", "attention_mask")}
    if "mm_token_type_ids" in extra:
        types = extra["mm_token_type_ids"]
        extra["mm_token_type_ids"] = torch.cat(
            [types, torch.zeros_like(completion, dtype=types.dtype)], dim=1
        )
    logits = model(input_ids=input_ids, attention_mask=torch.ones_like(input_ids), **extra).logits
    n_prompt = prompt_ids.shape[1]
    step_logits = logits[0, n_prompt - 1 : n_prompt - 1 + completion.shape[1]].float()
    logp = torch.log_softmax(step_logits, dim=-1).gather(1, completion[0].unsqueeze(1)).squeeze(1)
    # The loss is computed on the CPU (a few numbers per token); autograd carries the gradient back to
    # the model's device.
    return logp.cpu(), token_entropy(step_logits.detach()).cpu()


def _check(samples: Sequence[StepSample]) -> None:
    if not samples:
        raise InvalidTrainInput("no step samples")
    for i, s in enumerate(samples):
        if not s.response_token_ids:
            raise InvalidTrainInput(f"sample {i}: empty response")
        if s.behaviour_logprobs is not None and len(s.behaviour_logprobs) != len(s.response_token_ids):
            raise InvalidTrainInput(
                f"sample {i}: {len(s.behaviour_logprobs)} behaviour logprobs for "
                f"{len(s.response_token_ids)} tokens"
            )
        if not math.isfinite(s.reward):
            raise NonFiniteLossError(f"sample {i}: reward {s.reward} is not finite; previous checkpoint kept")
        if s.behaviour_logprobs is not None and not all(map(math.isfinite, s.behaviour_logprobs)):
            raise NonFiniteLossError(f"sample {i}: a behaviour logprob is not finite; checkpoint kept")


def _check_everywhere(samples: Sequence[StepSample]) -> None:
    """_check on every rank's share, raised on every rank: a rank that refused alone would leave the
    others waiting in the next collective forever."""
    try:
        _check(samples)
        mine: list[tuple[str, str]] = []
    except (InvalidTrainInput, NonFiniteLossError) as err:
        mine = [(err.type, str(err))]
    found = _all_gather(mine)
    if found:
        kind, message = found[0]
        raise (NonFiniteLossError if kind == NonFiniteLossError.type else InvalidTrainInput)(message)


def _padded(rows: Sequence[Tensor], width: int) -> Tensor:
    return torch.stack([torch.nn.functional.pad(r, (0, width - r.shape[0])) for r in rows])


def _distributed() -> tuple[int, int]:
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


def _all_gather(values: list[Any]) -> list[Any]:
    """This rank's list concatenated with every other rank's, in rank order (identity when alone)."""
    _, world = _distributed()
    if world == 1:
        return values
    parts: list[list[Any] | None] = [None] * world
    dist.all_gather_object(parts, values)
    return [v for part in parts for v in (part or [])]


def _scatter(values: Tensor, at: Sequence[int], n: int) -> Tensor:
    """A length-`n` float64 vector with `values` at positions `at` and 0 elsewhere (padding)."""
    out = torch.zeros(n, dtype=torch.float64)
    out[list(at)] = values.to(torch.float64)
    return out


@dataclass(frozen=True)
class _Row:
    """What the metrics need of one trained step sample (gathered from every rank)."""

    new: Tensor  # log π_θ of the response tokens in the update's forward (before the optimiser step)
    old: Tensor  # log π_old
    behaviour: list[float] | None  # vLLM's recorded logprobs
    ref: Tensor | None  # log π_ref
    advantage: float
    selection: float
    entropy: float


def _summarize(rows: Sequence[_Row], loss_config: LossConfig) -> tuple[dict[str, float], list[SampleStats]]:
    """The loss metrics the update used (recomputed without a graph) and the per-sample results."""
    width = max(r.old.shape[0] for r in rows)
    old = _padded([r.old for r in rows], width)
    new = _padded([r.new for r in rows], width)
    mask = _padded([torch.ones(r.old.shape[0], dtype=torch.float64) for r in rows], width)
    recorded = [r.behaviour or [0.0] * r.old.shape[0] for r in rows]
    behaviour = _padded([torch.tensor(b, dtype=torch.float64) for b in recorded], width)
    present = torch.tensor([r.behaviour is not None for r in rows])
    ref = _padded([r.ref for r in rows if r.ref is not None], width) if loss_config.use_kl else None
    advantages = torch.tensor([r.advantage for r in rows], dtype=torch.float64)
    selection = torch.tensor([r.selection for r in rows], dtype=torch.float64)
    summary = dart_loss(
        new,
        old,
        behaviour,
        advantages,
        mask,
        selection,
        logp_ref=ref,
        behaviour_present=present,
        config=loss_config,
        normalizer=max(1.0, float(selection.sum())),
    ).metrics
    # Per sample: the IS weight the loss multiplied into its PPO term (token-level TIS: the step's mean).
    token_weight, _ = truncated_is_weight(old, behaviour, cap=loss_config.tis_cap, behaviour_present=present)
    sample_weight = masked_sample_mean(token_weight, mask)
    per_sample = [
        SampleStats(
            advantage=r.advantage,
            selected=r.selection != 0,
            entropy=r.entropy,
            logp_old=float(r.old.sum()),
            logp_behaviour=math.fsum(r.behaviour) if r.behaviour is not None else None,
            is_weight=float(sample_weight[i]) if loss_config.use_tis else 1.0,
        )
        for i, r in enumerate(rows)
    ]
    return summary, per_sample


def train_step(
    model: nn.Module,
    processor: Qwen2VLProcessor,
    samples: Sequence[StepSample],
    config: TrainConfig,
    optimizer: torch.optim.Optimizer,
    *,
    reference: nn.Module | None = None,
    out_dir: Path | None = None,
    heartbeat: Heartbeat | None = None,
) -> StepResult:
    """One optimiser step on `samples` (this rank's share of the batch under torch.distributed)."""
    beat = heartbeat or (lambda _: None)
    rank, world = _distributed()
    started = time.perf_counter()
    _check_everywhere(samples)
    model.eval()  # no dropout: π_old and π_θ must be the same function of the weights (rho starts at 1)

    # Advantages over the whole batch (every rank sees every sample's group, trajectory and reward).
    counts = _all_gather([len(samples)])
    if len(set(counts)) > 1:
        # Every forward and backward is a collective under FSDP: unequal shares would hang the ranks.
        raise InvalidTrainInput(f"ranks hold unequal numbers of samples {counts}; pad or drop to a multiple")
    keys = _all_gather([(s.group_id, s.trajectory_id, s.reward, s.padding) for s in samples])
    offset = sum(counts[:rank])
    real = [i for i, k in enumerate(keys) if not k[3]]
    if not real:
        raise InvalidTrainInput("every step sample is padding")
    try:
        advantages_real = step_advantages(
            [keys[i][0] for i in real],
            [keys[i][1] for i in real],
            [keys[i][2] for i in real],
            statistics_over=config.advantage_statistics,
        )
    except NonFiniteValueError as err:
        raise NonFiniteLossError(f"{err}; previous checkpoint kept") from err
    advantages_all = _scatter(advantages_real, real, len(keys))
    advantages = advantages_all[offset : offset + len(samples)]

    # π_old and step entropies with the current weights.
    old_rows: list[Tensor] = []
    entropies: list[float] = []
    with torch.no_grad():
        for i, s in enumerate(samples):
            logp, ent = response_logprobs(model, processor, s)
            old_rows.append(logp.double())
            entropies.append(float(ent.mean()))  # every position is a real response token here
            beat({"phase": "old-logprobs", "samplesDone": i + 1, "samples": len(samples)})
    old_seconds = time.perf_counter() - started

    # Selection over the global batch (DART: k = floor(0.8·N) over the training batch).
    all_entropies = _all_gather(entropies)
    if not all(map(math.isfinite, all_entropies)):
        raise NonFiniteLossError("a step entropy is not finite (non-finite weights?); checkpoint kept")
    if config.use_entropy_selection:
        selection_real = high_entropy_mask(
            [all_entropies[i] for i in real], top_fraction=config.entropy_top_fraction
        )
    else:
        selection_real = torch.ones(len(real), dtype=torch.float64)
    selection_all = _scatter(selection_real, real, len(all_entropies))
    selection = selection_all[offset : offset + len(samples)]
    total_selected = float(selection_all.sum())

    use_ref = reference is not None and config.loss.use_kl and config.loss.kl_beta > 0
    loss_config = config.loss if use_ref else replace(config.loss, use_kl=False)
    ref_rows: list[Tensor] = []
    if use_ref:
        assert reference is not None
        reference.eval()
        with torch.no_grad():
            for i, s in enumerate(samples):
                ref_rows.append(response_logprobs(reference, processor, s)[0].double())
                beat({"phase": "reference-logprobs", "samplesDone": i + 1, "samples": len(samples)})

    width = max(len(s.response_token_ids) for s in samples)
    old = _padded(old_rows, width)
    mask = _padded([torch.ones(len(s.response_token_ids), dtype=torch.float64) for s in samples], width)
    recorded = [s.behaviour_logprobs or [0.0] * len(s.response_token_ids) for s in samples]
    behaviour = _padded([torch.tensor(r, dtype=torch.float64) for r in recorded], width)
    present = torch.tensor([s.behaviour_logprobs is not None for s in samples])
    ref = _padded(ref_rows, width) if use_ref else None

    # The update: one sample at a time, each scaled by the global normaliser. FSDP averages gradients
    # over ranks, so each rank's share is multiplied by the world size to give the global sum.
    optimizer.zero_grad(set_to_none=True)
    new_rows: list[Tensor] = [row.clone() for row in old]
    for i, s in enumerate(samples):
        if selection[i] == 0 and world == 1:
            continue  # contributes nothing (under FSDP every rank must still run the same collectives)
        logp, _ = response_logprobs(model, processor, s)
        row = torch.nn.functional.pad(logp.double(), (0, width - logp.shape[0])).unsqueeze(0)
        out = dart_loss(
            row,
            old[i : i + 1],
            behaviour[i : i + 1],
            advantages[i : i + 1],
            mask[i : i + 1],
            selection[i : i + 1],
            logp_ref=ref[i : i + 1] if ref is not None else None,
            behaviour_present=present[i : i + 1],
            config=loss_config,
            normalizer=max(1.0, total_selected) / world,
        )
        if not torch.isfinite(out.loss):
            optimizer.zero_grad(set_to_none=True)
            raise NonFiniteLossError(f"sample {i}: the loss is not finite; previous checkpoint kept")
        out.loss.backward()
        new_rows[i] = row[0].detach()
        beat({"phase": "training", "samplesDone": i + 1, "samples": len(samples)})

    grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), config.grad_clip)
    # Under FSDP the norm is a DTensor over the shards; its full value is the global norm.
    norm = float(grad_norm.full_tensor() if isinstance(grad_norm, DTensor) else grad_norm)
    if not math.isfinite(norm):
        optimizer.zero_grad(set_to_none=True)
        raise NonFiniteLossError(f"the gradient norm is not finite ({norm}); previous checkpoint kept")
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    train_seconds = time.perf_counter() - started - old_seconds

    # Metrics and per-sample results of the whole batch: every rank's rows (without padding), in order.
    rows = _all_gather(
        [
            _Row(
                new=new_rows[i][: len(s.response_token_ids)],
                old=old_rows[i],
                behaviour=s.behaviour_logprobs,
                ref=ref_rows[i] if use_ref else None,
                advantage=float(advantages[i]),
                selection=float(selection[i]),
                entropy=entropies[i],
            )
            for i, s in enumerate(samples)
            if not s.padding
        ]
    )
    summary, per_sample = _summarize(rows, loss_config)
    metrics = {
        **summary,
        "gradNorm": norm,
        "samples": float(len(rows)),
        "tokens": float(sum(r.old.shape[0] for r in rows)),
        "entropyMean": sum(r.entropy for r in rows) / len(rows),
        "oldLogprobSeconds": old_seconds,
        "updateSeconds": train_seconds,
        "worldSize": float(world),
    }
    if out_dir is not None:
        save_started = time.perf_counter()
        save_checkpoint(model, processor, out_dir)
        metrics["saveSeconds"] = time.perf_counter() - save_started
    metrics["stepSeconds"] = time.perf_counter() - started
    return StepResult(metrics, out_dir, per_sample)


def save_checkpoint(model: nn.Module, processor: Qwen2VLProcessor, out_dir: Path) -> None:
    """A Hugging Face folder (safetensors, config, processor and tokenizer files). Under FSDP the full
    state dict is gathered and rank 0 writes it."""
    rank, world = _distributed()
    state: dict[str, Any] | None = None
    if world > 1:
        from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

        state = dict(
            get_model_state_dict(model, options=StateDictOptions(full_state_dict=True, cpu_offload=True))
        )
    if rank == 0:
        assert isinstance(model, Qwen2VLForConditionalGeneration)
        model.save_pretrained(out_dir, state_dict=state, safe_serialization=True)
        processor.save_pretrained(out_dir)
