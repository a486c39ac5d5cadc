"""The policy a train step starts from, and what it writes: full weights or a LoRA adapter.

- v0 is the base model folder the worker was started with (`--base-model`, the folder the vLLM
  servers started from) unless the campaign stored a v0 `hf.json`; later versions come from MinIO.
- Full mode trains every weight and writes a `save_pretrained` folder; LoRA mode (`--lora-rank`)
  trains a peft adapter on the base and writes the adapter folder, which vLLM loads in place.
- A checkpoint of another architecture than the base (config.json), or of the other kind than the
  worker trains (an adapter for a full-weight worker, a full checkpoint under a LoRA worker: an
  adapter is always relative to the served base), is a CheckpointMismatchError.
- The AdamW moments are saved as safetensors keyed by parameter name, so a later step resumes them.
- Under torch.distributed (FSDP, full weights) the weights and moments are gathered from every rank's
  shard and rank 0 writes them; restored moments are sharded like their parameters.
- Models compute on `PolicySetup.device`: the CPU, or a CUDA GPU (`cuda`: the rank's own GPU, LOCAL_RANK
  under torchrun, else the rank, modulo the GPUs present). Checkpoints and moments are written from the
  CPU either way, so a folder trained on a GPU loads on a CPU and the other way round.
"""

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from peft import LoraConfig, PeftModel, get_peft_model
from safetensors.torch import load_file, save_file
from torch import nn
from torch.distributed.tensor import DTensor, distribute_tensor
from transformers import AutoProcessor, Qwen2VLForConditionalGeneration, Qwen2VLProcessor

from .errors import CheckpointMismatchError

# The config fields that decide whether a tensor of one model fits the other.
SHAPE_FIELDS = (
    "model_type",
    "architectures",
    "vocab_size",
    "hidden_size",
    "num_hidden_layers",
    "num_attention_heads",
    "num_key_value_heads",
    "intermediate_size",
)


@dataclass(frozen=True)
class PolicySetup:
    """How this worker trains: the base folder, and LoRA (rank > 0) or full weights."""

    base_model: Path
    lora_rank: int = 0
    lora_alpha: int = 16
    lora_targets: tuple[str, ...] = ("q_proj", "k_proj", "v_proj", "o_proj")
    device: str = "cpu"  # "cpu" or "cuda" (resolve_device picks the rank's GPU)

    @property
    def kind(self) -> str:
        return "lora" if self.lora_rank > 0 else "full"


class DeviceUnavailableError(RuntimeError):
    """`--device cuda` on a machine (or a torch build) without a CUDA GPU."""


def choose_device(requested: str) -> str:
    """The worker's `--device`: `auto` is cuda when torch sees a GPU, else cpu; `cuda` without one is
    refused with the fix (a typed error, not a crash in the first train step)."""
    if requested not in ("auto", "cpu", "cuda"):
        raise ValueError(f"--device: got {requested!r}; use auto, cpu or cuda")
    has_cuda = torch.cuda.is_available()
    if requested == "cuda" and not has_cuda:
        raise DeviceUnavailableError(
            "--device cuda: torch sees no CUDA GPU here (torch.cuda.is_available() is False); run on a GPU "
            "machine with a CUDA build of torch, or pass --device cpu"
        )
    return "cuda" if requested == "cuda" or (requested == "auto" and has_cuda) else "cpu"


def gpu_index(rank: int) -> int:
    """A rank's GPU on its machine: LOCAL_RANK under torchrun, else the rank (spawned ranks share one
    machine), modulo the GPUs present."""
    return int(os.environ.get("LOCAL_RANK", rank)) % max(1, torch.cuda.device_count())


def resolve_device(setup: PolicySetup) -> torch.device:
    """This process's compute device: the CPU, or its own GPU (one rank per GPU on a machine)."""
    if setup.device != "cuda":
        return torch.device("cpu")
    return torch.device("cuda", gpu_index(_rank_world()[0]))


def _config(folder: Path) -> dict[str, Any]:
    path = folder / "config.json"
    if not path.exists():
        return {}
    loaded: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return loaded


def _shape_view(config: dict[str, Any]) -> dict[str, Any]:
    text = config.get("text_config") if isinstance(config.get("text_config"), dict) else {}
    merged = {**config, **(text or {})}
    view = {k: merged.get(k) for k in SHAPE_FIELDS}
    vision = config.get("vision_config") or {}
    view["vision"] = {k: vision.get(k) for k in ("depth", "embed_dim", "hidden_size", "patch_size")}
    return view


def check_compatible(base: Path, folder: Path, what: str) -> None:
    """A full checkpoint's config must describe the base's architecture (else the weights cannot be
    served by the vLLM servers that started from the base)."""
    want, got = _shape_view(_config(base)), _shape_view(_config(folder))
    diff = [k for k in want if want[k] != got[k]]
    if diff:
        k = diff[0]
        raise CheckpointMismatchError(
            f"{what} does not match the base model {base}: config {k} is {got[k]!r}, the base has "
            f"{want[k]!r}; train from a checkpoint of this model, or start the worker with its base"
        )


def load_processor(setup: PolicySetup) -> Qwen2VLProcessor:
    processor = AutoProcessor.from_pretrained(setup.base_model)
    assert isinstance(processor, Qwen2VLProcessor)
    return processor


def check_source(setup: PolicySetup, folder: Path | None, kind: str | None, what: str) -> None:
    """A checkpoint this worker can train from: its kind (full or LoRA) and, for full weights, the
    base's architecture (CheckpointMismatchError otherwise). Cheap: reads config.json only."""
    if folder is not None and kind != setup.kind:
        raise CheckpointMismatchError(
            f"{what} is a {kind} checkpoint but this worker trains {setup.kind} weights"
            f"{' (--lora-rank ' + str(setup.lora_rank) + ')' if setup.lora_rank else ''}; start the worker "
            "with the matching --lora-rank, or train from a checkpoint of its kind"
        )
    if folder is not None and kind == "full":
        check_compatible(setup.base_model, folder, what)


def load_policy(
    setup: PolicySetup, folder: Path | None, kind: str | None, what: str, trainable: bool
) -> nn.Module:
    """The model of a version: `folder` None means the base itself (v0)."""
    check_source(setup, folder, kind, what)
    source = folder if folder is not None and kind == "full" else setup.base_model
    try:
        model: nn.Module = Qwen2VLForConditionalGeneration.from_pretrained(source, dtype=torch.float32)
    except (RuntimeError, ValueError, OSError) as err:
        raise CheckpointMismatchError(f"{what} does not load as the base's architecture: {err}") from err
    nn.Module.to(model, resolve_device(setup))  # in place (transformers' typed `to` wants no device)
    if setup.lora_rank <= 0:
        model.requires_grad_(trainable)
        return model
    if folder is not None:
        try:
            peft_model = PeftModel.from_pretrained(model, folder, is_trainable=trainable)
        except (RuntimeError, ValueError, KeyError) as err:
            raise CheckpointMismatchError(f"{what}: the LoRA adapter does not fit the base: {err}") from err
    else:
        config = LoraConfig(
            r=setup.lora_rank,
            lora_alpha=setup.lora_alpha,
            target_modules=list(setup.lora_targets),
            lora_dropout=0.0,  # π_old and π_θ must be the same function of the weights
            bias="none",
        )
        peft_model = get_peft_model(model, config)
        if not trainable:
            peft_model.requires_grad_(False)
    return peft_model


def _rank_world() -> tuple[int, int]:
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


def _full(t: torch.Tensor) -> torch.Tensor:
    """The whole tensor of a (possibly FSDP-sharded) one: a collective for a DTensor."""
    return t.full_tensor() if isinstance(t, DTensor) else t


def shard(model: nn.Module) -> None:
    """FSDP (fully_shard) over the ranks: each decoder layer, then the rest of the model. Parameters
    become DTensors sharded along dim 0; an optimizer must be created after this."""
    from torch.distributed.fsdp import fully_shard

    if isinstance(model, PeftModel):
        raise ValueError("FSDP of a LoRA adapter is not supported: train full weights under --world-size > 1")
    assert isinstance(model, Qwen2VLForConditionalGeneration)
    for layer in model.model.language_model.layers:
        fully_shard(layer)
    fully_shard(model)


def save(model: nn.Module, processor: Qwen2VLProcessor, out_dir: Path) -> None:
    """A folder vLLM and transformers load unmodified: `save_pretrained` (safetensors, sharded below
    S3's 5 GiB single-PUT limit) plus processor files; an adapter folder for a peft model. Under FSDP
    every rank takes part in gathering the full weights and rank 0 writes the folder."""
    rank, world = _rank_world()
    state: dict[str, Any] | None = None
    if world > 1:
        from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

        state = dict(
            get_model_state_dict(model, options=StateDictOptions(full_state_dict=True, cpu_offload=True))
        )
    if rank != 0:
        return
    out_dir.mkdir(parents=True, exist_ok=True)
    if isinstance(model, PeftModel):
        model.save_pretrained(str(out_dir), safe_serialization=True)
        return
    assert isinstance(model, Qwen2VLForConditionalGeneration)
    model.save_pretrained(out_dir, state_dict=state, safe_serialization=True, max_shard_size="4GB")
    processor.save_pretrained(out_dir)


def trainable_parameters(model: nn.Module) -> dict[str, nn.Parameter]:
    return {name: p for name, p in model.named_parameters() if p.requires_grad}


def save_optimizer(model: nn.Module, optimizer: torch.optim.Optimizer, path: Path) -> None:
    """AdamW moments by parameter name: `exp_avg.<name>`, `exp_avg_sq.<name>`, `step.<name>`."""
    tensors: dict[str, torch.Tensor] = {}
    rank, _ = _rank_world()
    for name, p in trainable_parameters(model).items():
        state = optimizer.state.get(p)
        if not state:
            continue  # the same on every rank: each steps every parameter
        # Under FSDP the moments are sharded like their parameter: gathered (a collective) in name order.
        tensors[f"exp_avg.{name}"] = _full(state["exp_avg"]).detach().cpu().contiguous()
        tensors[f"exp_avg_sq.{name}"] = _full(state["exp_avg_sq"]).detach().cpu().contiguous()
        step = _full(torch.as_tensor(state["step"]))
        tensors[f"step.{name}"] = step.detach().cpu().to(torch.float32).reshape(1)
    if rank == 0:
        save_file(tensors, str(path), metadata={"format": "dartflow-adamw/1"})


def load_optimizer(model: nn.Module, optimizer: torch.optim.Optimizer, path: Path, what: str) -> None:
    """Restores saved moments into a fresh optimizer over `model`; names or shapes that differ are a
    CheckpointMismatchError (a state of another model)."""
    saved = load_file(str(path))
    for name, p in trainable_parameters(model).items():
        if f"exp_avg.{name}" not in saved:
            continue  # a parameter the previous step never updated starts fresh, as in torch
        avg, sq = saved[f"exp_avg.{name}"], saved[f"exp_avg_sq.{name}"]
        if avg.shape != p.shape or sq.shape != p.shape:
            raise CheckpointMismatchError(
                f"{what}: optimizer state of {name} has shape {tuple(avg.shape)}, "
                f"the parameter {tuple(p.shape)}"
            )
        # Saved from the CPU: the moments go where their parameter computes.
        avg, sq = avg.to(p.device), sq.to(p.device)
        if isinstance(p, DTensor):  # FSDP: this rank's shard of the moments (every rank read the file)
            avg = distribute_tensor(avg, p.device_mesh, p.placements)
            sq = distribute_tensor(sq, p.device_mesh, p.placements)
        optimizer.state[p] = {
            "step": saved[f"step.{name}"].reshape(()).clone(),
            "exp_avg": avg.clone(),
            "exp_avg_sq": sq.clone(),
        }
