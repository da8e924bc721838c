"""The flow estimator (issue 27): normalizing flows to a joint Gaussian, its closed-form MI uncapped
at 10 and 20 nats, and better than its Gaussian-copula start where the flows have work to do."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from mitool import estimators, tasks
from mitool.checks import ParameterError
from mitool.estimators.flow import FlowGaussian, _spline, gaussian_log_ratio

QUICK = {"steps": 40, "eval_every": 20, "patience": 2}
"""Few steps: on Gaussians the Gaussian-copula start is already the answer."""


def _sample(task: object, n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    x, y = task.sample(n, torch.Generator().manual_seed(seed), dtype=torch.float64)
    return x.numpy(), y.numpy()


@pytest.mark.parametrize(("dim", "mi"), [(5, 10.0), (10, 20.0)])
def test_correlated_gaussians_at_10_and_20_nats_within_5_percent(dim: int, mi: float) -> None:
    x, y = _sample(tasks.CorrelatedGaussian(dim, mi=mi), 5000)
    result = estimators.get("flow", **QUICK).estimate(x, y, seed=1)
    assert result.value == pytest.approx(mi, rel=0.05)
    assert result.ci_low < result.value < result.ci_high
    assert len(result.details["correlations"]) == dim and result.estimator == "flow"


def test_a_per_coordinate_map_at_10_nats() -> None:
    x, y = _sample(tasks.CorrelatedGaussian(5, mi=10.0, transform="half-cube"), 5000)
    assert FlowGaussian(**QUICK).estimate(x, y).value == pytest.approx(10.0, rel=0.05)


def test_the_flows_beat_the_gaussian_copula_on_a_rotation_of_a_per_coordinate_map() -> None:
    """y = R asinh(3 g) with g Gaussian and R a fixed rotation: rank scores cannot undo the map
    (it is not per coordinate), the flows can; 5 nats."""
    x, g = _sample(tasks.CorrelatedGaussian(5, mi=5.0), 5000)
    rotation, _ = np.linalg.qr(np.random.default_rng(123).normal(size=(5, 5)))
    y = np.arcsinh(3.0 * g) @ rotation.T
    result = FlowGaussian(steps=150, eval_every=25).estimate(x, y)
    copula = result.details["gaussian_copula"]  # the estimate at 0 steps
    assert abs(result.value - 5.0) < abs(copula - 5.0) - 0.2 and copula < 4.5
    assert result.details["validation_log_likelihood"] > result.details["start_validation_log_likelihood"]
    assert result.details["best_step"] > 0


def test_independent_pairs_give_nearly_zero() -> None:
    rng = np.random.default_rng(4)
    result = FlowGaussian(**QUICK).estimate(rng.normal(size=(3000, 5)), rng.normal(size=(3000, 3)))
    assert abs(result.value) < 0.03 and abs(result.details["held_out"]) < 0.05


def test_near_copies_stay_finite_and_a_constant_side_gives_zero() -> None:
    x = np.random.default_rng(5).normal(size=(500, 2))
    copies = FlowGaussian(**QUICK).estimate(x, x)
    assert math.isfinite(copies.value) and copies.value > 10
    constant = FlowGaussian(**QUICK).estimate(x, np.ones((500, 1)))
    assert constant.value == 0.0 and "y is constant" in constant.notes[-1]


def test_the_gaussian_log_ratio_is_the_bivariate_formula_and_stable_near_one() -> None:
    u, v = torch.randn(2, 100, 3, dtype=torch.float64)
    rho = torch.tensor([0.3, -0.9, 0.999], dtype=torch.float64)
    one = 1 - rho**2
    direct = (-0.5 * torch.log(one) - (rho**2 * (u**2 + v**2) - 2 * rho * u * v) / (2 * one)).sum(-1)
    assert torch.allclose(gaussian_log_ratio(u, v, torch.atanh(rho)), direct)
    theta = torch.tensor([12.0], requires_grad=True)  # rho = 1 - 7.6e-11: 11.3 nats per pair
    value = gaussian_log_ratio(torch.ones(1, 1), torch.ones(1, 1), theta)
    value.sum().backward()
    assert math.isfinite(float(value.detach())) and math.isfinite(float(theta.grad))


def test_the_fast_spline_is_zukos() -> None:
    """The splines are zuko's MonotonicRQSTransform with a faster softmax for its knots: the same
    map and log-Jacobian (a guard against a change of zuko's internals)."""
    from zuko.transforms import MonotonicRQSTransform

    generator = torch.Generator().manual_seed(0)
    widths, heights = 3 * torch.randn(2, 7, 3, 8, generator=generator)
    derivatives = 3 * torch.randn(7, 3, 7, generator=generator)
    points = 4 * torch.randn(7, 3, generator=generator)
    ours = _spline(widths, heights, derivatives).call_and_ladj(points)
    zukos = MonotonicRQSTransform(widths, heights, derivatives).call_and_ladj(points)
    for mine, theirs in zip(ours, zukos, strict=True):
        assert torch.allclose(mine, theirs, atol=1e-5)
    assert torch.allclose(_spline(widths, heights, derivatives).inv(ours[0]), points, atol=1e-4)


def test_settings_progress_and_the_maf_flow() -> None:
    x, y = _sample(tasks.CorrelatedGaussian(2, mi=3.0), 1000)
    calls: list[tuple[int, int, float]] = []
    estimator = FlowGaussian(flow="maf", steps=30, eval_every=10)
    result = estimator.estimate(x, y, progress=lambda *call: calls.append(call))
    assert [call[:2] for call in calls][:1] == [(10, 30)] and all(math.isfinite(call[2]) for call in calls)
    assert result.details["flow"] == "maf" and result.value == pytest.approx(3.0, rel=0.1)
    with pytest.raises(ParameterError, match="^flow must be one of"):
        FlowGaussian(flow="glow")
