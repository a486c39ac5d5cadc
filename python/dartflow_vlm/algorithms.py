"""DART's algorithm core on token log-probs (reference/dart-spec.md §4), the VLM twin of algorithms/*.ts.

Pure functions on torch tensors; each one mirrors a TypeScript function number for number, and
tests/test_algorithms_parity.py checks that on the golden fixtures the TypeScript side writes
(test/fixtures/golden/algorithms.json). The TypeScript trainer works on step samples whose action is
one "token"; here a step sample's response has T tokens, so every per-sample quantity becomes a
per-token one with a response mask:

- advantages: one per step sample (step-wise GRPO, `step_advantages`), broadcast to every token;
- PPO clipped surrogate with dual clip, TIS weight and k3 KL: per token (the formulas of ppo.ts,
  importance.ts and kl.ts applied elementwise);
- entropy: per token from the logits; a step's entropy is the masked mean over its response tokens,
  and the top-80 % mask selects step samples (entropy-mask.ts);
- aggregation "seq-mean-token-mean" (DART's, §4.3): the masked token mean inside each step sample,
  then the mean over the selected step samples. Every step sample weighs the same whatever its
  response length, as one step sample is one sample in DART's data shape (§4.1); with one-token
  responses it is exactly computeLoss's step-level mean (algorithms/loss.ts), which is what makes the
  two trainers' losses comparable. (verl's default "token-mean" would let long responses dominate.)

Shapes: B step samples, T response tokens (right-padded); `mask` is 1.0 on real response tokens.
Computations run in the dtype of the inputs; the parity tests use float64.
"""

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import torch
from torch import Tensor


class NonFiniteValueError(ValueError):
    """A NaN or ±inf reached an algorithm (algorithms/common.ts NonFiniteValueError): one such value
    turns every advantage and gradient of the batch into NaN, so it is refused instead."""

    def __init__(self, field: str, index: int = -1) -> None:
        self.field = field
        self.index = index
        where = f"[{index}]" if index >= 0 else ""
        super().__init__(f"{field}{where} is not finite; refusing to train on it")


def assert_finite(values: Tensor | Sequence[float], field: str) -> None:
    t = values if isinstance(values, Tensor) else torch.tensor(list(values), dtype=torch.float64)
    bad = (~torch.isfinite(t.detach())).flatten().nonzero()
    if bad.numel() > 0:
        raise NonFiniteValueError(field, int(bad[0, 0]))


# ---------------------------------------------------------------- advantages (advantages.ts, §4.2)

StatisticsOver = Literal["steps", "trajectories"]


def group_advantages(
    rewards: Sequence[float],
    num_steps: Sequence[int],
    *,
    epsilon: float = 1e-6,
    statistics_over: StatisticsOver = "steps",
    normalize_by_std: bool = True,
    unbiased_std: bool = True,
) -> list[float]:
    """A = (R - mean_g) / (std_g + ε) for the trajectories of one group (groupAdvantages).

    Statistics over step samples by default (DART's code: a trajectory of 12 steps weighs 12 times),
    Bessel std; a one-element population gets mean 0 and std 1 (verl), all-equal rewards give exactly 0.
    Plain float arithmetic in the same order as the TypeScript, so the numbers are bit-identical.
    """
    assert_finite(rewards, "reward")
    weights = [n if statistics_over == "steps" else 1 for n in num_steps]
    count = sum(weights)
    if count == 0:
        return [0.0 for _ in rewards]
    if count == 1:
        mean, std = 0.0, 1.0
    else:
        total = 0.0
        for w, r in zip(weights, rewards, strict=True):
            total += w * r
        mean = total / count
        squares = 0.0
        for w, r in zip(weights, rewards, strict=True):
            squares += w * (r - mean) ** 2
        std = math.sqrt(squares / (count - 1 if unbiased_std else count))
    counted = [r for w, r in zip(weights, rewards, strict=True) if w > 0]
    if count > 1 and all(r == counted[0] for r in counted):
        # Exactly zero rather than round-off such as 1e-16 / 1e-6.
        return [0.0 for _ in rewards]
    return [(r - mean) / (std + epsilon) if normalize_by_std else r - mean for r in rewards]


def step_advantages(
    group_ids: Sequence[str],
    trajectory_ids: Sequence[str],
    rewards: Sequence[float],
    *,
    epsilon: float = 1e-6,
    statistics_over: StatisticsOver = "steps",
) -> Tensor:
    """One advantage per step sample (float64 [B]), grouped by group id (stepAdvantages).

    Over all step samples of a group in the batch, so a duplicated sample counts twice, as in DART.
    Every step of a trajectory must carry its trajectory's reward.
    """
    if not len(group_ids) == len(trajectory_ids) == len(rewards):
        raise ValueError("group_ids, trajectory_ids and rewards must have the same length")
    assert_finite(rewards, "reward")
    # group → trajectory → [reward, steps]; dicts keep insertion order, like the TypeScript Maps.
    groups: dict[str, dict[str, list[float]]] = {}
    for g, t, r in zip(group_ids, trajectory_ids, rewards, strict=True):
        traj = groups.setdefault(g, {}).get(t)
        if traj is None:
            groups[g][t] = [r, 1]
        elif traj[0] != r:
            raise ValueError(f"trajectory {t} has steps with different rewards ({traj[0]} and {r})")
        else:
            traj[1] += 1
    advantage: dict[tuple[str, str], float] = {}
    for g, trajs in groups.items():
        values = group_advantages(
            [v[0] for v in trajs.values()],
            [int(v[1]) for v in trajs.values()],
            epsilon=epsilon,
            statistics_over=statistics_over,
        )
        advantage.update({(g, t): a for t, a in zip(trajs, values, strict=True)})
    return torch.tensor(
        [advantage[(g, t)] for g, t in zip(group_ids, trajectory_ids, strict=True)], dtype=torch.float64
    )


def broadcast_to_tokens(per_step: Tensor, mask: Tensor) -> Tensor:
    """[B] → [B, T]: a step's value on each of its response tokens, 0 on padding (§4.2)."""
    return per_step.to(mask.dtype).unsqueeze(1) * mask


# ---------------------------------------------------------------- PPO (ppo.ts, §4.3)


@dataclass(frozen=True)
class PpoTerms:
    loss: Tensor  # [B, T] surrogate loss per token (to minimise)
    ratio: Tensor  # rho = π/π_old after the log-ratio clamp
    clipped: Tensor  # bool: the ε-clip was active (L2 > L1 strictly)
    dual_clipped: Tensor  # bool: the dual clip was active


def ppo_clipped_surrogate(
    logp: Tensor,
    logp_old: Tensor,
    advantage: Tensor,
    *,
    clip_low: float = 0.1,
    clip_high: float = 0.28,
    dual_clip: float | None = 10.0,
    log_ratio_clamp: float = 20.0,
    use_clip: bool = True,
) -> PpoTerms:
    """verl's "vanilla" token loss: rho = exp(clamp(logp - logp_old, ±20)), L = max(-A*rho, -A·clip(rho)),
    and for A < 0 the dual clip L = min(L, -A·c). `advantage` broadcasts against logp ([B, 1] or [B, T]).

    Gradients flow through `logp` only. The branches are chosen with strict comparisons and
    torch.where (not torch.maximum, which splits the gradient on ties), so autograd's dL/dlogp equals
    ppo.ts's dLossDLogp: 0 wherever a clip or the ±20 clamp is active.
    """
    if dual_clip is not None and not dual_clip > 1:
        raise ValueError(f"dual_clip must be > 1, got {dual_clip}")
    advantage = advantage.to(logp.dtype)
    ratio = torch.exp(torch.clamp(logp - logp_old, -log_ratio_clamp, log_ratio_clamp))
    unclipped = -advantage * ratio
    no = torch.zeros_like(unclipped, dtype=torch.bool)
    if not use_clip:
        return PpoTerms(unclipped, ratio.detach(), no, no)
    clipped_loss = -advantage * torch.clamp(ratio, 1 - clip_low, 1 + clip_high)
    clipped = clipped_loss.detach() > unclipped.detach()
    # The clipped branch is constant in logp where it wins (clip(rho) is at a bound).
    loss = torch.where(clipped, clipped_loss.detach(), unclipped)
    dual = no
    if dual_clip is not None:
        cap = (-advantage * dual_clip).expand_as(loss)
        dual = (advantage < 0) & (loss.detach() > cap)
        loss = torch.where(dual, cap, loss)
    return PpoTerms(loss, ratio.detach(), clipped, dual)


# ---------------------------------------------------------------- truncated IS (importance.ts, §4.4)


def truncated_is_weight(
    logp_old: Tensor,
    logp_behaviour: Tensor,
    *,
    cap: float = 1.0,
    behaviour_present: Tensor | None = None,
) -> tuple[Tensor, Tensor]:
    """w = min(exp(logp_old - logp_behaviour), C) per token, and whether it was cut to C.

    `behaviour_present` ([B] bool) marks step samples with recorded behaviour log-probs; the others
    (imported demonstrations, a server that returned none) get w = min(1, C), DART's substitution of
    the trainer's own log-probs. w is a constant of the update (no gradient).
    """
    if not cap > 0:
        raise ValueError(f"TIS cap must be > 0, got {cap}")
    raw = torch.exp(logp_old.detach() - logp_behaviour.detach())
    truncated = raw > cap
    weight = torch.where(truncated, torch.full_like(raw, cap), raw)
    if behaviour_present is not None:
        missing = ~behaviour_present.unsqueeze(1).expand_as(weight)
        weight = torch.where(missing, torch.full_like(weight, min(1.0, cap)), weight)
        truncated = torch.where(missing, torch.full_like(truncated, cap < 1), truncated)
    return weight, truncated


# ---------------------------------------------------------------- k3 KL (kl.ts, §4.3)


def low_var_kl(
    logp: Tensor, logp_ref: Tensor, *, log_ratio_clamp: float = 20.0, kl_clamp: float = 10.0
) -> Tensor:
    """k3 estimator of KL(π_θ ‖ π_ref) per token with verl's clamps:
    d = clamp(logp_ref - logp, ±20), kl = clamp(exp(d) - d - 1, ±10). Gradient 1 - exp(d) inside both
    clamps, 0 where one is active (torch.clamp passes the gradient on the closed interval, as kl.ts)."""
    d = torch.clamp(logp_ref.detach() - logp, -log_ratio_clamp, log_ratio_clamp)
    return torch.clamp(torch.exp(d) - d - 1, -kl_clamp, kl_clamp)


# ---------------------------------------------------------------- entropy selection (entropy-mask.ts, §4.5)


def token_entropy(logits: Tensor) -> Tensor:
    """Entropy of the next-token distribution at each position: [..., V] → [...]."""
    logp = torch.log_softmax(logits.float(), dim=-1)
    return -(logp.exp() * logp).sum(dim=-1)


def step_entropy(token_entropies: Tensor, mask: Tensor) -> Tensor:
    """Mean token entropy over each step's real response tokens ([B, T] → [B]). The masked mean, not
    the mean over the padded length of DART's commented-out code (§4.5 re-implementation note)."""
    m = mask.to(token_entropies.dtype)
    return (token_entropies * m).sum(dim=1) / m.sum(dim=1).clamp(min=1)


def selection_count(n: int, top_fraction: float, min_selected: int = 1) -> int:
    """k = floor(top_fraction x n) (with a 1e-9 guard against 0.29 x 100 = 28.999…), at least
    min(min_selected, n)."""
    k = math.floor(top_fraction * n + 1e-9)
    return min(n, max(k, min(min_selected, n)))


def high_entropy_mask(
    entropies: Sequence[float] | Tensor,
    *,
    top_fraction: float = 0.8,
    scope: Literal["batch", "group"] = "batch",
    group_ids: Sequence[str] | None = None,
    min_selected: int = 1,
) -> Tensor:
    """0/1 mask (float64 [B]) of the top-k step samples by entropy, per batch or per group.
    Ties keep input order (the earlier sample wins), so a retried step selects the same samples."""
    if not 0 < top_fraction <= 1:
        raise ValueError(f"top_fraction must be in (0, 1], got {top_fraction}")
    values = [float(x) for x in (entropies.tolist() if isinstance(entropies, Tensor) else entropies)]
    assert_finite(values, "entropy")
    n = len(values)
    if scope == "batch":
        scopes = [list(range(n))]
    else:
        if group_ids is None or len(group_ids) != n:
            raise ValueError(f"scope 'group' needs one group id per entropy ({n})")
        by_group: dict[str, list[int]] = {}
        for i, g in enumerate(group_ids):
            by_group.setdefault(g, []).append(i)
        scopes = list(by_group.values())
    mask = torch.zeros(n, dtype=torch.float64)
    for indices in scopes:
        k = selection_count(len(indices), top_fraction, min_selected)
        order = sorted(indices, key=lambda i: (-values[i], i))
        mask[order[:k]] = 1.0
    return mask


# ---------------------------------------------------------------- the loss (loss.ts, §4.3-4.5)


@dataclass(frozen=True)
class LossConfig:
    """The loss fields of schemas/config.ts TrainerSchema (same defaults, DART's constants)."""

    clip_low: float = 0.1
    clip_high: float = 0.28
    dual_clip: float = 10.0
    tis_cap: float = 1.0
    kl_beta: float = 0.1
    use_tis: bool = True
    use_kl: bool = True
    use_clip: bool = True


@dataclass(frozen=True)
class LossOutput:
    loss: Tensor  # scalar; backward() through it
    metrics: dict[str, float]


def masked_sample_mean(values: Tensor, mask: Tensor) -> Tensor:
    """Token mean inside each step sample ([B, T] → [B]); 0 for a sample without tokens."""
    return (values * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1)


def dart_loss(
    logp: Tensor,
    logp_old: Tensor,
    logp_behaviour: Tensor,
    advantages: Tensor,
    mask: Tensor,
    selection: Tensor,
    *,
    logp_ref: Tensor | None = None,
    behaviour_present: Tensor | None = None,
    config: LossConfig = LossConfig(),
    normalizer: float | None = None,
) -> LossOutput:
    """total = (1/D) Σ_i s_i · tokenmean_t( w_it·L_it + β·KL_it ),  D = Σ_i s_i unless given.

    logp* and mask are [B, T]; advantages and selection ([B], 0/1) are per step sample. As loss.ts:
    the TIS weight multiplies the PPO term only, the selection removes a sample from every term, and
    `normalizer` fixes D when one optimiser step accumulates several micro-batches (or ranks).
    """
    for name, t in (("logp", logp), ("logpOld", logp_old), ("logpBehaviour", logp_behaviour)):
        assert_finite(t, name)
    assert_finite(advantages, "advantage")
    if logp_ref is not None:
        assert_finite(logp_ref, "logpRef")
    elif config.use_kl and config.kl_beta > 0:
        raise ValueError("use_kl is on but no reference log-probs were given")
    dtype = logp.dtype
    mask = mask.to(dtype)
    selection = selection.to(dtype)
    ppo = ppo_clipped_surrogate(
        logp,
        logp_old,
        advantages.to(dtype).unsqueeze(1),
        clip_low=config.clip_low,
        clip_high=config.clip_high,
        dual_clip=config.dual_clip,
        use_clip=config.use_clip,
    )
    weight, truncated = truncated_is_weight(
        logp_old, logp_behaviour, cap=config.tis_cap, behaviour_present=behaviour_present
    )
    w = weight if config.use_tis else torch.ones_like(weight)
    kl = low_var_kl(logp, logp_ref) if logp_ref is not None else torch.zeros_like(logp)
    beta = config.kl_beta if config.use_kl else 0.0

    pg_i = masked_sample_mean(w * ppo.loss, mask)
    kl_i = masked_sample_mean(kl, mask)
    num_selected = float(selection.sum())
    d = normalizer if normalizer is not None else num_selected
    if normalizer is not None and not (normalizer > 0 and math.isfinite(normalizer)):
        raise ValueError(f"normalizer must be finite and > 0, got {normalizer}")
    # Nothing selected: loss 0 with zero gradients rather than 0/0.
    loss = (logp * 0).sum() if num_selected == 0 else (selection * (pg_i + beta * kl_i)).sum() / d

    def sel_mean(per_sample: Tensor) -> float:
        return float((selection * per_sample).sum()) / num_selected if num_selected else 0.0

    tokens = mask.sum()
    metrics = {
        "loss": float(loss.detach()),
        "pgLoss": sel_mean(pg_i.detach()),
        "kl": sel_mean(kl_i.detach()),
        "clipFraction": sel_mean(masked_sample_mean(ppo.clipped.to(dtype), mask)),
        "dualClipFraction": sel_mean(masked_sample_mean(ppo.dual_clipped.to(dtype), mask)),
        "ratioMean": sel_mean(masked_sample_mean(ppo.ratio, mask)),
        # Token-level IS statistics over all samples: the data's off-policyness, reported even when
        # use_tis is off.
        "isWeightMean": float((weight * mask).sum() / tokens) if tokens > 0 else 1.0,
        "isWeightMin": float(weight[mask > 0].min()) if tokens > 0 else 1.0,
        "isWeightTruncatedFraction": (
            float((truncated.to(dtype) * mask).sum() / tokens) if tokens > 0 else 0.0
        ),
        "selectedFraction": num_selected / max(1, selection.numel()),
        "numSamples": float(selection.numel()),
        "numSelected": num_selected,
    }
    return LossOutput(loss, metrics)
