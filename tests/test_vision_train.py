"""The training loop on synthetic data: exact resume, atomic and validated checkpoints, the NaN
guard, the logged metrics, the learning-rate schedule."""

from __future__ import annotations

import json
import math
import os

import pytest
import torch

from mitool import bounds
from mitool._infra.files import TEMPORARY_SUFFIX
from mitool.bounds import BoundResult
from mitool.vision import checkpoint as checkpoints
from mitool.vision.config import PretrainConfig
from mitool.vision.lr_schedule import learning_rate
from mitool.vision.simclr import SimCLR
from mitool.vision.step import TrainingDiverged
from mitool.vision.train import pretrain


def _config(out, method: str = "moco", **options) -> PretrainConfig:
    """A set of 64 synthetic 16-pixel images, batch 16: 4 steps per epoch (moco's queue of 32 is
    less than the 64 images, as it must be)."""
    negatives = {"moco": 32, "simo": 8, "simclr": None}[method]
    settings = dict(
        method=method, arch="small-cnn", dataset="synthetic", synthetic_size=64, image_size=16, epochs=3,
        batch_size=16, negatives=negatives, bn_splits=2, workers=0, out=str(out), log_every=1,
        checkpoint_every=100, knn_every=1, knn_max_samples=32, embedding_dim=32,
    )  # fmt: skip
    settings.update(options)
    return PretrainConfig(**settings)


class _CallsCode:
    """Unpickling this calls a function (os.getcwd): what weights_only=True must refuse."""

    def __reduce__(self):
        return (os.getcwd, ())


def _state(out) -> dict[str, torch.Tensor]:
    return checkpoints.load(os.path.join(out, "checkpoint.pt"), kind="pretrain")["model"]


@pytest.mark.parametrize(("method", "first_part"), [("moco", 3), ("simo", 4), ("simclr", 5)])
def test_resume_gives_the_same_parameters_as_one_run(tmp_path, method: str, first_part: int) -> None:
    """2N steps in one go == N steps, resume, N more (mid-epoch and epoch-end stops; the kNN
    monitor runs in between)."""
    pretrain(_config(tmp_path / "once", method, max_steps=8), progress=False)
    pretrain(_config(tmp_path / "twice", method, max_steps=first_part), progress=False)
    pretrain(_config(tmp_path / "twice", method, max_steps=8), resume=True, progress=False)
    once, twice = _state(tmp_path / "once"), _state(tmp_path / "twice")
    assert once.keys() == twice.keys()
    for name in once:
        assert torch.equal(once[name], twice[name]), name
    with open(tmp_path / "twice" / "metrics.jsonl") as file:
        steps = [json.loads(line)["step"] for line in file if "loss" in line]
    assert steps == list(range(1, 9))


def test_device_augmentation_trains_and_resumes_exactly(tmp_path) -> None:
    """--gpu-augment decode on CPU tensors: workers decode, GPUTwoViewAugment makes the views; its
    generator state travels in the checkpoint, so 6 steps == 2 + resume + 4 (mid-epoch stop)."""
    options = dict(gpu_augment="decode", knn_every=0)
    pretrain(_config(tmp_path / "once", "simclr", max_steps=6, **options), progress=False)
    pretrain(_config(tmp_path / "twice", "simclr", max_steps=2, **options), progress=False)
    saved = checkpoints.load(str(tmp_path / "twice" / "checkpoint.pt"), kind="pretrain")
    assert len(saved["gpu_augment"]) == 1 and saved["gpu_augment"][0]["generator"].dtype == torch.uint8
    pretrain(_config(tmp_path / "twice", "simclr", max_steps=6, **options), resume=True, progress=False)
    once, twice = _state(tmp_path / "once"), _state(tmp_path / "twice")
    for name in once:
        assert torch.equal(once[name], twice[name]), name
    # the views differ from the CPU pipeline's: the same run without the option trains differently
    pretrain(_config(tmp_path / "cpu", "simclr", max_steps=6, knn_every=0), progress=False)
    plain = _state(tmp_path / "cpu")
    assert any(not torch.equal(plain[name], once[name]) for name in once if once[name].is_floating_point())
    with pytest.raises(ValueError, match="option gpu_augment differs"):
        pretrain(
            _config(tmp_path / "twice", "simclr", max_steps=8, knn_every=0, gpu_augment="off"),
            resume=True, progress=False,
        )  # fmt: skip
    # left unset, a resumed run keeps where its views were made (the default depends on the device)
    resumed = pretrain(_config(tmp_path / "twice", "simclr", max_steps=8, knn_every=0), resume=True,
                       progress=False)  # fmt: skip
    assert resumed["step"] == 8
    saved = checkpoints.load(str(tmp_path / "twice" / "checkpoint.pt"), kind="pretrain")
    assert saved["config"]["gpu_augment"] == "decode"


def test_resume_from_a_truncated_checkpoint_uses_the_previous_and_says_so(tmp_path, capsys) -> None:
    out = tmp_path / "run"
    pretrain(_config(out, max_steps=2, checkpoint_every=1, knn_every=0), progress=False)
    path = out / "checkpoint.pt"
    previous = checkpoints.previous_path(str(path))
    assert checkpoints.load(previous, kind="pretrain")["step"] == 1
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    resumed = pretrain(
        _config(out, max_steps=4, checkpoint_every=1, knn_every=0), resume=True, progress=False
    )
    assert f"{path} cannot be read; resuming from the previous checkpoint {previous} (step 1)" in (
        capsys.readouterr().err
    )
    assert resumed["step"] == 4 and checkpoints.load(str(path), kind="pretrain")["step"] == 4
    straight = pretrain(_config(tmp_path / "straight", max_steps=4, checkpoint_every=1, knn_every=0),
                        progress=False)  # fmt: skip
    assert resumed["metrics"]["loss"] == pytest.approx(straight["metrics"]["loss"], abs=1e-6)


def test_checkpoint_files_are_validated(tmp_path) -> None:
    path = str(tmp_path / "c.pt")
    checkpoints.save(path, {"kind": "pretrain", "step": 1, "weights": torch.ones(3)})
    checkpoints.save(path, {"kind": "pretrain", "step": 2, "weights": torch.zeros(3)})
    assert checkpoints.load(path)["step"] == 2
    assert checkpoints.load(checkpoints.previous_path(path))["step"] == 1
    assert [name for name in os.listdir(tmp_path) if TEMPORARY_SUFFIX in name] == []
    foreign = str(tmp_path / "foreign.pt")
    torch.save({"weights": torch.ones(2)}, foreign)
    with pytest.raises(ValueError, match="not written by mitool"):
        checkpoints.load(foreign)
    code = str(tmp_path / "code.pt")
    torch.save({"format": checkpoints.FORMAT, "kind": "pretrain", "payload": _CallsCode()}, code)
    with pytest.raises(ValueError, match="truncated or not a mitool checkpoint"):
        checkpoints.load(code)
    with pytest.raises(ValueError, match=r"is a 'pretrain' checkpoint \(expected a linear checkpoint"):
        checkpoints.load(path, kind="linear")
    with pytest.raises(ValueError, match="checkpoint .*missing.pt: no such file"):
        checkpoints.load(str(tmp_path / "missing.pt"))


def test_rng_states_round_trip() -> None:
    import random

    import numpy as np

    states = checkpoints.rng_states()
    first = (torch.rand(3), np.random.rand(3), random.random())
    checkpoints.restore_rng_states(states)
    second = (torch.rand(3), np.random.rand(3), random.random())
    assert torch.equal(first[0], second[0]) and (first[1] == second[1]).all() and first[2] == second[2]


def test_nan_loss_stops_the_run_naming_the_step_and_keeps_the_last_checkpoint(tmp_path, monkeypatch) -> None:
    calls = {"count": 0}

    def poisoned_bound(method):
        def bound(pos, neg):
            calls["count"] += 1
            result = bounds.infonce(pos, neg)
            if calls["count"] == 3:
                return BoundResult(result.loss * float("nan"), result.mi, result.npc)
            return result

        return bound

    monkeypatch.setattr(SimCLR, "scores_bound", poisoned_bound)
    out = tmp_path / "run"
    with pytest.raises(TrainingDiverged, match=r"loss is nan at step 3 .*last good checkpoint: .*\(step 2\)"):
        pretrain(_config(out, "simclr", max_steps=6, checkpoint_every=2, knn_every=0), progress=False)
    assert checkpoints.load(str(out / "checkpoint.pt"), kind="pretrain")["step"] == 2


def test_metrics_hold_every_field_and_the_bound_identity(tmp_path) -> None:
    """For MoCo with InfoNCE the logged mi is log(K + 1) - loss at every step."""
    out = tmp_path / "run"
    summary = pretrain(_config(out, max_steps=4, knn_every=1), progress=False)
    with open(out / "metrics.jsonl") as file:
        records = [json.loads(line) for line in file]
    steps = [record for record in records if "loss" in record]
    assert len(steps) == 4 and summary["step"] == 4 and summary["stopped_by"] == "max_steps"
    for record in steps:
        assert record["mi"] + record["loss"] == pytest.approx(math.log(33), abs=1e-4)
        assert 0 < record["npc"] < 1 and record["grad_norm"] > 0 and record["images_per_second"] > 0
        assert 0 <= record["data_wait_fraction"] <= 1
    assert [record["lr"] for record in steps] == pytest.approx(
        [learning_rate(step, 12, 0, 0.03 * 16 / 256) for step in range(4)]
    )
    knn = [record for record in records if "knn_top1" in record]
    assert len(knn) == 1 and 0 <= knn[0]["knn_top1"] <= knn[0]["knn_top5"] <= 1


def test_a_run_stopped_early_writes_its_last_record_and_the_counters_agree(tmp_path) -> None:
    """3 steps with log_every 10: the record of those 3 steps is written when the run stops (marked
    partial), then the alignment and uniformity at that step; the summary's step and epoch are the
    last record's (epochs done: 3 of 4 batches = 0.75)."""
    out = tmp_path / "run"
    summary = pretrain(_config(out, max_steps=3, log_every=10, knn_every=0), progress=False)
    with open(out / "metrics.jsonl") as file:
        records = [json.loads(line) for line in file]
    assert [(record["step"], "loss" in record, "alignment" in record) for record in records] == [
        (3, True, False),
        (3, False, True),
    ]
    assert (summary["step"], summary["epoch"]) == (records[-1]["step"], records[-1]["epoch"]) == (3, 0.75)
    assert summary["metrics"] == records[0] and records[0]["skipped_images"] == 0
    assert summary["alignment"] == records[1]
    assert "knn" not in summary and "off" in summary["knn_note"]
    with open(out / "config.json") as file:
        assert json.load(file)["negatives"] == 32
    assert records[0]["partial"] is True and "partial" not in records[1]
    # resumed to the end of its 3 epochs: the partial record is dropped (the record of step 10
    # averages steps 1-10, its interval continued from the checkpoint), one more record at the last
    # step, epoch 3 (the kNN monitor of the last epoch, with alignment and uniformity, is the
    # summary's knn, with the same counters; no separate record of them at the last step)
    summary = pretrain(_config(out, log_every=10, knn_every=3), resume=True, progress=False)
    with open(out / "metrics.jsonl") as file:
        records = [json.loads(line) for line in file]
    assert [(record["step"], record["epoch"], "loss" in record) for record in records] == [
        (3, 0.75, False),
        (10, 2.5, True),
        (12, 3.0, False),
        (12, 3.0, True),
    ]
    assert summary["stopped_by"] == "epochs" and (summary["step"], summary["epoch"]) == (12, 3.0)
    assert summary["knn"] == records[2] == summary["alignment"] and summary["metrics"] == records[3]


def test_learning_rate_schedule() -> None:
    peak = 0.12
    assert learning_rate(0, 100, 10, peak) == pytest.approx(peak / 10)
    assert learning_rate(9, 100, 10, peak) == pytest.approx(peak)
    assert learning_rate(10, 100, 10, peak) == pytest.approx(peak)
    assert learning_rate(55, 100, 10, peak) == pytest.approx(peak / 2)
    assert learning_rate(99, 100, 10, peak) == pytest.approx(peak * 0.5 * (1 + math.cos(math.pi * 89 / 90)))
    assert learning_rate(5, 100, 0, peak) == pytest.approx(peak * 0.5 * (1 + math.cos(math.pi * 5 / 100)))


def test_a_finished_run_is_not_overwritten(tmp_path) -> None:
    out = tmp_path / "run"
    pretrain(_config(out, max_steps=1, knn_every=0), progress=False)
    with pytest.raises(ValueError, match="already holds a run"):
        pretrain(_config(out, max_steps=1, knn_every=0), progress=False)
    with pytest.raises(ValueError, match="option temperature differs"):
        pretrain(_config(out, max_steps=2, temperature=0.5), resume=True, progress=False)


def test_resume_drops_a_metrics_line_cut_short_by_a_crash(tmp_path) -> None:
    from mitool.vision.records import keep_records_up_to

    path = tmp_path / "metrics.jsonl"
    path.write_text('{"step": 10, "loss": 1.5}\n{"step": 20, "loss": 1.2}\n{"step": 30, "lo')
    keep_records_up_to(str(path), 20)
    assert [json.loads(line)["step"] for line in path.read_text().splitlines()] == [10, 20]


def test_a_non_finite_gradient_norm_stops_the_run_at_the_next_read_with_the_last_good_checkpoint(
    tmp_path, monkeypatch
) -> None:
    """The norm of step 3 is infinite: the fused SGD skips step 3 on the device, step 4's read of
    the scalars finds it and stops the run naming step 3; a run whose last step is the bad one
    stops before writing its checkpoint. Either way the checkpoint on disk is step 2's."""
    from mitool.vision import step as step_module

    real_norm, calls = step_module._total_norm, {"count": 0}

    def norm(gradients):
        calls["count"] += 1
        return real_norm(gradients) * (float("inf") if calls["count"] == 3 else 1.0)

    monkeypatch.setattr(step_module, "_total_norm", norm)
    for name, steps in (("next", 6), ("last", 3)):
        calls["count"] = 0
        out = tmp_path / name
        with pytest.raises(
            TrainingDiverged, match=r"gradient norm is inf at step 3 .*last good checkpoint: .*\(step 2\)"
        ):
            pretrain(_config(out, "simclr", max_steps=steps, checkpoint_every=2, knn_every=0), progress=False)
        assert checkpoints.load(str(out / "checkpoint.pt"), kind="pretrain")["step"] == 2


def test_moco_refuses_a_queue_as_large_as_the_training_set_before_any_step(tmp_path) -> None:
    out = tmp_path / "run"
    with pytest.raises(ValueError, match="negatives .* must be less than the 64 training images.*got 64"):
        pretrain(_config(out, "moco", negatives=64, max_steps=1), progress=False)
    assert not (out / "checkpoint.pt").exists()


def test_augmentation_is_made_on_the_gpu_by_default_on_cuda() -> None:
    """gpu_augment left unset: decode on cuda (a device string: the resolution needs no GPU), off
    on the CPU; a value given is kept."""
    from mitool.vision.config import default_gpu_augment, resolve_defaults

    def resolved(**options) -> str:
        return resolve_defaults(
            PretrainConfig(arch="small-cnn", dataset="synthetic", **options), 16
        ).gpu_augment

    assert (default_gpu_augment("cuda"), default_gpu_augment("cpu")) == ("decode", "off")
    assert resolved(device="cuda") == "decode" and resolved(device="cpu") == "off"
    assert resolved(device="cuda", gpu_augment="off") == "off"
    assert resolved(device="cpu", gpu_augment="decode") == "decode"


def test_stl10_pretrains_on_train_and_unlabeled(tmp_path, monkeypatch) -> None:
    """A pretraining run on STL-10 opens torchvision's train+unlabeled split (105 000 images);
    the evaluations keep the labelled train and test splits; other datasets pretrain on train."""
    import torchvision

    from mitool.vision.datasets import load_dataset, pretraining_split

    opened = []

    class FakeSTL10(torch.utils.data.Dataset):
        def __init__(self, root, split, transform=None, download=False):
            opened.append(split)

        def __len__(self) -> int:
            return 105_000 if "unlabeled" in opened[-1] else 5000

    monkeypatch.setattr(torchvision.datasets, "STL10", FakeSTL10)
    assert [pretraining_split(name) for name in ("stl10", "cifar10", "imagefolder")] == [
        "train+unlabeled", "train", "train"
    ]  # fmt: skip
    assert len(load_dataset("stl10", pretraining_split("stl10"), tmp_path)) == 105_000
    assert len(load_dataset("stl10", "train", tmp_path)) == 5000
    with pytest.raises(ValueError, match="split must be one of train, test"):
        load_dataset("cifar10", "unlabeled", tmp_path)
    from mitool.vision.config import resolve_defaults
    from mitool.vision.datasets import dataset_info
    from mitool.vision.train import _training_data

    config = resolve_defaults(PretrainConfig(dataset="stl10", data_dir=str(tmp_path), workers=0), 96)
    loader, _ = _training_data(config, dataset_info("stl10"), 0, 1)
    assert opened[-1] == "train+unlabeled" and len(loader.dataset) == 105_000
