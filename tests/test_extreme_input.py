"""Extreme input: scales from 1e-300 to 1e300, an outlier of 1e308, a single row, a statistic that
is not finite. Each gives the estimate of ordinary data, or one line naming the problem; never a
NaN with a p-value, never a silent wrong number."""

from __future__ import annotations

import json

import numpy as np
import pytest
from click.testing import CliRunner

import mitool
from mitool.checks import ParameterError
from mitool.cli.main import main as cli
from mitool.estimators.values import safe_scale


def pairs(n: int = 400, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, 1))
    return x, x + rng.normal(size=(n, 1))


@pytest.mark.parametrize("estimator", ["ksg", "gaussian", "mixed-ksg", "frenzel-pompe"])
@pytest.mark.parametrize("scale", [1e-300, 1e-200, 1e153, 1e300])
def test_a_change_of_units_leaves_the_estimate(estimator: str, scale: float) -> None:
    """The MI does not depend on units; at 1e153 squares overflow and at 1e-200 they underflow, where
    KSG once gave 0, mixed-ksg -0.29 and gaussian NaN. The scaled data give the unscaled estimate
    (a power of two is exact, so the k-NN estimates agree to the bit)."""
    x, y = pairs()
    z = None
    if estimator == "frenzel-pompe":
        z = np.random.default_rng(1).normal(size=(len(x), 1))
    plain = mitool.estimate(x, y, z, estimator=estimator)
    scaled = mitool.estimate(x * scale, y * scale, None if z is None else z * scale, estimator=estimator)
    assert np.isfinite(plain.value)
    assert scaled.value == pytest.approx(plain.value, rel=1e-9, abs=1e-12)


def test_safe_scale_touches_only_columns_at_an_extreme_scale() -> None:
    x, _ = pairs()
    ordinary = np.hstack([x, 1e50 * x, 1e-50 * x])
    assert safe_scale("x", ordinary) is ordinary  # every spread within [2^-200, 2^200]: as given
    extreme = np.hstack([x, 1e100 * x, 1e-100 * x])
    scaled = safe_scale("x", extreme)
    np.testing.assert_array_equal(scaled[:, 0], x[:, 0])
    for column in (1, 2):
        ratio = scaled[:, column] / extreme[:, column]
        assert np.all(ratio == ratio[0]) and np.log2(ratio[0]) == np.round(np.log2(ratio[0]))  # a power of 2
        assert 0.1 < np.median(np.abs(scaled[:, column])) < 10


@pytest.mark.parametrize("estimator", [None, "ksg", "gaussian", "mixed-ksg"])
def test_an_outlier_beyond_any_scale_is_refused_naming_its_row(estimator: str | None) -> None:
    """One value of 1e308 among values near 1: KSG once gave -0.0585 (0.825 without it) and the
    Gaussian estimate NaN. It is refused, naming x and the row."""
    x, y = pairs()
    x[17, 0] = 1e308
    with pytest.raises(ParameterError, match=r"^x holds 1e\+308 in row 17 \(column 0\), more than 1e\+100"):
        mitool.estimate(x, y, estimator=estimator)
    x[17, 0] = 1e50  # an outlier that floating point holds beside the others (its square 1e100) is kept
    assert np.isfinite(mitool.estimate(x, y, estimator="ksg").value)


def test_the_command_line_refuses_an_outlier_in_one_line(tmp_path) -> None:
    x, y = pairs()
    x[3, 0] = 1e308
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "y.npy", y)
    for command in (["estimate"], ["test", "--estimator", "gaussian", "--permutations", "99"]):
        result = CliRunner().invoke(cli, [*command, str(tmp_path / "x.npy"), str(tmp_path / "y.npy")])
        assert result.exit_code == 2, result.output
        lines = result.output.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("Error: X holds 1e+308 in row 3"), result.output


def test_a_statistic_that_is_not_finite_gets_no_pvalue() -> None:
    """X = Y: the Gaussian MI is infinite on the data and on no permutation; ranked against the null
    it once got the smallest p-value. It is refused in one line."""
    x = np.random.default_rng(0).normal(size=(200, 2))
    with pytest.raises(
        ParameterError, match="^estimator gaussian gives a statistic that is not a finite number"
    ):
        mitool.independence_test(x, x, estimator="gaussian", permutations=19)


@pytest.mark.parametrize("command", [["estimate"], ["test"], ["test", "--per-feature"]])
def test_one_row_is_refused(tmp_path, command: list[str]) -> None:
    """One pair once gave "I = 0.0000, exact interval" and p = 1."""
    np.save(tmp_path / "x.npy", np.array([[1.0, 2.0]]))
    np.save(tmp_path / "y.npy", np.array([3.0]))
    result = CliRunner().invoke(cli, [*command, str(tmp_path / "x.npy"), str(tmp_path / "y.npy")])
    assert result.exit_code == 2, result.output
    assert "too few samples (1; an MI needs at least 2 pairs" in result.output
    with pytest.raises(ParameterError, match=r"^x has too few samples \(1;"):
        mitool.estimate([1.0], [2.0])


def test_json_is_strict(tmp_path) -> None:
    """A lower bound's open end (inf) and an interval that could not be measured (NaN) are null in
    --json: RFC 8259 has neither, and Python's json writes them as invalid tokens."""
    x, _ = pairs(60)
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "y.npy", x + 1e-4 * np.random.default_rng(3).normal(size=x.shape))
    result = CliRunner().invoke(
        cli, ["estimate", str(tmp_path / "x.npy"), str(tmp_path / "y.npy"), "--estimator", "ksg", "--json"]
    )
    assert result.exit_code == 0, result.output

    def refuse(token: str) -> None:
        raise AssertionError(f"{token} in JSON")

    report = json.loads(result.stdout, parse_constant=refuse)
    assert report["ci_high"] is None and "open above" in report["interval"]


def test_input_too_wide_for_the_memory_is_refused_before_the_work(monkeypatch) -> None:
    """10 000 columns a side ran past 280 s and 4.2 GB before anything was said. An estimate whose
    (d x d) matrices exceed the free memory is refused at once, in one line naming x and a remedy."""
    from mitool import runtime

    x, y = pairs(200)
    monkeypatch.setattr(runtime, "available_memory", lambda: 2**16)  # 64 KiB free
    wide = np.hstack([x, np.random.default_rng(2).normal(size=(200, 60))])
    with pytest.raises(ParameterError, match=r"^x an estimate on 62 columns in all \(200 rows\) needs about"):
        mitool.estimate(wide, y)
    assert np.isfinite(mitool.estimate(x, y).value)  # 2 columns: 13 KiB


def test_the_matrix_names_the_column_of_an_outlier_and_refuses_one_row(tmp_path) -> None:
    """matrix on one row once wrote zeros; with an outlier of 1e308, --estimator ksg gave -4.48 for
    every pair and gaussian NaN with the smallest p-value."""
    x, y = pairs(100)
    table = np.hstack([x, y])
    table[5, 1] = 1e308
    np.save(tmp_path / "outlier.npy", table)
    np.save(tmp_path / "one.npy", table[:1])
    for name, words in (
        ("outlier", "Error: column x1 holds 1e+308 in row 5"),
        ("one", "Error: DATA has 1 row(s)"),
    ):
        result = CliRunner().invoke(
            cli, ["matrix", str(tmp_path / f"{name}.npy"), "--out", str(tmp_path / name)]
        )
        assert result.exit_code == 2 and result.output.startswith(words), result.output
        assert len(result.output.strip().splitlines()) == 1


def test_wide_input_is_announced_before_the_work(tmp_path, monkeypatch) -> None:
    """Wide input that the memory holds is announced on stderr before its silent first stage; the
    estimate itself is refused here (a tiny free memory) so that the test does not train."""
    from mitool import runtime

    monkeypatch.setattr(runtime, "available_memory", lambda: 2**16)
    np.save(tmp_path / "x.npy", np.random.default_rng(1).normal(size=(30, 1200)))
    np.save(tmp_path / "y.npy", np.random.default_rng(2).normal(size=30))
    result = CliRunner().invoke(
        cli, ["estimate", str(tmp_path / "x.npy"), str(tmp_path / "y.npy"), "--quiet"]
    )
    assert result.stderr.startswith("estimate: 1201 columns in all (30 rows)")
    assert result.exit_code == 2 and "needs about" in result.stderr.splitlines()[-1]
