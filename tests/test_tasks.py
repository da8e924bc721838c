"""Gaussian task formulas: the rho/MI round trip, the sample covariance, the optimal critic, the
transforms and the staircase."""

from __future__ import annotations

import math

import pytest
import torch

from mitool.tasks import TRANSFORMS, CorrelatedGaussian, Staircase, mi_to_rho, rho_to_mi


def test_rho_and_mi_round_trip_and_published_values() -> None:
    for mi in (0.0, 0.5, 2.0, 10.0, 40.0):
        assert rho_to_mi(mi_to_rho(mi, 20), 20) == pytest.approx(mi, rel=1e-12, abs=1e-12)
    # the literature's staircase, d = 20: rho = 0.426 / 0.574 / 0.672 / 0.742 / 0.795
    for mi, rho in zip((2, 4, 6, 8, 10), (0.426, 0.574, 0.672, 0.742, 0.795), strict=True):
        assert mi_to_rho(mi, 20) == pytest.approx(rho, abs=5e-4)
    assert rho_to_mi(0.5, 1) == pytest.approx(-0.5 * math.log(0.75))
    assert rho_to_mi(-0.5, 3) == rho_to_mi(0.5, 3)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: rho_to_mi(1.0, 2), r"\|rho\| < 1"),
        (lambda: rho_to_mi(-1.5, 2), r"\|rho\| < 1"),
        (lambda: mi_to_rho(-0.1, 2), "mi must be"),
        (lambda: mi_to_rho(1.0, 0), "dim must be"),
        (lambda: CorrelatedGaussian(0, mi=1.0), "dim must be"),
        (lambda: CorrelatedGaussian(2), "exactly one of mi"),
        (lambda: CorrelatedGaussian(2, mi=1.0, rho=0.1), "exactly one of mi"),
        (lambda: CorrelatedGaussian(2, mi=1.0, transform="square"), "valid: none, cubic"),
        (lambda: CorrelatedGaussian(2, mi=1.0).sample(0), "n .* >= 1"),
        (lambda: Staircase([]), "at least one"),
        (lambda: Staircase([1, -2]), ">= 0"),
        (lambda: Staircase([1, 2], steps_per_stage=[3]), "one number or 2"),
        (lambda: Staircase([1], steps_per_stage=0), ">= 1"),
    ],
)
def test_bad_arguments(call, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        call()


def test_sample_covariance_matches_rho() -> None:
    task = CorrelatedGaussian(5, mi=3.0)
    x, y = task.sample(200_000, generator=torch.Generator().manual_seed(0))
    assert x.shape == y.shape == (200_000, 5)
    joint = torch.cat([x, y], dim=1).double()
    covariance = joint.T.cov()
    expected = torch.eye(10, dtype=torch.float64)
    expected[:5, 5:] = expected[5:, :5] = torch.eye(5, dtype=torch.float64) * task.rho
    assert torch.allclose(covariance, expected, atol=0.01)


@pytest.mark.parametrize("transform", [None, *TRANSFORMS])
def test_optimal_critic_averages_to_the_mi(transform: str | None) -> None:
    """E_p(x,y)[log p(y|x)/p(y)] = I, for the transformed pairs too (the transform is inverted)."""
    task = CorrelatedGaussian(10, mi=2.0, transform=transform)
    x, y = task.sample(200_000, generator=torch.Generator().manual_seed(1))
    estimate = task.log_density_ratio(x, y).double().mean().item()
    assert estimate == pytest.approx(2.0, abs=0.03)
    # under the product of marginals, E[p(y|x)/p(y)] = 1
    y_marginal = task.sample_marginal_y(200_000, generator=torch.Generator().manual_seed(2))
    ratio = task.log_density_ratio(x, y_marginal).double().exp().mean().item()
    assert ratio == pytest.approx(1.0, abs=0.05)


def test_log_density_ratio_against_scipy() -> None:
    from scipy.stats import multivariate_normal

    task = CorrelatedGaussian(3, rho=0.6)
    x, y = task.sample(50, generator=torch.Generator().manual_seed(3))
    conditional = [
        multivariate_normal(mean=0.6 * x[i].double().numpy(), cov=0.64 * torch.eye(3).numpy()).logpdf(
            y[i].double().numpy()
        )
        for i in range(50)
    ]
    marginal = multivariate_normal(mean=[0, 0, 0]).logpdf(y.double().numpy())
    expected = torch.tensor(conditional, dtype=torch.float64) - torch.from_numpy(marginal)
    assert torch.allclose(task.log_density_ratio(x, y).double(), expected, atol=1e-4)


@pytest.mark.parametrize("transform", list(TRANSFORMS))
def test_transforms_are_invertible(transform: str) -> None:
    forward, inverse = TRANSFORMS[transform]
    values = torch.linspace(-4, 4, 101, dtype=torch.float64)
    assert torch.allclose(inverse(forward(values)), values, atol=1e-9)
    assert torch.all(torch.diff(forward(values)) > 0)  # strictly increasing, hence MI-preserving


def test_staircase_schedule() -> None:
    stairs = Staircase((2, 4, 6, 8, 10), steps_per_stage=4000)
    assert stairs.total_steps == 20_000 and len(stairs) == 5
    assert [stairs.mi_at(s) for s in (0, 3999, 4000, 19_999)] == [2, 2, 4, 10]
    uneven = Staircase((1, 3), steps_per_stage=[5, 7])
    assert [(s.start, s.stop) for s in uneven] == [(0, 5), (5, 12)]
    with pytest.raises(ValueError, match="step must be in"):
        stairs.stage_at(20_000)
