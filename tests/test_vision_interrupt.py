"""SIGINT and SIGTERM during ``mitool vision pretrain``: a real signal to a child process running
the command; it writes a checkpoint at the step it reached, prints one line saying where, at
which step and how to resume, and the printed command continues the run exactly."""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import subprocess
import sys
import time

import pytest
import torch
from click.testing import CliRunner

from mitool.cli.main import main
from mitool.vision import checkpoint as checkpoints

SETTINGS = ["--method", "simclr", "--dataset", "synthetic", "--synthetic-size", "64", "--arch", "small-cnn",
            "--image-size", "16", "--batch-size", "16", "--epochs", "100", "--log-every", "1",
            "--knn-every", "0"]  # fmt: skip


def _wait_for_step(metrics: str, step: int, child: subprocess.Popen, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert child.poll() is None, child.communicate()
        if os.path.exists(metrics):
            with open(metrics) as file:
                steps = [json.loads(line)["step"] for line in file if line.endswith("\n")]
            if steps and steps[-1] >= step:
                return
        time.sleep(0.05)
    child.kill()
    raise AssertionError(f"no step {step} in {metrics} after {timeout} s")


@pytest.mark.parametrize(
    ("signal_number", "workers", "whole_group"),
    [(signal.SIGINT, "1", True), (signal.SIGTERM, "0", False)],
    ids=["ctrl-c-to-the-group-with-a-worker", "sigterm-to-the-process"],
)
@pytest.mark.slow
def test_a_signal_writes_a_checkpoint_at_the_step_and_says_how_to_resume(
    tmp_path, monkeypatch, signal_number: int, workers: str, whole_group: bool
) -> None:
    monkeypatch.setenv("MITOOL_THREADS", "1")  # the same arithmetic in the child and here
    out = str(tmp_path / "run")
    command = [sys.executable, "-m", "mitool.cli.main", "vision", "pretrain", *SETTINGS, "--workers", workers,
               "--out", out]  # fmt: skip
    environment = {**os.environ, "PYTHONWARNINGS": "ignore"}
    child = subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=environment,
        start_new_session=True,
    )
    _wait_for_step(os.path.join(out, "metrics.jsonl"), 3, child)
    if whole_group:  # as a terminal's Ctrl-C: every process of the group, the loader worker too
        os.killpg(child.pid, signal_number)
    else:
        child.send_signal(signal_number)
    _stdout, stderr = child.communicate(timeout=120)
    assert child.returncode == 128 + signal_number, stderr
    last = stderr.strip().splitlines()[-1]
    name = signal.Signals(signal_number).name
    found = re.fullmatch(
        rf"interrupted by {name} at step (\d+) \(epoch ([\d.]+)\): checkpoint written to (\S+); "
        r"resume with: (\S+ -m mitool.cli.main vision pretrain .* --resume)",
        last,
    )
    assert found, last
    step, path, resume = int(found[1]), found[3], found[4]
    assert "Traceback" not in stderr and path == os.path.join(out, "checkpoint.pt")
    assert "\r" not in stderr  # progress into a pipe: plain lines, no carriage returns
    assert float(found[2]) == pytest.approx(step / 4)  # 64 images, batch 16: 4 steps an epoch
    saved = checkpoints.load(path, kind="pretrain")
    assert saved["step"] == step >= 3
    with open(os.path.join(out, "metrics.jsonl")) as file:
        assert json.loads(file.readlines()[-1])["step"] == step
    # the printed command continues the run exactly: N + resume + 2 steps == N + 2 steps in one go
    arguments = shlex.split(resume)[3:] + ["--max-steps", str(step + 2), "--quiet"]
    assert CliRunner().invoke(main, arguments).exit_code == 0
    once = str(tmp_path / "once")
    result = CliRunner().invoke(
        main,
        [
            "vision",
            "pretrain",
            *SETTINGS,
            "--workers",
            workers,
            "--out",
            once,
            "--max-steps",
            str(step + 2),
            "--quiet",
        ],  # fmt: skip
    )
    assert result.exit_code == 0, result.output
    resumed = checkpoints.load(path, kind="pretrain")
    straight = checkpoints.load(os.path.join(once, "checkpoint.pt"), kind="pretrain")
    assert resumed["step"] == straight["step"] == step + 2
    for key, value in straight["model"].items():
        assert torch.equal(value, resumed["model"][key]), key


def test_a_run_stopped_mid_interval_and_resumed_writes_the_records_of_one_run(tmp_path, monkeypatch) -> None:
    """SIGTERM (to this process, in the step after step 4) stops a log_every 3 run at step 5, mid
    interval: its record of steps 4-5 is marked partial, and the checkpoint holds the open
    interval. Resumed to step 9, the metrics file holds the records of one uninterrupted 9-step
    run: steps 3, 6, 9 with the same scalars (the record of step 6 averages steps 4-6)."""
    from mitool.vision import train
    from mitool.vision.config import PretrainConfig
    from mitool.vision.records import STEP_SCALARS, read_records

    monkeypatch.setenv("MITOOL_THREADS", "1")

    def config(out: str, max_steps: int) -> PretrainConfig:
        return PretrainConfig(
            method="simclr", arch="small-cnn", dataset="synthetic", synthetic_size=64, image_size=16,
            epochs=3, batch_size=16, workers=0, out=out, log_every=3, checkpoint_every=100, knn_every=0,
            embedding_dim=32, max_steps=max_steps,
        )  # fmt: skip

    fit = train.fit_schedule_to_time

    def signal_at_step_4(run) -> None:
        fit(run)
        if run.step == 4 and run.config.out.endswith("stopped"):
            os.kill(os.getpid(), signal.SIGTERM)

    monkeypatch.setattr(train, "fit_schedule_to_time", signal_at_step_4)
    stopped = str(tmp_path / "stopped")
    with pytest.raises(train.TrainingInterrupted) as interrupted:
        train.pretrain(config(stopped, 9), progress=False)
    assert interrupted.value.step == 5
    assert [(record["step"], record.get("partial")) for record in read_records(stopped)] == [
        (3, None),
        (5, True),
    ]
    train.pretrain(config(stopped, 9), resume=True, progress=False)
    train.pretrain(config(str(tmp_path / "once"), 9), progress=False)
    resumed, once = read_records(stopped), read_records(str(tmp_path / "once"))
    assert [record["step"] for record in resumed] == [record["step"] for record in once] == [3, 6, 9, 9]
    for left, right in zip(resumed, once, strict=True):
        assert left.keys() == right.keys(), (left, right)
        for key in set(left) & {*STEP_SCALARS, "lr", "epoch", "alignment", "uniformity"}:
            assert left[key] == pytest.approx(right[key], abs=1e-6, nan_ok=True), (left["step"], key)
