"""Data-parallel training with FSDP (torch.distributed.fsdp.fully_shard) on 2 CPU processes over gloo:
each rank trains on its half of the batch, and after one step both ranks hold the same full weights,
equal to a single process's step on the whole batch (entropy selection, advantages and the loss
normaliser are global), and rank 0's `save_pretrained` folder holds them. A NaN input on one rank
refuses the step on every rank."""

import math
import os
import socket
from dataclasses import replace
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.distributed as dist
from torch.multiprocessing.spawn import spawn

from dartflow_vlm.errors import NonFiniteLossError
from dartflow_vlm.score import load
from dartflow_vlm.train_step import StepSample, TrainConfig, make_optimizer, train_step

from .test_train_step import make_samples

CONFIG = TrainConfig(learning_rate=1e-3)
WORLD = 2


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _rank_main(rank: int, port: int, model_dir: str, samples: list[StepSample], out: str) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)  # two ranks on a 2-core machine
    # A bounded collective timeout: a rank left waiting fails the test instead of hanging it.
    dist.init_process_group("gloo", rank=rank, world_size=WORLD, timeout=timedelta(seconds=120))
    try:
        from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict
        from torch.distributed.fsdp import fully_shard

        model, processor = load(model_dir)
        for layer in model.model.language_model.layers:
            fully_shard(layer)
        fully_shard(model)
        share = len(samples) // WORLD
        mine = samples[rank * share : (rank + 1) * share]
        result = train_step(
            model, processor, mine, CONFIG, make_optimizer(model, CONFIG), out_dir=Path(out) / "checkpoint"
        )
        full = get_model_state_dict(model, options=StateDictOptions(full_state_dict=True))
        # A NaN on one rank only: every rank must refuse (and none wait for the other forever).
        poisoned = [replace(s, behaviour_logprobs=[math.nan] * len(s.response_token_ids)) for s in mine]
        refused = ""
        try:
            train_step(
                model, processor, poisoned if rank == 1 else mine, CONFIG, make_optimizer(model, CONFIG)
            )
        except NonFiniteLossError as err:
            refused = err.type
        torch.save(
            {"weights": dict(full), "metrics": result.metrics, "refused": refused},
            Path(out) / f"rank{rank}.pt",
        )
    finally:
        dist.destroy_process_group()


def test_two_fsdp_ranks_end_with_identical_weights_equal_to_one_process(
    models: dict[str, Path], tmp_path: Path
) -> None:
    model, processor = load(str(models["seed0"]))
    samples = make_samples(model, processor, 4)
    before = {k: v.clone() for k, v in model.state_dict().items()}

    spawn(_rank_main, args=(_free_port(), str(models["seed0"]), samples, str(tmp_path)), nprocs=WORLD)
    ranks: list[dict[str, Any]] = [torch.load(tmp_path / f"rank{r}.pt") for r in range(WORLD)]
    w0, w1 = ranks[0]["weights"], ranks[1]["weights"]
    assert w0.keys() == w1.keys() == before.keys()
    assert all(torch.equal(w0[k], w1[k]) for k in w0), "the ranks diverged"
    assert sum(not torch.equal(w0[k], before[k]) for k in w0) > len(w0) // 2, "the step changed nothing"

    # The same step in one process on the whole batch.
    single = train_step(model, processor, samples, CONFIG, make_optimizer(model, CONFIG))
    ref = model.state_dict()
    worst = max(float((w0[k] - ref[k]).abs().max()) for k in ref)
    # Adam's first step moves every weight by about ±lr; reduction order only perturbs the last bits.
    assert worst < 1e-2 * CONFIG.learning_rate, worst
    assert ranks[0]["metrics"]["gradNorm"] == pytest.approx(single.metrics["gradNorm"], rel=1e-5)

    assert [r["refused"] for r in ranks] == ["NonFiniteLossError"] * WORLD

    saved = (tmp_path / "checkpoint" / "model.safetensors").is_file()
    assert saved, "rank 0 did not write the checkpoint folder"
