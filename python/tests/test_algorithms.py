"""The token-level parts of the algorithm core that have no TypeScript twin (entropy from logits,
masking, broadcasting) and its refusals; the shared formulas are in test_algorithms_parity.py."""

import math

import pytest
import torch

from dartflow_vlm.algorithms import (
    LossConfig,
    NonFiniteValueError,
    broadcast_to_tokens,
    dart_loss,
    step_advantages,
    step_entropy,
    token_entropy,
)


def test_token_entropy_of_uniform_and_peaked_logits() -> None:
    logits = torch.zeros(2, 3, 50)
    logits[1, :, 7] = 100.0  # all mass on one token
    h = token_entropy(logits)
    assert h.shape == (2, 3)
    assert torch.allclose(h[0], torch.full((3,), math.log(50)), atol=1e-5)
    assert float(h[1].max()) < 1e-6


def test_step_entropy_is_the_masked_mean() -> None:
    h = torch.tensor([[1.0, 3.0, 99.0], [2.0, 99.0, 99.0], [0.0, 0.0, 0.0]])
    mask = torch.tensor([[1.0, 1.0, 0.0], [1.0, 0.0, 0.0], [0.0, 0.0, 0.0]])
    # Padding (99) never counts; a sample without tokens gets 0, not 0/0.
    assert step_entropy(h, mask).tolist() == [2.0, 2.0, 0.0]


def test_advantage_is_broadcast_to_each_response_token_only() -> None:
    adv = step_advantages(["g", "g", "g"], ["a", "a", "b"], [1.0, 1.0, 0.0])
    mask = torch.tensor([[1.0, 1.0, 0.0], [1.0, 1.0, 1.0], [1.0, 0.0, 0.0]], dtype=torch.float64)
    tokens = broadcast_to_tokens(adv, mask)
    assert tokens[0, 0] == tokens[0, 1] == adv[0]
    assert tokens[0, 2] == 0
    assert float(adv[0]) > 0 > float(adv[2])


def test_steps_of_one_trajectory_with_different_rewards_are_refused() -> None:
    with pytest.raises(ValueError, match="different rewards"):
        step_advantages(["g", "g"], ["a", "a"], [1.0, 0.0])


def test_non_finite_inputs_are_refused_naming_the_field() -> None:
    with pytest.raises(NonFiniteValueError, match=r"reward\[1\]"):
        step_advantages(["g", "g"], ["a", "b"], [1.0, math.nan])
    ok = torch.zeros(2, 3)
    bad = ok.clone()
    bad[1, 2] = math.inf
    with pytest.raises(NonFiniteValueError, match="logpBehaviour"):
        dart_loss(ok, ok, bad, torch.zeros(2), torch.ones(2, 3), torch.ones(2), logp_ref=ok)


def test_padding_tokens_get_no_gradient_and_do_not_change_the_loss() -> None:
    torch.manual_seed(0)
    logp_old = -torch.rand(2, 4) * 3
    logp = (logp_old + 0.05 * torch.randn(2, 4)).requires_grad_(True)
    mask = torch.tensor([[1.0, 1.0, 1.0, 0.0], [1.0, 1.0, 0.0, 0.0]])
    args = (logp_old, logp_old - 0.1, torch.tensor([0.7, -0.4]), mask, torch.ones(2))
    out = dart_loss(logp, *args, logp_ref=logp_old + 0.2)
    out.loss.backward()
    assert logp.grad is not None
    assert float(logp.grad[0, 3]) == 0.0
    assert float(logp.grad[1, 2:].abs().sum()) == 0.0
    # Garbage in the padded positions changes nothing.
    noisy = logp.detach().clone()
    noisy[mask == 0] = -50.0
    again = dart_loss(noisy, *args, logp_ref=logp_old + 0.2)
    assert float(again.loss) == pytest.approx(float(out.loss.detach()), abs=1e-12)


def test_every_sample_weighs_the_same_whatever_its_length() -> None:
    """seq-mean-token-mean: a 1-token and a 3-token sample with the same per-token loss contribute equally."""
    logp = torch.full((2, 3), -1.0, requires_grad=True)
    mask = torch.tensor([[1.0, 0.0, 0.0], [1.0, 1.0, 1.0]])
    out = dart_loss(
        logp,
        logp.detach(),
        logp.detach(),
        torch.tensor([1.0, 1.0]),
        mask,
        torch.ones(2),
        config=LossConfig(use_kl=False),
    )
    out.loss.backward()
    assert logp.grad is not None
    # rho = 1, w = 1, A = 1: per-sample loss -1, total -1; sample 0's token carries 1/2, sample 1's 1/6 each.
    assert float(out.loss.detach()) == pytest.approx(-1.0)
    assert float(logp.grad[0, 0]) == pytest.approx(-0.5)
    assert logp.grad[1].tolist() == pytest.approx([-1 / 6] * 3)


def test_unselected_samples_contribute_nothing() -> None:
    logp = torch.full((2, 2), -1.0, requires_grad=True)
    out = dart_loss(
        logp,
        logp.detach(),
        logp.detach(),
        torch.tensor([1.0, -1.0]),
        torch.ones(2, 2),
        torch.tensor([1.0, 0.0]),
        config=LossConfig(use_kl=False),
    )
    out.loss.backward()
    assert logp.grad is not None
    assert logp.grad[1].abs().sum() == 0
    assert out.metrics["numSelected"] == 1
