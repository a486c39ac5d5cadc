"""Log-probabilities of given completion tokens under a model folder, recomputed by teacher forcing.

    echo '{"model_dir": DIR, "requests": [{"messages": [...], "completion_token_ids": [...]}]}' \\
      | python -m dartflow_vlm.score
    → {"results": [{"prompt_token_ids": [...], "logprobs": [...]}]}

This is the trainer's view of a rollout (the π_old of PPO/TIS): the same prompt as vLLM rendered it
(OpenAI messages with base64 screenshots), then the exact token ids vLLM sampled. Comparing it with
vLLM's own logprobs checks that serving and training agree on weights, prompt and image processing.
"""

import json
import sys
from typing import Any

import torch
from transformers import AutoProcessor, Qwen2VLForConditionalGeneration, Qwen2VLProcessor

from .messages import to_processor_messages


def prompt_inputs(processor: Qwen2VLProcessor, messages: list[dict[str, Any]]) -> dict[str, torch.Tensor]:
    """input_ids, attention_mask and (with images) pixel_values/image_grid_thw of the generation prompt."""
    hf_messages, images = to_processor_messages(messages)
    text = processor.apply_chat_template(hf_messages, tokenize=False, add_generation_prompt=True)
    assert isinstance(text, str)
    batch = processor(text=[text], images=images or None, return_tensors="pt")
    return {k: v for k, v in batch.items() if isinstance(v, torch.Tensor)}


@torch.no_grad()
def completion_logprobs(
    model: Qwen2VLForConditionalGeneration,
    processor: Qwen2VLProcessor,
    messages: list[dict[str, Any]],
    completion_token_ids: list[int],
) -> tuple[list[int], list[float]]:
    """(prompt token ids, log p(token_t | prompt, tokens_<t) for each completion token)."""
    device = next(model.parameters()).device
    inputs = {k: v.to(device) for k, v in prompt_inputs(processor, messages).items()}
    prompt_ids = inputs["input_ids"]
    completion = torch.tensor([completion_token_ids], dtype=prompt_ids.dtype, device=device)
    input_ids = torch.cat([prompt_ids, completion], dim=1)
    attention_mask = torch.ones_like(input_ids)
    extra = {k: v for k, v in inputs.items() if k not in ("input_ids", "attention_mask")}
    if "mm_token_type_ids" in extra:
        # One type per token (0 = text, 1 = image): the completion tokens are text.
        types = extra["mm_token_type_ids"]
        extra["mm_token_type_ids"] = torch.cat(
            [types, torch.zeros_like(completion, dtype=types.dtype)], dim=1
        )
    logits = model(input_ids=input_ids, attention_mask=attention_mask, **extra).logits
    # The logits at position i predict token i+1: the completion's tokens are predicted from the last
    # prompt position on.
    n_prompt = prompt_ids.shape[1]
    step_logits = logits[0, n_prompt - 1 : n_prompt - 1 + len(completion_token_ids)].float()
    logprobs = torch.log_softmax(step_logits, dim=-1).gather(1, completion[0].unsqueeze(1)).squeeze(1)
    return [int(t) for t in prompt_ids[0].tolist()], [float(x) for x in logprobs.tolist()]


def load(model_dir: str) -> tuple[Qwen2VLForConditionalGeneration, Qwen2VLProcessor]:
    model = Qwen2VLForConditionalGeneration.from_pretrained(model_dir, dtype=torch.float32).eval()
    processor = AutoProcessor.from_pretrained(model_dir)
    assert isinstance(processor, Qwen2VLProcessor)
    return model, processor


def main() -> int:
    request = json.load(sys.stdin)
    model, processor = load(request["model_dir"])
    results = []
    for item in request["requests"]:
        prompt_ids, logprobs = completion_logprobs(
            model, processor, item["messages"], item["completion_token_ids"]
        )
        results.append({"prompt_token_ids": prompt_ids, "logprobs": logprobs})
    json.dump({"results": results}, sys.stdout)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
