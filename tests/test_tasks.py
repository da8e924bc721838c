"""Task formulas: the rho/MI round trip, the sample covariance, the optimal critic and the
transforms; the benchmark families against published values, Monte Carlo and
scipy, the maps' inverses, and the suite."""

from __future__ import annotations

import math

import pytest
import torch

from mitool.benchmark.suites import get_task, suite
from mitool.maps import MAPS
from mitool.tasks import (
    TRANSFORMS,
    AdditiveUniform,
    CorrelatedGaussian,
    MultivariateNormal,
    StudentT,
    block_normal,
    dense_normal,
    mi_to_rho,
    rho_to_mi,
    sparse_normal,
    student_t,
)

SLOW_TRANSFORMS = ("bimodal", "wiggly")
"""The transforms whose inversion takes more than about 5 s over 200 000 pairs (marked slow)."""


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


@pytest.mark.parametrize(
    "transform",
    [
        pytest.param(name, marks=pytest.mark.slow) if name in SLOW_TRANSFORMS else name
        for name in [None, *TRANSFORMS]
    ],
)
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
    forward, inverse = MAPS[transform].forward, MAPS[transform].inverse
    values = torch.linspace(-4, 4, 101, dtype=torch.float64)
    assert torch.allclose(inverse(forward(values)), values, atol=1e-9)
    assert torch.all(torch.diff(forward(values)) > 0)  # strictly increasing, hence MI-preserving


# ----------------------------------------------------------------------------------------------
# the benchmark families, the maps and the suite


def _draw(task, n: int, seed: int):
    return task.sample(n, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


@pytest.mark.parametrize(
    ("dims", "dof", "published"),
    [((2, 2), 1, 0.432), ((2, 2), 2, 0.193), ((3, 3), 2, 0.291), ((3, 3), 3, 0.179), ((5, 5), 2, 0.448),
     ((5, 5), 3, 0.299)],
)  # fmt: skip
def test_student_t_mi_matches_the_benchmark_and_a_monte_carlo_of_the_density_ratio(
    dims, dof, published
) -> None:
    """The published values (Czyz et al. 2023, identity dispersion) and the mean of the log density
    ratio over 100 000 samples (the densities are the textbook Student-t ones)."""
    task = student_t(*dims, dof)
    assert task.mi == pytest.approx(published, abs=5e-4)
    ratio = task.log_density_ratio(*_draw(task, 100_000, dof))
    assert ratio.mean().item() == pytest.approx(task.mi, abs=4 * ratio.std().item() / math.sqrt(100_000))


def test_student_t_density_ratio_against_scipy() -> None:
    from scipy.stats import multivariate_t

    dispersion = torch.tensor([[1.0, 0.3, 0.2], [0.3, 1.0, -0.4], [0.2, -0.4, 1.5]], dtype=torch.float64)
    task = StudentT(dispersion, 1, dof=2.5)
    x, y = _draw(task, 20, 0)
    joint = multivariate_t(shape=dispersion.numpy(), df=2.5).logpdf(torch.cat([x, y], 1).numpy())
    marginal_x = multivariate_t(shape=dispersion[:1, :1].numpy(), df=2.5).logpdf(x.numpy())
    marginal_y = multivariate_t(shape=dispersion[1:, 1:].numpy(), df=2.5).logpdf(y.numpy())
    expected = torch.from_numpy(joint - marginal_x - marginal_y)
    assert torch.allclose(task.log_density_ratio(x, y), expected, atol=1e-9)


def test_student_t_tends_to_the_gaussian_as_nu_grows() -> None:
    dense = dense_normal(3, 2, 0.4)
    for dof, gap in ((1e3, 1e-2), (1e6, 1e-5)):
        assert StudentT(dense.split.matrix, 3, dof).mi == pytest.approx(dense.mi, abs=gap)
    assert student_t(2, 2, 1e7).mi == pytest.approx(0.0, abs=1e-6)  # identity dispersion: independent


@pytest.mark.parametrize("epsilon", [0.1, 0.5, 0.75])
def test_additive_uniform_closed_form_both_branches(epsilon: float) -> None:
    task = AdditiveUniform(epsilon)
    expected = epsilon - math.log(2 * epsilon) if epsilon <= 0.5 else 1 / (4 * epsilon)
    assert task.mi == pytest.approx(expected)
    ratio = task.log_density_ratio(*_draw(task, 200_000, 1))
    assert ratio.mean().item() == pytest.approx(task.mi, abs=0.01)


def test_gaussian_builders_have_the_stated_covariance_and_mi() -> None:
    assert dense_normal(2, 2).mi == pytest.approx(0.294, abs=5e-4)
    assert dense_normal(25, 25).mi == pytest.approx(1.292, abs=5e-4)
    assert dense_normal(50, 50).mi == pytest.approx(1.624, abs=5e-4)
    assert sparse_normal(5, 5).mi == pytest.approx(-math.log(1 - 0.64))
    block = block_normal(4, 4, blocks=2, loading=0.7)
    x, y = _draw(block, 200_000, 2)
    empirical = torch.cat([x, y], 1).T.cov()
    assert torch.allclose(empirical, block.split.matrix, atol=0.01)
    assert block.split.matrix[0, 2] == pytest.approx(0.49) and block.split.matrix[0, 1] == 0.0
    with pytest.raises(ValueError, match="covariance must be symmetric and positive definite"):
        MultivariateNormal(torch.tensor([[1.0, 2.0], [2.0, 1.0]]), 1)


@pytest.mark.parametrize("name", list(MAPS))
def test_maps_are_invertible_on_samples(name: str) -> None:
    chosen = MAPS[name]
    dim = 1 if chosen.max_dim == 1 else 4
    x = torch.randn(5000, dim, generator=torch.Generator().manual_seed(3), dtype=torch.float64).clamp(-5, 5)
    image = chosen(x)
    assert image.shape == (5000, chosen.output_dim(dim))
    assert torch.allclose(chosen.inverse(image), x, atol=1e-7)
    if name not in ("spiral", "swiss-roll"):  # coordinate-wise: strictly increasing
        grid = torch.linspace(-5, 5, 2001, dtype=torch.float64)[:, None]
        assert torch.all(torch.diff(chosen(grid)[:, 0]) > 0)
    if name == "spiral":
        assert torch.allclose(image.norm(dim=1), x.norm(dim=1))


def test_the_suite() -> None:
    tasks = suite("main")
    names = [task.name for task in tasks]
    assert 35 <= len(tasks) <= 45 and len(set(names)) == len(names)
    assert min(t.dim_x for t in tasks) == 1 and max(t.dim_x for t in tasks) == 50
    assert 0.15 < min(t.mi for t in tasks) < 0.25 and 4 < max(t.mi for t in tasks) < 5
    assert sum(t.mi <= 2 for t in tasks) >= 30
    assert get_task("spiral-normal-sparse-5x5").mi == pytest.approx(sparse_normal(5, 5).mi)
    with pytest.raises(ValueError, match="^tasks must be one of"):
        get_task("no-such-task")


@pytest.mark.parametrize("task", suite("main"), ids=lambda task: task.name)
def test_every_suite_task_density_ratio_averages_to_its_mi(task) -> None:
    """A Monte Carlo of E log p(x, y) / (p(x) p(y)) over 20 000 samples, through the maps' inverses
    (their Jacobians cancel), equals the closed-form MI (within 5 standard errors + 0.005)."""
    x, y = _draw(task, 20_000, 11)
    assert x.shape == (20_000, task.dim_x) and y.shape == (20_000, task.dim_y)
    ratio = task.log_density_ratio(x, y)
    spread = 5 * ratio.std().item() / math.sqrt(20_000) + 0.005
    assert ratio.mean().item() == pytest.approx(task.mi, abs=spread)
