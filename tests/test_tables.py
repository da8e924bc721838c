"""The ``tables`` suite (mitool.benchmark.tables): its references against known MI, its rows on
iris end to end, and ``mitool benchmark --suite tables`` with and without scikit-learn."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from scipy import integrate, stats

from mitool._infra.files import read_csv
from mitool.benchmark import tables
from mitool.cli.main import main


@pytest.fixture
def sklearn():
    return pytest.importorskip("sklearn")


def _two_classes_mi(separation: float) -> float:
    """I(X; Y) for Y uniform on {0, 1} and X | Y ~ N(-+separation, 1), by quadrature."""

    def conditional_entropy(x: float) -> float:
        density = 0.5 * (stats.norm.pdf(x, -separation) + stats.norm.pdf(x, separation))
        posterior = 1 / (1 + math.exp(-2 * separation * x))
        return density * -sum(p * math.log(p) for p in (posterior, 1 - posterior) if p > 0)

    return math.log(2) - integrate.quad(conditional_entropy, -15, 15, limit=200)[0]


def _two_classes(n: int, separation: float, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    labels = rng.integers(0, 2, n)
    return rng.normal(size=n) + separation * (2 * labels - 1), labels


def test_the_two_classes_truth_by_quadrature_matches_a_monte_carlo() -> None:
    truth = _two_classes_mi(1.0)
    rng = np.random.default_rng(5)
    x, labels = _two_classes(400_000, 1.0, rng)
    joint = stats.norm.pdf(x, 2 * labels - 1)
    marginal = 0.5 * (stats.norm.pdf(x, -1) + stats.norm.pdf(x, 1))
    assert np.mean(np.log(joint / marginal)) == pytest.approx(truth, abs=0.004)
    assert truth == pytest.approx(0.3368, abs=1e-3)


def test_the_heldout_class_bound_is_below_the_truth_and_close_to_it(sklearn) -> None:
    truth = _two_classes_mi(1.0)
    rng = np.random.default_rng(0)
    bounds = [tables.heldout_class_bound(*_two_classes(1000, 1.0, rng), seed=seed) for seed in range(10)]
    values = np.array([bound.value for bound in bounds])
    spread = values.std(ddof=1) / math.sqrt(len(values))
    assert values.mean() <= truth + 2 * spread
    assert values.mean() >= truth - 0.03
    # the reported standard error is the size of the seeds' scatter
    assert 0.5 < np.mean([bound.stderr for bound in bounds]) / values.std(ddof=1) < 2.0
    assert bounds[0].model == "quadratic logistic regression"


def test_the_heldout_class_bound_does_not_reward_overfitting(sklearn) -> None:
    """20 features independent of the labels on 150 rows: a model scored on its own training rows
    would claim information; held out, the bound stays at or below 0."""
    rng = np.random.default_rng(1)
    values = [
        tables.heldout_class_bound(rng.normal(size=(150, 20)), rng.integers(0, 3, 150), seed=seed).value
        for seed in range(5)
    ]
    assert np.mean(values) <= 0.0
    assert tables.heldout_class_bound(rng.normal(size=(150, 20)), rng.integers(0, 3, 150)).model == (
        "linear logistic regression"
    )


def test_the_heldout_regression_bound_is_below_the_truth_and_close_to_it(sklearn) -> None:
    truth = 0.5 * math.log(2.0)  # y = x + e, both N(0, 1)
    rng = np.random.default_rng(2)
    values = []
    for seed in range(8):
        x = rng.normal(size=500)
        values.append(tables.heldout_regression_bound(x, x + rng.normal(size=500), seed=seed).value)
    spread = np.std(values, ddof=1) / math.sqrt(len(values))
    assert np.mean(values) <= truth + 2 * spread
    assert np.mean(values) >= truth - 0.05


def test_the_heldout_regression_bound_is_a_bound_for_a_skewed_target(sklearn) -> None:
    """y = exp(x + e): a log-normal target whose spread grows with x; I(X; Y) = I(X; x + e) =
    1/2 log 2. On normal scores of y (the default) the bound is close; on y itself the linear model
    with one residual density fits badly and the bound is loose, but still a bound."""
    truth = 0.5 * math.log(2.0)
    rng = np.random.default_rng(3)
    data = [(x, np.exp(x + rng.normal(size=500))) for x in rng.normal(size=(6, 500))]
    for normalise in (True, False):
        for residuals in ("kde", "gaussian"):
            values = [
                tables.heldout_regression_bound(
                    x, y, seed=seed, residuals=residuals, normalise=normalise
                ).value
                for seed, (x, y) in enumerate(data)
            ]
            assert np.mean(values) <= truth, (normalise, residuals)
            if normalise:
                assert np.mean(values) >= truth - 0.05, residuals


def test_the_heldout_regression_bound_of_independent_data_is_not_above_zero(sklearn) -> None:
    rng = np.random.default_rng(4)
    values = [
        tables.heldout_regression_bound(rng.normal(size=(200, 10)), rng.exponential(size=200), seed=seed)
        for seed in range(5)
    ]
    assert np.mean([bound.value for bound in values]) <= 2 * np.mean([bound.stderr for bound in values])
    with pytest.raises(ValueError, match="residuals"):
        tables.heldout_regression_bound(np.zeros((10, 1)), np.zeros(10), residuals="t")


def test_the_copula_value_is_the_gaussian_mi_on_gaussian_data() -> None:
    rng = np.random.default_rng(6)
    covariance = np.array([[1.0, 0.8], [0.8, 1.0]])
    rows = rng.multivariate_normal([0, 0], covariance, size=5000)
    value, is_bound = tables.copula_mi(rows[:, :1], rows[:, 1], classes=False)
    assert value == pytest.approx(-0.5 * math.log(1 - 0.8**2), abs=0.03)
    assert is_bound
    # three columns against one: -1/2 log(1 - R^2)
    x = rng.normal(size=(5000, 3))
    y = x @ np.array([0.5, -0.3, 0.2]) + rng.normal(size=5000) * 0.5
    r_squared = 0.38 / (0.38 + 0.25)
    value, is_bound = tables.copula_mi(x, y, classes=False)
    assert value == pytest.approx(-0.5 * math.log(1 - r_squared), abs=0.03)
    assert is_bound


def test_the_copula_value_is_unchanged_by_a_monotone_map_of_a_column() -> None:
    rng = np.random.default_rng(7)
    x = rng.normal(size=(500, 2))
    y = x[:, 0] + x[:, 1] ** 2 + rng.normal(size=500)
    mapped = np.column_stack([np.exp(x[:, 0]), x[:, 1] ** 3])
    before, _ = tables.copula_mi(x, y, classes=False)
    after, _ = tables.copula_mi(mapped, np.arctan(y), classes=False)
    assert after == pytest.approx(before, abs=1e-12)
    labels = (y > 0).astype(int)
    assert tables.copula_mi(mapped, labels, classes=True)[0] == pytest.approx(
        tables.copula_mi(x, labels, classes=True)[0], abs=1e-12
    )
    assert before > 0.1


def test_the_copula_value_of_one_feature_against_classes_is_below_the_truth() -> None:
    truth = _two_classes_mi(1.0)
    rng = np.random.default_rng(8)
    value, is_bound = tables.copula_mi(*_two_classes(20_000, 1.0, rng), classes=True)
    assert is_bound
    assert truth - 0.1 < value <= truth + 0.01


def test_ties_are_broken_at_random_so_a_discrete_column_keeps_a_finite_bound() -> None:
    """X = Y binary: I = log 2. Averaged ranks would make each class a single point (infinite
    Gaussian MI); the random tie-break gives the half-normal's -1/2 log(1 - 2/pi)."""
    labels = np.random.default_rng(9).integers(0, 2, 4000)
    value, is_bound = tables.copula_mi(labels.astype(float), labels, classes=True)
    assert is_bound
    assert value == pytest.approx(-0.5 * math.log(1 - 2 / math.pi), abs=0.02)
    assert value < math.log(2)


def test_several_features_against_classes_is_an_estimate_and_can_exceed_the_truth() -> None:
    """The docstring's example: X2 = X1 in class 0, X2 = -X1 in class 1; I(X; Y) <= log 2."""
    rng = np.random.default_rng(10)
    labels = rng.integers(0, 2, 2000)
    x1 = rng.normal(size=2000)
    x = np.column_stack([x1, np.where(labels == 0, x1, -x1) + 0.01 * rng.normal(size=2000)])
    value, is_bound = tables.copula_mi(x, labels, classes=True)
    assert not is_bound
    assert value > 2 * math.log(2)


def test_gaussian_entropy_is_unbiased_on_gaussian_samples() -> None:
    rng = np.random.default_rng(11)
    covariance = np.array([[2.0, 0.5, 0.0], [0.5, 1.0, 0.3], [0.0, 0.3, 0.5]])
    truth = 0.5 * math.log(np.linalg.det(2 * math.pi * math.e * covariance))
    values = [
        tables.gaussian_entropy(rng.multivariate_normal(np.zeros(3), covariance, 20)) for _ in range(4000)
    ]
    assert np.mean(values) == pytest.approx(truth, abs=0.01)


def _row(**changes) -> tables.Row:
    values = dict(
        dataset="d", feature="f", n=100, classes=True, mitool=0.30, mitool_low=0.25, mitool_high=0.35,
        mitool_estimator="ross", sklearn=0.32, heldout=tables.Bound(0.20, 0.02, "m"), copula=0.22,
        copula_is_bound=True, mitool_seconds=0.1,
    )  # fmt: skip
    return tables.Row(**{**values, **changes})


def test_the_two_checks() -> None:
    assert _row().below_heldout_bound() is False
    assert _row(mitool_high=0.19).below_heldout_bound() is True
    assert _row(mitool=math.nan, mitool_low=math.nan, mitool_high=math.nan).below_heldout_bound() is None
    assert _row().near_sklearn() is True
    assert _row(mitool=0.38).near_sklearn() is False  # 0.06 away: more than max(0.05, 0.032)
    assert _row(sklearn=1.0, mitool=0.91).near_sklearn() is True  # 10% of 1.0
    assert _row(sklearn=0.19).near_sklearn() is None  # under the held-out bound
    assert _row(copula=0.33).near_sklearn() is None  # under the copula bound
    assert _row(copula=0.33, copula_is_bound=False).near_sklearn() is True  # an estimate: not asked
    assert _row(sklearn=math.nan).near_sklearn() is None


def test_iris_end_to_end(sklearn, tmp_path: Path) -> None:
    rows = tables.table_rows("iris")
    assert [row.feature for row in rows] == [
        "sepal length (cm)", "sepal width (cm)", "petal length (cm)", "petal width (cm)", "all 4",
    ]  # fmt: skip
    assert all(row.n == 150 and row.classes and row.dataset == "iris" for row in rows)
    single, joint = rows[:4], rows[4]
    assert all(math.isfinite(row.sklearn) for row in single) and math.isnan(joint.sklearn)
    assert all(row.copula_is_bound for row in single) and not joint.copula_is_bound
    assert joint.heldout.model == "linear logistic regression"
    # the petals nearly separate the three species: H(Y) = log 3
    for row in (rows[2], rows[3], joint):
        assert 0.8 < row.heldout.value <= math.log(3)
    for row in single:
        assert row.copula <= math.log(3)
        assert row.heldout.value < row.sklearn + 0.1
    for row in rows:
        assert row.note or math.isfinite(row.mitool)
        assert row.below_heldout_bound() in (None, row.mitool_high < row.heldout.value)
    # the same rows again: seeded throughout
    assert [row.heldout.value for row in tables.table_rows("iris")] == [row.heldout.value for row in rows]

    written, paths, _ = tables.run_tables(tmp_path, datasets=["iris"])
    assert paths == [tmp_path / "tables.csv", tmp_path / "tables.md"]
    stored = read_csv(tmp_path / "tables.csv")
    assert list(stored[0]) == list(tables.COLUMNS)
    assert [row["feature"] for row in stored] == [row.feature for row in written]
    assert float(stored[2]["heldout_bound"]) == pytest.approx(rows[2].heldout.value, rel=1e-5)
    assert [row["copula_kind"] for row in stored] == ["bound"] * 4 + ["estimate"]
    assert stored[4]["sklearn"] == "" and stored[4]["near_sklearn"] == ""
    text = (tmp_path / "tables.md").read_text()
    assert "| iris | petal length (cm) | 150 |" in text
    assert "mitool below a held-out lower bound by more than its interval" in text


def test_the_command_line_runs_the_suite(sklearn, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(tables, "DATASETS", ("iris",))
    result = CliRunner().invoke(
        main, ["benchmark", "--suite", "tables", "--out", str(tmp_path), "--quiet"], catch_exceptions=False
    )
    assert result.exit_code == 0, result.output
    assert f"wrote {tmp_path / 'tables.csv'}" in result.output
    assert "5 rows of 1 data sets (iris)" in result.output
    assert len(read_csv(tmp_path / "tables.csv")) == 5


def test_the_command_line_refuses_options_of_the_other_suites(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        main, ["benchmark", "--suite", "tables", "--out", str(tmp_path), "--sizes", "100"]
    )
    assert result.exit_code == 2
    assert result.output.strip() == "Error: --sizes does not apply to --suite tables"


def test_the_command_line_without_scikit_learn_says_so_in_one_line(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "sklearn", None)  # import sklearn raises ImportError
    with pytest.raises(tables.SklearnMissing):
        tables.run_tables(tmp_path)
    result = CliRunner().invoke(main, ["benchmark", "--suite", "tables", "--out", str(tmp_path / "out")])
    assert result.exit_code == 2
    assert result.output.strip().splitlines() == [
        "Error: the tables suite needs scikit-learn (pip install 'mitool[compare]')"
    ]
    assert not (tmp_path / "out").exists()
