"""Builds a tiny random-init Qwen2-VL folder offline: weights, tokenizer, processor, chat template.

    python -m dartflow_vlm.build_tiny_model --out DIR --seed 0

The folder is an ordinary `save_pretrained` checkpoint (safetensors), so transformers'
`AutoProcessor`/`AutoModelForImageTextToText`, vLLM and the safetensors library load it unchanged. It has
Qwen2-VL's architecture at toy size (≈668k parameters; `--size small|base` builds larger ones), which
makes the real serving and training code paths runnable on a CPU in seconds. The same seed gives
byte-identical weights; every seed of one size shares one set of tensor shapes, and every size one
tokenizer, so one model's weights can be loaded into another's server of the same size.
"""

import argparse
import json
import sys
import time
from pathlib import Path

import torch
from transformers import (
    PreTrainedTokenizerFast,
    Qwen2VLConfig,
    Qwen2VLForConditionalGeneration,
    Qwen2VLImageProcessor,
    Qwen2VLProcessor,
    Qwen2VLVideoProcessor,
)

from . import tiny_tokenizer as tt
from .chat_template import QWEN2_VL_CHAT_TEMPLATE

# The image processor's pixel cap: a 320x200 screenshot becomes 60 image tokens (28x28 px each after
# the 2x2 merge), small enough for 2048-token contexts with several screenshots.
MIN_PIXELS = 4 * 28 * 28  # 3,136
MAX_PIXELS = 64 * 28 * 28  # 50,176
PATCH_SIZE = 14
MERGE_SIZE = 2
TEMPORAL_PATCH_SIZE = 2


def build_tokenizer() -> PreTrainedTokenizerFast:
    tok = PreTrainedTokenizerFast(
        tokenizer_object=tt.train_tokenizer(),
        eos_token=tt.IM_END,
        pad_token=tt.ENDOFTEXT,
        # Real Qwen tokenizers add no BOS: the chat template is the whole prompt.
        bos_token=None,
        unk_token=None,
        additional_special_tokens=[t for t in tt.SPECIAL_TOKENS if t not in (tt.IM_END, tt.ENDOFTEXT)],
        model_max_length=32768,
        clean_up_tokenization_spaces=False,
    )
    tok.chat_template = QWEN2_VL_CHAT_TEMPLATE
    return tok


# Model sizes, all Qwen2-VL's architecture: `tiny` (≈668k parameters) makes the serving and training code
# paths run in seconds (the tests); `small` (≈3.7M) and `base` (≈18.9M) are for learning benchmarks
# (bench/vlm.ts), which need capacity to read a screen. Every size keeps 64-wide attention heads, so
# M-RoPE's [8, 12, 12] split of the 32 rotary pairs holds for all of them.
SIZES: dict[str, dict[str, int]] = {
    "tiny": {"hidden": 128, "layers": 2, "heads": 2, "kv_heads": 1, "vision_depth": 2, "vision_width": 64},
    "small": {"hidden": 256, "layers": 4, "heads": 4, "kv_heads": 2, "vision_depth": 4, "vision_width": 128},
    "base": {"hidden": 512, "layers": 6, "heads": 8, "kv_heads": 2, "vision_depth": 6, "vision_width": 256},
}


def build_config(tok: PreTrainedTokenizerFast, size: str = "tiny") -> Qwen2VLConfig:
    def tid(token: str) -> int:
        i = tok.convert_tokens_to_ids(token)
        assert isinstance(i, int), token
        return i

    if size not in SIZES:
        raise ValueError(f"--size: got {size!r}; use one of {', '.join(SIZES)}")
    d = SIZES[size]
    # Qwen2-VL ties nothing; its text vocab covers the whole tokenizer including special tokens.
    vocab_size = len(tok)
    return Qwen2VLConfig(
        text_config={
            "vocab_size": vocab_size,
            "hidden_size": d["hidden"],
            "intermediate_size": 2 * d["hidden"],
            "num_hidden_layers": d["layers"],
            "num_attention_heads": d["heads"],
            "num_key_value_heads": d["kv_heads"],
            "max_position_embeddings": 4096,
            # M-RoPE: the 32 rotary frequency pairs of a 64-wide head split into temporal, height and
            # width sections (Qwen2-VL-7B uses [16, 24, 24] for 128-wide heads).
            "rope_parameters": {
                "rope_type": "default",
                "rope_theta": 1_000_000.0,
                "mrope_section": [8, 12, 12],
            },
            "bos_token_id": tid(tt.ENDOFTEXT),
            "eos_token_id": tid(tt.IM_END),
            "pad_token_id": tid(tt.ENDOFTEXT),
        },
        vision_config={
            "depth": d["vision_depth"],
            "embed_dim": d["vision_width"],
            "hidden_size": d["hidden"],  # the merger projects into the text model's width
            "num_heads": d["vision_width"] // 32,
            "mlp_ratio": 2,
            "patch_size": PATCH_SIZE,
            "spatial_merge_size": MERGE_SIZE,
            "temporal_patch_size": TEMPORAL_PATCH_SIZE,
        },
        image_token_id=tid(tt.IMAGE_PAD),
        video_token_id=tid(tt.VIDEO_PAD),
        vision_start_token_id=tid(tt.VISION_START),
        vision_end_token_id=tid(tt.VISION_END),
        tie_word_embeddings=False,
    )


def build_processor(tok: PreTrainedTokenizerFast) -> Qwen2VLProcessor:
    image_processor = Qwen2VLImageProcessor(
        min_pixels=MIN_PIXELS,
        max_pixels=MAX_PIXELS,
        patch_size=PATCH_SIZE,
        merge_size=MERGE_SIZE,
        temporal_patch_size=TEMPORAL_PATCH_SIZE,
    )
    video_processor = Qwen2VLVideoProcessor(
        min_pixels=MIN_PIXELS,
        max_pixels=MAX_PIXELS,
        patch_size=PATCH_SIZE,
        merge_size=MERGE_SIZE,
        temporal_patch_size=TEMPORAL_PATCH_SIZE,
    )
    return Qwen2VLProcessor(
        image_processor=image_processor,
        tokenizer=tok,
        video_processor=video_processor,
        chat_template=QWEN2_VL_CHAT_TEMPLATE,
    )


def build(out: Path, seed: int, size: str = "tiny") -> dict[str, object]:
    """Writes the model folder and returns a short summary (parameter count, vocabulary, files)."""
    tok = build_tokenizer()
    config = build_config(tok, size)
    # Seeding right before construction makes the random init a function of the seed alone.
    torch.manual_seed(seed)
    model = Qwen2VLForConditionalGeneration(config).eval()  # float32, the default dtype
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out, safe_serialization=True)
    build_processor(tok).save_pretrained(out)
    return {
        "out": str(out),
        "seed": seed,
        "size": size,
        "parameters": sum(p.numel() for p in model.parameters()),
        "vocab_size": len(tok),
        "special_token_ids": sorted(tok.all_special_ids),
        "files": sorted(p.name for p in out.iterdir()),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True, help="folder to write (created if missing)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the random weights")
    parser.add_argument("--size", choices=sorted(SIZES), default="tiny", help="model size (SIZES)")
    args = parser.parse_args(argv)
    started = time.monotonic()
    summary = build(args.out, args.seed, args.size)
    summary["seconds"] = round(time.monotonic() - started, 2)
    json.dump(summary, sys.stdout)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
