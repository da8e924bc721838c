"""Datasets (vision.datasets), the IDX reader (vision.idx), loaders and skipped images (vision.loader)."""

from __future__ import annotations

import gzip
import os
import warnings

import numpy as np
import pytest
import torch
from PIL import Image

from mitool.checks import ParameterError
from mitool.vision.augment import eval_transform, two_view_transform
from mitool.vision.datasets import (
    DATASETS,
    FASHION_MNIST_DIR,
    EncodedImage,
    UnreadableImage,
    dataset_info,
    load_dataset,
)
from mitool.vision.idx import read_idx
from mitool.vision.loader import (
    SkippedImages,
    UnreadableImagesWarning,
    augmentation_seed,
    collate_skipping_unreadable,
    make_loader,
)

FASHION_FILES = ("train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte")
FASHION_INSTALLED = all(
    os.path.isfile(os.path.join(FASHION_MNIST_DIR, stem + ".gz"))
    or os.path.isfile(os.path.join(FASHION_MNIST_DIR, stem))
    for stem in FASHION_FILES
)


def write_idx(path: str, array: np.ndarray, compress: bool) -> None:
    """An IDX file written independently of read_idx: magic 0x0000 08 ndim, big-endian sizes."""
    header = bytes([0, 0, 8, array.ndim]) + b"".join(int(n).to_bytes(4, "big") for n in array.shape)
    content = header + array.astype(np.uint8).tobytes()
    with (gzip.open if compress else open)(path, "wb") as file:
        file.write(content)


def make_image_folder(root, per_class: int = 3, classes: tuple[str, ...] = ("cat", "dog"), size=(40, 30)):
    """root/train/<class>/<i>.jpg|png and root/val/... with a distinct colour per class."""
    for split in ("train", "val"):
        for class_index, class_name in enumerate(classes):
            folder = root / split / class_name
            folder.mkdir(parents=True)
            for i in range(per_class):
                colour = (80 * class_index + 20 * i, 100, 50)
                extension = "png" if i % 2 else "jpg"
                Image.new("RGB", size, colour).save(folder / f"{i}.{extension}")
    return root


# ----------------------------------------------------------------------------------------------
# info and errors


def test_dataset_info_for_every_name():
    for name in DATASETS:
        info = dataset_info(name)
        assert len(info.mean) == len(info.std) == info.channels
    assert dataset_info("imagefolder").image_size == 224
    assert dataset_info("fashion-mnist").channels == 1
    assert dataset_info("synthetic", num_classes=4, channels=1, image_size=16).num_classes == 4
    with pytest.raises(ValueError, match="dataset must be one of imagefolder"):
        dataset_info("imagenet")


def test_bad_names_and_options_are_one_line_errors(tmp_path):
    with pytest.raises(ValueError, match="dataset must be one of"):
        load_dataset("mnist", "train")
    with pytest.raises(ValueError, match="split must be one of train, test"):
        load_dataset("synthetic", "val")
    with pytest.raises(ValueError, match="synthetic option colours is not one of size, image_size"):
        load_dataset("synthetic", "train", colours=3)
    with pytest.raises(ValueError, match="synthetic channels must be 1 or 3, got 2"):
        load_dataset("synthetic", "train", channels=2)
    with pytest.raises(ValueError, match="synthetic_size must be a whole number >= 1, got 2.5"):
        load_dataset("synthetic", "train", size=2.5)
    with pytest.raises(ParameterError, match="data_dir must be given for dataset imagefolder") as caught:
        load_dataset("imagefolder", "train")
    assert caught.value.parameter == "data_dir"  # shown as --data by the command line
    with pytest.raises(ParameterError, match="nothing: no such directory .the root of cifar10"):
        load_dataset("cifar10", "train", data_dir=tmp_path / "nothing")
    with pytest.raises(ParameterError, match="does not hold stl10 in torchvision's layout"):
        load_dataset("stl10", "train", data_dir=tmp_path)
    with pytest.raises(
        ParameterError, match="missing: no such directory; expected the Fashion-MNIST IDX files"
    ):
        load_dataset("fashion-mnist", "train", data_dir=tmp_path / "missing")


def test_missing_and_empty_image_folders(tmp_path):
    with pytest.raises(ParameterError, match="data_dir .*missing: no such directory .expected class folders"):
        load_dataset("imagefolder", "train", data_dir=tmp_path / "missing")
    with pytest.raises(ParameterError, match="has no val/ folder for split 'test'"):
        (tmp_path / "train").mkdir()
        load_dataset("imagefolder", "test", data_dir=tmp_path)
    with pytest.raises(ValueError, match="has no class folders"):
        load_dataset("imagefolder", "train", data_dir=tmp_path)
    (tmp_path / "train" / "cat").mkdir()
    (tmp_path / "train" / "cat" / "notes.txt").write_text("not an image")
    with pytest.raises(ValueError, match="has no images"):
        load_dataset("imagefolder", "train", data_dir=tmp_path)


# ----------------------------------------------------------------------------------------------
# datasets


def test_synthetic_is_deterministic_shaped_and_learnable():
    dataset = load_dataset("synthetic", "train", size=60, image_size=16, num_classes=3, seed=5)
    again = load_dataset("synthetic", "train", size=60, image_size=16, num_classes=3, seed=5)
    other_split = load_dataset("synthetic", "test", size=60, image_size=16, num_classes=3, seed=5)
    assert len(dataset) == 60
    image, label = dataset[7]
    assert image.size == (16, 16) and image.mode == "RGB" and label == 7 % 3
    assert np.array_equal(np.asarray(image), np.asarray(again[7][0]))
    assert not np.array_equal(np.asarray(image), np.asarray(other_split[7][0]))
    gray = load_dataset("synthetic", "train", size=4, channels=1)[0][0]
    assert gray.mode == "L"
    # learnable: a nearest-class-mean classifier on the pixels beats chance (1/3) clearly
    pixels = np.stack([np.asarray(dataset[i][0], dtype=np.float32).ravel() for i in range(60)])
    labels = np.arange(60) % 3
    spectra = np.abs(np.fft.rfft2(pixels.reshape(60, 16, 16, 3).mean(-1))).reshape(60, -1)
    means = np.stack([spectra[labels == c][:10].mean(0) for c in range(3)])
    predicted = np.argmin(((spectra[:, None, :] - means[None]) ** 2).sum(-1), axis=1)
    assert (predicted[30:] == labels[30:]).mean() > 0.8


def test_fashion_mnist_matches_the_idx_headers():
    if not FASHION_INSTALLED:
        pytest.skip(
            "install the Debian package dataset-fashion-mnist (apt-get install dataset-fashion-mnist)"
        )
    train = load_dataset("fashion-mnist", "train")
    test = load_dataset("fashion-mnist", "test")
    assert (len(train), len(test)) == (60000, 10000)
    image, label = train[0]
    assert image.size == (28, 28) and image.mode == "L" and 0 <= label < 10
    with gzip.open(os.path.join(FASHION_MNIST_DIR, "train-labels-idx1-ubyte.gz")) as file:
        raw = file.read()
    assert int.from_bytes(raw[4:8], "big") == 60000
    assert [train[i][1] for i in range(5)] == list(raw[8:13])
    assert sorted(set(int(v) for v in test.labels)) == list(range(10))


@pytest.mark.parametrize("compress", [True, False])
def test_fashion_mnist_reads_plain_and_gzipped_idx(tmp_path, compress):
    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, size=(5, 28, 28), dtype=np.uint8)
    labels = np.array([3, 1, 4, 1, 5], dtype=np.uint8)
    suffix = ".gz" if compress else ""
    write_idx(str(tmp_path / f"t10k-images-idx3-ubyte{suffix}"), images, compress)
    write_idx(str(tmp_path / f"t10k-labels-idx1-ubyte{suffix}"), labels, compress)
    dataset = load_dataset("fashion-mnist", "test", data_dir=tmp_path)
    assert len(dataset) == 5 and dataset[2][1] == 4
    assert np.array_equal(np.asarray(dataset[3][0]), images[3])
    with pytest.raises(ParameterError, match="has no IDX file train-images-idx3-ubyte"):
        load_dataset("fashion-mnist", "train", data_dir=tmp_path)
    truncated = tmp_path / "short-idx"
    truncated.write_bytes(bytes([0, 0, 8, 1, 0, 0, 0, 9, 1, 2]))
    with pytest.raises(ValueError, match="truncated"):
        read_idx(str(truncated))


def test_image_folder_labels_and_splits(tmp_path):
    make_image_folder(tmp_path, per_class=3)
    train = load_dataset("imagefolder", "train", data_dir=tmp_path)
    test = load_dataset("imagefolder", "test", data_dir=tmp_path)
    assert train.classes == ["cat", "dog"] and len(train) == 6 and len(test) == 6
    assert [label for _, label in train.samples] == [0, 0, 0, 1, 1, 1]
    image, label = train[4]
    assert image.mode == "RGB" and image.size == (40, 30) and label == 1
    assert np.asarray(image)[0, 0, 0] == pytest.approx(80 + 20, abs=3)  # class 1, image 1 (PNG: exact)
    assert dataset_info("imagefolder", data_dir=tmp_path).num_classes == 2


# ----------------------------------------------------------------------------------------------
# loaders


def test_loader_two_views_order_and_determinism():
    info = dataset_info("synthetic", image_size=16)
    dataset = load_dataset(
        "synthetic", "train", transform=two_view_transform(info, 16), size=20, image_size=16
    )
    loader = make_loader(dataset, batch_size=8, shuffle=True, workers=0, seed=3, drop_last=True)
    batches = list(loader)
    assert len(batches) == 2
    (view_1, view_2), labels, skipped = batches[0]
    assert view_1.shape == view_2.shape == (8, 3, 16, 16) and skipped == []
    assert not torch.equal(view_1, view_2)
    order = [label for _, labels, _ in batches for label in labels.tolist()]
    again = make_loader(dataset, batch_size=8, shuffle=True, workers=0, seed=3, drop_last=True)
    assert [label for _, labels, _ in again for label in labels.tolist()] == order
    loader.set_epoch(1)
    epoch_1 = [label for _, labels, _ in loader for label in labels.tolist()]
    resumed = make_loader(dataset, 8, True, 0, 3, True, epoch=1)
    assert [label for _, labels, _ in resumed for label in labels.tolist()] == epoch_1
    plain = make_loader(dataset, batch_size=20, shuffle=False, workers=0, seed=0, drop_last=False)
    assert next(iter(plain))[1].tolist() == [i % 10 for i in range(20)]


def test_distributed_loader_uses_the_seeded_distributed_sampler(tmp_path):
    import torch.distributed as dist

    info = dataset_info("synthetic", image_size=8)
    dataset = load_dataset("synthetic", "train", transform=eval_transform(info, 8), size=12, image_size=8)
    store = dist.FileStore(str(tmp_path / "store"), 1)
    dist.init_process_group("gloo", store=store, rank=0, world_size=1)
    try:
        loader = make_loader(
            dataset, 6, shuffle=True, workers=0, seed=1, drop_last=False, distributed=True, epoch=2
        )
        order = [label for _, labels, _ in loader for label in labels.tolist()]
    finally:
        dist.destroy_process_group()
    assert isinstance(loader.sampler, torch.utils.data.DistributedSampler) and loader.sampler.epoch == 2
    expected = torch.utils.data.DistributedSampler(dataset, num_replicas=1, rank=0, shuffle=True, seed=1)
    expected.set_epoch(2)
    assert order == [index % 10 for index in expected]
    expected.set_epoch(0)
    assert order != [index % 10 for index in expected]


@pytest.mark.parametrize("num_workers", [0, 2])
def test_corrupt_jpeg_is_skipped_and_counted(tmp_path, num_workers):
    make_image_folder(tmp_path, per_class=4)
    good = (tmp_path / "train" / "dog" / "0.jpg").read_bytes()
    (tmp_path / "train" / "dog" / "broken.jpg").write_bytes(good[: len(good) // 2])  # truncated
    (tmp_path / "train" / "cat" / "junk.jpg").write_bytes(b"this is not a jpeg")
    info = dataset_info("imagefolder", data_dir=tmp_path)
    dataset = load_dataset("imagefolder", "train", data_dir=tmp_path, transform=eval_transform(info, 16))
    loader = make_loader(dataset, batch_size=4, shuffle=True, workers=num_workers, seed=0, drop_last=False)
    skipped_images = SkippedImages()
    seen = 0
    for inputs, labels, skipped in loader:
        assert inputs.shape[0] == labels.shape[0]
        seen += labels.shape[0]
        skipped_images.add(skipped)
    assert seen == 8 and skipped_images.count == 2
    with pytest.warns(UnreadableImagesWarning, match=r"skipped 2 unreadable images: .*(broken|junk)\.jpg"):
        skipped_images.report()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert skipped_images.report() is None  # already reported: no second warning


def test_batch_of_only_unreadable_images_is_carried_over(tmp_path):
    folder = tmp_path / "train" / "a"
    folder.mkdir(parents=True)
    for i in range(3):
        (folder / f"bad{i}.jpg").write_bytes(b"\xff\xd8\xff broken")
    Image.new("RGB", (8, 8)).save(folder / "good.png")
    dataset = load_dataset(
        "imagefolder", "train", data_dir=tmp_path, transform=eval_transform(dataset_info("imagefolder"), 8)
    )
    batches = list(make_loader(dataset, batch_size=2, shuffle=False, workers=0, seed=0, drop_last=False))
    assert len(batches) == 1  # [bad0, bad1] were all unreadable: carried into [bad2, good]
    inputs, labels, skipped = batches[0]
    assert inputs.shape == (1, 3, 8, 8) and sorted(skipped) == ["a/bad0.jpg", "a/bad1.jpg", "a/bad2.jpg"]

    # under DDP every rank must yield one batch per sampler batch (their collectives pair up):
    # the all-unreadable batch comes out in place, empty
    shards = [
        list(
            make_loader(
                dataset,
                batch_size=1,
                shuffle=False,
                workers=0,
                seed=0,
                drop_last=False,
                distributed=True,
                rank=rank,
                world_size=2,
            )
        )  # fmt: skip
        for rank in (0, 1)
    ]
    assert [len(batches) for batches in shards] == [2, 2]
    empty = [batch for batches in shards for batch in batches if batch[0] is None]
    assert len(empty) == 3 and all(len(batch[1]) == 0 and len(batch[2]) == 1 for batch in empty)


def test_collate_stacks_equal_shapes_and_lists_different_ones():
    equal = [(torch.full((1, 2, 2), float(i)), i) for i in range(3)]
    inputs, labels, skipped = collate_skipping_unreadable(equal)
    assert inputs.shape == (3, 1, 2, 2) and inputs[2, 0, 0, 0].item() == 2.0 and labels.tolist() == [0, 1, 2]
    different = [(torch.zeros(3, 4, 5, dtype=torch.uint8), 0), (torch.zeros(3, 6, 2, dtype=torch.uint8), 1)]
    inputs, labels, skipped = collate_skipping_unreadable(different)
    assert isinstance(inputs, list) and [tuple(t.shape) for t in inputs] == [(3, 4, 5), (3, 6, 2)]
    assert skipped == [] and labels.tolist() == [0, 1]


def test_worker_augmentations_are_fixed_by_seed_and_epoch():
    info = dataset_info("synthetic", image_size=16)
    dataset = load_dataset(
        "synthetic", "train", transform=two_view_transform(info, 16), size=16, image_size=16
    )

    def first_views(epoch: int) -> torch.Tensor:
        loader = make_loader(dataset, 8, shuffle=True, workers=2, seed=4, drop_last=True, epoch=epoch)
        return next(iter(loader))[0][0]

    epoch_0 = first_views(0)
    assert torch.equal(epoch_0, first_views(0))  # a resumed run sees the same views
    assert not torch.equal(epoch_0, first_views(1))


class _RandomDraws(torch.utils.data.Dataset):
    """Item i: (four uniform draws from torch's global generator, i); the draws stand for an
    augmentation's random parameters and do not depend on the image."""

    def __len__(self) -> int:
        return 16

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        return torch.rand(4), index


def _rank_draws(num_workers: int, rank: int, world_size: int = 2, epoch: int = 0) -> torch.Tensor:
    loader = make_loader(
        _RandomDraws(), 4, shuffle=True, workers=num_workers, seed=5, drop_last=True,
        distributed=True, epoch=epoch, rank=rank, world_size=world_size,
    )  # fmt: skip
    return torch.cat([inputs for inputs, _, _ in loader])


@pytest.mark.parametrize("num_workers", [0, 1])
def test_each_rank_draws_its_own_augmentations(num_workers):
    rank_0, rank_1 = _rank_draws(num_workers, 0), _rank_draws(num_workers, 1)
    assert rank_0.shape == rank_1.shape == (8, 4)
    # the same stream on both ranks would repeat the same draws for different images
    assert not torch.isclose(rank_0, rank_1).any()
    assert torch.equal(rank_0, _rank_draws(num_workers, 0))  # fixed by (seed, epoch, rank): resumable
    assert torch.equal(rank_1, _rank_draws(num_workers, 1))
    assert not torch.isclose(rank_0, _rank_draws(num_workers, 0, epoch=1)).any()


def test_rank_zero_and_one_process_keep_the_single_process_seeds():
    assert augmentation_seed(3, 7) == augmentation_seed(3, 7, rank=0) == 3 * 1_000_003 + 7
    assert len({augmentation_seed(3, 7, rank) for rank in range(64)}) == 64
    # workers: rank 0 of a distributed run draws what one process draws (first half of its items)
    single = make_loader(_RandomDraws(), 4, shuffle=True, workers=1, seed=5, drop_last=True)
    single_draws = torch.cat([inputs for inputs, _, _ in single])
    assert torch.equal(_rank_draws(1, 0), single_draws[:8])
    # main process under DDP: the loader's own stream leaves the global generator untouched
    torch.manual_seed(11)
    before = torch.get_rng_state()
    draws = _rank_draws(0, 1)
    assert torch.equal(torch.get_rng_state(), before)
    expected = torch.Generator().manual_seed(augmentation_seed(5, 0, 1))
    assert torch.equal(draws, torch.rand(8, 4, generator=expected))


def test_dataset_errors_reach_the_command_line_as_one_line(tmp_path):
    import click
    from click.testing import CliRunner

    from mitool.cli.errors import FriendlyGroup

    @click.group(cls=FriendlyGroup)
    def group() -> None:
        pass

    @group.command()
    @click.option("--dataset", default="imagefolder")
    @click.option("--data", "data_dir", default=None)
    def count(dataset: str, data_dir: str | None) -> None:
        click.echo(len(load_dataset(dataset, "train", data_dir=data_dir)))

    runner = CliRunner()
    missing = runner.invoke(group, ["count", "--data", str(tmp_path / "nowhere")])
    assert (
        missing.exit_code == 2
        and f"Error: --data {tmp_path / 'nowhere'}: no such directory" in missing.output
    )
    assert "Traceback" not in missing.output
    unknown = runner.invoke(group, ["count", "--dataset", "imagenet21k"])
    assert unknown.exit_code == 2 and "Error: --dataset must be one of imagefolder, cifar10" in unknown.output
    unset = runner.invoke(group, ["count"])
    assert unset.exit_code == 2 and "Error: --data must be given for dataset imagefolder" in unset.output
    good = runner.invoke(group, ["count", "--data", str(make_image_folder(tmp_path / "ok", per_class=2))])
    assert good.exit_code == 0 and good.output.strip() == "4"


def test_encoded_items_are_raw_jpeg_bytes_and_truncation_is_caught_in_the_worker(tmp_path):
    make_image_folder(tmp_path, per_class=2)
    jpeg = (tmp_path / "train" / "cat" / "0.jpg").read_bytes()
    (tmp_path / "train" / "cat" / "padded.jpg").write_bytes(jpeg + bytes(100))  # zeros after the end marker
    (tmp_path / "train" / "cat" / "cut.jpg").write_bytes(jpeg[:-40])
    dataset = load_dataset("imagefolder", "train", data_dir=tmp_path, encoded=True)
    items = {dataset.samples[i][0]: dataset[i][0] for i in range(len(dataset))}
    assert isinstance(items["cat/0.jpg"], EncodedImage) and bytes(items["cat/0.jpg"].data.numpy()) == jpeg
    assert isinstance(items["cat/padded.jpg"], EncodedImage)
    assert isinstance(items["cat/cut.jpg"], UnreadableImage) and "truncated" in items["cat/cut.jpg"].reason
    assert items["cat/1.png"].data.shape == (3, 30, 40)  # PNG decoded in the worker: (C, H, W)
    with pytest.raises(ValueError, match="encoded is for dataset imagefolder only, not .synthetic."):
        load_dataset("synthetic", "train", encoded=True)


def test_default_workers_share_the_free_cores_and_leave_one_to_training(monkeypatch):
    import mitool.vision.loader as loader

    monkeypatch.delenv("LOCAL_WORLD_SIZE", raising=False)
    for free, expected in ((1, 0), (2, 1), (4, 3), (64, loader.MAX_DEFAULT_WORKERS)):
        monkeypatch.setattr(loader, "free_cores", lambda free=free: free)
        assert loader.default_workers() == expected
    monkeypatch.setattr(loader, "free_cores", lambda: 16)
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "4")  # torchrun: four processes share the 16 cores
    assert loader.default_workers() == 3
