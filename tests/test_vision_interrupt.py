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
