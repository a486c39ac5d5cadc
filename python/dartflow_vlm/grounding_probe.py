"""Grounding probe: can a random-init Qwen2-VL of a given size learn to click a button by behaviour
cloning alone? (bench/vlm-grounding.ts; the "what size it needs" question of issue 13.4.)

    python -m dartflow_vlm.grounding_probe --prompt-json FILE --size tiny --train 256 --epochs 12

Screens are synthetic and imitate dartflow's click-target page as the VLM sees it: a 168x168 white screen
(the 160-px page after UI-TARS smart-resize) with one button of random size (42-71 x 31-50 px), colour,
label and position. The demonstration answers `click(start_box='(x,y)')` at the button's centre, in
smart-resized pixels, exactly as the `uitars-oracle` demonstrations do. The prompt is dartflow's UI-TARS
prompt (the template FILE the benchmark writes from vlm/prompt.ts, with the instruction and the image
left as placeholders). Cloning runs through the trainer's own `bc_epochs` (the `behaviourClone` code),
and after every `--eval-every` epochs the model answers held-out screens greedily: a hit is a point inside
the button, the same rule as the page's reward. For scale, the summary gives the hit rate of a model that
ignores the screen and always answers its centre (the point most buttons cover).

Prints one JSON line per evaluation and a final summary line.
"""

import argparse
import base64
import io
import json
import random
import re
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, cast

import torch
from PIL import Image, ImageDraw
from transformers import Qwen2VLForConditionalGeneration, Qwen2VLProcessor

from .bc_step import bc_epochs
from .build_tiny_model import SIZES, build
from .samples import demo_token_ids
from .score import prompt_inputs
from .train_step import StepSample, TrainConfig, make_optimizer

INSTRUCTION_SLOT = "@@INSTRUCTION@@"
IMAGE_SLOT = "@@IMAGE@@"
SCREEN = 168
LABELS = ("OK", "GO", "YES", "NEXT", "SEND", "START")
# dartflow's task pages use eight colours far apart in RGB (tasks/pages/runtime.js).
COLOURS = (
    (220, 40, 40),
    (40, 160, 60),
    (40, 80, 220),
    (240, 200, 30),
    (30, 200, 220),
    (200, 60, 200),
    (250, 140, 30),
    (30, 30, 30),
)
POINT = re.compile(r"\((\d+),\s*(\d+)\)")


def screen(rng: random.Random) -> tuple[str, str, tuple[int, int, int, int]]:
    """(instruction, PNG data URL, button box x, y, w, h) of one synthetic click-target screen."""
    w, h = rng.randint(42, 71), rng.randint(31, 50)
    x, y = rng.randint(0, SCREEN - w), rng.randint(0, SCREEN - h)
    colour, label = rng.choice(COLOURS), rng.choice(LABELS)
    img = Image.new("RGB", (SCREEN, SCREEN), "white")
    draw = ImageDraw.Draw(img)
    draw.rectangle((x, y, x + w, y + h), fill=colour)
    draw.text((x + 6, y + h // 2 - 5), label, fill="black" if colour in COLOURS[3:5] else "white")
    buf = io.BytesIO()
    img.save(buf, "PNG")
    url = "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode("ascii")
    return f"Click the {label} button.", url, (x, y, w, h)


def fill(template: list[dict[str, Any]], instruction: str, url: str) -> list[dict[str, Any]]:
    """The template's messages with the instruction and the screenshot put in."""
    text = json.dumps(template).replace(INSTRUCTION_SLOT, instruction).replace(IMAGE_SLOT, url)
    messages: list[dict[str, Any]] = json.loads(text)
    return messages


def hit(answer: str, box: tuple[int, int, int, int]) -> tuple[bool, bool]:
    """(the answer has a point, the point is inside the box)."""
    m = POINT.search(answer)
    if not m:
        return False, False
    px, py = int(m.group(1)), int(m.group(2))
    x, y, w, h = box
    return True, x <= px <= x + w and y <= py <= y + h


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--prompt-json", type=Path, required=True, help="messages template (bench writes it)")
    parser.add_argument("--size", choices=sorted(SIZES), default="tiny")
    parser.add_argument("--train", type=int, default=256, help="demonstrations (distinct screens)")
    parser.add_argument("--test", type=int, default=64, help="held-out screens per evaluation")
    parser.add_argument("--epochs", type=int, default=12)
    parser.add_argument("--eval-every", type=int, default=2)
    parser.add_argument("--lr", type=float, default=2e-3)
    parser.add_argument("--minibatch", type=int, default=8)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    template = json.loads(args.prompt_json.read_text(encoding="utf-8"))
    torch.manual_seed(args.seed)
    with tempfile.TemporaryDirectory() as tmp:
        summary = build(Path(tmp), args.seed, args.size)
        processor = Qwen2VLProcessor.from_pretrained(tmp)
        model = Qwen2VLForConditionalGeneration.from_pretrained(tmp, dtype=torch.float32)
    train_rng, test_rng = random.Random(args.seed), random.Random(10_000 + args.seed)
    samples = []
    for i in range(args.train):
        instruction, url, (x, y, w, h) = screen(train_rng)
        answer = f"Thought: \nAction: click(start_box='({x + w // 2},{y + h // 2})')"
        samples.append(
            StepSample(
                messages=fill(template, instruction, url),
                response_token_ids=demo_token_ids(processor, answer),
                behaviour_logprobs=None,
                group_id="probe",
                trajectory_id=str(i),
                reward=1.0,
            )
        )
    held_out = [screen(test_rng) for _ in range(args.test)]
    # What a model that ignores the screen can reach: always the centre, the point most boxes cover.
    centre = f"({SCREEN // 2},{SCREEN // 2})"
    centre_baseline = sum(hit(centre, box)[1] for _, _, box in held_out) / len(held_out)
    end = processor.tokenizer.convert_tokens_to_ids("<|im_end|>")
    # As the benchmark's vLLM requests do: never a vision special token (logit bias -100).
    suppress = [int(t) for t in processor.tokenizer.all_special_ids if t != end]

    def evaluate() -> tuple[float, float, str]:
        model.eval()
        points = hits = 0
        answer = ""
        with torch.no_grad():
            for instruction, url, box in held_out:
                inputs = prompt_inputs(processor, fill(template, instruction, url))
                out = cast(Any, model).generate(
                    **inputs, max_new_tokens=24, do_sample=False, suppress_tokens=suppress
                )
                answer = processor.tokenizer.decode(
                    out[0, inputs["input_ids"].shape[1] :], skip_special_tokens=True
                )
                has_point, inside = hit(answer, box)
                points += has_point
                hits += inside
        return hits / len(held_out), points / len(held_out), answer

    optimizer = make_optimizer(model, TrainConfig(learning_rate=args.lr, weight_decay=0.0))
    started = time.monotonic()
    curve = []
    for epoch in range(1, args.epochs + 1):
        metrics = bc_epochs(
            model,
            processor,
            samples,
            optimizer,
            epochs=1,
            minibatch_size=args.minibatch,
            seed=f"probe/{args.seed}/{epoch}",
            heartbeat=lambda _p: None,
        )
        if epoch % args.eval_every == 0 or epoch == args.epochs:
            hit_rate, point_rate, last = evaluate()
            point = {
                "epoch": epoch,
                "bcLoss": metrics["bcLoss"],
                "heldOutHit": hit_rate,
                "answersWithPoint": point_rate,
                "seconds": round(time.monotonic() - started, 1),
                "lastAnswer": last,
            }
            curve.append(point)
            print(json.dumps(point), flush=True)
    print(
        json.dumps(
            {
                "summary": True,
                "size": args.size,
                "parameters": summary["parameters"],
                "train": args.train,
                "test": args.test,
                "epochs": args.epochs,
                "lr": args.lr,
                "minibatch": args.minibatch,
                "centreBaseline": centre_baseline,
                "curve": curve,
            }
        ),
        flush=True,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
