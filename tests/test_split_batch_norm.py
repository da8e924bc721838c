"""SplitBatchNorm2d (moco's one-device shuffle-BN) against S separate nn.BatchNorm2d layers: outputs,
gradients of the input and of the shared weight and bias, running statistics, eval mode, layout; in
both memory layouts, with a momentum and with the cumulative average, through the eager kernel path
and through the formulation used under torch.compile."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from mitool.vision import backbones
from mitool.vision.backbones import SplitBatchNorm2d, build_backbone, split_batch_norm

SPLITS, CHANNELS = 4, 3


def _separate_layers(split: SplitBatchNorm2d) -> list[nn.BatchNorm2d]:
    layers = [nn.BatchNorm2d(CHANNELS, momentum=split.momentum) for _ in range(SPLITS)]
    for layer in layers:
        layer.load_state_dict(split.state_dict())
    return layers


def _average_running_statistics(layers: list[nn.BatchNorm2d]) -> None:
    """What SplitBatchNorm2d keeps: every group's update starts from the shared running value."""
    mean = sum(layer.running_mean for layer in layers) / len(layers)
    variance = sum(layer.running_var for layer in layers) / len(layers)
    for layer in layers:
        layer.running_mean.copy_(mean)
        layer.running_var.copy_(variance)


@pytest.fixture(params=["kernels", "compiled-form"])
def path(request, monkeypatch) -> str:
    if request.param == "compiled-form":
        monkeypatch.setattr(backbones, "_compiling", lambda: True)
    return request.param


@pytest.mark.parametrize("momentum", [0.1, None])
@pytest.mark.parametrize("memory_format", [torch.contiguous_format, torch.channels_last])
def test_equals_separate_batch_norm_layers(path: str, memory_format, momentum) -> None:
    torch.manual_seed(0)
    split = SplitBatchNorm2d(CHANNELS, num_splits=SPLITS, momentum=momentum)
    with torch.no_grad():
        split.weight.uniform_(0.5, 1.5)
        split.bias.uniform_(-0.5, 0.5)
    layers = _separate_layers(split)
    for step in range(3):
        # groups with different means and scales, so that pooled statistics would differ
        scale = torch.arange(1, 2 * SPLITS + 1, dtype=torch.float32).view(-1, 1, 1, 1)
        inputs = (torch.randn(2 * SPLITS, CHANNELS, 5, 4) * scale + step).contiguous(
            memory_format=memory_format
        )
        inputs.requires_grad_(True)
        output = split(inputs)
        assert output.is_contiguous(memory_format=memory_format)
        expected = torch.cat([layer(part) for layer, part in zip(layers, inputs.chunk(SPLITS), strict=True)])
        torch.testing.assert_close(output, expected, atol=1e-5, rtol=1e-5)
        upstream = torch.randn(output.shape)
        gradients = torch.autograd.grad(output, [inputs, split.weight, split.bias], upstream)
        separate = [parameter for layer in layers for parameter in (layer.weight, layer.bias)]
        expected_gradients = torch.autograd.grad(expected, [inputs, *separate], upstream)
        torch.testing.assert_close(gradients[0], expected_gradients[0], atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(gradients[1], sum(expected_gradients[1::2]), atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(gradients[2], sum(expected_gradients[2::2]), atol=1e-5, rtol=1e-5)
        _average_running_statistics(layers)
        torch.testing.assert_close(split.running_mean, layers[0].running_mean, atol=1e-6, rtol=1e-6)
        torch.testing.assert_close(split.running_var, layers[0].running_var, atol=1e-6, rtol=1e-6)
        assert int(split.num_batches_tracked) == step + 1 == int(layers[0].num_batches_tracked)
    split.eval()
    layers[0].eval()
    with torch.no_grad():
        torch.testing.assert_close(split(inputs), layers[0](inputs), atol=1e-6, rtol=1e-6)


def test_without_affine_parameters_and_running_statistics(path: str) -> None:
    split = SplitBatchNorm2d(CHANNELS, num_splits=2, affine=False, track_running_stats=False)
    plain = nn.BatchNorm2d(CHANNELS, affine=False, track_running_stats=False)
    inputs = torch.randn(6, CHANNELS, 3, 3, requires_grad=True)
    output = split(inputs)
    expected = torch.cat([plain(part) for part in inputs.chunk(2)])
    torch.testing.assert_close(output, expected, atol=1e-5, rtol=1e-5)
    upstream = torch.randn(output.shape)
    (gradient,) = torch.autograd.grad(output, inputs, upstream)
    torch.testing.assert_close(
        gradient, torch.autograd.grad(expected, inputs, upstream)[0], atol=1e-5, rtol=1e-5
    )
    split.eval()  # no running statistics: eval normalises with the batch's own, as nn.BatchNorm2d does
    torch.testing.assert_close(split(inputs), plain.eval()(inputs), atol=1e-6, rtol=1e-6)


def test_bfloat16_activations_with_float32_parameters() -> None:
    """Under autocast the activations are bf16 and the parameters fp32: the output stays bf16 and
    matches the float32 computation to bf16 precision (statistics are kept in float32)."""
    torch.manual_seed(1)
    split = SplitBatchNorm2d(CHANNELS, num_splits=2)
    inputs = (torch.randn(4, CHANNELS, 6, 6) * 3 + 20).contiguous(memory_format=torch.channels_last)
    reference = split(inputs.bfloat16().float())
    output = split(inputs.bfloat16())
    assert output.dtype == torch.bfloat16
    torch.testing.assert_close(output.float(), reference, atol=0.05, rtol=0.02)


def test_batch_not_divisible_by_splits_is_a_one_line_error() -> None:
    with pytest.raises(ValueError, match="bn_splits must divide the batch on this device: 5 images, 4"):
        SplitBatchNorm2d(CHANNELS, num_splits=4)(torch.randn(5, CHANNELS, 4, 4))


def test_a_split_batch_norm_resnet_equals_its_groups_run_separately() -> None:
    """A whole backbone with split-BN gives each group the features of a plain-BN copy of it run on
    that group alone (BN is the only layer that mixes images)."""
    torch.manual_seed(2)
    split_model, _ = build_backbone("resnet18", 1, small_stem=True, norm_layer=split_batch_norm(2))
    plain_model, _ = build_backbone("resnet18", 1, small_stem=True)
    plain_model.load_state_dict(split_model.state_dict())
    images = torch.randn(4, 1, 12, 12).contiguous(memory_format=torch.channels_last)
    features = split_model(images)
    expected = torch.cat([plain_model(part) for part in images.chunk(2)])
    torch.testing.assert_close(features, expected, atol=1e-4, rtol=1e-4)
