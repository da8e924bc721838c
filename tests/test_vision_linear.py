"""The linear protocol: step decay, and exact resume of the classifier (with augmentation)."""

from __future__ import annotations

import pytest
import torch

from mitool.vision import checkpoint as checkpoints
from mitool.vision.config import PretrainConfig
from mitool.vision.linear import LinearConfig, linear_evaluation, step_decay
from mitool.vision.train import pretrain


def test_step_decay_divides_by_ten_at_each_milestone() -> None:
    rates = [step_decay(epoch, 30.0, (60, 80)) for epoch in (0, 59, 60, 79, 80, 99)]
    assert rates == pytest.approx([30.0, 30.0, 3.0, 3.0, 0.3, 0.3])


@pytest.fixture(scope="module")
def pretrained(tmp_path_factory) -> str:
    out = tmp_path_factory.mktemp("pretrain")
    config = PretrainConfig(
        method="simclr", arch="small-cnn", dataset="synthetic", synthetic_size=48, image_size=16, epochs=1,
        batch_size=16, workers=0, out=str(out), knn_every=0, embedding_dim=16,
    )  # fmt: skip
    pretrain(config, progress=False)
    return str(out / "checkpoint.pt")


@pytest.mark.parametrize("augment", [True, False])
def test_linear_resume_gives_the_same_classifier_as_one_run(pretrained, tmp_path, augment: bool) -> None:
    def settings(out, max_epochs):
        return LinearConfig(
            checkpoint=pretrained, out=str(out), epochs=3, max_epochs=max_epochs, batch_size=16, lr=0.5,
            milestones=(2,), augment=augment, workers=0,
        )  # fmt: skip

    once = linear_evaluation(settings(tmp_path / "once", None), progress=False)
    linear_evaluation(settings(tmp_path / "twice", 1), progress=False)
    twice = linear_evaluation(settings(tmp_path / "twice", 3), resume=True, progress=False)
    first = checkpoints.load(str(tmp_path / "once" / "linear.pt"), kind="linear")
    second = checkpoints.load(str(tmp_path / "twice" / "linear.pt"), kind="linear")
    assert first["epoch"] == second["epoch"] == 3
    for name, value in first["classifier"].items():
        assert torch.equal(value, second["classifier"][name]), name
    assert once["top1"] == twice["top1"] and 0 <= once["top1"] <= once["top5"] <= 1
