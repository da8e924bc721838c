"""A time-boxed run (max_minutes with fit_schedule) fits its cosine schedule to the steps that fit,
records the decision in its config, ends its schedule at that step, and resumes exactly."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch

from mitool.vision import schedule as train_schedule
from mitool.vision.config import PretrainConfig
from mitool.vision.records import read_records
from mitool.vision.schedule import steps_that_fit
from mitool.vision.train import pretrain


def test_steps_that_fit() -> None:
    assert steps_that_fit(100, 0.5, 60.0, 10_000) == 220  # 120 more steps in a minute at 0.5 s
    assert steps_that_fit(100, 0.5, 60.0, 150) == 150  # never longer than planned
    assert steps_that_fit(100, 0.5, -5.0, 10_000) == 101  # out of time: one more step ends it


def _config(out: Path, **settings) -> PretrainConfig:
    options = dict(
        method="simclr", arch="small-cnn", dataset="synthetic", synthetic_size=64, image_size=16,
        batch_size=16, epochs=50, workers=0, knn_every=0, log_every=1, checkpoint_every=1000,
        max_minutes=60.0, out=str(out),
    )  # fmt: skip
    return PretrainConfig(**{**options, **settings})


@pytest.fixture
def decided(monkeypatch) -> list[tuple]:
    """Measure over 2 steps; the speed is replaced by a decision of 7 steps (a clock-free test)."""
    calls: list[tuple] = []
    monkeypatch.setattr(train_schedule, "FIT_PROBE_STEPS", 2)

    def fixed(step: int, seconds_per_step: float, seconds_left: float, planned: int) -> int:
        calls.append((step, seconds_per_step, seconds_left, planned))
        return 7

    monkeypatch.setattr(train_schedule, "steps_that_fit", fixed)
    return calls


def _weights(out: Path) -> dict[str, torch.Tensor]:
    return torch.load(out / "checkpoint.pt", map_location="cpu", weights_only=True)["model"]


def test_a_time_boxed_run_ends_its_fitted_schedule_and_resumes_exactly(tmp_path: Path, decided) -> None:
    summary = pretrain(_config(tmp_path / "whole"), progress=False)
    assert decided == [(3, decided[0][1], decided[0][2], 50 * 4)]  # after the first step + 2
    assert 0 < decided[0][1] and 0 < decided[0][2] < 3600
    assert summary["step"] == 7 and summary["stopped_by"] == "schedule_end"
    saved = torch.load(tmp_path / "whole" / "checkpoint.pt", map_location="cpu", weights_only=False)
    assert saved["config"]["schedule_steps"] == 7 and saved["schedule"]["total_steps"] == 7
    records = [r for r in read_records(str(tmp_path / "whole")) if "lr" in r]
    assert [r["schedule_steps"] for r in read_records(str(tmp_path / "whole")) if "schedule_steps" in r] == [
        7
    ]
    # warmup scaled with the schedule: round(10 epochs x 4 x 7 / 200) = 1 step; the last step
    # (index 6) is at 5/6 of the cosine: lr = peak (1 + cos(5 pi / 6)) / 2
    peak = 0.3 * 16 / 256
    assert records[-1]["step"] == 7
    assert records[-1]["lr"] == pytest.approx(peak * 0.5 * (1 + math.cos(math.pi * 5 / 6)), rel=1e-6)
    # stopped at step 5 after the decision, then resumed: the same weights as in one go
    pretrain(_config(tmp_path / "cut", max_steps=5), progress=False)
    resumed = pretrain(_config(tmp_path / "cut"), resume=True, progress=False)
    assert resumed["step"] == 7 and len(decided) == 2  # the resumed run did not decide again
    whole, cut = _weights(tmp_path / "whole"), _weights(tmp_path / "cut")
    assert all(torch.equal(whole[key], cut[key]) for key in whole)


def test_without_fit_schedule_max_minutes_only_stops(tmp_path: Path, decided) -> None:
    summary = pretrain(_config(tmp_path, fit_schedule=False, epochs=1), progress=False)
    assert decided == [] and summary["step"] == 4 and summary["stopped_by"] == "epochs"
