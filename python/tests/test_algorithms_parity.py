"""Parity: the Python algorithm core gives the TypeScript one's numbers on the golden fixtures
(test/fixtures/golden/algorithms.json, written by scripts/gen-golden-fixtures.ts from algorithms/*.ts),
values and gradients (autograd's dL/dlogp against the TypeScript closed-form derivatives), to 1e-6."""

import json
from pathlib import Path
from typing import Any

import pytest
import torch

from dartflow_vlm.algorithms import (
    LossConfig,
    dart_loss,
    group_advantages,
    high_entropy_mask,
    low_var_kl,
    ppo_clipped_surrogate,
    selection_count,
    step_advantages,
    truncated_is_weight,
)

FIXTURES = Path(__file__).resolve().parents[2] / "test" / "fixtures" / "golden" / "algorithms.json"
GOLDEN: dict[str, Any] = json.loads(FIXTURES.read_text())
TOL = 1e-6


def close(actual: float, expected: float) -> bool:
    # Relative for large values (a ratio of 4.9e8 after the ±20 clamp), absolute otherwise.
    return abs(actual - expected) <= TOL * max(1.0, abs(expected))


def ids(cases: list[dict[str, Any]]) -> list[str]:
    return [c["name"] for c in cases]


def f64(values: Any) -> torch.Tensor:
    return torch.tensor(values, dtype=torch.float64)


def test_fixture_file_has_every_section() -> None:
    # A generator that silently dropped a section would make its parametrized tests vanish.
    for section in ("advantages", "stepAdvantages", "ppo", "tis", "kl", "entropyMask", "loss", "tokenLoss"):
        assert GOLDEN[section], section
    assert len(GOLDEN["ppo"]) >= 10
    assert len(GOLDEN["loss"]) >= 6


@pytest.mark.parametrize("case", GOLDEN["advantages"], ids=ids(GOLDEN["advantages"]))
def test_group_advantages(case: dict[str, Any]) -> None:
    o = case["options"]
    got = group_advantages(
        [t["reward"] for t in case["trajectories"]],
        [t["numSteps"] for t in case["trajectories"]],
        epsilon=o.get("epsilon", 1e-6),
        statistics_over=o.get("statisticsOver", "steps"),
        normalize_by_std=o.get("normalizeByStd", True),
    )
    expected = case["expected"]["advantages"]
    assert all(close(a, b) for a, b in zip(got, expected, strict=True)), (got, expected)


@pytest.mark.parametrize("case", GOLDEN["stepAdvantages"], ids=ids(GOLDEN["stepAdvantages"]))
def test_step_advantages(case: dict[str, Any]) -> None:
    s = case["samples"]
    got = step_advantages([x["groupId"] for x in s], [x["trajectoryId"] for x in s], [x["reward"] for x in s])
    assert torch.allclose(got, f64(case["expected"]), atol=TOL, rtol=0)


@pytest.mark.parametrize("case", GOLDEN["ppo"], ids=ids(GOLDEN["ppo"]))
def test_ppo_value_gradient_and_flags(case: dict[str, Any]) -> None:
    o, e = case["options"], case["expected"]
    logp = f64([case["logp"]]).requires_grad_(True)
    terms = ppo_clipped_surrogate(
        logp,
        f64([case["logpOld"]]),
        f64([case["advantage"]]),
        clip_low=o.get("clipLow", 0.1),
        clip_high=o.get("clipHigh", 0.28),
        dual_clip=o.get("dualClip", 10.0),  # an explicit null disables it
        use_clip=o.get("useClip", True),
    )
    terms.loss.sum().backward()
    assert logp.grad is not None
    assert close(float(terms.loss.detach()), e["loss"])
    assert close(float(logp.grad), e["dLossDLogp"])
    assert close(float(terms.ratio), e["ratio"])
    assert bool(terms.clipped) == e["clipped"]
    assert bool(terms.dual_clipped) == e["dualClipped"]


@pytest.mark.parametrize("case", GOLDEN["tis"], ids=ids(GOLDEN["tis"]))
def test_truncated_is_weight(case: dict[str, Any]) -> None:
    present = case["logpBehaviour"] is not None
    weight, truncated = truncated_is_weight(
        f64([[case["logpOld"]]]),
        f64([[case["logpBehaviour"] if present else 0.0]]),
        cap=case["cap"],
        behaviour_present=torch.tensor([present]),
    )
    assert close(float(weight), case["expected"]["weight"])
    assert bool(truncated) == case["expected"]["truncated"]


@pytest.mark.parametrize("case", GOLDEN["kl"], ids=ids(GOLDEN["kl"]))
def test_low_var_kl(case: dict[str, Any]) -> None:
    logp = f64([case["logp"]]).requires_grad_(True)
    kl = low_var_kl(logp, f64([case["logpRef"]]))
    kl.sum().backward()
    assert logp.grad is not None
    assert close(float(kl.detach()), case["expected"]["kl"])
    assert close(float(logp.grad), case["expected"]["dKlDLogp"])


@pytest.mark.parametrize("case", GOLDEN["entropyMask"]["masks"], ids=ids(GOLDEN["entropyMask"]["masks"]))
def test_high_entropy_mask(case: dict[str, Any]) -> None:
    o = case["options"]
    mask = high_entropy_mask(
        case["entropies"],
        top_fraction=o.get("topFraction", 0.8),
        scope=o.get("scope", "batch"),
        group_ids=case.get("groupIds"),
        min_selected=o.get("minSelected", 1),
    )
    assert [int(x) for x in mask.tolist()] == case["expected"]


def test_selection_count() -> None:
    for c in GOLDEN["entropyMask"]["counts"]:
        assert selection_count(c["n"], c["topFraction"], c["minSelected"]) == c["expected"], c


@pytest.mark.parametrize("case", GOLDEN["loss"], ids=ids(GOLDEN["loss"]))
def test_step_level_loss_equals_compute_loss(case: dict[str, Any]) -> None:
    """One-token step samples: dart_loss's seq-mean-token-mean is computeLoss's step-level mean."""
    samples, c, e = case["samples"], case["config"], case["expected"]
    column = [[s["logp"]] for s in samples]
    logp = f64(column).requires_grad_(True)
    present = [s.get("logpBehaviour") is not None for s in samples]
    has_ref = all(s.get("logpRef") is not None for s in samples)
    config = LossConfig(
        tis_cap=c.get("tisCap", 1.0),
        kl_beta=c.get("klBeta", 0.1),
        use_tis=c.get("useTis", True),
        use_kl=c.get("useKl", True),
        use_clip=c.get("useClip", True),
    )
    out = dart_loss(
        logp,
        f64([[s["logpOld"]] for s in samples]),
        f64([[s["logpBehaviour"] if p else 0.0] for s, p in zip(samples, present, strict=True)]),
        f64([s["advantage"] for s in samples]),
        torch.ones(len(samples), 1, dtype=torch.float64),
        f64(e["selectionMask"]),
        logp_ref=f64([[s["logpRef"]] for s in samples]) if has_ref else None,
        behaviour_present=torch.tensor(present),
        config=config,
        normalizer=case["options"].get("normalizer"),
    )
    out.loss.backward()
    assert logp.grad is not None
    assert close(float(out.loss.detach()), e["loss"])
    grads = logp.grad[:, 0].tolist()
    assert all(close(a, b) for a, b in zip(grads, e["gradLogp"], strict=True)), (grads, e["gradLogp"])
    for key, value in out.metrics.items():
        assert close(value, e["metrics"][key]), (key, value, e["metrics"][key])


def test_entropy_selection_of_loss_cases_matches() -> None:
    """computeLoss chose its own masks where none was given; high_entropy_mask chooses the same."""
    for case in GOLDEN["loss"]:
        if "selectionMask" in case["options"] or case["config"].get("useEntropySelection") is False:
            continue
        mask = high_entropy_mask([s["entropy"] for s in case["samples"]])
        assert [int(x) for x in mask.tolist()] == case["expected"]["selectionMask"], case["name"]


@pytest.mark.parametrize("case", GOLDEN["tokenLoss"], ids=ids(GOLDEN["tokenLoss"]))
def test_token_level_loss(case: dict[str, Any]) -> None:
    logp = f64(case["logp"]).requires_grad_(True)
    out = dart_loss(
        logp,
        f64(case["logpOld"]),
        f64(case["logpBehaviour"]),
        f64(case["advantages"]),
        f64(case["mask"]),
        f64(case["selection"]),
        logp_ref=f64(case["logpRef"]),
        config=LossConfig(tis_cap=case["config"]["tisCap"], kl_beta=case["config"]["klBeta"]),
    )
    out.loss.backward()
    assert logp.grad is not None
    assert close(float(out.loss.detach()), case["expected"]["loss"])
    expected = f64(case["expected"]["gradLogp"])
    assert torch.allclose(logp.grad, expected, atol=TOL, rtol=0), (logp.grad, expected)
