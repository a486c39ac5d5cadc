"""The scorer: teacher-forced log-probs equal what transformers' own generation saw, the prompt is the
processor's, and message conversion accepts exactly the OpenAI form dartflow sends."""

from pathlib import Path
from typing import Any, cast

import pytest
import torch

from dartflow_vlm.messages import to_processor_messages
from dartflow_vlm.score import completion_logprobs, load, prompt_inputs

from .images import chat, data_url, screenshot


def test_logprobs_equal_generation_logits(models: dict[str, Path]) -> None:
    model, processor = load(str(models["seed0"]))
    messages = chat(screenshot())
    inputs = prompt_inputs(processor, messages)
    special = processor.tokenizer.all_special_ids
    torch.manual_seed(0)
    # generate()'s annotations do not cover a model class's own kwargs (pixel_values, image_grid_thw).
    generate = cast(Any, model).generate
    out = generate(
        **inputs,
        do_sample=True,
        max_new_tokens=12,
        suppress_tokens=special,
        output_logits=True,
        return_dict_in_generate=True,
    )
    n_prompt = inputs["input_ids"].shape[1]
    generated = [int(t) for t in out.sequences[0, n_prompt:].tolist()]
    assert len(generated) == 12
    # output_logits are the raw logits (before suppress_tokens), like vLLM's returned logprobs.
    expected = [
        float(torch.log_softmax(step[0].float(), dim=-1)[t])
        for step, t in zip(out.logits, generated, strict=True)
    ]
    prompt_ids, logprobs = completion_logprobs(model, processor, messages, generated)
    assert prompt_ids == [int(t) for t in inputs["input_ids"][0].tolist()]
    assert max(abs(a - b) for a, b in zip(logprobs, expected, strict=True)) < 1e-4


def test_other_weights_give_other_logprobs(models: dict[str, Path]) -> None:
    messages = chat(screenshot())
    tokens = [100, 200, 300, 400]
    a = completion_logprobs(*load(str(models["seed0"])), messages, tokens)[1]
    b = completion_logprobs(*load(str(models["seed1"])), messages, tokens)[1]
    assert max(abs(x - y) for x, y in zip(a, b, strict=True)) > 0.01


def test_message_conversion() -> None:
    image = screenshot(64, 48)
    hf, images = to_processor_messages(chat(image, "hi"))
    assert hf[0] == {"role": "system", "content": "You are a helpful assistant."}
    assert hf[1]["content"] == [{"type": "text", "text": "hi"}, {"type": "image"}]
    assert len(images) == 1
    assert images[0].size == (64, 48)
    assert images[0].mode == "RGB"
    assert images[0].tobytes() == image.tobytes()


def test_message_conversion_rejects_remote_images() -> None:
    bad = [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "https://x/y.png"}}]}]
    with pytest.raises(ValueError, match="data: URLs"):
        to_processor_messages(bad)
    assert data_url(screenshot(8, 8)).startswith("data:image/png;base64,")
