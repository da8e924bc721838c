"""One answer per question (issue 51, finding 4): the MI a command prints for a pair is the same
statistic whichever testing command prints it (test, test --per-feature, matrix), and a test's line
says that its number is the test's statistic, which may differ from mitool estimate's MI."""

from __future__ import annotations

import numpy as np
import pytest

import mitool
from mitool.matrix import mi_matrix, pair_seed


def test_the_testing_commands_give_one_statistic_and_say_what_it_is() -> None:
    rng = np.random.default_rng(11)
    x = rng.normal(size=60)
    table = np.column_stack([x, np.sin(2 * x) + 0.3 * rng.normal(size=60), rng.normal(size=60)])
    test = mitool.independence_test(table[:, 0], table[:, 1], permutations=19, seed=pair_seed(0, 0, 1))
    matrix = mi_matrix(table, permutations=19, null="pair")
    features = mitool.feature_mi(table[:, [0, 2]], table[:, 1], permutations=19)
    assert matrix.statistic[0, 1] == pytest.approx(test.statistic, abs=1e-12)
    assert features.statistic[0] == pytest.approx(test.statistic, abs=1e-9)
    line = str(test)
    assert line.startswith(f"I(X; Y) = {test.statistic:.4f} nats by the test's {test.estimator} statistic")
    assert "not as the best estimate of the MI, which mitool.estimate gives" in test.method
