"""``mitool benchmark`` and mitool.benchmark at tiny sizes: estimator names, the cells and their
results, resume, sharding by rank, settings that differ, the summary, and a real signal."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from mitool._infra.files import read_csv
from mitool._infra.runner import SettingsDiffer
from mitool.benchmark import figures as benchmark_figures
from mitool.benchmark import suites
from mitool.benchmark.run import (
    RESULT_COLUMNS,
    EstimatorSpec,
    Plan,
    estimator_names,
    parse_estimator,
    run_benchmark,
    task_data,
)
from mitool.benchmark.suites import get_task
from mitool.checks import ParameterError
from mitool.cli.main import main

TINY_NEURAL = EstimatorSpec("infonce-tiny", "infonce", {"steps": 30, "hidden": 8, "batch_size": 16})
TASKS = (get_task("normal-dense-1x1-0.75"), get_task("normal-dense-2x2"))


@pytest.fixture(autouse=True)
def one_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MITOOL_THREADS", "1")
    monkeypatch.delenv("RANK", raising=False)
    monkeypatch.delenv("WORLD_SIZE", raising=False)


def tiny_plan(seeds: int = 2) -> Plan:
    estimators = (parse_estimator("gaussian"), parse_estimator("ksg"), TINY_NEURAL)
    return Plan(estimators, TASKS, (300,), tuple(range(seeds)))


def test_estimator_names() -> None:
    assert parse_estimator("smile-concat") == EstimatorSpec("smile-concat", "smile", {"critic": "concat"})
    assert parse_estimator("default").as_config() == {"estimator": "default"}
    assert {"default", "ksg", "gaussian", "infonce", "nwj-separable"} <= set(estimator_names())
    with pytest.raises(ParameterError, match="^estimators has an unknown estimator 'magic'"):
        parse_estimator("magic")
    narrow = parse_estimator("infonce-concat:hidden=64:lr=0.001:canonical=true:normalise=rank")
    assert narrow.as_config() == {"estimator": "infonce", "critic": "concat", "hidden": 64, "lr": 0.001,
                                  "canonical": True, "normalise": "rank"}  # fmt: skip
    assert parse_estimator("ksg:k=3").as_config() == {"estimator": "ksg", "k": 3}
    with pytest.raises(
        ParameterError, match="^estimators has 'magic=1' in 'infonce:magic=1': settings are key=value"
    ):
        parse_estimator("infonce:magic=1")
    with pytest.raises(ParameterError, match="^k must be a whole number >= 1, got 0"):
        parse_estimator("ksg:k=0")


def test_every_estimator_sees_the_same_data_and_tasks_differ() -> None:
    first, again = task_data(TASKS[1], 50, seed=3), task_data(TASKS[1], 50, seed=3)
    assert np.array_equal(first[0], again[0]) and first[0].shape == (50, 2)
    assert not np.array_equal(first[0], task_data(TASKS[1], 50, seed=4)[0])


def test_results_resume_and_summary(tmp_path: Path) -> None:
    plan, log = tiny_plan(), []
    results = run_benchmark(tmp_path, plan, log=log.append)
    rows = read_csv(results)
    assert len(rows) == 3 * 2 * 2 and tuple(rows[0]) == RESULT_COLUMNS
    assert {row["estimator"] for row in rows} == {"gaussian", "ksg", "infonce-tiny"}
    assert all(float(row["ci_low"]) <= float(row["estimate"]) <= float(row["ci_high"]) for row in rows)
    truth = {row["task"]: float(row["true_mi"]) for row in rows}
    assert truth == {task.name: pytest.approx(task.mi, abs=1e-5) for task in TASKS}
    gaussian = [float(r["estimate"]) for r in rows if r["estimator"] == "gaussian"]
    assert np.mean(gaussian) == pytest.approx(np.mean([t.mi for t in TASKS]), abs=0.15)
    # a rerun skips every cell and writes the same results
    again = run_benchmark(tmp_path, plan, log=log.append)
    assert read_csv(again) == rows and "6 of 6 cells already finished, skipped" in log[-1]
    # summary.md: one row per task, the best per task in bold, the footer per estimator
    summary = benchmark_figures.summary_markdown(rows)
    assert "| normal-dense-2x2 | 0.294 |" in summary and "**" in summary
    assert "| mean absolute error (nats) | |" in summary and "tasks <= 2 nats within target" in summary
    written = benchmark_figures.redraw(tmp_path, "svg")
    assert {path.name for path in written} == {"summary.md", "errors_n300.svg", "heatmap_n300.svg"}


def test_results_keep_the_defaults_bias_high_and_the_summary_counts_it_on_every_task(tmp_path: Path) -> None:
    """results.csv's bias_high is the default's details["bias_high"] (ci_high + BIAS_ALLOWANCE x the
    estimate: KSG on 1 + 1 dimensions here) and empty for an estimator without one; the summary's
    coverage of [ci_low, bias_high] counts every task, against a plain count of the same rows."""
    from mitool.trust import BIAS_ALLOWANCE

    plan = Plan((parse_estimator("default"), parse_estimator("gaussian")), (TASKS[0],), (300,), (0, 1))
    rows = read_csv(run_benchmark(tmp_path, plan))
    default = [row for row in rows if row["estimator"] == "default"]
    assert len(default) == 2 and all(row["bias_high"] == "" for row in rows if row["estimator"] == "gaussian")
    for row in default:
        expected = float(row["ci_high"]) + BIAS_ALLOWANCE * max(float(row["estimate"]), 0.0)
        assert float(row["bias_high"]) == pytest.approx(expected, rel=1e-5)
    # rows made by hand: the truth 1.0 above two intervals, within one bias_high, on tasks off target
    made = [
        {"task": task, "true_mi": "1.0", "estimator": name, "estimate": estimate, "ci_low": low,
         "ci_high": high, "bias_high": bias_high, "seconds": "1", "n": "100", "family": "f"}
        for task, name, estimate, low, high, bias_high in [
            ("a", "default", "0.8", "0.75", "0.85", "1.1"), ("b", "default", "0.7", "0.65", "0.75", "0.96"),
            ("c", "default", "0.95", "0.9", "1.05", "1.3"), ("a", "ksg", "0.8", "0.75", "0.85", ""),
        ]
    ]  # fmt: skip
    inside = sum(float(r["ci_low"]) <= 1.0 <= float(r["bias_high"]) for r in made if r["bias_high"])
    summary = benchmark_figures.summary_markdown(made)
    label = "| truth inside [ci_low, bias_high]"
    line = next(text for text in summary.splitlines() if text.startswith(label))
    assert inside == 2 and line == "| truth inside [ci_low, bias_high] (all tasks) | | 2/3 (67%) | - |"
    assert "## n = 100 pairs, 1 seed\n" in summary


def test_results_give_z_its_dimension_for_a_conditional_task(tmp_path: Path) -> None:
    from mitool.benchmark.conditional import CommonCause

    conditional = CommonCause(dim_z=2, noise=1.0)
    plan = Plan((parse_estimator("gaussian"),), (TASKS[0], conditional), (200,), (0,))
    rows = {row["task"]: row for row in read_csv(run_benchmark(tmp_path, plan))}
    assert rows[conditional.name]["dim_z"] == "2" and rows[TASKS[0].name]["dim_z"] == ""


def test_other_settings_on_the_same_out_are_refused_by_name(tmp_path: Path) -> None:
    run_benchmark(tmp_path, Plan((parse_estimator("gaussian"),), TASKS[:1], (200,), (0,)))
    with pytest.raises(SettingsDiffer, match=r"seeds \[0\] there, \[0, 1\] now"):
        run_benchmark(tmp_path, Plan((parse_estimator("gaussian"),), TASKS[:1], (200,), (0, 1)))


def test_ranks_share_the_cells_and_rank_0_combines_them(tmp_path: Path, monkeypatch) -> None:
    plan = Plan((parse_estimator("gaussian"), parse_estimator("ksg")), TASKS, (200,), (0,))
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("RANK", "1")
    assert run_benchmark(tmp_path, plan) is None
    assert sorted(p.parent.name for p in (tmp_path / "cells").glob("*/*.csv")) == ["ksg", "ksg"]
    monkeypatch.setenv("RANK", "0")
    rows = read_csv(run_benchmark(tmp_path, plan))
    assert len(rows) == 4 and [row["estimator"] for row in rows] == ["gaussian", "ksg", "gaussian", "ksg"]


def test_command_line_bad_input(tmp_path: Path) -> None:
    cases = [
        (["--estimators", "magic"], "Error: --estimators has an unknown estimator 'magic'"),
        (["--tasks", "no-such"], "Error: --tasks must be one of"),
        (["--tasks", "normal-dense-2x2", "--suite", "quick"], "Error: --tasks and --suite exclude"),
        (["--sizes", "1,x"], "Error: --sizes must be comma-separated whole numbers"),
        (["--seeds", "0"], "Error: --seeds must be a whole number >= 1"),
        (["--estimators", "ksg,ksg"], "Error: --estimators may list each value once"),
    ]
    for extra, expected in cases:
        result = CliRunner().invoke(main, ["benchmark", "--out", str(tmp_path), "--quiet", *extra])
        assert result.exit_code == 2 and result.stderr.startswith(expected), (extra, result.stderr)
        assert len(result.stderr.strip().splitlines()) == 1


def test_command_line_run_and_list(tmp_path: Path) -> None:
    args = ["benchmark", "--estimators", "gaussian,ksg", "--suite", "quick", "--sizes", "200", "--seeds", "1"]
    result = CliRunner().invoke(main, [*args, "--out", str(tmp_path), "--quiet"], catch_exceptions=False)
    assert result.exit_code == 0 and f"wrote {tmp_path / 'summary.md'}" in result.stdout
    assert len(read_csv(tmp_path / "results.csv")) == 2 * 5
    listing = CliRunner().invoke(main, ["benchmark", "--list-tasks"]).stdout
    assert "main\tspiral-normal-sparse-25x25\tnormal\t25x25\t1.0217" in listing


@pytest.mark.parametrize("signal_number", [signal.SIGINT, signal.SIGTERM])
def test_a_real_signal_stops_the_benchmark_with_one_line_on_how_to_resume(
    tmp_path: Path, signal_number
) -> None:
    """The CLI in a child process: the signal arrives while the neural cell trains, after the
    first (gaussian) cell is saved."""
    out = tmp_path / "bench"
    args = ["benchmark", "--estimators", "gaussian,infonce", "--tasks", "normal-dense-2x2", "--sizes", "3000",
            "--seeds", "1", "--out", str(out)]  # fmt: skip
    environment = {**os.environ, "MITOOL_THREADS": "1"}
    command = [sys.executable, "-m", "mitool.cli.main", *args]
    child = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=environment
    )
    try:
        deadline = time.monotonic() + 120
        while not list(out.glob("cells/*/*.csv")) and child.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert child.poll() is None, child.communicate()
        time.sleep(0.3)
        child.send_signal(signal_number)
        _, stderr = child.communicate(timeout=60)
    finally:
        child.kill()
    assert child.returncode == 128 + signal_number, stderr
    lines = [line for line in stderr.splitlines() if line.strip()]
    name = signal.Signals(signal_number).name
    assert lines[-1].startswith(f"benchmark stopped by {name}: 1 of 2 cells finished and saved under")
    assert (
        "gaussian/normal-dense-2x2-n3000" in lines[-1] and "Run the same command again to resume" in lines[-1]
    )
    assert "Traceback" not in stderr and not (out / "results.csv").exists()


BMI_MUTUAL_INFORMATION = {
    "1v1-normal-0.75": 0.41333928659223396,
    "normal_cdf-1v1-normal-0.75": 0.41333928659223396,
    "1v1-additive-0.1": 1.7094379663467407,
    "1v1-additive-0.75": 0.3333333333333333,
    "1v1-bimodal-0.75": 0.41333928659223396,
    "wiggly-1v1-normal-0.75": 0.41333928659223396,
    "half_cube-1v1-normal-0.75": 0.41333928659223396,
    "student-identity-1-1-1": 0.22417142752923613,
    "asinh-student-identity-1-1-1": 0.22417142752923613,
    "swissroll_x-normal_cdf-1v1-normal-0.75": 0.41333928659223396,
    "multinormal-dense-2-2-0.5": 0.2938933324510593,
    "multinormal-dense-3-3-0.5": 0.41333928659223407,
    "multinormal-dense-5-5-0.5": 0.5928118328288701,
    "multinormal-dense-25-25-0.5": 1.2921837216593204,
    "multinormal-dense-50-50-0.5": 1.6242653743037039,
    "multinormal-sparse-2-2-2-2.0": 1.0216512475319819,
    "multinormal-sparse-3-3-2-2.0": 1.0216512475319819,
    "multinormal-sparse-5-5-2-2.0": 1.021651247531981,
    "multinormal-sparse-25-25-2-2.0": 1.0216512475319774,
    "student-identity-2-2-1": 0.43194562200144127,
    "student-identity-2-2-2": 0.1931471805599454,
    "student-identity-3-3-2": 0.29092192268276484,
    "student-identity-3-3-3": 0.17871185309236282,
    "student-identity-5-5-2": 0.44815067691532917,
    "student-identity-5-5-3": 0.29854362265275824,
    "normal_cdf-multinormal-sparse-3-3-2-2.0": 1.0216512475319819,
    "normal_cdf-multinormal-sparse-5-5-2-2.0": 1.021651247531981,
    "normal_cdf-multinormal-sparse-25-25-2-2.0": 1.0216512475319774,
    "half_cube-multinormal-sparse-3-3-2-2.0": 1.0216512475319819,
    "half_cube-multinormal-sparse-5-5-2-2.0": 1.021651247531981,
    "half_cube-multinormal-sparse-25-25-2-2.0": 1.0216512475319774,
    "spiral-multinormal-sparse-3-3-2-2.0": 1.0216512475319819,
    "spiral-multinormal-sparse-5-5-2-2.0": 1.021651247531981,
    "spiral-multinormal-sparse-25-25-2-2.0": 1.0216512475319774,
    "spiral-normal_cdf-multinormal-sparse-3-3-2-2.0": 1.0216512475319819,
    "spiral-normal_cdf-multinormal-sparse-5-5-2-2.0": 1.021651247531981,
    "spiral-normal_cdf-multinormal-sparse-25-25-2-2.0": 1.0216512475319774,
    "asinh-student-identity-2-2-1": 0.43194562200144127,
    "asinh-student-identity-3-3-2": 0.29092192268276484,
    "asinh-student-identity-5-5-2": 0.44815067691532917,
}
"""``task.mutual_information`` of each task of bmi's ``BENCHMARK_TASKS_LIST``
(``bmi.benchmark.task_list``, benchmark-mi 0.1.3, cbg-ethz/bmi), in its order, as bmi reports it."""


def test_the_bmi_suite_is_bmis_40_tasks_with_their_ids_order_and_mutual_information() -> None:
    bmi = suites.suite("bmi")
    assert [task.name for task in bmi] == list(BMI_MUTUAL_INFORMATION)
    for task in bmi:
        assert task.mi == pytest.approx(BMI_MUTUAL_INFORMATION[task.name], rel=1e-6), (
            task.name
        )  # bmi: float32
