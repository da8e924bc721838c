"""MI matrices (:mod:`mitool.matrix`): the structure found, each pair's numbers equal to
independence_test's and the estimator's alone, the shared null, resuming a stopped run, the CSV
and the figure, the command line, and a two-worker Dask cluster giving the local numbers."""

from __future__ import annotations

import csv
import doctest
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

import mitool
from mitool import estimators
from mitool.checks import ParameterError
from mitool.cli.main import main
from mitool.estimators.ksg import ksg
from mitool.estimators.preparation import normal_scores
from mitool.estimators.ross import ross_mi
from mitool.independence import min_p_combination
from mitool.independence.shared_null import dequantised_columns, labelled_null_block, labelled_statistics
from mitool.matrix import NULL_BLOCK, MatrixResult, _small_ksg, mi_matrix, pair_seed, shared_null_block

PERMUTATIONS = 199
DEPENDENT = {(0, 1), (2, 3)}


@pytest.fixture(autouse=True)
def one_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MITOOL_THREADS", "1")


@pytest.fixture(scope="module")
def data() -> np.ndarray:
    """Six columns of 300 rows: 0 ~ 1 linear, 2 ~ 3 through a sine, 4 and 5 independent of all."""
    rng = np.random.default_rng(7)
    table = rng.normal(size=(300, 6))
    table[:, 1] += 0.8 * table[:, 0]
    table[:, 3] = np.sin(2 * table[:, 2]) + 0.4 * rng.normal(size=300)
    table[:, 5] = rng.exponential(size=300)
    return table


@pytest.fixture(scope="module")
def result(data: np.ndarray) -> MatrixResult:
    return mi_matrix(data, permutations=PERMUTATIONS, workers=1)


def upper_pairs(width: int) -> list[tuple[int, int]]:
    return [(a, b) for a in range(width) for b in range(a + 1, width)]


def assert_same(one: MatrixResult, other: MatrixResult) -> None:
    for name in ("statistic", "ci_low", "ci_high", "pvalue", "qvalue", "null_values"):
        np.testing.assert_array_equal(getattr(one, name), getattr(other, name), err_msg=name)


def test_the_dependent_pairs_and_only_they_are_found(result: MatrixResult) -> None:
    found = {(a, b) for a, b in upper_pairs(6) if result.qvalue[a, b] <= 0.05}
    assert found == DEPENDENT
    for a, b in DEPENDENT:
        assert result.pvalue[a, b] == 1 / (PERMUTATIONS + 1)
    others = [result.pvalue[a, b] for a, b in upper_pairs(6) if (a, b) not in DEPENDENT]
    assert min(others) > 0.01
    for matrix in (result.statistic, result.pvalue, result.qvalue, result.ci_low):
        np.testing.assert_array_equal(matrix, matrix.T)
        assert np.isnan(np.diag(matrix)).all()
    assert result.null == "shared" and len(result.null_values) == PERMUTATIONS
    assert result.columns == tuple(f"x{j}" for j in range(6))


def test_each_pair_is_what_independence_test_and_the_estimator_give_alone(
    data: np.ndarray, result: MatrixResult
) -> None:
    ksg20 = estimators.get("ksg", k=20, normalise="rank")
    for a, b in [(0, 1), (2, 3), (1, 4), (4, 5)]:
        seed = pair_seed(0, a, b)
        alone = mitool.independence_test(data[:, a], data[:, b], permutations=PERMUTATIONS, seed=seed)
        assert result.statistic[a, b] == alone.statistic
        estimate = mitool.estimate(data[:, a], data[:, b], estimator="ksg", k=20, normalise="rank", seed=seed)
        raw = estimate.details.get("raw_value", estimate.value)  # estimate() reports a value below 0 as 0
        assert result.statistic[a, b] == pytest.approx(raw, abs=1e-12)
        interval = ksg20.estimate(data[:, a, None], data[:, b, None], seed=seed)
        assert result.ci_low[a, b] == pytest.approx(interval.ci_low, abs=1e-12)
        assert result.ci_high[a, b] == pytest.approx(interval.ci_high, abs=1e-12)
        linear = alone.components[1].statistic  # the linear statistic, beside KSG on the shared null
        assert result.linear[a, b] == pytest.approx(linear, rel=1e-9, abs=1e-15)
        null_rows = np.column_stack([result.null_values, result.linear_null_values])
        assert result.pvalue[a, b] == min_p_combination(np.array([alone.statistic, linear]), null_rows)[0]
    # the shared null: the blocks of permutations of the ranks, each its own stream
    blocks = [shared_null_block(300, [20], 0, block, min(NULL_BLOCK, PERMUTATIONS - block * NULL_BLOCK))
              for block in range(2)]  # fmt: skip
    np.testing.assert_array_equal(null_rows, np.concatenate(blocks))


def test_with_its_own_permutations_each_pair_has_independence_tests_p_value(data: np.ndarray) -> None:
    table = data.copy()
    table[7, 4] = np.nan  # a column with a missing value: its pairs keep their own rows and permutations
    own = mi_matrix(table[:, :5], permutations=49, null="pair", workers=1, seed=3)
    shared = mi_matrix(table[:, :5], permutations=49, workers=1, seed=3)
    assert own.null == "pair" and shared.null == "mixed" and not shared.shared_pairs[0, 4]
    for a, b in upper_pairs(5):
        keep = ~np.isnan(table[:, a]) & ~np.isnan(table[:, b])
        alone = mitool.independence_test(
            table[keep, a], table[keep, b], permutations=49, seed=pair_seed(3, a, b)
        )
        assert own.statistic[a, b] == alone.statistic and own.pvalue[a, b] == alone.pvalue
        assert shared.statistic[a, b] == alone.statistic
        if b == 4:
            assert shared.pvalue[a, b] == alone.pvalue


def test_a_discrete_columns_pairs_share_its_own_null(data: np.ndarray) -> None:
    """Ross's and Wilks' statistics on the numeric column's rank scores, against one null per
    discrete column (the permutations of its classes), recomputed here from the public pieces."""
    table = data[:, :4].astype(object)
    labels = np.where(data[:, 0] + 0.5 * data[:, 5] > 0, "high", "low")  # depends on column 0
    table = np.column_stack([table, labels, np.round(data[:, 5])])  # labels, and whole numbers
    result = mi_matrix(table, permutations=PERMUTATIONS, workers=1, seed=2)
    assert result.shared_pairs[0, 4] and result.shared_pairs[3, 5] and not result.shared_pairs[4, 5]
    assert result.pvalue[0, 4] == pytest.approx(1 / (PERMUTATIONS + 1))  # the dependent pair
    assert result.pvalue[2, 4] > 0.05
    k = 20
    for discrete in (4, 5):
        codes = np.unique(table[:, discrete].astype(str) if discrete == 4 else table[:, discrete],
                          return_inverse=True)[1]  # fmt: skip
        sizes = [min(NULL_BLOCK, PERMUTATIONS - block * NULL_BLOCK) for block in range(2)]
        blocks = [labelled_null_block(codes, k, 2, discrete, block, size) for block, size in enumerate(sizes)]
        null_rows = np.concatenate(blocks)
        for other in range(4):
            scores = normal_scores(data[:, other, None])[0]
            observed = labelled_statistics(scores, codes, k)(np.arange(300))
            assert result.statistic[other, discrete] == pytest.approx(
                ross_mi(scores, codes[:, None], k=k), abs=1e-12
            )
            assert result.pvalue[other, discrete] == min_p_combination(np.array(observed), null_rows)[0]
        assert (
            result.ci_low[discrete - 1, discrete]
            < result.statistic[discrete - 1, discrete]
            < result.ci_high[discrete - 1, discrete]
        )


def test_a_column_with_repeated_values_is_dequantised_once_onto_the_shared_null(data: np.ndarray) -> None:
    table = data[:, :4].copy()
    table[:, 1] = np.round(table[:, 1], 1)  # finite precision: ties, not discrete
    result = mi_matrix(table, permutations=49, workers=1, seed=5)
    assert result.dequantised == ("x1",) and result.null == "shared"
    assert any("dequantised once" in note for note in result.notes)
    moved = dequantised_columns(list(table.T), 5)[0][1]
    assert len(np.unique(moved)) == 300  # no ties left, and the recorded order kept: ties broken only
    assert np.all(np.diff(table[np.argsort(moved), 1]) >= 0)
    alone = mitool.independence_test(table[:, 0], moved, permutations=49, seed=pair_seed(5, 0, 1))
    assert result.statistic[0, 1] == pytest.approx(alone.statistic, abs=1e-12)
    assert mi_matrix(table, permutations=49, workers=1, seed=5, null="pair").dequantised == ()


def test_the_subsets_of_the_interval_are_ksgs_own_numbers() -> None:
    rng = np.random.default_rng(1)
    x = rng.normal(size=(10, 60))
    y = np.tanh(x) + rng.standard_t(3, size=(10, 60))
    for ks in ([20], [5, 6, 7]):
        expected = [ksg(x[j, :, None], y[j, :, None], k=ks[0], k_max=ks[-1] if len(ks) > 1 else 0,
                        normalise="rank") for j in range(10)]  # fmt: skip
        np.testing.assert_array_equal(_small_ksg(x, y, ks), expected)


def test_a_stopped_run_resumes_from_its_finished_blocks(data: np.ndarray, result: MatrixResult,
                                                        tmp_path: Path) -> None:  # fmt: skip
    reports: list[tuple[int, int]] = []

    def stop_after_two_blocks(done: int, total: int) -> None:
        reports.append((done, total))
        if len(reports) == 3:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        mi_matrix(data, permutations=PERMUTATIONS, workers=1, out=tmp_path, progress=stop_after_two_blocks)
    saved = sorted(p.name for p in tmp_path.glob("*/block-*"))
    assert len(saved) == 2 and reports[0][0] == 0
    resumed = mi_matrix(data, permutations=PERMUTATIONS, workers=1, out=tmp_path)
    assert resumed.reused_blocks == 2
    assert_same(resumed, result)
    again = mi_matrix(data, permutations=PERMUTATIONS, workers=1, out=tmp_path)
    assert again.reused_blocks == len(list(tmp_path.glob("*/block-*")))
    with pytest.raises(ParameterError, match="other settings.*permutations 199 there, 99 now"):
        mi_matrix(data, permutations=99, workers=1, out=tmp_path)


def test_the_csv_and_the_figure(result: MatrixResult, tmp_path: Path) -> None:
    with open(result.to_csv(tmp_path / "matrix.csv"), newline="") as stream:
        rows = list(csv.DictReader(stream))
    assert list(rows[0]) == ["column_a", "column_b", "mi", "ci_low", "ci_high", "pvalue", "qvalue"]
    assert [(row["column_a"], row["column_b"]) for row in rows] == [
        (f"x{a}", f"x{b}") for a, b in upper_pairs(6)
    ]
    assert float(rows[0]["mi"]) == result.statistic[0, 1] and float(rows[0]["qvalue"]) == result.qvalue[0, 1]
    assert sorted(result.order()[:2].tolist()) in ([0, 1], [2, 3]) or set(result.order()[-2:]) in (
        {0, 1},
        {2, 3},
    )
    figure = result.figure(tmp_path / "matrix.png")
    assert figure.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "x2 ~ x3" in str(result) and "2 pair(s) at q <= 0.05" in str(result)


def test_the_command_line(data: np.ndarray, tmp_path: Path) -> None:
    path = tmp_path / "six.csv"
    np.savetxt(path, data, delimiter=",", header="a,b,c,d,e,f", comments="")
    out = tmp_path / "out"
    arguments = [
        "matrix",
        str(path),
        "--permutations",
        str(PERMUTATIONS),
        "--out",
        str(out),
        "--workers",
        "1",
    ]
    run = CliRunner().invoke(main, arguments)
    assert run.exit_code == 0, run.output
    assert "c ~ d" in run.output and "Wrote" in run.output
    with open(out / "matrix.csv", newline="") as stream:
        rows = {(row["column_a"], row["column_b"]): row for row in csv.DictReader(stream)}
    assert len(rows) == 15 and float(rows["a", "b"]["qvalue"]) <= 0.05
    assert (out / "matrix.png").stat().st_size > 0
    bad = CliRunner().invoke(main, ["matrix", str(path), "--permutations", "0", "--out", str(out)])
    assert bad.exit_code == 2
    assert bad.output.strip() == "Error: --permutations must be a whole number >= 1, got 0"
    plain = CliRunner().invoke(main, [*arguments[:-4], "--out", str(tmp_path / "plain"), "--tail", "none"])
    assert plain.exit_code == 0, plain.output
    with open(tmp_path / "plain" / "matrix.csv", newline="") as stream:
        pvalues = [float(row["pvalue"]) for row in csv.DictReader(stream)]
    assert min(pvalues) >= 1 / (PERMUTATIONS + 1) - 1e-12  # permutation p-values only
    wrong = CliRunner().invoke(main, [*arguments, "--tail", "pareto"])
    assert wrong.exit_code == 2
    assert wrong.output.strip() == "Error: Invalid value for '--tail': 'pareto' is not one of 'gpd', 'none'."


def test_bad_input_is_one_line() -> None:
    with pytest.raises(ParameterError, match="at least two columns"):
        mi_matrix(np.zeros((50, 1)))
    with pytest.raises(ParameterError, match="infinite values .first in column x1, row 3"):
        table = np.random.default_rng(0).normal(size=(50, 3))
        table[3, 1] = np.inf
        mi_matrix(table)
    with pytest.raises(ParameterError, match="null"):
        mi_matrix(np.zeros((50, 2)), null="mine")


def test_worker_processes_give_the_numbers_of_one(data: np.ndarray) -> None:
    one = mi_matrix(data[:, :4], permutations=99, workers=1)
    two = mi_matrix(data[:, :4], permutations=99, workers=2)
    assert_same(one, two)


@pytest.mark.slow
def test_a_two_worker_dask_cluster_gives_the_local_numbers(data: np.ndarray, result: MatrixResult) -> None:
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
    ) as cluster:
        with distributed.Client(cluster) as client:
            remote = mi_matrix(data, permutations=PERMUTATIONS, client=client)
    assert_same(remote, result)


def test_the_docstring_examples_run() -> None:
    import importlib
    import pkgutil

    import mitool.matrix

    modules = [mitool.matrix] + [importlib.import_module(f"mitool.matrix.{info.name}")
                                 for info in pkgutil.iter_modules(mitool.matrix.__path__)]  # fmt: skip
    attempted = {}
    for module in modules:  # the package's own docstrings (mi_matrix) and its modules' (pair_seed)
        failed, attempted[module.__name__] = doctest.testmod(module, optionflags=doctest.ELLIPSIS)[:2]
        assert failed == 0, module.__name__
    assert attempted["mitool.matrix"] > 0 and attempted["mitool.matrix.blocks"] > 0


def test_a_missing_value_leaves_its_row_out_of_its_pairs_only() -> None:
    """NaN in column x1, row 3: the pairs with x1 are tested on the other rows (as independence_test
    tests them after dropping the row), the other pairs on all rows and through the shared null."""
    rng = np.random.default_rng(6)
    table = rng.normal(size=(120, 3))
    table[:, 2] += table[:, 0]
    table[3, 1] = np.nan
    result = mi_matrix(table, permutations=19)
    kept = np.arange(120) != 3
    alone = mitool.independence_test(table[kept, 0], table[kept, 1], permutations=19, seed=pair_seed(0, 0, 1))
    assert result.statistic[0, 1] == pytest.approx(alone.statistic, abs=1e-12)
    assert np.isfinite(result.statistic[~np.eye(3, dtype=bool)]).all() and result.pvalue[0, 2] < 0.1


def test_a_small_table_by_column_names_from_the_command_line(tmp_path: Path) -> None:
    """mtcars' 32 rows once aborted ("ross needs at least 42"); --columns picks columns by name and
    --k sets the neighbours; the pair's MI is independence_test's on the same columns and k."""
    rng = np.random.default_rng(8)
    wt = rng.normal(3, 1, size=32)
    mpg = 37 - 5 * wt + rng.normal(size=32)
    am = (wt < 3).astype(int)
    lines = [
        "name,mpg,wt,am",
        *(
            f"car{i},{m!r},{w!r},{a}"
            for i, (m, w, a) in enumerate(zip(mpg.tolist(), wt.tolist(), am.tolist(), strict=True))
        ),
    ]
    (tmp_path / "cars.csv").write_text("\n".join(lines) + "\n")
    result = CliRunner().invoke(
        main, ["matrix", str(tmp_path / "cars.csv"), "--columns", "mpg,wt,am", "--k", "5",
               "--permutations", "19", "--out", str(tmp_path / "out"), "--quiet"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    rows = list(csv.DictReader(open(tmp_path / "out" / "matrix.csv")))
    pair = next(row for row in rows if {row["column_a"], row["column_b"]} == {"mpg", "wt"})
    alone = mitool.independence_test(mpg, wt, permutations=19, k=5, seed=pair_seed(0, 0, 1))
    assert float(pair["mi"]) == pytest.approx(alone.statistic, abs=1e-9)
    wrong = CliRunner().invoke(main, ["matrix", str(tmp_path / "cars.csv"), "--columns", "mpg,zz"])
    assert (
        wrong.exit_code == 2
        and "--columns names 'zz', not a column of cars.csv; its columns: name, mpg, wt, am" in wrong.output
    )


def test_a_matrix_too_large_for_the_memory_is_refused_before_the_work(monkeypatch) -> None:
    """10 000 columns: 50 million pairs reached 6.7 GB with no word said. A matrix whose pairs exceed
    the free memory is refused at once, in one line naming data and a remedy."""
    from mitool import runtime

    monkeypatch.setattr(runtime, "available_memory", lambda: 2**20)  # 1 MiB free
    table = np.random.default_rng(0).normal(size=(30, 200))  # 19 900 pairs: about 4.5 MiB
    with pytest.raises(ParameterError, match=r"^data a matrix of 200 columns \(19900 pairs\) needs about"):
        mi_matrix(table, permutations=9)
