"""The tiny Qwen2-VL builder: determinism per seed, shared shapes and tokenizer across seeds, the
architecture asked for, and a folder that transformers' Auto classes load offline."""

import hashlib
from pathlib import Path
from typing import Any

import pytest
import torch
from safetensors import safe_open
from transformers import (
    AutoProcessor,
    Qwen2VLForConditionalGeneration,
    Qwen2VLProcessor,
    Qwen2VLTextConfig,
    Qwen2VLVisionConfig,
)

from dartflow_vlm import tiny_tokenizer as tt
from dartflow_vlm.corpus import actions

from .images import screenshot


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def shapes(model_dir: Path) -> dict[str, list[int]]:
    with safe_open(str(model_dir / "model.safetensors"), framework="pt") as f:
        return {k: list(f.get_slice(k).get_shape()) for k in f.keys()}  # noqa: SIM118 (not a dict)


def test_same_seed_gives_identical_folders(models: dict[str, Path]) -> None:
    a, b = models["seed0"], models["seed0_again"]
    assert sorted(p.name for p in a.iterdir()) == sorted(p.name for p in b.iterdir())
    for file in a.iterdir():
        assert sha256(file) == sha256(b / file.name), file.name


def test_other_seed_other_weights_same_shapes_and_tokenizer(models: dict[str, Path]) -> None:
    a, c = models["seed0"], models["seed1"]
    assert sha256(a / "model.safetensors") != sha256(c / "model.safetensors")
    assert shapes(a) == shapes(c)
    assert sha256(a / "tokenizer.json") == sha256(c / "tokenizer.json")


def test_architecture(models: dict[str, Path]) -> None:
    model = Qwen2VLForConditionalGeneration.from_pretrained(models["seed0"])
    n = sum(p.numel() for p in model.parameters())
    assert 600_000 < n < 700_000, n
    text, vision = model.config.text_config, model.config.vision_config
    assert isinstance(text, Qwen2VLTextConfig)
    assert isinstance(vision, Qwen2VLVisionConfig)
    assert (text.hidden_size, text.num_hidden_layers, text.num_attention_heads, text.num_key_value_heads) == (
        128,
        2,
        2,
        1,
    )
    rope: dict[str, Any] = dict(text.rope_parameters or {})
    assert rope["mrope_section"] == [8, 12, 12]
    assert (vision.depth, vision.embed_dim, vision.patch_size, vision.spatial_merge_size) == (2, 64, 14, 2)
    assert next(model.parameters()).dtype == torch.float32


def test_processor_loads_offline_and_caps_pixels(models: dict[str, Path]) -> None:
    processor = AutoProcessor.from_pretrained(models["seed0"])
    assert isinstance(processor, Qwen2VLProcessor)
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": [{"type": "text", "text": "Click"}, {"type": "image"}]}
    ]
    text = processor.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    assert "<|vision_start|><|image_pad|><|vision_end|>" in text
    assert text.startswith("<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n")
    assert text.endswith("<|im_start|>assistant\n")
    batch = processor(text=[text], images=[screenshot(320, 200)], return_tensors="pt")
    pad = processor.tokenizer.convert_tokens_to_ids(tt.IMAGE_PAD)
    # 320x200 is over the 50,176-pixel cap: scaled to 280x168 (multiples of 28) = 10x6 merged patches.
    assert int((batch["input_ids"] == pad).sum()) == 60
    big = processor(text=[text], images=[screenshot(1920, 1080)], return_tensors="pt")
    assert int((big["input_ids"] == pad).sum()) <= 50_176 // (28 * 28)


def test_tokenizer_specials_and_actions(models: dict[str, Path]) -> None:
    tok = AutoProcessor.from_pretrained(models["seed0"]).tokenizer
    for special in tt.SPECIAL_TOKENS:
        assert len(tok.encode(special, add_special_tokens=False)) == 1, special
    assert tok.eos_token == tt.IM_END
    samples = [*actions(3), "Thought: Größe prüfen, 日本語.\nAction: type(content='naïve')"]
    for text in samples:
        ids = tok.encode(text, add_special_tokens=False)
        assert tok.decode(ids) == text
    # The corpus is mostly actions: they take far fewer tokens than bytes.
    action = "Action: click(start_box='(120,45)')"
    assert len(tok.encode(action, add_special_tokens=False)) < len(action.encode()) / 2


def test_sizes_share_the_tokenizer_and_grow_the_model(tmp_path: Path) -> None:
    """`--size small` (the learning benchmark's larger model): more parameters, 64-wide heads, the same
    tokenizer; an unknown size is refused naming the choices."""
    from dartflow_vlm.build_tiny_model import SIZES, build

    out = tmp_path / "small"
    summary = build(out, 0, "small")
    assert summary["size"] == "small"
    params = summary["parameters"]
    assert isinstance(params, int)
    assert 3_000_000 < params < 5_000_000, params
    model = Qwen2VLForConditionalGeneration.from_pretrained(out)
    text = model.config.text_config
    assert isinstance(text, Qwen2VLTextConfig)
    assert text.hidden_size // text.num_attention_heads == 64
    assert (text.hidden_size, text.num_hidden_layers) == (SIZES["small"]["hidden"], SIZES["small"]["layers"])
    tiny = build(tmp_path / "tiny", 0)
    assert sha256(out / "tokenizer.json") == sha256(Path(str(tiny["out"])) / "tokenizer.json")
    with pytest.raises(ValueError, match=r"--size: got 'huge'; use one of tiny, small, base"):
        build(tmp_path / "huge", 0, "huge")
