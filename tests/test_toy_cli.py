"""`mitool toy run / sweep / plot` end to end at tiny sizes, resume, ranks, and bad input."""

from __future__ import annotations

import csv
import json
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from mitool.cli.main import main
from mitool.toy import study as toy_study
from mitool.toy.study import CURVE_COLUMNS, SUMMARY_COLUMNS

TINY = [
    "--dim", "3", "--mi", "1,3", "--steps-per-stage", "6", "--batch-size", "8",
    "--hidden", "16", "--embed-dim", "8", "--quiet",
]  # fmt: skip


@pytest.fixture(autouse=True)
def one_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MITOOL_THREADS", "1")
    monkeypatch.delenv("RANK", raising=False)
    monkeypatch.delenv("WORLD_SIZE", raising=False)


def invoke(*args: str):
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def rows(path: Path) -> list[dict[str, str]]:
    with open(path, newline="") as stream:
        return list(csv.DictReader(stream))


def header(path: Path) -> list[str]:
    with open(path, newline="") as stream:
        return next(csv.reader(stream))


def without_rate(summary: list[dict[str, str]]) -> list[dict[str, str]]:
    return [{key: value for key, value in row.items() if key != "steps_per_s"} for row in summary]


def test_run_writes_curves_summary_figure_and_config(tmp_path: Path) -> None:
    out = tmp_path / "run"
    result = invoke(
        "toy",
        "run",
        "--estimators",
        "infonce,eqco",
        "--negatives",
        "5",
        "--seeds",
        "2",
        "--alpha",
        "32",
        "--out",
        str(out),
        *TINY,
    )
    assert result.exit_code == 0, result.output
    assert header(out / "curves.csv") == list(CURVE_COLUMNS)
    assert header(out / "summary.csv") == list(SUMMARY_COLUMNS)
    curves = rows(out / "curves.csv")
    assert len(curves) == 2 * 2 * 12  # estimators x seeds x steps
    assert {row["alpha"] for row in curves if row["estimator"] == "eqco"} == {"32"}
    assert all(
        float(row["estimate"]) <= math.log(6) + 1e-5 for row in curves if row["estimator"] == "infonce"
    )
    summary = rows(out / "summary.csv")
    assert [(r["estimator"], r["true_mi"]) for r in summary] == [
        ("infonce", "1"),
        ("infonce", "3"),
        ("eqco", "1"),
        ("eqco", "3"),
    ]
    for row in summary:  # bias = mean - true MI, mse >= bias^2 (mse = bias^2 + variance)
        assert float(row["bias"]) == pytest.approx(float(row["mean"]) - float(row["true_mi"]), abs=1e-4)
        assert float(row["mse"]) >= float(row["bias"]) ** 2 - 1e-4
    config = json.loads((out / "config.json").read_text())
    assert config["settings"]["steps_per_stage"] == 6 and config["grid"]["seeds"] == [0, 1]
    assert {"python", "torch", "mitool"} <= set(config["versions"])
    assert (out / "staircase.png").stat().st_size > 1000
    assert f"wrote {out / 'staircase.png'}" in result.stdout


@pytest.mark.slow
def test_sweep_interrupted_and_resumed_equals_uninterrupted(tmp_path: Path, monkeypatch) -> None:
    args = [
        "toy",
        "sweep",
        "--estimators",
        "infonce,nwj",
        "--negatives",
        "2,9",
        "--critic",
        "separable,cosine",
        "--seeds",
        "2",
        *TINY,
    ]
    whole = tmp_path / "whole"
    assert invoke(*args, "--out", str(whole)).exit_code == 0
    assert len(rows(whole / "summary.csv")) == 2 * 2 * 2 * 2  # estimators x K x critics x stages
    for name in ("bias_vs_k", "std_vs_k", "gradnorm_vs_k", "staircase_separable-K2", "staircase_cosine-K9"):
        assert (whole / f"{name}.png").is_file()

    real_run_cell = toy_study.run_cell
    calls = []

    def killed_after_two_cells(*call_args, **call_kwargs):
        if len(calls) == 2:
            raise KeyboardInterrupt  # the process is killed while the third cell trains
        calls.append(call_args)
        return real_run_cell(*call_args, **call_kwargs)

    parts = tmp_path / "parts"
    monkeypatch.setattr(toy_study, "run_cell", killed_after_two_cells)
    interrupted = CliRunner().invoke(main, [*args, "--out", str(parts)])
    assert interrupted.exit_code == 130  # 128 + SIGINT, as a shell reports Ctrl-C
    (line,) = interrupted.stderr.strip().splitlines()
    assert line.startswith("toy sweep stopped by SIGINT: 2 of 4 cells finished") and "resume" in line
    monkeypatch.setattr(toy_study, "run_cell", real_run_cell)
    assert len(list(parts.glob("cells/*/done.json"))) == 2 and not (parts / "summary.csv").exists()
    finished_before = {p: p.stat().st_mtime_ns for p in parts.glob("cells/*/curves.csv")}
    resumed = CliRunner().invoke(main, [*args, "--out", str(parts)], catch_exceptions=False)
    assert resumed.exit_code == 0
    assert "2 of 4 cells already finished" in resumed.stderr
    assert all(p.stat().st_mtime_ns == t for p, t in finished_before.items())  # not trained again
    assert without_rate(rows(parts / "summary.csv")) == without_rate(rows(whole / "summary.csv"))


def test_sweep_shared_by_ranks_only_rank_zero_writes_the_summary(tmp_path: Path, monkeypatch) -> None:
    args = ["toy", "sweep", "--estimators", "dcl", "--negatives", "2,3,4", "--out", str(tmp_path), *TINY]
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("RANK", "1")
    first = invoke(*args)
    assert first.exit_code == 0 and "rank 1 of 2" in first.stdout
    assert sorted(p.parent.name for p in tmp_path.glob("cells/*/done.json")) == ["separable-K3"]
    assert not (tmp_path / "summary.csv").exists()
    monkeypatch.setenv("RANK", "0")
    second = invoke(*args)
    assert second.exit_code == 0
    assert len(list(tmp_path.glob("cells/*/done.json"))) == 3
    assert sorted({row["negatives"] for row in rows(tmp_path / "summary.csv")}) == ["2", "3", "4"]


def test_resume_with_other_settings_names_them_as_options(tmp_path: Path) -> None:
    args = ["toy", "sweep", "--estimators", "dcl", "--negatives", "2", "--out", str(tmp_path)]
    assert invoke(*args, *TINY).exit_code == 0
    other = CliRunner().invoke(main, [*args, *TINY, "--lr", "0.01", "--mi", "1,4", "--seeds", "2"])
    assert other.exit_code == 2
    (line,) = other.stderr.strip().splitlines()
    assert line.startswith(f"Error: --out {tmp_path} holds results made with other settings")
    assert "--lr 0.0005 there, 0.01 now" in line and "--mi [1.0, 3.0] there, [1.0, 4.0] now" in line
    assert "--seeds [0] there, [0, 1] now" in line and "--dim" not in line
    assert invoke(*args, *TINY).exit_code == 0  # the same settings resume (nothing left to do)


def test_diverged_runs_are_reported_and_marked(tmp_path: Path) -> None:
    args = [
        "--estimators",
        "dcl,infonce",
        "--negatives",
        "3",
        "--divergence-threshold",
        "0.05",
        "--lr",
        "0.01",
    ]
    result = CliRunner().invoke(main, ["toy", "sweep", *args, "--out", str(tmp_path), *TINY])
    assert result.exit_code == 0, result.output
    assert "diverged at step" in result.stderr and "last finite estimate" in result.stderr
    summary = rows(tmp_path / "summary.csv")
    assert any(int(row["diverged"]) > 0 for row in summary)
    for row in summary:  # n_seeds + diverged = all seeds; a stage with no seed left has no statistics
        assert int(row["n_seeds"]) + int(row["diverged"]) == 1
        assert (row["mean"] == "nan") == (row["n_seeds"] == "0")


def test_plot_redraws_from_the_csvs(tmp_path: Path) -> None:
    first = invoke("toy", "run", "--estimators", "nwj", "--negatives", "3", "--out", str(tmp_path), *TINY)
    assert first.exit_code == 0
    (tmp_path / "staircase.png").unlink()
    result = invoke("toy", "plot", str(tmp_path))
    assert result.exit_code == 0 and (tmp_path / "staircase.png").stat().st_size > 1000
    assert result.stdout == f"wrote {tmp_path / 'staircase.png'}\n"
    quiet = invoke("toy", "plot", str(tmp_path), "--quiet", "--format", "svg")
    assert quiet.exit_code == 0 and quiet.output == ""
    assert (tmp_path / "staircase.svg").read_text().lstrip().startswith("<?xml")
    assert invoke("toy", "plot", str(tmp_path), "--format", "pdf").exit_code == 0
    assert (tmp_path / "staircase.pdf").read_bytes().startswith(b"%PDF")
    assert not list(tmp_path.glob(".*"))  # no temporary file left behind by the atomic writes


def test_sweep_writes_vector_figures(tmp_path: Path) -> None:
    args = ["toy", "sweep", "--estimators", "infonce", "--negatives", "2,4", "--format", "svg", *TINY]
    result = invoke(*args, "--out", str(tmp_path))
    assert result.exit_code == 0, result.output
    for name in ("bias_vs_k", "std_vs_k", "gradnorm_vs_k", "staircase_separable-K2"):
        assert f"wrote {tmp_path / name}.svg" in result.stdout
        assert "<svg" in (tmp_path / f"{name}.svg").read_text()
    assert not list(tmp_path.glob("*.png"))


@pytest.mark.slow
def test_the_figures_against_k_fit_a_page_and_drop_the_caption_when_asked(
    tmp_path: Path, monkeypatch
) -> None:
    """A real sweep over the default five stages: bias_vs_k is 3 + 2 panels and the legend, a
    page wide (it was five panels in a row, 3460 x 676 px); `toy plot --no-caption` redraws it with
    no caption text (the figures' texts, recorded as they are saved)."""
    from matplotlib.image import imread

    from mitool.figures import PAGE_WIDTH, pyplot
    from mitool.toy import plots

    saved: dict[str, list[str]] = {}
    real_save = plots.save

    def recording_save(figure, path, *args, **kwargs):
        saved[Path(path).name] = [text.get_text() for text in figure.findobj(pyplot().Text)]
        return real_save(figure, path, *args, **kwargs)

    monkeypatch.setattr(plots, "save", recording_save)
    small = [item for index, item in enumerate(TINY) if index not in (2, 3)]  # all but --mi 1,3
    out = tmp_path / "sweep"
    args = ["toy", "sweep", "--estimators", "infonce,nwj", "--negatives", "2,4", "--mi", "2,4,6,8,10"]
    assert invoke(*args, "--out", str(out), *small).exit_code == 0
    height, width = imread(out / "bias_vs_k.png").shape[:2]
    assert width <= (PAGE_WIDTH + 0.4) * 200 and 1.1 <= width / height <= 1.8, (width, height)
    assert any(text.startswith("Lines:") for text in saved["bias_vs_k.png"])
    figure = plots.figure_against_k(rows(out / "summary.csv"), "bias")
    drawn = [axis for axis in figure.axes if axis.axison]
    assert len(drawn) == 5 and len({axis.get_subplotspec().rowspan.start for axis in drawn}) == 2
    assert max(axis.get_subplotspec().colspan.start for axis in drawn) == 2  # three columns
    pyplot().close(figure)

    saved.clear()
    result = invoke("toy", "plot", str(out), "--no-caption")
    assert result.exit_code == 0 and f"wrote {out / 'bias_vs_k.png'}" in result.stdout
    assert {"bias_vs_k.png", "std_vs_k.png", "gradnorm_vs_k.png", "staircase_separable-K2.png"} <= set(saved)
    for name, texts in saved.items():
        assert not [text for text in texts if "Lines:" in text or "steps per stage" in text], name
    assert imread(out / "bias_vs_k.png").shape[0] < height  # the caption's lines are gone
    for command in ("run", "sweep", "demo", "plot"):  # every command that draws figures
        assert "--caption / --no-caption" in invoke("toy", command, "--help").output


def test_help_of_every_command() -> None:
    for command in (["toy", "run"], ["toy", "sweep"], ["toy", "plot"], ["toy", "demo"], ["estimate"]):
        result = invoke(*command, "--help")
        assert result.exit_code == 0 and "Usage:" in result.output
    sweep_help = invoke("toy", "sweep", "--help").output
    for option in (
        "--estimators",
        "--critic",
        "--negatives",
        "--alpha",
        "--dim",
        "--mi",
        "--steps-per-stage",
        "--batch-size",
        "--lr",
        "--seeds",
        "--seed",
        "--transform",
        "--device",
        "--out",
        "--quiet",
    ):
        assert option in sweep_help


BAD = [  # (extra options, the option the one-line error must start with)
    (["--negatives", "0"], "--negatives"),
    (["--negatives", "4,70000"], "--negatives"),
    (["--negatives", "four"], "--negatives"),
    (["--negatives", "4,"], "--negatives"),
    (["--alpha", "0"], "--alpha"),
    (["--alpha", "-3"], "--alpha"),
    (["--mi", "2,-1"], "--mi"),
    (["--mi", "2,,4"], "--mi"),
    (["--mi", "2,nan"], "--mi"),
    (["--dim", "0"], "--dim"),
    (["--steps-per-stage", "1"], "--steps-per-stage"),
    (["--batch-size", "1"], "--batch-size"),
    (["--lr", "0"], "--lr"),
    (["--embed-dim", "0"], "--embed-dim"),
    (["--hidden", "0"], "--hidden"),
    (["--hidden-layers", "0"], "--hidden-layers"),
    (["--temperature", "-1"], "--temperature"),
    (["--divergence-threshold", "0"], "--divergence-threshold"),
    (["--estimators", "infonce,magic"], "--estimators"),
    (["--estimators", ""], "--estimators"),
    (["--critic", "resnet"], "--critic"),
    (["--seeds", "0"], "--seeds"),
    (["--seed", "-1"], "--seed"),
    (["--transform", "square"], "--transform"),
    (["--estimators", "infonce,infonce"], "--estimators"),
    (["--negatives", "16,16"], "--negatives"),
    (["--device", "meta"], "--device"),
    (["--device", "cuda:7"], "--device"),
    (["--format", "jpg"], "--format"),
]


@pytest.mark.parametrize(("extra", "option"), BAD)
def test_bad_input_is_one_line_naming_the_option(tmp_path: Path, extra: list[str], option: str) -> None:
    args = ["toy", "sweep", "--estimators", "infonce", "--negatives", "3", "--out", str(tmp_path), "--quiet"]
    result = CliRunner().invoke(main, [*args, *extra])
    assert result.exit_code == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"Error: {option} "), lines
    assert "Traceback" not in result.output
    assert not (tmp_path / "cells").exists()


def test_bad_input_of_toy_run_and_plot(tmp_path: Path) -> None:
    lists = CliRunner().invoke(main, ["toy", "run", "--critic", "separable,cosine", "--out", str(tmp_path)])
    assert lists.exit_code == 2 and lists.stderr.startswith("Error: --critic takes one value")
    a_file = tmp_path / "a-file"
    a_file.write_text("")
    result = CliRunner().invoke(main, ["toy", "run", "--out", str(a_file), *TINY])
    assert result.exit_code == 2 and result.stderr.startswith(f"Error: --out must be a directory; {a_file}")
    empty = CliRunner().invoke(main, ["toy", "plot", str(tmp_path)])
    assert empty.exit_code == 2 and "holds neither curves.csv" in empty.stderr


@pytest.mark.parametrize("signal_number", [signal.SIGINT, signal.SIGTERM])
@pytest.mark.slow
def test_a_real_signal_stops_the_sweep_with_one_line_on_how_to_resume(tmp_path: Path, signal_number) -> None:
    """The CLI in a child process at tiny sizes; the signal arrives once the first cell is saved.
    Twelve cells of about 5 s each, so that a test process starved of the CPU still signals before
    the last (with six cells it once signalled as the last cell ended; with twelve of about 1 s,
    the sweep once finished before the signal on a loaded CI machine)."""
    out = tmp_path / "sweep"
    negatives = ",".join(str(k) for k in range(2, 14))
    sweep = ["toy", "sweep", "--estimators", "infonce", "--negatives", negatives, "--out", str(out)]
    command = [sys.executable, "-m", "mitool.cli.main", *sweep, *TINY[:-1], "--steps-per-stage", "1500"]
    environment = {**os.environ, "MITOOL_THREADS": "1"}
    child = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=environment
    )
    try:
        deadline = time.monotonic() + 120
        while (
            not list(out.glob("cells/*/done.json")) and child.poll() is None and time.monotonic() < deadline
        ):
            time.sleep(0.05)
        assert child.poll() is None, child.communicate()
        child.send_signal(signal_number)
        _, stderr = child.communicate(timeout=60)
    finally:
        child.kill()
    assert child.returncode == 128 + signal_number
    lines = [line for line in stderr.splitlines() if line.strip()]
    finished = len(list(out.glob("cells/*/done.json")))
    assert 1 <= finished < 12
    name = signal.Signals(signal_number).name
    assert lines[-1].startswith(f"toy sweep stopped by {name}: {finished} of 12 cells finished and saved")
    assert "Run the same command again to resume" in lines[-1] and "Traceback" not in stderr
    assert not (out / "summary.csv").exists()


@pytest.mark.slow
def test_the_demo_shared_by_two_processes_gives_the_results_of_one(tmp_path: Path) -> None:
    """`toy demo` runs a process per free core (each one thread); the cells and their seeds fix the
    results, so two processes write what one writes, and what the sweep its help names writes. Run
    as a user runs it: real second processes."""
    import subprocess
    import sys

    from mitool.toy.config import DEMO_NEGATIVES

    outs = {count: tmp_path / f"demo{count}" for count in (1, 2)}
    program = [sys.executable, "-m", "mitool.cli.main", "toy"]
    for count, out in outs.items():
        command = [*program, "demo", "--steps-per-stage", "3", "--processes", str(count), "--quiet",
                   "--out", str(out)]  # fmt: skip
        finished = subprocess.run(command, capture_output=True, text=True, timeout=600)
        assert finished.returncode == 0, finished.stderr
    sweep = [*program, "sweep", "--critic", "separable,cosine", "--negatives", "4,16,64,256",
             "--hidden", "128", "--seeds", "3", "--steps-per-stage", "3", "--quiet",
             "--out", str(tmp_path / "sweep")]  # fmt: skip
    finished = subprocess.run(sweep, capture_output=True, text=True, timeout=600)
    assert finished.returncode == 0, finished.stderr
    one = without_rate(rows(outs[1] / "summary.csv"))
    assert len(one) == 4 * 2 * len(DEMO_NEGATIVES) * 5  # bounds x critics x K x stages
    assert without_rate(rows(outs[2] / "summary.csv")) == one
    assert without_rate(rows(tmp_path / "sweep" / "summary.csv")) == one
