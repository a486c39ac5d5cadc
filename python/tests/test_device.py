"""Where the trainer computes: `--device auto|cpu|cuda` (models.choose_device, worker.parse_args)."""

from pathlib import Path

import pytest
import torch

from dartflow_vlm.models import DeviceUnavailableError, PolicySetup, choose_device, resolve_device
from dartflow_vlm.worker import parse_args


def test_auto_follows_torch_and_cpu_is_always_there() -> None:
    assert choose_device("cpu") == "cpu"
    assert choose_device("auto") == ("cuda" if torch.cuda.is_available() else "cpu")
    assert resolve_device(PolicySetup(base_model=Path("."))) == torch.device("cpu")


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a GPU")
def test_cuda_without_a_gpu_is_refused_with_the_fix(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(DeviceUnavailableError, match="--device cpu"):
        choose_device("cuda")
    with pytest.raises(SystemExit):
        parse_args(["--base-model", "/tmp/x", "--device", "cuda"])
    assert "torch sees no CUDA GPU" in capsys.readouterr().err


def test_unknown_device_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(ValueError, match="use auto, cpu or cuda"):
        choose_device("tpu")
    with pytest.raises(SystemExit):
        parse_args(["--base-model", "/tmp/x", "--device", "tpu"])
    assert "--device: got 'tpu'" in capsys.readouterr().err


def test_the_worker_defaults_to_auto(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text("{}", encoding="utf-8")
    monkeypatch.delenv("DARTFLOW_VLM_DEVICE", raising=False)
    args = parse_args(["--base-model", str(tmp_path)])
    assert args.device == choose_device("auto")
    monkeypatch.setenv("DARTFLOW_VLM_DEVICE", "cpu")
    assert parse_args(["--base-model", str(tmp_path)]).device == "cpu"
