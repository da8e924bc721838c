"""The CPU two-view transform and the batched device augmentation, against torchvision."""

from __future__ import annotations

import io
import math

import numpy as np
import pytest
import torch
import torchvision.transforms as transforms_v1
from PIL import Image
from scipy.stats import ks_2samp
from torchvision.transforms import v2
from torchvision.transforms.v2 import functional as TF

from mitool.vision.augment import blur_kernel_size, eval_transform, moco_v2_settings, two_view_transform
from mitool.vision.datasets import dataset_info, load_dataset
from mitool.vision.gpu_augment import (
    DecodeOnly,
    GPUTwoViewAugment,
    adjust_brightness,
    adjust_contrast,
    adjust_hue,
    adjust_saturation,
    decode_on_device,
    gaussian_blur,
    grayscale,
    loader_options,
    pad_to_batch,
    resized_crop,
    sample_crop_boxes,
    sample_parameters,
)
from mitool.vision.loader import make_loader

# KS tests run on fixed seeds (deterministic); 1e-3 is the rejection level.
KS_LEVEL = 1e-3


def steps_of(transform) -> list:
    """The flat list of torchvision steps in a TwoViews(Compose(...)) or Compose."""
    compose = getattr(transform, "transform", transform)
    return list(compose.transforms)


def smooth_batch(count: int, channels: int, height: int, width: int, seed: int = 0) -> torch.Tensor:
    """uint8 images made of a few low-frequency waves (like photographs, unlike pixel noise)."""
    generator = torch.Generator().manual_seed(seed)
    rows = torch.linspace(0, 1, height).view(1, 1, height, 1)
    columns = torch.linspace(0, 1, width).view(1, 1, 1, width)
    image = torch.full((count, channels, height, width), 0.5)
    for _ in range(3):
        frequency = 1 + 3 * torch.rand((count, channels, 2, 1, 1), generator=generator)
        phase = 6.3 * torch.rand((count, channels, 1, 1), generator=generator)
        image = image + 0.15 * torch.sin(
            6.3 * (frequency[:, :, 0] * rows + frequency[:, :, 1] * columns) + phase
        )
    return (image.clamp(0, 1) * 255).round().to(torch.uint8)


# ----------------------------------------------------------------------------------------------
# the CPU pipeline


def test_two_view_transform_has_moco_v2_steps_sized_to_the_image():
    colour = steps_of(two_view_transform(dataset_info("imagefolder"), 224))
    crop, jitter, gray, blur, flip = colour[:5]
    assert isinstance(crop, v2.RandomResizedCrop) and crop.size == (224, 224) and crop.scale == (0.2, 1.0)
    assert (
        jitter.p == 0.8
        and jitter.transforms[0].brightness == (0.6, 1.4)
        and jitter.transforms[0].hue == (-0.1, 0.1)
    )
    assert isinstance(gray, v2.RandomGrayscale) and gray.p == 0.2
    assert (
        blur.p == 0.5
        and blur.transforms[0].kernel_size == (23, 23)
        and blur.transforms[0].sigma == [0.1, 2.0]
    )
    assert isinstance(flip, v2.RandomHorizontalFlip) and flip.p == 0.5
    assert [blur_kernel_size(size) for size in (224, 96, 32, 28)] == [23, 9, 3, 3]
    gray_steps = steps_of(two_view_transform(dataset_info("fashion-mnist"), 28))
    assert not any(isinstance(step, v2.RandomGrayscale) for step in gray_steps)
    assert gray_steps[1].transforms[0].saturation is None and gray_steps[1].transforms[0].hue is None


def test_two_views_keep_the_channel_count_and_normalise():
    image = Image.fromarray(np.full((28, 28), 200, dtype=np.uint8), mode="L")
    info = dataset_info("fashion-mnist")
    view_1, view_2 = two_view_transform(info, 28)(image)
    assert view_1.shape == view_2.shape == (1, 28, 28)
    evaluated = eval_transform(info, 28)(image)
    assert evaluated.shape == (1, 28, 28)
    assert evaluated.mean().item() == pytest.approx((200 / 255 - 0.2860) / 0.3530, abs=1e-4)
    photo = Image.new("RGB", (400, 300), (255, 0, 0))
    assert eval_transform(dataset_info("imagefolder"), 224)(photo).shape == (3, 224, 224)
    upscaled = eval_transform(dataset_info("cifar10"), 64)(Image.new("RGB", (32, 32)))
    assert upscaled.shape == (3, 64, 64)
    with pytest.raises(ValueError, match="image_size must be >= 8"):
        two_view_transform(info, 4)


# ----------------------------------------------------------------------------------------------
# the batched operations against torchvision's functional ones, one sample at a time


def test_batched_colour_operations_match_torchvision():
    images = torch.rand(6, 3, 10, 12, generator=torch.Generator().manual_seed(1))
    factors = torch.tensor([0.6, 0.8, 1.0, 1.2, 1.4, 0.7])
    shifts = torch.tensor([-0.1, -0.05, 0.0, 0.03, 0.1, 0.45])
    cases = [
        (adjust_brightness, TF.adjust_brightness, factors),
        (adjust_contrast, TF.adjust_contrast, factors),
        (adjust_saturation, TF.adjust_saturation, factors),
        (adjust_hue, TF.adjust_hue, shifts),
    ]
    for batched, reference, arguments in cases:
        expected = torch.stack([reference(images[i], float(arguments[i])) for i in range(6)])
        torch.testing.assert_close(batched(images.clone(), arguments), expected, atol=1e-5, rtol=0)
    torch.testing.assert_close(grayscale(images), TF.rgb_to_grayscale(images), atol=1e-6, rtol=0)
    one_channel = images[:, :1]
    torch.testing.assert_close(adjust_hue(one_channel, shifts), one_channel)
    expected = torch.stack([TF.adjust_contrast(one_channel[i], float(factors[i])) for i in range(6)])
    torch.testing.assert_close(adjust_contrast(one_channel, factors), expected, atol=1e-6, rtol=0)


def test_batched_blur_matches_torchvision():
    images = torch.rand(5, 3, 16, 18, generator=torch.Generator().manual_seed(2))
    sigma = torch.tensor([0.1, 0.5, 1.0, 1.5, 2.0])
    expected = torch.stack([TF.gaussian_blur(images[i], [5, 5], [float(sigma[i])] * 2) for i in range(5)])
    torch.testing.assert_close(gaussian_blur(images, sigma, 5), expected, atol=1e-5, rtol=0)


def test_roi_align_crop_matches_torchvision_resize():
    images = smooth_batch(2, 3, 40, 48).float() / 255
    boxes = torch.tensor([[4.0, 6.0, 20.0, 30.0], [0.0, 0.0, 48.0, 40.0]])
    crops = resized_crop(images, boxes, torch.tensor([0, 1]), 32)
    enlarged = TF.resized_crop(images[0], 6, 4, 24, 16, [32, 32], antialias=False)
    # identical away from the border (at the border roi_align also sees the pixels just outside the box)
    torch.testing.assert_close(crops[0, :, 1:-1, 1:-1], enlarged[:, 1:-1, 1:-1], atol=1e-5, rtol=0)
    shrunk = TF.resized_crop(images[1], 0, 0, 40, 48, [32, 32], antialias=True)
    assert (crops[1] - shrunk).abs().mean().item() < 0.01  # area sampling vs antialiased bilinear


# ----------------------------------------------------------------------------------------------
# parameter distributions against torchvision's samplers


def test_crop_boxes_follow_torchvision_random_resized_crop():
    count, height, width = 3000, 300, 400
    torch.manual_seed(0)
    image = torch.zeros(3, height, width)
    reference = np.array(
        [transforms_v1.RandomResizedCrop.get_params(image, [0.2, 1.0], [3 / 4, 4 / 3]) for _ in range(count)],
        dtype=np.float64,
    )  # rows: top, left, h, w
    sizes = torch.tensor([[height, width]]).expand(count, 2)
    boxes = (
        sample_crop_boxes(sizes, (0.2, 1.0), (3 / 4, 4 / 3), torch.Generator().manual_seed(1))
        .double()
        .numpy()
    )
    ours = np.stack([boxes[:, 1], boxes[:, 0], boxes[:, 3] - boxes[:, 1], boxes[:, 2] - boxes[:, 0]], axis=1)
    assert (ours[:, 0] >= 0).all() and (ours[:, 0] + ours[:, 2] <= height).all()
    assert (ours[:, 1] >= 0).all() and (ours[:, 1] + ours[:, 3] <= width).all()
    for name, statistic in [
        ("area fraction", lambda rows: rows[:, 2] * rows[:, 3] / (height * width)),
        ("log aspect", lambda rows: np.log(rows[:, 3] / rows[:, 2])),
        ("centre row", lambda rows: (rows[:, 0] + rows[:, 2] / 2) / height),
        ("centre column", lambda rows: (rows[:, 1] + rows[:, 3] / 2) / width),
    ]:
        assert ks_2samp(statistic(reference), statistic(ours)).pvalue > KS_LEVEL, name
    # a strip too thin for any try: torchvision's centred fallback, exactly
    thin = torch.zeros(3, 10, 200)
    top, left, crop_height, crop_width = transforms_v1.RandomResizedCrop.get_params(
        thin, [0.9, 1.0], [3 / 4, 4 / 3]
    )
    fallback = sample_crop_boxes(torch.tensor([[10, 200]]), (0.9, 1.0), (3 / 4, 4 / 3))[0].tolist()
    assert fallback == [left, top, left + crop_width, top + crop_height]


def test_flip_jitter_grayscale_blur_rates_and_factors_match_the_cpu_pipeline():
    info = dataset_info("imagefolder")
    settings = moco_v2_settings(info, 224)
    count = 4000
    parameters = sample_parameters(
        settings, torch.tensor([[256, 256]]).expand(count, 2), torch.Generator().manual_seed(3)
    )
    crop, jitter, gray, blur, flip = steps_of(two_view_transform(info, 224))[:5]
    for name, flags, probability in [
        ("flip", parameters.flip, flip.p),
        ("jitter", parameters.jitter, jitter.p),
        ("grayscale", parameters.grayscale, gray.p),
        ("blur", parameters.blur, blur.p),
    ]:
        tolerance = 4 * math.sqrt(probability * (1 - probability) / count)
        assert abs(flags.double().mean().item() - probability) < tolerance, name
    torch.manual_seed(4)
    color_jitter = jitter.transforms[0]
    draws = [
        transforms_v1.ColorJitter.get_params(
            color_jitter.brightness, color_jitter.contrast, color_jitter.saturation, color_jitter.hue
        )
        for _ in range(count)
    ]
    reference_factors = np.array([draw[1:] for draw in draws])
    for column, name in enumerate(["brightness", "contrast", "saturation", "hue"]):
        ours = parameters.jitter_factors[:, column].numpy()
        assert ks_2samp(reference_factors[:, column], ours).pvalue > KS_LEVEL, name
    first_reference = np.bincount([int(draw[0][0]) for draw in draws], minlength=4) / count
    first_ours = np.bincount(parameters.jitter_order[:, 0].numpy(), minlength=4) / count
    assert np.abs(first_reference - first_ours).max() < 4 * math.sqrt(0.25 * 0.75 / count) * math.sqrt(2)
    sigma_reference = torch.empty(count).uniform_(*blur.transforms[0].sigma).numpy()
    assert ks_2samp(sigma_reference, parameters.blur_sigma.numpy()).pvalue > KS_LEVEL
    assert settings.blur_kernel == blur.transforms[0].kernel_size[0]


# ----------------------------------------------------------------------------------------------
# output statistics against the CPU pipeline on the same images


@pytest.mark.parametrize("channels", [3, 1])
def test_output_statistics_match_the_cpu_pipeline(channels):
    info = dataset_info("synthetic", image_size=32, channels=channels)
    dataset = load_dataset("synthetic", "train", size=64, image_size=32, channels=channels)
    batch = (
        torch.from_numpy(np.stack([dataset.image_array(i) for i in range(64)]))
        .permute(0, 3, 1, 2)
        .contiguous()
    )
    torch.manual_seed(5)
    transform = two_view_transform(info, 24)
    rounds = 4
    cpu = torch.stack([view for _ in range(rounds) for i in range(64) for view in transform(dataset[i][0])])
    augment = GPUTwoViewAugment.for_dataset(info, 24, seed=6)
    device = torch.cat([torch.cat(augment(batch)) for _ in range(rounds)])
    assert cpu.shape == device.shape == (2 * rounds * 64, channels, 24, 24)

    def per_view(views: torch.Tensor) -> dict[str, np.ndarray]:
        return {
            "mean": views.mean(dim=(1, 2, 3)).numpy(),
            "std": views.std(dim=(1, 2, 3)).numpy(),
            "sharpness": views.diff(dim=-1).abs().mean(dim=(1, 2, 3)).numpy(),
        }

    cpu_statistics, device_statistics = per_view(cpu), per_view(device)
    for name in cpu_statistics:
        assert ks_2samp(cpu_statistics[name], device_statistics[name]).pvalue > KS_LEVEL, name
    # per-channel mean over all views within 4 standard errors of the difference
    for channel in range(channels):
        a, b = cpu[:, channel].mean(dim=(1, 2)), device[:, channel].mean(dim=(1, 2))
        standard_error = math.sqrt(a.var().item() / len(a) + b.var().item() / len(b))
        assert abs(a.mean().item() - b.mean().item()) < 4 * standard_error


def test_output_statistics_detect_a_missing_step():
    """The comparison above can fail: without colour jitter the spread of view means shrinks."""
    info = dataset_info("synthetic", image_size=32)
    batch = smooth_batch(64, 3, 32, 32)
    settings = moco_v2_settings(info, 24)
    full = torch.cat(GPUTwoViewAugment(settings, torch.Generator().manual_seed(0))(batch))
    no_jitter = torch.cat(
        GPUTwoViewAugment(
            type(settings)(**{**settings.__dict__, "jitter_probability": 0.0}),
            torch.Generator().manual_seed(0),
        )(batch)
    )
    assert ks_2samp(full.mean(dim=(1, 2, 3)).numpy(), no_jitter.mean(dim=(1, 2, 3)).numpy()).pvalue < KS_LEVEL


# ----------------------------------------------------------------------------------------------
# determinism, devices, variable sizes, decoding


def test_seeded_views_are_reproducible_and_independent(device):
    info = dataset_info("imagefolder")
    batch = smooth_batch(4, 3, 48, 64)
    first = GPUTwoViewAugment.for_dataset(info, 32, seed=7)(batch)
    again = GPUTwoViewAugment.for_dataset(info, 32, seed=7)(batch.to(device))
    assert first[0].shape == (4, 3, 32, 32) and again[0].device.type == device.type
    torch.testing.assert_close(again[0].cpu(), first[0], atol=1e-4, rtol=0)
    torch.testing.assert_close(again[1].cpu(), first[1], atol=1e-4, rtol=0)
    assert not torch.allclose(first[0], first[1])  # the two views differ
    other = GPUTwoViewAugment.for_dataset(info, 32, seed=8)(batch)
    assert not torch.allclose(first[0], other[0])


def test_lists_of_different_sizes_are_padded_by_edge_replication():
    small, large = smooth_batch(1, 3, 20, 30)[0], smooth_batch(1, 3, 36, 24, seed=1)[0]
    batch, sizes = pad_to_batch([small, large])
    assert batch.shape == (2, 3, 36, 30) and sizes.tolist() == [[20, 30], [36, 24]]
    assert torch.equal(batch[0, :, :20, :30], small) and torch.equal(batch[0, :, 35, :30], small[:, 19])
    assert torch.equal(batch[1, :, :, 29], large[:, :, 23])
    info = dataset_info("imagefolder")
    stacked = GPUTwoViewAugment.for_dataset(info, 16, seed=0)(smooth_batch(3, 3, 20, 20))
    listed = GPUTwoViewAugment.for_dataset(info, 16, seed=0)(list(smooth_batch(3, 3, 20, 20)))
    torch.testing.assert_close(listed[0], stacked[0])
    with pytest.raises(ValueError, match="images must have 3 channels"):
        GPUTwoViewAugment.for_dataset(info, 16)(torch.zeros(2, 1, 20, 20, dtype=torch.uint8))


def test_decode_only_and_encoded_loader_with_device_decoding(tmp_path, device):
    folder = tmp_path / "train" / "a"
    folder.mkdir(parents=True)
    # one luma pattern with colour offsets: little chroma detail, so decoders that upsample the
    # subsampled chroma differently (libjpeg, nvJPEG) agree closely
    luma = smooth_batch(1, 1, 40, 60)[0, 0].numpy().astype(np.int16)
    pixels = np.clip(luma[:, :, None] + np.array([0, 25, -25]), 0, 255).astype(np.uint8)
    Image.fromarray(pixels).save(folder / "photo.jpg", quality=95)
    Image.fromarray(pixels).save(folder / "lossless.png")
    buffer = io.BytesIO()
    Image.fromarray(pixels).save(buffer, format="JPEG")
    # starts and ends like a JPEG but holds no image: passes the worker, caught by the device decoder
    (folder / "zeroed.jpg").write_bytes(b"\xff\xd8\xff\xe0" + bytes(100) + b"\xff\xd9")
    (folder / "truncated.jpg").write_bytes(buffer.getvalue()[:300])  # caught in the worker
    decoded = load_dataset("imagefolder", "train", data_dir=tmp_path, transform=DecodeOnly())[0][0]
    assert decoded.dtype == torch.uint8 and decoded.shape == (3, 40, 60)
    assert torch.equal(decoded, torch.from_numpy(pixels).permute(2, 0, 1))  # the PNG, lossless
    shrunk = DecodeOnly(shorter_side=20)(Image.fromarray(pixels))
    assert shrunk.shape == (3, 20, 30)

    dataset = load_dataset("imagefolder", "train", data_dir=tmp_path, encoded=True)
    inputs, labels, skipped = next(iter(make_loader(dataset, 4, False, 0, 0, False)))
    assert skipped == ["a/truncated.jpg"] and len(inputs) == 3
    images, kept, failed = decode_on_device(inputs, device)
    assert failed == ["a/zeroed.jpg"] and kept.tolist() == [0, 1]
    lossless, photo = (image.cpu() for image in images)
    assert torch.equal(lossless, torch.from_numpy(pixels).permute(2, 0, 1))
    with Image.open(folder / "photo.jpg") as opened:  # the same file through PIL's decoder
        reference = torch.from_numpy(np.asarray(opened.convert("RGB")).copy()).permute(2, 0, 1)
    assert photo.shape == reference.shape and (photo.float() - reference.float()).abs().mean().item() < 1.5


def test_generator_state_resumes_the_same_views_and_loader_options():
    info = dataset_info("imagefolder")
    batch = smooth_batch(3, 3, 30, 40)
    augment = GPUTwoViewAugment.for_dataset(info, 16, seed=9)
    augment(batch)
    saved = augment.state_dict()
    expected = augment(batch)
    resumed = GPUTwoViewAugment.for_dataset(info, 16, seed=0)
    resumed.load_state_dict(saved)
    torch.testing.assert_close(resumed(batch)[0], expected[0], atol=0, rtol=0)
    assert isinstance(loader_options("decode", 256)["transform"], DecodeOnly)
    assert loader_options("jpeg") == {"encoded": True}
    with pytest.raises(ValueError, match="gpu-augment mode must be one of decode, jpeg"):
        loader_options("nvjpeg")


def test_views_of_an_encoded_batch_keep_labels_aligned(tmp_path, device):
    folder = tmp_path / "train"
    for name, value in (("a", 40), ("b", 200)):
        (folder / name).mkdir(parents=True)
        Image.new("RGB", (32, 24), (value, value, value)).save(folder / name / "x.jpg", quality=95)
    (folder / "b" / "y.jpg").write_bytes(b"\xff\xd8\xff\xe0" + bytes(64) + b"\xff\xd9")
    dataset = load_dataset("imagefolder", "train", data_dir=tmp_path, **loader_options("jpeg"))
    inputs, labels, skipped = next(iter(make_loader(dataset, 3, False, 0, 0, False)))
    augment = GPUTwoViewAugment.for_dataset(dataset_info("imagefolder"), 16, seed=0)
    view_1, view_2, kept, failed = augment.views_of_batch(inputs, device)
    assert failed == ["b/y.jpg"] and labels[kept].tolist() == [0, 1] and view_1.shape == (2, 3, 16, 16)
    # flat gray images: brightness jitter scales by 0.6-1.4 and nothing else moves them, so the
    # views of b (level 200) stay brighter than those of a (level 40): the labels still match
    assert (
        view_1[1].mean().item() > view_1[0].mean().item()
        and view_2[1].mean().item() > view_2[0].mean().item()
    )
