"""The linear protocol: step decay, and exact resume of the classifier (with augmentation)."""

from __future__ import annotations

import sys

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


def test_the_linear_training_transform_is_moco_main_lincls() -> None:
    """Crop, flip, to tensor, normalise: no resize and centre crop after the crop (those are the
    evaluation transform's), at ImageNet size and at CIFAR size."""
    from PIL import Image
    from torchvision.transforms import v2

    from mitool.vision.augment import linear_train_transform
    from mitool.vision.datasets import dataset_info

    for dataset, size in (("imagefolder", 224), ("cifar10", 32)):
        info = dataset_info(dataset)
        transform = linear_train_transform(info, size)
        steps = transform.transforms
        assert [type(step) for step in steps] == [
            v2.RandomResizedCrop, v2.RandomHorizontalFlip, v2.ToImage, v2.ToDtype, v2.Normalize
        ]  # fmt: skip
        assert tuple(steps[0].size) == (size, size) and tuple(steps[0].scale) == (0.08, 1.0)
        assert steps[1].p == 0.5
        assert list(steps[4].mean) == list(info.mean) and list(steps[4].std) == list(info.std)
        image = Image.new("RGB", (3 * size // 2, size + 7), (200, 100, 50))
        view = transform(image)
        assert view.shape == (3, size, size) and view.dtype == torch.float32
        expected = (torch.tensor([200, 100, 50]) / 255 - torch.tensor(info.mean)) / torch.tensor(info.std)
        assert torch.allclose(view[:, size // 2, size // 2], expected, atol=1e-5)


def test_linear_protocol_trains_on_the_main_lincls_transform_and_reads_the_loss_rarely(
    pretrained, tmp_path, monkeypatch
) -> None:
    """The train split is opened with linear_train_transform (test: the evaluation transform);
    the training loop reads the device only for the progress bar's loss note, every NOTE_EVERY
    steps (none with the bar off)."""
    from mitool.vision import linear

    opened = {}
    real_load = linear.load_dataset

    def load_dataset(dataset, split, data_dir, transform, **options):
        opened[split] = transform
        return real_load(dataset, split, data_dir, transform, **options)

    monkeypatch.setattr(linear, "load_dataset", load_dataset)
    reads = {"count": 0}

    def counted(real):
        def read(tensor):  # a read of a value by the linear loop itself (the loader's are on the CPU)
            if sys._getframe(1).f_code.co_filename == linear.__file__:
                reads["count"] += 1
            return real(tensor)

        return read

    settings = LinearConfig(checkpoint=pretrained, out=str(tmp_path / "out"), epochs=1, batch_size=4, lr=0.1,
                            workers=0)  # fmt: skip
    linear_evaluation(settings, progress=False)
    assert [type(step).__name__ for step in opened["train"].transforms] == [
        "RandomResizedCrop", "RandomHorizontalFlip", "ToImage", "ToDtype", "Normalize"
    ]  # fmt: skip
    assert opened["test"] is not opened["train"]
    monkeypatch.setattr(linear, "NOTE_EVERY", 5)
    for name in ("__float__", "item", "tolist"):
        monkeypatch.setattr(torch.Tensor, name, counted(getattr(torch.Tensor, name)))
    linear._train(settings, *_linear_parts(pretrained, linear), progress=True)
    assert reads["count"] == 12 // 5  # 48 images in batches of 4: 12 steps, a note every 5
    reads["count"] = 0
    linear._train(settings, *_linear_parts(pretrained, linear), progress=False)
    assert reads["count"] == 0


def _linear_parts(pretrained, linear):
    """(backbone, train set, classifier, optimizer, epochs, device) for linear._train."""
    from mitool.vision.augment import linear_train_transform
    from mitool.vision.evaluate import load_pretrained

    loaded = load_pretrained(pretrained, torch.device("cpu"))
    transform = linear_train_transform(loaded.info, 16)
    train_set = linear.load_dataset("synthetic", "train", None, transform, size=48)
    classifier = torch.nn.Linear(loaded.feature_width, loaded.info.num_classes)
    optimizer = torch.optim.SGD(classifier.parameters(), lr=0.1)
    return loaded.backbone, train_set, classifier, optimizer, range(1), torch.device("cpu")
