"""Repeated values of continuous data (mitool.ties): finite precision is dequantised without changing
the MI, point masses are atoms; float32, rounded and labelled data give the MI of the data, and a
number that cannot be trusted says so."""

from __future__ import annotations

import math

import numpy as np
import pytest

import mitool
from mitool.checks import ParameterError
from mitool.estimators.base import Estimate
from mitool.ties import atoms_of, dequantise, treat_ties
from mitool.trust import trust_notes

RHO = math.sqrt(1 - math.exp(-2 * 0.5))
"""The correlation of a bivariate normal with I = 0.5 nats."""


def gaussian_pair(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = rng.normal(size=n)
    return x, RHO * x + math.sqrt(1 - RHO**2) * rng.normal(size=n)


def test_dequantised_values_stay_in_their_own_interval_so_the_originals_are_recovered() -> None:
    rng = np.random.default_rng(0)
    column = np.round(rng.standard_t(3, size=3000), 1)  # long tails: uneven gaps between values
    moved = dequantise(column, rng)
    values = np.unique(column)
    nearest = values[np.abs(moved[:, None] - values[None]).argmin(axis=1)]
    assert np.array_equal(nearest, column)  # v is recovered from v + U: I(X + U; Y) = I(X; Y)
    assert len(np.unique(moved)) == len(column)  # no tie left
    highest = np.array([moved[column == value].max() for value in values])
    lowest = np.array([moved[column == value].min() for value in values])
    assert np.all(highest[:-1] < lowest[1:])  # the order of distinct values is kept


def test_atoms_are_point_masses_not_finite_precision() -> None:
    rng = np.random.default_rng(1)
    x = rng.normal(size=5000)
    zero_inflated = np.where(rng.random(5000) < 0.3, 0.0, x)
    assert list(atoms_of(zero_inflated)) == [0.0]
    assert list(atoms_of(np.round(zero_inflated, 2))) == [0.0]  # rounded as well: still one atom
    assert len(atoms_of(np.round(x, 2))) == 0  # measured to 2 decimals: neighbouring values as common
    assert len(atoms_of(x.astype(np.float32).astype(float))) == 0  # float32's few repeats
    assert len(atoms_of(rng.poisson(40, 5000).astype(float))) == 0  # counts with many values
    limited = np.maximum(x, -1.0)  # a detection limit: 16% of the rows at -1
    assert list(atoms_of(limited)) == [-1.0]


@pytest.mark.parametrize("prepare", ["float32", "2 decimals", "1 decimal"])
def test_float32_and_rounded_data_give_the_mi_of_the_data(prepare: str) -> None:
    x, y = gaussian_pair(5000, seed=2)
    if prepare == "float32":
        x, y = x.astype(np.float32), y.astype(np.float32)
    else:
        x, y = np.round(x, int(prepare[0])), np.round(y, int(prepare[0]))
    result = mitool.estimate(x, y)
    assert result.estimator == "ksg" and abs(result.value - 0.5) < 0.05
    if prepare != "float32":
        assert any("dequantised within the data's resolution" in note for note in result.notes)


def test_a_zero_inflated_variable_goes_to_the_atoms_estimator_and_finds_the_truth() -> None:
    rng = np.random.default_rng(3)
    x = rng.normal(size=5000)
    y = np.where(rng.random(5000) < 0.3, 0.0, x + 0.5 * rng.normal(size=5000))
    truth = 0.7 * 0.5 * math.log(1 + 1 / 0.25)
    for data in ((x, y), (np.round(x, 2), np.round(y, 2))):
        result = mitool.estimate(*data)
        assert result.estimator == "atoms" and abs(result.value - truth) < 0.04
        assert any("point mass(es) at 0" in note for note in result.notes)


def test_integer_measurements_against_classes_are_not_atoms() -> None:
    """Wine's magnesium, in miniature: whole-number measurements (many values, so continuous)
    against a class. Every repeated value taken as an atom gave negative MI there."""
    rng = np.random.default_rng(4)
    classes = rng.integers(0, 3, size=3000)
    measured = np.round(100 + 15 * classes + 12 * rng.normal(size=3000))
    exact = mitool.estimate(100 + 15 * classes + 12 * rng.normal(size=3000), classes).value
    result = mitool.estimate(measured, classes)
    assert result.estimator == "ross" and result.value > 0.2 and abs(result.value - exact) < 0.05


def test_ties_choices_refuse_atoms_and_an_estimator_named_on_tied_data() -> None:
    x, y = gaussian_pair(2000, seed=5)
    x, y = np.round(x, 1), np.round(y, 1)
    with pytest.raises(ParameterError, match="^ties is 'refuse', and x has .* rows that repeat"):
        mitool.estimate(x, y, ties="refuse")
    assert mitool.estimate(x, y, ties="atoms").estimator == "mixed-ksg"  # both sides tied, as before
    named = mitool.estimate(x, y, estimator="ksg", k=3)
    assert abs(named.value - 0.5) < 0.08 and any("dequantised" in note for note in named.notes)
    with pytest.raises(ParameterError, match="^ties must be one of auto, dequantise, atoms, refuse"):
        mitool.estimate(x, y, ties="jitter")
    inflated = np.where(np.random.default_rng(6).random(2000) < 0.3, 0.0, y)
    spikes = mitool.estimate(x, inflated, estimator="ksg")
    assert any("ksg takes no atoms: they were dequantised too" in note for note in spikes.notes)


def test_treat_ties_says_per_column_what_it_did() -> None:
    rng = np.random.default_rng(7)
    rows = np.stack([rng.normal(size=1000), np.round(rng.normal(size=1000), 1)], axis=1)
    treated = treat_ties("x", rows, "auto", rng)
    assert np.array_equal(treated.rows[:, 0], rows[:, 0]) and not treated.atoms
    assert treated.notes == (
        "x: columns 1 (1 of 2) repeat values (finite precision, no point mass): dequantised "
        "within the data's resolution (MI unchanged)",
    )


def test_labels_are_discrete_values() -> None:
    rng = np.random.default_rng(8)
    classes = rng.integers(0, 3, size=1500)
    x = classes + rng.normal(size=1500)
    names = np.array(["setosa", "versicolor", "virginica"])[classes]
    coded, labelled = mitool.estimate(x, classes), mitool.estimate(x, names)
    assert labelled.value == pytest.approx(coded.value, abs=1e-12)
    assert any("labels (3 distinct), discrete" in note for note in labelled.notes)
    as_objects = mitool.estimate(x, names.astype(object))
    assert as_objects.value == pytest.approx(coded.value, abs=1e-12)


def test_inputs_of_every_type_give_the_same_estimate() -> None:
    import torch

    x, y = gaussian_pair(600, seed=9)
    x32, y32 = x.astype(np.float32), y.astype(np.float32)
    reference = mitool.estimate(x32.astype(np.float64), y32.astype(np.float64)).value
    for data in ((x32, y32), (x32.tolist(), y32.tolist()), (torch.from_numpy(x32), torch.from_numpy(y32))):
        assert mitool.estimate(*data).value == pytest.approx(reference, abs=1e-12)
    integers = np.random.default_rng(9).integers(0, 1000, size=(600, 2))
    assert math.isfinite(mitool.estimate(integers[:, 0], integers[:, 0] + integers[:, 1]).value)


def plain_estimate(value: float, low: float, high: float) -> Estimate:
    return Estimate(value=value, stderr=abs(high - low) / 4, ci_low=low, ci_high=high, ci_level=0.95,
                    interval="test", estimator="test", n_pairs=100, seconds=0.0)  # fmt: skip


def test_numbers_that_cannot_be_trusted_say_so() -> None:
    assert trust_notes(plain_estimate(0.3, 0.2, 0.4)) == []
    (negative,) = trust_notes(plain_estimate(-0.2, -0.29, -0.1))
    assert negative.startswith(
        "below 0 with its whole interval (test gave -0.2000 [-0.290, -0.100]): MI is never"
    )
    (near_zero,) = trust_notes(plain_estimate(-0.01, -0.05, 0.03))
    assert "reported as 0" in near_zero and "-0.0100 [-0.050, 0.030]" in near_zero
    (flat,) = trust_notes(plain_estimate(6.9078, 6.9078, 6.9078))
    assert flat.startswith("the interval has no width")
    (wide,) = trust_notes(plain_estimate(1.36, -4.67, 7.38))  # a default's estimate once, truth 10 nats
    assert wide.startswith("the interval is 12.05 nats wide, more than 2 times the estimate")
    assert trust_notes(plain_estimate(1.36, 0.90, 1.82)) == []  # 0.92 wide: under 1 nat
    assert trust_notes(plain_estimate(0.60, 0.05, 1.15)) == []  # 1.10 wide: under 2 x 0.60
    (noise,) = trust_notes(plain_estimate(0.40, -0.35, 1.15))  # 1.50 wide: over 1 nat and 2 x 0.40
    assert noise.startswith("the interval is 1.50 nats wide")


def test_the_result_reads_as_a_sentence_a_number_and_a_short_repr() -> None:
    x, y = gaussian_pair(1000, seed=10)
    result = mitool.estimate(x, y)
    assert str(result).startswith(f"I(X; Y) = {result.value:.4f} +- {result.stderr:.4f} nats, 95% interval")
    assert f"{result:.3f}" == f"{result.value:.3f}" and format(result, ".1e") == format(result.value, ".1e")
    assert repr(result) == (f"Estimate(value={result.value:.4g}, ci=[{result.ci_low:.4g}, "
                            f"{result.ci_high:.4g}], estimator='ksg', n_pairs=1000)")  # fmt: skip


def test_atoms_beside_many_dimensions_are_dequantised() -> None:
    """Boston's 13 features against medv, censored at 50: the estimator for atoms (k-NN in 14
    dimensions) gave 0.507, below lstat alone (0.677). Beyond LOW_DIMENSION dimensions in all the
    point mass is dequantised, with a note, and the default for continuous data takes the pairs; in
    1 + 1 dimensions the atoms stay atoms."""
    from mitool.estimation import prepare

    rng = np.random.default_rng(3)
    x = rng.normal(size=(400, 4))
    y = np.minimum(x[:, 0] + rng.normal(size=400), 1.0)  # censored: a point mass at 1
    wide = prepare(x, y)
    assert wide.estimator.name != "atoms"
    assert any("falls short of the MI beyond 3 dimensions" in note for note in wide.notes)
    assert prepare(x[:, 0], y).estimator.name == "atoms"
