"""The Gaussian-copula lower bound of single columns and the chain-rule note it gives an estimate
that falls short of the MI of one of its columns."""

from __future__ import annotations

import numpy as np
import pytest

import mitool
from mitool.estimators.copula import copula_bound


def test_the_bound_of_a_gaussian_pair_against_its_closed_form() -> None:
    """For a bivariate Gaussian the bound is -1/2 log(1 - rho^2) less its confidence margin: below
    the truth in (almost) every sample, within 0.1 nats of it at n = 4000, and 0 for independent columns."""
    rng = np.random.default_rng(2)
    rho = 0.8
    truth = -0.5 * np.log(1 - rho**2)
    values = []
    for _ in range(50):
        x = rng.normal(size=(4000, 1))
        y = rho * x + np.sqrt(1 - rho**2) * rng.normal(size=(4000, 1))
        values.append(copula_bound(np.exp(x), y**3)[0])  # monotone maps leave the copula as it is
    assert max(values) < truth and truth - np.mean(values) < 0.1
    independent = [copula_bound(rng.normal(size=(300, 2)), rng.normal(size=(300, 2)))[0] for _ in range(100)]
    assert np.mean(np.array(independent) > 0) <= 0.1


def test_an_estimate_below_a_single_column_says_so() -> None:
    """KSG in 13 dimensions falls far short of the MI of the one column that carries it (0.35 for a
    column whose own MI is 2.36): the note names the column and the bound; with that column alone
    there is no note."""
    rng = np.random.default_rng(1)
    x = rng.normal(size=(500, 12))
    y = x[:, :1] + 0.1 * rng.normal(size=(500, 1))
    short = mitool.estimate(x, y, estimator="ksg")
    notes = [note for note in short.notes if "chain rule" in note]
    assert short.ci_high < 1.0 and len(notes) == 1 and "column 0 of X and column 0 of Y" in notes[0]
    assert short.details["column_bound"] > 2.0 and "below one column's MI" in str(short)  # the line says so
    alone = mitool.estimate(x[:, :1], y, estimator="ksg")
    assert alone.value == pytest.approx(2.36, abs=0.15) and not any("chain rule" in n for n in alone.notes)
