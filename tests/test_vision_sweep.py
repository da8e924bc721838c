"""``mitool vision sweep`` on tiny synthetic runs: grid expansion, one-line errors, parallel runs,
the summary and the figures, skipping finished runs, exact resume of an interrupted run, SIGTERM,
and runs shared across ranks."""

from __future__ import annotations

import csv
import json
import math
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner

from mitool.checks import ParameterError
from mitool.cli.main import main as mitool
from mitool.vision.config import PretrainConfig
from mitool.vision.sweep import Grid, expand, run_name
from mitool.vision.sweep.summary import _training_figures

TINY = [
    "--arch", "small-cnn", "--dataset", "synthetic", "--synthetic-size", "64", "--image-size", "16",
    "--batch-size", "16", "--epochs", "2", "--workers", "0", "--knn-max-samples", "64",
    "--log-every", "1", "--checkpoint-every", "2", "--device", "cpu",
]  # fmt: skip


def _base(**settings) -> PretrainConfig:
    options = dict(
        arch="small-cnn", dataset="synthetic", synthetic_size=64, image_size=16, epochs=1, workers=0
    )
    return PretrainConfig(**{**options, **settings})


def _sweep(out: Path, *arguments: str, env: dict | None = None) -> subprocess.CompletedProcess:
    command = [
        sys.executable,
        "-m",
        "mitool.cli.main",
        "vision",
        "sweep",
        *TINY,
        "--out",
        str(out),
        *arguments,
    ]
    return subprocess.run(command, capture_output=True, text=True, timeout=300, env=env)


def _rows(out: Path) -> dict[str, dict[str, str]]:
    with open(out / "summary.csv", newline="") as file:
        return {row["name"]: row for row in csv.DictReader(file)}


def test_grid_expands_only_the_axes_that_apply(tmp_path: Path) -> None:
    grid = Grid(
        method=("simo", "simclr"), loss=("eqco", "infonce"), negatives=(4, 8), alpha=(64.0, 256.0),
        batch_size=(16, 32), seeds=(0, 1),
    )  # fmt: skip
    runs = expand(grid, _base(), tmp_path)
    names = [run.name for run in runs]
    # simo: eqco x K x alpha + infonce x K; simclr: eqco x alpha + infonce (no K); x batch x seeds
    assert len(names) == len(set(names)) == (2 * 2 + 2 + 2 + 1) * 2 * 2
    assert "simo-eqco-K4-a64-b16-t0.2-s0" in names
    assert "simclr-infonce-b32-t0.1-s1" in names
    assert not any(name.startswith("simclr") and "-K" in name for name in names)
    assert not any("infonce" in name and "-a" in name for name in names)
    for run in runs:
        assert run.name == run_name(run.config)
        assert run.config["out"] == os.path.join(str(tmp_path), "runs", run.name)
    # the method's defaults fill what the grid leaves out (simo: eqco, alpha 256, K 16)
    (default,) = expand(Grid(method=("simo",), batch_size=(32,)), _base(), tmp_path)
    assert default.name == "simo-eqco-K16-a256-b32-t0.2-s0"


def test_invalid_combinations_are_named_in_one_error(tmp_path: Path) -> None:
    grid = Grid(method=("simo",), negatives=(8, 16, 32), batch_size=(16, 64))
    with pytest.raises(ParameterError) as error:
        expand(grid, _base(), tmp_path)
    message = str(error.value)
    assert error.value.parameter == "negatives"
    assert "2 invalid combination" in message and "negatives=16" in message and "negatives=32" in message
    with pytest.raises(ParameterError, match="alpha applies to the eqco loss only"):
        expand(Grid(method=("simclr",), alpha=(4.0,)), _base(), tmp_path)
    with pytest.raises(ParameterError, match="negatives does not apply to simclr"):
        expand(Grid(method=("simclr",), negatives=(4,)), _base(), tmp_path)


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        (["--method", "simo", "--negatives", "8,16"], "--negatives gives 1 invalid combination"),
        (["--method", "moco,nope"], "--method must be one of"),
        (["--negatives", "4,x"], "--negatives"),
        (["--method", "simclr", "--alpha", "256"], "--alpha applies to the eqco loss only"),
        (["--parallel", "0"], "--parallel must be a whole number >= 1"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(tmp_path: Path, arguments: list[str], expected: str) -> None:
    result = CliRunner().invoke(mitool, ["vision", "sweep", *TINY, "--out", str(tmp_path), *arguments])
    assert result.exit_code == 2, result.output
    lines = [line for line in result.output.splitlines() if line.startswith("Error")]
    assert len(lines) == 1 and expected in lines[0], result.output
    assert "Traceback" not in result.output
    assert not (tmp_path / "runs").exists()


def test_training_figures_from_metrics_records() -> None:
    """images/s over intervals of different speeds: total images / total seconds, not the mean rate."""
    records = [
        {"step": 10, "loss": 4.0, "mi": 1.0, "npc": 0.9, "images_per_second": 100.0},
        {"step": 20, "loss": 3.0, "mi": 2.0, "npc": 0.8, "images_per_second": 300.0},
        {"step": 20, "knn_top1": 0.5},
    ]
    figures = _training_figures(records)  # 10 steps at 100 and 10 at 300 images/s, batch b:
    assert math.isclose(figures["images_per_second"], 20 / (10 / 100 + 10 / 300))  # 10b/100 + 10b/300 s
    assert figures["loss_final"] == 3.0 and figures["npc_final"] == 0.8  # the last 10% of the steps
    assert math.isclose(figures["npc_mean"], 0.85)


@pytest.mark.slow
def test_parallel_sweep_summary_figures_and_skip(tmp_path: Path) -> None:
    out = tmp_path / "sweep"
    result = _sweep(out, "--method", "simclr", "--loss", "infonce,dcl", "--parallel", "2")
    assert result.returncode == 0, result.stderr
    rows = _rows(out)
    assert sorted(rows) == ["simclr-dcl-b16-t0.1-s0", "simclr-infonce-b16-t0.1-s0"]
    for name, row in rows.items():
        outcome = json.loads((out / "runs" / name / "result.json").read_text())
        assert row["status"] == "done" and int(row["steps"]) == 2 * (64 // 16) == outcome["steps"]
        assert math.isclose(float(row["knn_top1"]), outcome["knn_top1"], rel_tol=1e-5)
        assert 0 < float(row["npc_mean"]) < 1 and float(row["images_per_second"]) > 0
    for figure in ("knn_vs_k.png", "knn_vs_batch.png", "curves.png"):
        assert (out / figure).read_bytes()[:4] == b"\x89PNG"
    assert "runs done" in result.stderr and "finished simclr-dcl" in result.stderr
    before = {name: (out / "runs" / name / "result.json").stat().st_mtime_ns for name in rows}
    again = _sweep(out, "--method", "simclr", "--loss", "infonce,dcl")
    assert again.returncode == 0 and "rank 0: 2 of 2 runs already finished, skipped" in again.stderr
    assert before == {name: (out / "runs" / name / "result.json").stat().st_mtime_ns for name in rows}
    changed = _sweep(out, "--method", "simclr", "--loss", "infonce,dcl", "--weight-decay", "0.001")
    assert (
        changed.returncode == 2
        and "holds results made with other settings (--weight-decay 0.0001 there, 0.001 now)"
        in changed.stderr
    )


def _weights(path: Path) -> dict[str, torch.Tensor]:
    return torch.load(path, map_location="cpu", weights_only=True)["model"]


@pytest.mark.slow
def test_an_interrupted_run_resumes_exactly(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A run stopped at step 3 of 8 with its checkpoint (what a killed run leaves is its last
    checkpoint) ends, resumed by the sweep, with the weights of the same run made in one go. One
    thread everywhere: the free cores, which set the threads otherwise, change with the machine's
    load between the runs, and another thread count sums in another order (a CI run with two
    benchmarks beside it differed in the last bits)."""
    from mitool.vision.train import pretrain

    monkeypatch.setenv("MITOOL_THREADS", "1")  # the sweep's runs (its children)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # the run made here
    try:
        _resume_exactly(tmp_path, pretrain)
    finally:
        torch.set_num_threads(threads)


def _resume_exactly(tmp_path: Path, pretrain: Callable[..., object]) -> None:
    arguments = ("--method", "simo", "--negatives", "4")
    assert _sweep(tmp_path / "whole", *arguments).returncode == 0
    (run,) = expand(
        Grid(method=("simo",), negatives=(4,), batch_size=(16,)),
        _base(epochs=2, knn_max_samples=None, log_every=1, checkpoint_every=2, knn_every=0),
        tmp_path / "cut",
    )
    pretrain(PretrainConfig(**{**run.config, "max_steps": 3}), progress=False)  # killed after step 3
    resumed = _sweep(tmp_path / "cut", *arguments)
    assert resumed.returncode == 0, resumed.stderr
    whole = _weights(tmp_path / "whole" / "runs" / run.name / "checkpoint.pt")
    cut = _weights(tmp_path / "cut" / "runs" / run.name / "checkpoint.pt")
    assert whole.keys() == cut.keys()
    for key in whole:
        assert torch.equal(whole[key], cut[key]), key


@pytest.mark.slow
def test_sigterm_says_what_finished_and_how_to_resume(tmp_path: Path) -> None:
    out = tmp_path / "sweep"
    command = [sys.executable, "-m", "mitool.cli.main", "vision", "sweep", *TINY, "--out", str(out)]
    command += ["--method", "simclr", "--epochs", "400", "--quiet"]
    process = subprocess.Popen(command, stderr=subprocess.PIPE, text=True)
    metrics = out / "runs" / "simclr-infonce-b16-t0.1-s0" / "metrics.jsonl"
    deadline = time.monotonic() + 120
    while not (metrics.is_file() and metrics.stat().st_size) and time.monotonic() < deadline:
        time.sleep(0.2)
    process.send_signal(signal.SIGTERM)
    _, stderr = process.communicate(timeout=60)
    assert process.returncode == 143, stderr
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert lines[-1].startswith("vision sweep stopped by SIGTERM: 0 of 1 runs finished"), stderr
    assert "interrupted, they resume from their last checkpoint: simclr-infonce-b16-t0.1-s0" in lines[-1]
    assert f"resume with the same command: {sys.executable} -m mitool.cli.main vision sweep" in lines[-1]
    assert "Traceback" not in stderr
    assert not (out / "runs" / "simclr-infonce-b16-t0.1-s0" / "result.json").exists()


@pytest.mark.slow
def test_runs_are_shared_across_ranks(tmp_path: Path) -> None:
    """As under torchrun: rank 1 makes run 1 and leaves; rank 0 makes run 0, waits, summarises."""
    out = tmp_path / "sweep"
    arguments = ("--method", "simclr", "--loss", "infonce,dcl")
    environment = {**os.environ, "WORLD_SIZE": "2", "LOCAL_RANK": "0", "MASTER_ADDR": "127.0.0.1"}
    second = _sweep(out, *arguments, env={**environment, "RANK": "1"})
    assert second.returncode == 0, second.stderr
    assert [path.name for path in (out / "runs").iterdir() if (path / "result.json").exists()] == [
        "simclr-dcl-b16-t0.1-s0"
    ]
    assert not (out / "summary.csv").exists()
    first = _sweep(out, *arguments, env={**environment, "RANK": "0"})
    assert first.returncode == 0, first.stderr
    assert sorted(_rows(out)) == ["simclr-dcl-b16-t0.1-s0", "simclr-infonce-b16-t0.1-s0"]
