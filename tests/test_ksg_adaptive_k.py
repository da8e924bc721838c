"""KSG's k by Lepski's rule (``adapt_k``, :func:`mitool.estimators.ksg.adapted_k`): the pointwise
values against a plain implementation, k kept where no k is biased, lowered on bmi's waves where
k = 5 blurs the sheets, and the default for low-dimensional data."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from scipy.special import digamma

import mitool
from mitool import estimators
from mitool.benchmark import bmi_v2
from mitool.checks import ParameterError
from mitool.estimators.ksg import ADAPT_Z, adapted_k, ksg, ksg_point_values


def plain_ksg_terms(x: np.ndarray, y: np.ndarray, k: int) -> np.ndarray:
    """KSG estimator I's pointwise terms from all pairwise max-norm distances (no trees)."""
    n = len(x)
    distance_x = np.abs(x[:, None, :] - x[None, :, :]).max(axis=2)
    distance_y = np.abs(y[:, None, :] - y[None, :, :]).max(axis=2)
    joint = np.maximum(distance_x, distance_y)
    np.fill_diagonal(joint, np.inf)
    radius = np.sort(joint, axis=1)[:, k - 1]
    np.fill_diagonal(distance_x, np.inf)
    np.fill_diagonal(distance_y, np.inf)
    count_x = (distance_x < radius[:, None]).sum(axis=1)
    count_y = (distance_y < radius[:, None]).sum(axis=1)
    return digamma(k) + digamma(n) - digamma(count_x + 1) - digamma(count_y + 1)


def standardised(values: np.ndarray) -> np.ndarray:
    return (values - values.mean(axis=0)) / values.std(axis=0)


def waves(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    x, y = bmi_v2.task_waves().sample(n, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    return x.double().numpy(), y.double().numpy()


WAVES_MI = bmi_v2.MONTE_CARLO_MI["2v1-waves-12-5.0-3.0"][0]


def test_pointwise_values_are_ksgs_terms_for_every_k() -> None:
    rng = np.random.default_rng(0)
    x = rng.normal(size=(300, 2))
    y = x[:, :1] + rng.normal(size=(300, 1))
    values = ksg_point_values(x, y, [1, 2, 5])
    for row, k in enumerate((1, 2, 5)):
        np.testing.assert_allclose(
            values[row], plain_ksg_terms(standardised(x), standardised(y), k), atol=1e-9
        )
        assert values[row].mean() == pytest.approx(ksg(x, y, k=k), abs=1e-12)  # the same up to rounding


def test_the_rule_keeps_the_largest_k_no_smaller_k_exceeds_by_more_than_the_threshold() -> None:
    noise = np.random.default_rng(1).normal(size=(4, 2000))  # standard error of a difference: 0.032
    assert adapted_k(noise)[0] == 3
    assert adapted_k(noise + [[0.0], [0.0], [0.0], [-0.5]])[0] == 2  # k_4 lower than the rest: blurred
    assert adapted_k(noise + [[0.5], [0.0], [0.0], [0.0]])[0] == 0  # only k_1 departs from the others
    assert adapted_k(noise + [[-0.5], [0.0], [0.0], [0.0]])[0] == 3  # a smaller k lower: not KSG's blur
    _, departure = adapted_k(noise + [[0.0], [0.0], [0.0], [-0.5]])
    assert departure == pytest.approx(0.5 / np.sqrt(2 / 2000), rel=0.1) and departure > ADAPT_Z


@pytest.mark.parametrize(
    ("dims", "rho", "n"), [((1, 1), 0.8, 2000), ((2, 1), 0.95, 1000), ((1, 1), 0.0, 500)]
)
def test_k_is_kept_on_gaussian_pairs_where_no_k_is_biased(dims: tuple[int, int], rho: float, n: int) -> None:
    for seed in range(3):
        rng = np.random.default_rng(seed)
        x = rng.normal(size=(n, dims[0]))
        y = rho * x[:, :1] + np.sqrt(1 - rho**2) * rng.normal(size=(n, 1))
        result = estimators.get("ksg", normalise="rank", adapt_k=True).estimate(x, y, seed=seed)
        assert result.details["k"] == 5 and result.details["k_departure"] < ADAPT_Z
        assert result.value == pytest.approx(ksg(x, y, k=5, normalise="rank"), abs=1e-12)
        assert not any("k lowered" in note for note in result.notes)


def test_k_is_lowered_on_bmis_waves_and_the_estimate_nears_the_truth() -> None:
    x, y = waves(3000, seed=0)
    fixed = estimators.get("ksg", normalise="rank").estimate(x, y)
    adapted = estimators.get("ksg", normalise="rank", adapt_k=True).estimate(x, y)
    assert fixed.value < WAVES_MI - 0.4  # k = 5 blurs the sheets (bmi's own samples: -0.59 at n = 5000)
    assert adapted.details["k"] < 5 and adapted.details["k_departure"] > ADAPT_Z
    assert adapted.value > fixed.value + 0.2 and abs(adapted.value - WAVES_MI) < 0.35
    assert adapted.value == pytest.approx(ksg(x, y, k=adapted.details["k"], normalise="rank"), abs=1e-12)
    assert any(note.startswith(f"k lowered from 5 to {adapted.details['k']}") for note in adapted.notes)


def plain_ksg_ii_terms(x: np.ndarray, y: np.ndarray, k: int) -> np.ndarray:
    """KSG estimator II's pointwise terms, psi(k) - 1/k + psi(n) - psi(n_x) - psi(n_y), from all
    pairwise distances: n_x counts the other points within the x distance to the farthest of the k
    nearest joint neighbours (no trees)."""
    n = len(x)
    distance_x = np.abs(x[:, None, :] - x[None, :, :]).max(axis=2)
    distance_y = np.abs(y[:, None, :] - y[None, :, :]).max(axis=2)
    joint = np.maximum(distance_x, distance_y)
    np.fill_diagonal(joint, np.inf)
    nearest = np.argsort(joint, axis=1)[:, :k]
    side_x = np.take_along_axis(distance_x, nearest, axis=1).max(axis=1)
    side_y = np.take_along_axis(distance_y, nearest, axis=1).max(axis=1)
    count_x = (distance_x <= side_x[:, None]).sum(axis=1) - 1
    count_y = (distance_y <= side_y[:, None]).sum(axis=1) - 1
    return digamma(k) - 1 / k + digamma(n) - digamma(count_x) - digamma(count_y)


def test_estimator_ii_pointwise_values_are_its_terms_for_every_k() -> None:
    rng = np.random.default_rng(2)
    x = rng.normal(size=(300, 2))
    y = np.sin(x[:, :1]) + 0.3 * rng.normal(size=(300, 1))
    values = ksg_point_values(x, y, [1, 2, 5], variant=2)
    for row, k in enumerate((1, 2, 5)):
        np.testing.assert_allclose(
            values[row], plain_ksg_ii_terms(standardised(x), standardised(y), k), atol=1e-9
        )
        assert values[row].mean() == pytest.approx(ksg(x, y, k=k, variant=2), abs=1e-12)


def test_estimator_ii_blurs_the_waves_less_at_the_k_estimator_i_chooses() -> None:
    """The rule reads estimator I's values for both variants, so both keep the same k; at it, the
    rectangles of estimator II take in fewer points of the other sheets (bmi's own samples at
    n = 5000: -0.202 -> -0.163 nats)."""
    x, y = waves(3000, seed=2)
    one = estimators.get("ksg", normalise="rank", adapt_k=True).estimate(x, y)
    two = estimators.get("ksg", normalise="rank", adapt_k=True, variant=2).estimate(x, y)
    assert two.details["k"] == one.details["k"] == 1 and two.details["variant"] == 2
    assert two.details["k_departure"] == one.details["k_departure"] > ADAPT_Z
    assert WAVES_MI - 0.32 < two.value < WAVES_MI and two.value > one.value
    assert two.value == pytest.approx(ksg(x, y, k=1, normalise="rank", variant=2), abs=1e-12)


def test_the_default_adapts_k_for_low_dimensional_data() -> None:
    x, y = waves(3000, seed=0)
    result = mitool.estimate(x, y)
    assert result.estimator == "ksg" and result.details["k"] < 5 and result.details["variant"] == 2
    assert result.value == pytest.approx(
        ksg(x, y, k=result.details["k"], normalise="rank", variant=2), abs=1e-12
    )


def test_adapt_k_with_an_ensemble_over_k_is_refused_naming_the_setting() -> None:
    x = np.random.default_rng(0).normal(size=(200, 1))
    with pytest.raises(ParameterError, match="adapt_k.*k_max"):
        estimators.get("ksg", adapt_k=True, k_max=8).estimate(x, x + 1.0)


def test_the_command_line_refuses_adapt_k_with_k_max_by_its_flags(tmp_path) -> None:
    from click.testing import CliRunner

    from mitool.cli.main import main

    x = np.random.default_rng(0).normal(size=(300, 1))
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "y.npy", x + np.random.default_rng(1).normal(size=(300, 1)))
    arguments = [str(tmp_path / "x.npy"), str(tmp_path / "y.npy"), "--estimator", "ksg", "--quiet"]
    result = CliRunner().invoke(main, ["estimate", *arguments, "--adapt-k", "--k-max", "8"])
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert (
        result.output.strip().splitlines()[-1] == "Error: --adapt-k needs --k-max 0 (one k to adapt), got 8"
    )
    adapted = CliRunner().invoke(main, ["estimate", *arguments, "--adapt-k", "--json"])
    details = json.loads(adapted.stdout)["details"]  # Gaussian pairs: no k is biased, k = 5 kept
    assert (
        adapted.exit_code == 0
        and details["k"] == details["k_asked"] == 5
        and details["k_departure"] < ADAPT_Z
    )


def test_the_command_line_takes_the_variant_by_its_flag_and_refuses_one_it_lacks(tmp_path) -> None:
    from click.testing import CliRunner

    from mitool.cli.main import main

    rng = np.random.default_rng(0)
    x = rng.normal(size=(400, 1))
    y = x + rng.normal(size=(400, 1))
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "y.npy", y)
    arguments = [
        "estimate",
        str(tmp_path / "x.npy"),
        str(tmp_path / "y.npy"),
        "--estimator",
        "ksg",
        "--quiet",
    ]
    refused = CliRunner().invoke(main, [*arguments, "--variant", "3"])
    assert refused.exit_code == 2 and "Traceback" not in refused.output
    assert (
        refused.output.strip().splitlines()[-1]
        == "Error: --variant must be a whole number from 1 to 2, got 3"
    )
    taken = CliRunner().invoke(main, [*arguments, "--variant", "2", "--json"])
    details = json.loads(taken.stdout)["details"]
    assert taken.exit_code == 0 and details["variant"] == 2
    assert json.loads(taken.stdout)["value"] == pytest.approx(ksg(x, y, k=5, variant=2), abs=1e-12)
