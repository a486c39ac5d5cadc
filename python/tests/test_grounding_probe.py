"""The grounding probe runs end to end on a tiny budget, and its hit rule is the page's."""

import json
from pathlib import Path

import pytest

from dartflow_vlm.grounding_probe import IMAGE_SLOT, INSTRUCTION_SLOT, hit, main


def test_hit_rule() -> None:
    box = (10, 20, 40, 30)  # x, y, w, h
    assert hit("Action: click(start_box='(10,20)')", box) == (True, True)
    assert hit("Action: click(start_box='(50,50)')", box) == (True, True)
    assert hit("Action: click(start_box='(51,20)')", box) == (True, False)
    assert hit("Action: click(start_box='')", box) == (False, False)


def test_runs_and_reports_a_curve(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    template = [
        {"role": "system", "content": "You are a helpful assistant."},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": f"Task: {INSTRUCTION_SLOT}"},
                {"type": "image_url", "image_url": {"url": IMAGE_SLOT}},
            ],
        },
    ]
    prompt = tmp_path / "prompt.json"
    prompt.write_text(json.dumps(template), encoding="utf-8")
    assert (
        main(
            ["--prompt-json", str(prompt), "--train", "4", "--test", "2", "--epochs", "2", "--minibatch", "2"]
        )
        == 0
    )
    lines = [json.loads(line) for line in capsys.readouterr().out.strip().splitlines()]
    summary = lines[-1]
    assert summary["summary"] is True
    assert summary["size"] == "tiny"
    assert [p["epoch"] for p in summary["curve"]] == [2]
    point = summary["curve"][0]
    assert 0.0 <= point["heldOutHit"] <= point["answersWithPoint"] <= 1.0
    assert point["bcLoss"] > 0
    assert 0.0 <= summary["centreBaseline"] <= 1.0
