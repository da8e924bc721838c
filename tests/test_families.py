"""The ``families`` suite (:mod:`mitool.benchmark.families`): every truth against an independent
computation (the Monte Carlo mean of the log density ratio over joint draws; scipy's entropies of
the Gaussian, Student-t and Dirichlet laws; the banded Gaussian's singular values), the maps
inverted exactly, the tasks reproducible from their seeds, and the suite as the issue states it
(names, MI 0 to 4 nats, 1 to 30 dimensions a side, listed by ``mitool benchmark --list-tasks``)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from click.testing import CliRunner
from scipy import stats

from mitool.benchmark import families
from mitool.benchmark.suites import SUITES, suite
from mitool.tasks import Mapped, MultivariateNormal, StudentT

TASKS = suite("families")
BY_NAME = {task.name: task for task in TASKS}
MONTE_CARLO_DRAWS, MONTE_CARLO_DRAWS_WIDE = 200_000, 50_000
"""Joint draws of the Monte Carlo check: fewer for tasks of more than 20 dimensions in all."""


def _law(task):
    """The base law of a suite task (under its maps)."""
    return task.base if isinstance(task, Mapped) else task


def _gaussian_entropy_mi(covariance: np.ndarray, dim_x: int) -> float:
    """H(X) + H(Y) - H(X, Y) by scipy's multivariate normal entropies."""
    entropy = [
        stats.multivariate_normal(cov=block).entropy()
        for block in (covariance[:dim_x, :dim_x], covariance[dim_x:, dim_x:], covariance)
    ]
    return entropy[0] + entropy[1] - entropy[2]


def test_the_suite_is_registered_with_unique_names_and_the_stated_ranges() -> None:
    assert "families" in SUITES
    assert len(TASKS) == len(families.FAMILIES) * families.SUITE_SEEDS
    assert [task.name for task in TASKS] == [
        f"{family}-{seed}" for family in families.FAMILIES for seed in range(families.SUITE_SEEDS)
    ]
    others = {task.name for name in SUITES if name != "families" for task in suite(name)}
    assert not others & set(BY_NAME), "a name of another suite"
    for task in TASKS:
        assert task.family == task.name.rpartition("-")[0]
        assert 1 <= task.dim_x <= families.MOST_DIM and 1 <= task.dim_y <= families.MOST_DIM
        assert 0.0 <= task.mi <= families.MOST_MI + 1e-9
    mis = [task.mi for task in TASKS]
    assert sum(mi == 0.0 for mi in mis) >= 2 and max(mis) > 3.5
    small = sum(max(task.dim_x, task.dim_y) <= families.SMALL_DIM for task in TASKS)
    assert small >= 0.75 * len(TASKS) and max(max(t.dim_x, t.dim_y) for t in TASKS) > families.SMALL_DIM


def test_the_suite_is_listed_by_the_command_line() -> None:
    from mitool.cli.main import main

    result = CliRunner().invoke(main, ["benchmark", "--list-tasks"])
    assert result.exit_code == 0, result.output
    listed = {line.split("\t")[1] for line in result.output.splitlines() if line.startswith("families\t")}
    assert listed == set(BY_NAME)


def test_tasks_are_reproducible_from_their_seed_and_differ_between_seeds() -> None:
    for family in families.FAMILIES:
        first, again = families.family_task(family, 7), families.family_task(family, 7)
        assert (first.name, first.dim_x, first.dim_y, first.mi) == (
            again.name,
            again.dim_x,
            again.dim_y,
            again.mi,
        )
        draws = [
            task.sample(50, torch.Generator().manual_seed(3), dtype=torch.float64) for task in (first, again)
        ]
        assert torch.equal(draws[0][0], draws[1][0]) and torch.equal(draws[0][1], draws[1][1])
        other = families.family_task(family, 8)
        assert (other.dim_x, other.dim_y, other.mi) != (first.dim_x, first.dim_y, first.mi)
    with pytest.raises(ValueError):
        families.family_task("banded-normal", -1)


@pytest.mark.parametrize("seed", [*range(families.SUITE_SEEDS), 11, 12])
def test_every_map_is_inverted_exactly(seed: int) -> None:
    for family in families.FAMILIES:
        task = families.family_task(family, seed)
        if not isinstance(task, Mapped):
            continue
        x, y = task.base._draw(2000, torch.Generator().manual_seed(seed))
        for map_, rows in ((task.x_map, x), (task.y_map, y)):
            if map_ is not None:
                image = map_(rows)
                assert image.shape == rows.shape and torch.isfinite(image).all(), task.name
                assert torch.allclose(map_.inverse(image), rows, rtol=0.0, atol=1e-8), task.name


@pytest.mark.parametrize("name", list(BY_NAME))
def test_the_truth_is_the_mean_of_the_log_density_ratio(name: str) -> None:
    task = BY_NAME[name]
    draws = MONTE_CARLO_DRAWS if task.dim_x + task.dim_y <= 20 else MONTE_CARLO_DRAWS_WIDE
    x, y = task.sample(draws, torch.Generator().manual_seed(2024), dtype=torch.float64)
    ratio = task.log_density_ratio(x, y)
    assert torch.isfinite(ratio).all()
    error = float(ratio.std()) / math.sqrt(draws)
    assert float(ratio.mean()) == pytest.approx(task.mi, abs=4.0 * error + 0.005)


def test_the_log_density_ratio_broadcasts_over_pairs() -> None:
    for family in families.FAMILIES:
        task = families.family_task(family, 1)
        x, y = task.sample(5, torch.Generator().manual_seed(0), dtype=torch.float64)
        matrix = task.log_density_ratio(x[:, None, :], y[None, :, :])
        assert matrix.shape == (5, 5)
        assert torch.allclose(torch.diagonal(matrix), task.log_density_ratio(x, y))


@pytest.mark.parametrize("seed", range(6))
def test_gaussian_truths_match_scipys_entropies(seed: int) -> None:
    for family in ("banded-normal", "factor-normal", "coupled-normal", "sandwich-normal", "heavy-tail"):
        task = families.family_task(family, seed)
        law = _law(task)
        assert isinstance(law, MultivariateNormal)
        covariance = law.split.matrix.numpy()
        assert task.mi == pytest.approx(_gaussian_entropy_mi(covariance, law.dim_x), abs=1e-9)


def test_banded_truth_matches_its_singular_values_and_is_banded() -> None:
    for seed in range(8):
        law = families.family_task("banded-normal", seed)
        matrix = law.split.matrix.numpy()
        within_x, within_y, cross = (
            matrix[: law.dim_x, : law.dim_x],
            matrix[law.dim_x :, law.dim_x :],
            matrix[: law.dim_x, law.dim_x :],
        )
        whitened = (
            np.linalg.inv(np.linalg.cholesky(within_x))
            @ cross
            @ np.linalg.inv(np.linalg.cholesky(within_y)).T
        )
        singular = np.linalg.svd(whitened, compute_uv=False)
        assert law.mi == pytest.approx(-0.5 * np.log1p(-(singular**2)).sum(), abs=1e-9)
        gaps = np.abs(np.arange(law.dim_x)[:, None] - np.arange(law.dim_y)[None, :])
        assert (cross[gaps > 3] == 0).all()


def test_student_t_truths_match_scipys_entropies() -> None:
    for seed in range(6):
        law = _law(families.family_task("multivariate-t", seed))
        assert isinstance(law, StudentT)
        matrix, dim_x, dof = law.split.matrix.numpy(), law.dim_x, law.dof
        entropy = [
            stats.multivariate_t(shape=block, df=dof).entropy()
            for block in (matrix[:dim_x, :dim_x], matrix[dim_x:, dim_x:], matrix)
        ]
        assert law.mi == pytest.approx(entropy[0] + entropy[1] - entropy[2], abs=1e-7)


def test_dirichlet_truths_match_scipys_entropies() -> None:
    for seed in range(6):
        law = _law(families.family_task("dirichlet", seed))
        assert isinstance(law, families.DirichletParts)
        alpha_x, alpha_y, rest = law.x_concentration, law.y_concentration, law.rest
        entropy = [
            stats.dirichlet(np.concatenate(parts)).entropy()
            for parts in (
                (alpha_x, [law.total_y + rest]),
                (alpha_y, [law.total_x + rest]),
                (alpha_x, alpha_y, [rest]),
            )
        ]
        assert law.mi == pytest.approx(entropy[0] + entropy[1] - entropy[2], abs=1e-9)
        assert rest >= families.LEAST_REST - 1e-9
    # Dirichlet(1, 1, 1), one part a side: -log 2 + 2 (psi(3) - psi(2)) = 1 - log 2
    assert families.dirichlet_mi(1.0, 1.0, 1.0) == pytest.approx(1.0 - math.log(2.0), abs=1e-12)
