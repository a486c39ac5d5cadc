"""A synthetic screenshot and the OpenAI chat messages dartflow sends with it."""

import base64
import io
from typing import Any

from PIL import Image, ImageDraw


def screenshot(width: int = 320, height: int = 200) -> Image.Image:
    image = Image.new("RGB", (width, height), "white")
    ImageDraw.Draw(image).rectangle((40, 40, 120, 100), fill=(220, 20, 20))
    return image


def data_url(image: Image.Image) -> str:
    buf = io.BytesIO()
    image.save(buf, format="PNG")
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode()


def chat(image: Image.Image, text: str = "Click the red box") -> list[dict[str, Any]]:
    return [
        {"role": "system", "content": "You are a helpful assistant."},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": text},
                {"type": "image_url", "image_url": {"url": data_url(image)}},
            ],
        },
    ]
