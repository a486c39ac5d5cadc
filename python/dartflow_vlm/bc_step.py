"""Behaviour cloning of a VLM (the `behaviourClone` activity's computation): minimise the token-mean
negative log-likelihood of the demonstrated responses, through the same teacher forcing as the RL step.

Per epoch the demonstrations are shuffled with a seed derived from the step (a retry sees the same
order), cut into minibatches of `minibatch_size`, and each minibatch is one AdamW step (gradient clip
2.0, no weight decay: the TypeScript trainer's BC settings). Gradients accumulate one sample at a time,
so memory does not grow with the minibatch.

Under torch.distributed (FSDP) every rank holds every demonstration and takes its contiguous share of
each minibatch (padded with weight-0 copies so all ranks run as many forwards and backwards); FSDP
averages the gradients over ranks, so each share's loss is scaled by the world size: the same update as
one process on the whole minibatch.
"""

import math
import random
import time
from collections.abc import Sequence

import torch
from torch import nn
from torch.distributed.tensor import DTensor
from transformers import Qwen2VLProcessor

from .errors import NonFiniteLossError
from .train_step import Heartbeat, StepSample, _all_gather, _distributed, response_logprobs

BC_GRAD_CLIP = 2.0


def bc_epochs(
    model: nn.Module,
    processor: Qwen2VLProcessor,
    samples: Sequence[StepSample],
    optimizer: torch.optim.Optimizer,
    *,
    epochs: int,
    minibatch_size: int,
    seed: str,
    heartbeat: Heartbeat,
) -> dict[str, float]:
    model.eval()  # no dropout: the same function the rollouts sample from
    rank, world = _distributed()
    rng = random.Random(seed)
    loss_sum = 0.0
    grad_norm_sum = 0.0
    updates = 0
    started = time.perf_counter()
    last_epoch_loss, last_epoch_updates = 0.0, 0
    for epoch in range(epochs):
        last_epoch_loss, last_epoch_updates = 0.0, 0
        order = list(range(len(samples)))
        rng.shuffle(order)
        for start in range(0, len(order), minibatch_size):
            rows = [samples[i] for i in order[start : start + minibatch_size]]
            share = -(-len(rows) // world)
            weighted = [(s, 1.0) for s in rows] + [(rows[0], 0.0)] * (share * world - len(rows))
            optimizer.zero_grad(set_to_none=True)
            losses: list[float] = []
            for s, weight in weighted[rank * share : (rank + 1) * share]:
                logp, _ = response_logprobs(model, processor, s)
                loss = -logp.mean() * weight / len(rows)
                finite = bool(torch.isfinite(loss))
                if world > 1:  # refused on every rank, or none would leave the next collective
                    finite = all(_all_gather([finite]))
                if not finite:
                    optimizer.zero_grad(set_to_none=True)
                    raise NonFiniteLossError("the BC loss is not finite; previous checkpoint kept")
                (loss * world).backward()  # FSDP averages the ranks' gradients
                losses.append(float(loss.detach()))
            batch_loss = math.fsum(_all_gather(losses))
            total_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), BC_GRAD_CLIP)
            norm = float(total_norm.full_tensor() if isinstance(total_norm, DTensor) else total_norm)
            if not math.isfinite(norm):
                optimizer.zero_grad(set_to_none=True)
                raise NonFiniteLossError(
                    f"the BC gradient norm is not finite ({norm}); previous checkpoint kept"
                )
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            loss_sum += batch_loss
            grad_norm_sum += norm
            updates += 1
            last_epoch_loss += batch_loss
            last_epoch_updates += 1
            heartbeat({"phase": "bc", "epoch": epoch, "minibatch": updates})
    return {
        "bcLoss": loss_sum / max(1, updates),
        # Whether cloning converged: the mean loss of the last pass alone.
        "bcLossLastEpoch": last_epoch_loss / max(1, last_epoch_updates),
        "stepSeconds": time.perf_counter() - started,
        "gradNorm": grad_norm_sum / max(1, updates),
        "samples": float(len(samples)),
        "optimizerSteps": float(updates),
    }
