"""OpenAI chat messages (as sent to vLLM) → the messages and images transformers' processor takes.

The trainer must rebuild exactly the prompt vLLM sampled from; this is the one place that maps the
OpenAI form (text parts, base64 `image_url` parts) to the processor's form (`{"type": "image"}` parts plus
a list of PIL images in order), which is the mapping vLLM applies before rendering the chat template.
"""

import base64
import io
from typing import Any

from PIL import Image


def decode_data_url(url: str) -> Image.Image:
    """A `data:image/...;base64,...` URL as an RGB image (vLLM also converts every image to RGB)."""
    if not url.startswith("data:"):
        raise ValueError(f"only data: URLs are supported offline, got {url[:40]!r}")
    _, _, payload = url.partition(",")
    image = Image.open(io.BytesIO(base64.b64decode(payload)))
    return image.convert("RGB")


def to_processor_messages(
    messages: list[dict[str, Any]],
) -> tuple[list[dict[str, Any]], list[Image.Image]]:
    out: list[dict[str, Any]] = []
    images: list[Image.Image] = []
    for message in messages:
        content = message["content"]
        if isinstance(content, str):
            out.append({"role": message["role"], "content": content})
            continue
        parts: list[dict[str, Any]] = []
        for part in content:
            kind = part["type"]
            if kind == "text":
                parts.append({"type": "text", "text": part["text"]})
            elif kind == "image_url":
                images.append(decode_data_url(part["image_url"]["url"]))
                parts.append({"type": "image"})
            else:
                raise ValueError(f"unsupported content part type {kind!r}")
        out.append({"role": message["role"], "content": parts})
    return out, images
