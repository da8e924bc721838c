"""The methods on tiny inputs: scores against plain implementations, queue and sampling
invariants, BatchNorm variants, backbones, and every method x bound learning on synthetic images."""

from __future__ import annotations

import dataclasses
import itertools
import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode

from mitool import bounds
from mitool.vision.backbones import SplitBatchNorm2d, build_backbone
from mitool.vision.common import momentum_update
from mitool.vision.config import PretrainConfig, resolve_defaults
from mitool.vision.datasets import SyntheticImages
from mitool.vision.method_specs import METHODS
from mitool.vision.methods import build_method, method_class
from mitool.vision.moco import MoCo
from mitool.vision.simclr import SimCLR, in_batch_scores
from mitool.vision.simo import SiMo, sample_negative_indices

CPU = torch.device("cpu")


def _synthetic_images(count: int = 256, size: int = 16) -> torch.Tensor:
    dataset = SyntheticImages("train", size=count, image_size=size, channels=3)
    arrays = [torch.from_numpy(dataset.image_array(i)).permute(2, 0, 1) for i in range(count)]
    return (torch.stack(arrays).float() / 255 - 0.5) / 0.22


IMAGES = _synthetic_images()


def _two_views(generator: torch.Generator, batch: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Two views of the same random images: independent shifts of up to 2 pixels plus noise."""
    images = IMAGES[torch.randint(0, IMAGES.shape[0], (batch,), generator=generator)]

    def view() -> torch.Tensor:
        shift = torch.randint(-2, 3, (2,), generator=generator).tolist()
        return torch.roll(images, shift, (2, 3)) + 0.3 * torch.randn(images.shape, generator=generator)

    return view(), view()


def _small_method(method: str, loss: str, **options) -> nn.Module:
    negatives = options.pop("negatives", {"moco": 256, "simo": 8, "simclr": None, "nnclr": None}[method])
    alpha = 64.0 if loss == "eqco" else None
    if method == "nnclr":
        options.setdefault("support_size", 64)
    config = PretrainConfig(
        method=method, loss=loss, arch="small-cnn", negatives=negatives, alpha=alpha, key_momentum=0.9,
        bn_splits=2, embedding_dim=32, **options,
    )  # fmt: skip
    return build_method(resolve_defaults(config, 16), 3, CPU)


@pytest.mark.parametrize(
    ("method", "loss"), list(itertools.product(["moco", "simo", "simclr", "nnclr"], bounds.INFONCE_FAMILY))
)
def test_every_method_and_bound_learns(method: str, loss: str) -> None:
    torch.manual_seed(0)
    model = _small_method(method, loss)
    trained = [parameter for parameter in model.parameters() if parameter.requires_grad]
    optimizer = torch.optim.SGD(trained, lr=0.05, momentum=0.9)
    generator = torch.Generator().manual_seed(1)
    if method == "moco":  # fill the queue with real keys first, as after the first steps of a run
        with torch.no_grad():
            for _ in range(8):
                model(*_two_views(generator, 32))
    losses = []
    for _ in range(20):
        result = model(*_two_views(generator, 32))
        optimizer.zero_grad()
        result.loss.backward()
        optimizer.step()
        losses.append(result.loss.item())
        assert math.isfinite(result.mi.item()) and 0 <= result.npc.item() <= 1
    first, last = sum(losses[:4]) / 4, sum(losses[-4:]) / 4
    assert last < first - 0.3, (first, last)


def test_moco_loss_is_the_bound_on_queue_scores_and_keys_are_enqueued_after() -> None:
    torch.manual_seed(0)
    model = _small_method("moco", "infonce", bn_mode="sync")
    view_1, view_2 = _two_views(torch.Generator().manual_seed(2), 8)
    queue_before = model.queue.clone()
    result = model(view_1, view_2)
    # the same forward pass by hand (the momentum update already happened in the call above)
    queries = F.normalize(model.head(model.backbone(view_1)), dim=1)
    keys = F.normalize(model.key_head(model.key_backbone(view_2)), dim=1)
    pos = (queries * keys).sum(1) / 0.2
    neg = queries @ queue_before.t() / 0.2
    expected = -torch.log_softmax(torch.cat([pos[:, None], neg], dim=1).double(), dim=1)[:, 0].mean()
    assert result.loss.item() == pytest.approx(expected.item(), abs=1e-4)
    assert torch.allclose(model.queue[:8], keys, atol=1e-5)
    assert torch.equal(model.queue[8:], queue_before[8:])
    assert int(model.queue_pointer) == 8


def test_moco_queue_is_first_in_first_out_and_wraps() -> None:
    model = MoCo(lambda: build_backbone("small-cnn"), "infonce", queue_size=6, embedding_dim=2)
    first = torch.arange(8.0).view(4, 2)
    second = 100 + torch.arange(8.0).view(4, 2)
    model.enqueue(first)
    assert torch.equal(model.queue[:4], first) and int(model.queue_pointer) == 4
    old_tail = model.queue[4:].clone()
    model.enqueue(second)
    # slots 4, 5, 0, 1 get the second batch; 2 and 3 (the newest of the first) survive
    assert torch.equal(model.queue[4:], second[:2])
    assert torch.equal(model.queue[:2], second[2:])
    assert torch.equal(model.queue[2:4], first[2:])
    assert int(model.queue_pointer) == 2
    assert not torch.equal(old_tail, model.queue[4:])
    with pytest.raises(ValueError, match="queue size"):
        model.enqueue(torch.zeros(7, 2))
    # a loaded state (a resumed run) moves the pointer kept on the host too
    state = model.state_dict()
    state["queue_pointer"] = torch.tensor(5)
    model.load_state_dict(state)
    model.enqueue(first[:2])
    assert torch.equal(model.queue[5], first[0]) and torch.equal(model.queue[0], first[1])
    assert int(model.queue_pointer) == 1


def test_simo_negatives_never_include_the_own_key_and_are_uniform() -> None:
    torch.manual_seed(0)
    global_batch, count = 12, 4
    positions = torch.arange(6) + 6  # the second of two ranks
    hits = torch.zeros(6, global_batch)
    for _ in range(400):
        index = sample_negative_indices(global_batch, positions, count)
        assert index.shape == (6, count)
        assert not (index == positions[:, None]).any()
        assert all(len(set(row.tolist())) == count for row in index)
        assert index.min() >= 0 and index.max() < global_batch
        hits.scatter_add_(1, index, torch.ones(6, count))
    others = hits[hits > 0].view(6, global_batch - 1)
    expected = 400 * count / (global_batch - 1)
    assert ((others - expected).abs() < 0.35 * expected).all()
    everything = sample_negative_indices(5, torch.arange(5), 4)
    assert torch.equal(
        everything.sort(dim=1).values, torch.tensor([[j for j in range(5) if j != i] for i in range(5)])
    )
    with pytest.raises(ValueError, match="negatives"):
        sample_negative_indices(5, torch.arange(5), 5)


@pytest.mark.parametrize(
    ("method", "loss"), [("moco", "infonce"), ("moco", "dclw"), ("simo", "eqco"), ("simo", "dcl")]
)
def test_fused_method_loss_equals_the_plain_bound_on_the_same_embeddings(method: str, loss: str) -> None:
    """The method's loss (mitool.fused) against mitool.bounds on scores built by hand from the same
    embeddings: values and the gradients of every trained parameter."""
    torch.manual_seed(0)
    model = _small_method(method, loss, bn_mode="sync", temperature=0.3)
    view_1, view_2 = _two_views(torch.Generator().manual_seed(4), 12)
    negatives_before = model.queue.clone() if method == "moco" else None
    torch.manual_seed(7)  # SiMo's sampled negatives
    result = model(view_1, view_2)
    trained = [parameter for parameter in model.parameters() if parameter.requires_grad]
    fused_gradients = torch.autograd.grad(result.loss, trained)
    # by hand, after the forward's momentum update: queries with gradient, keys without
    queries = F.normalize(model.head(model.backbone(view_1)), dim=1)
    with torch.no_grad():
        keys = F.normalize(model.key_head(model.key_backbone(view_2)), dim=1)
    pos = (queries * keys).sum(dim=1) / 0.3
    if method == "moco":
        neg = queries @ negatives_before.T / 0.3  # (B, K) against the queue before the enqueue
    else:
        torch.manual_seed(7)
        index = sample_negative_indices(12, torch.arange(12), model.negatives)
        neg = torch.stack([keys[row] @ queries[i] for i, row in enumerate(index)]) / 0.3  # (B, K)
    options = {"eqco": {"alpha": 64.0}, "dclw": {"sigma": 0.5, "temperature": 0.3}}.get(loss, {})
    plain = bounds.get(loss, **options)(pos, neg)
    plain_gradients = torch.autograd.grad(plain.loss, trained)
    assert result.loss.item() == pytest.approx(plain.loss.item(), abs=1e-5)
    assert result.mi.item() == pytest.approx(plain.mi.item(), abs=1e-5)
    assert result.npc.item() == pytest.approx(plain.npc.item(), abs=1e-6)
    for fused, expected in zip(fused_gradients, plain_gradients, strict=True):
        assert torch.allclose(fused, expected, rtol=1e-4, atol=1e-6)
    assert sum(gradient.abs().sum() for gradient in plain_gradients) > 0


def test_methods_take_the_loss_and_its_options_from_the_table_of_bounds() -> None:
    """A loss's options come from mitool.bounds.BOUNDS: given, else the method's default, else the
    table's; options of other losses and the scores' own temperature are refused."""
    assert MoCo.spec.options_of_loss("eqco", {"alpha": 16}) == {"alpha": 16.0}
    assert MoCo.spec.options_of_loss("dclw", {"sigma": None}) == {"sigma": 0.5}  # the table's default
    assert MoCo.spec.options_of_loss("infonce", {"alpha": None, "sigma": None}) == {}
    with pytest.raises(ValueError, match="loss must be one of infonce, eqco, dcl, dclw, got 'nwj'"):
        MoCo(lambda: build_backbone("small-cnn"), "nwj", queue_size=6)
    with pytest.raises(ValueError, match="alpha applies to the eqco loss only, not 'dcl'; got 3"):
        SimCLR.spec.options_of_loss("dcl", {"alpha": 3})
    with pytest.raises(ValueError, match="temperature of loss 'dclw' is the method's own temperature"):
        SiMo(lambda: build_backbone("small-cnn"), "dclw", {"temperature": 0.2})
    simo = SiMo(lambda: build_backbone("small-cnn"))  # the paper's settings, from SiMo.defaults
    assert (simo.loss, simo.loss_options, simo.negatives) == ("eqco", {"alpha": 256.0}, 16)
    assert simo.temperature == SiMo.spec.defaults["temperature"] and simo.key_momentum == 0.999
    moco = MoCo(lambda: build_backbone("small-cnn"), "eqco", queue_size=6)
    assert moco.loss_options == {"alpha": MoCo.spec.defaults["alpha"]}
    # a dclw SimCLR scores with dclw's weighting temperature set to the method's own
    scores_bound = SimCLR(lambda: build_backbone("small-cnn"), "dclw", temperature=0.3).scores_bound()
    pos, neg = torch.randn(5), torch.randn(5, 8)
    expected = bounds.dclw(pos, neg, sigma=0.5, temperature=0.3)
    assert scores_bound(pos, neg).loss.item() == pytest.approx(expected.loss.item(), abs=1e-6)


def test_the_registry_holds_each_method_with_its_rules(monkeypatch) -> None:
    """Defaults per method and per dataset, size checks and usable rows, read by config and train."""
    assert list(METHODS) == ["moco", "simo", "simclr", "nnclr"]
    for name, method in METHODS.items():
        assert method.name == name and method.summary and method.defaults["loss"] in bounds.INFONCE_FAMILY
        assert method_class(name).spec is method
        resolved = resolve_defaults(PretrainConfig(method=name, arch="small-cnn"), 32)
        for setting, value in method.defaults.items():
            if setting not in ("alpha", "sigma") or setting in bounds.BOUNDS[resolved.loss].option_names:
                assert getattr(resolved, setting) == value, (name, setting)
    # a dataset row replaces the method's default for that dataset only
    changed = dataclasses.replace(
        METHODS["simo"], dataset_defaults={"synthetic": {"temperature": 0.5, "alpha": 64.0}}
    )
    monkeypatch.setitem(METHODS, "simo", changed)
    on_synthetic = resolve_defaults(PretrainConfig(method="simo", dataset="synthetic"), 32)
    elsewhere = resolve_defaults(PretrainConfig(method="simo", dataset="cifar10"), 32)
    given = resolve_defaults(PretrainConfig(method="simo", dataset="synthetic", temperature=0.1), 32)
    monkeypatch.undo()
    assert (on_synthetic.temperature, on_synthetic.alpha) == (0.5, 64.0)
    assert (elsewhere.temperature, elsewhere.alpha) == (0.2, 256.0)
    assert given.temperature == 0.1
    # what each method can use of a batch shortened by unreadable images
    moco = resolve_defaults(PretrainConfig(method="moco", batch_size=16, negatives=64, bn_splits=4), 32)
    assert [method_class("moco").usable_rows(rows, moco, 1) for rows in (16, 11, 5, 3)] == [16, 8, 4, 0]
    assert method_class("moco").usable_rows(11, moco, 2) == 11  # no split-BN under DDP
    simo = resolve_defaults(PretrainConfig(method="simo", batch_size=16, negatives=8), 32)
    assert [method_class("simo").usable_rows(rows, simo, 1) for rows in (16, 9, 8)] == [16, 9, 0]
    assert (
        method_class("simclr").usable_rows(2, simo, 1) == 2
        and method_class("simclr").usable_rows(1, simo, 1) == 0
    )
    with pytest.raises(ValueError, match="negatives must be less than the global batch"):
        method_class("simo").check_sizes(
            resolve_defaults(PretrainConfig(method="simo", batch_size=16), 32), 1
        )
    with pytest.raises(ValueError, match="negatives .* must be at least the 32 keys enqueued per step"):
        method_class("moco").check_sizes(
            resolve_defaults(PretrainConfig(batch_size=16, negatives=20, symmetric=True), 32), 1
        )
    with pytest.raises(ValueError, match="batch_size must be a multiple of moco's 3 split-BN groups"):
        method_class("moco").check_sizes(resolve_defaults(PretrainConfig(batch_size=16, bn_splits=3), 32), 1)
    method_class("moco").check_sizes(
        resolve_defaults(PretrainConfig(batch_size=16, bn_splits=3, bn_mode="sync"), 32), 2
    )


def test_moco_refuses_plain_batch_norm_with_unshuffled_keys_on_one_process() -> None:
    """On one process bn_mode sync is plain BatchNorm over unshuffled keys, and one split-BN group
    is plain BatchNorm however the keys are shuffled: MoCo's BN leak. Refused there; under DDP sync
    is SyncBN (solo-learn's choice) and allowed."""
    moco = method_class("moco")
    with pytest.raises(ValueError, match="bn_mode sync gives moco on one process plain BatchNorm"):
        moco.check_sizes(resolve_defaults(PretrainConfig(batch_size=16, bn_mode="sync"), 32), 1)
    with pytest.raises(ValueError, match="bn_splits 1 gives moco on one process plain BatchNorm"):
        moco.check_sizes(resolve_defaults(PretrainConfig(batch_size=16, bn_splits=1), 32), 1)
    moco.check_sizes(resolve_defaults(PretrainConfig(batch_size=16, bn_splits=2), 32), 1)
    for world in (2, 4):
        moco.check_sizes(resolve_defaults(PretrainConfig(batch_size=16, bn_mode="sync"), 32), world)
        moco.check_sizes(resolve_defaults(PretrainConfig(batch_size=16, bn_splits=1), 32), world)


def test_moco_queue_defaults_fit_the_dataset_and_a_queue_as_large_as_it_is_refused() -> None:
    """4096 keys (the MoCo CIFAR demo's) on CIFAR-10, STL-10 and Fashion-MNIST, ImageNet's 65536
    on image folders; K >= the training images is refused (every query would meet an older key of
    its own image), one less is allowed."""
    queues = {
        dataset: resolve_defaults(PretrainConfig(dataset=dataset), 32).negatives
        for dataset in ("cifar10", "stl10", "fashion-mnist", "imagefolder", "synthetic")
    }
    assert queues == {"cifar10": 4096, "stl10": 4096, "fashion-mnist": 4096, "imagefolder": 65536,
                      "synthetic": 256}  # fmt: skip
    assert resolve_defaults(PretrainConfig(dataset="cifar10", negatives=1024), 32).negatives == 1024
    moco = method_class("moco")
    for dataset, images in (("cifar10", 50_000), ("stl10", 105_000), ("fashion-mnist", 60_000)):
        moco.check_training_set(resolve_defaults(PretrainConfig(dataset=dataset), 32), images)
    with pytest.raises(ValueError, match="negatives .* must be less than the 50000 training images"):
        large = resolve_defaults(PretrainConfig(dataset="cifar10", negatives=65536), 32)
        moco.check_training_set(large, 50_000)
    with pytest.raises(ValueError, match="must be less than the 4096 training images"):
        moco.check_training_set(resolve_defaults(PretrainConfig(dataset="cifar10"), 32), 4096)
    moco.check_training_set(resolve_defaults(PretrainConfig(dataset="cifar10"), 32), 4097)
    method_class("simo").check_training_set(resolve_defaults(PretrainConfig(method="simo"), 32), 10)


def test_symmetric_moco_sums_the_two_directions() -> None:
    """loss = loss_12 + loss_21 (the MoCo CIFAR demo's), each InfoNCE over B queries against the
    queue before the step; mi is the mean of the two directions' estimates."""
    torch.manual_seed(0)
    model = _small_method("moco", "infonce", bn_mode="sync", symmetric=True)
    view_1, view_2 = _two_views(torch.Generator().manual_seed(3), 8)
    queue_before = model.queue.clone()
    result = model(view_1, view_2)
    assert int(model.queue_pointer) == 16  # keys of both views enqueued

    def direction(query_view, key_view):
        queries = F.normalize(model.head(model.backbone(query_view)), dim=1)
        keys = F.normalize(model.key_head(model.key_backbone(key_view)), dim=1)
        pos, neg = (queries * keys).sum(1) / 0.2, queries @ queue_before.t() / 0.2
        return bounds.infonce(pos, neg)

    one, two = direction(view_1, view_2), direction(view_2, view_1)
    assert result.loss.item() == pytest.approx(one.loss.item() + two.loss.item(), abs=1e-4)
    assert result.mi.item() == pytest.approx((one.mi.item() + two.mi.item()) / 2, abs=1e-4)
    assert result.mi.item() == pytest.approx(math.log(257) - result.loss.item() / 2, abs=1e-4)


class _ProductDtypes(TorchDispatchMode):
    """Records (output shape, output dtype) of every matrix product."""

    PRODUCTS = (torch.ops.aten.mm.default, torch.ops.aten.bmm.default, torch.ops.aten.addmm.default)

    def __init__(self) -> None:
        super().__init__()
        self.products: list[tuple[tuple[int, ...], torch.dtype]] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        output = func(*args, **(kwargs or {}))
        if func in self.PRODUCTS:
            self.products.append((tuple(output.shape), output.dtype))
        return output


@pytest.mark.parametrize("method", ["moco", "simo", "simclr", "nnclr"])
def test_scores_are_float32_under_bf16_autocast(method: str) -> None:
    """Under bf16 autocast the encoders run in bf16 but the products that form the scores are
    float32: moco's (B, K) against the queue, simo's (B, K, 1) per-query batched product,
    simclr's (2B, 2N), nnclr's (B, N) per view and its search of the (here 12) support rows."""
    torch.manual_seed(0)
    model = _small_method(method, "infonce", **({"negatives": 96} if method == "moco" else {}))
    view_1, view_2 = _two_views(torch.Generator().manual_seed(5), 12)
    if method == "nnclr":  # one step first: the support set holds 12 embeddings to search
        with torch.no_grad():
            model(view_1, view_2)
    recorder = _ProductDtypes()
    with recorder, torch.autocast("cpu", dtype=torch.bfloat16):
        result = model(view_1, view_2)
    scores = {"moco": (12, 96), "simo": (12, 8, 1), "simclr": (24, 24), "nnclr": (12, 12)}[method]
    dtypes = {dtype for shape, dtype in recorder.products if shape == scores}
    assert dtypes == {torch.float32}, recorder.products
    assert torch.bfloat16 in {dtype for _, dtype in recorder.products}  # the encoders' products
    assert result.loss.dtype == torch.float32


@pytest.mark.parametrize("offset", [0, 3])
def test_simclr_in_batch_scores_match_a_plain_loop(offset: int) -> None:
    torch.manual_seed(0)
    total, local, tau = 6, 3, 0.1
    all_1, all_2 = F.normalize(torch.randn(total, 5), dim=1), F.normalize(torch.randn(total, 5), dim=1)
    local_1, local_2 = all_1[offset : offset + local], all_2[offset : offset + local]
    pos, neg = in_batch_scores(local_1, local_2, all_1, all_2, offset, tau)
    candidates = torch.cat([all_1, all_2])
    for row in range(2 * local):
        view, i = divmod(row, local)
        anchor = (local_1, local_2)[view][i]
        positive = (all_2, all_1)[view][offset + i]
        assert pos[row].item() == pytest.approx(float(anchor @ positive) / tau, abs=1e-5)
        own, other = offset + i + view * total, offset + i + (1 - view) * total
        expected = [float(anchor @ candidates[c]) / tau for c in range(2 * total) if c not in (own, other)]
        assert neg[row].tolist() == pytest.approx(expected, abs=1e-5)
    assert neg.shape == (2 * local, 2 * total - 2)


def test_momentum_update_is_the_exponential_average() -> None:
    key, query = nn.Linear(3, 2), nn.Linear(3, 2)
    before = key.weight.detach().clone()
    momentum_update(key, query, 0.9)
    assert torch.allclose(key.weight, 0.9 * before + 0.1 * query.weight, atol=1e-7)


@pytest.mark.parametrize("memory_format", [torch.contiguous_format, torch.channels_last])
def test_split_batch_norm_equals_plain_batch_norm_per_group(memory_format) -> None:
    """Outputs, input and affine gradients, running statistics (after two steps) and the layout,
    against S separate nn.BatchNorm2d on the S slices (their running statistics averaged)."""
    torch.manual_seed(0)
    splits, channels = 4, 3
    split = SplitBatchNorm2d(channels, num_splits=splits)
    plain = [nn.BatchNorm2d(channels) for _ in range(splits)]
    with torch.no_grad():
        split.weight.uniform_(0.5, 1.5)
        split.bias.uniform_(-0.5, 0.5)
        for norm in plain:
            norm.weight.copy_(split.weight)
            norm.bias.copy_(split.bias)
    for step in range(2):
        inputs = (torch.randn(8, channels, 5, 4) * (step + 2) + step).contiguous(memory_format=memory_format)
        inputs.requires_grad_(True)
        output = split(inputs)
        assert output.is_contiguous(memory_format=memory_format)
        expected = torch.cat([norm(part) for norm, part in zip(plain, inputs.chunk(splits), strict=True)])
        assert torch.allclose(output, expected, atol=1e-5)
        upstream = torch.randn(output.shape)
        gradients = torch.autograd.grad(output, [inputs, split.weight, split.bias], upstream)
        plain_parameters = [parameter for norm in plain for parameter in (norm.weight, norm.bias)]
        plain_gradients = torch.autograd.grad(expected, [inputs, *plain_parameters], upstream)
        assert torch.allclose(gradients[0], plain_gradients[0], atol=1e-5)
        assert torch.allclose(gradients[1], sum(plain_gradients[1::2]), atol=1e-5)
        assert torch.allclose(gradients[2], sum(plain_gradients[2::2]), atol=1e-5)
        mean = sum(norm.running_mean for norm in plain) / splits
        variance = sum(norm.running_var for norm in plain) / splits
        assert torch.allclose(split.running_mean, mean, atol=1e-6)
        assert torch.allclose(split.running_var, variance, atol=1e-6)
        assert int(split.num_batches_tracked) == step + 1
    split.eval()
    evaluation = torch.nn.functional.batch_norm(
        inputs, mean, variance, split.weight, split.bias, False, 0.0, split.eps
    )
    assert torch.allclose(split(inputs), evaluation, atol=1e-6)
    with pytest.raises(ValueError, match="bn_splits"):
        split.train()(torch.randn(5, channels, 4, 4))


@pytest.mark.parametrize(("arch", "width"), [("small-cnn", 256), ("resnet18", 512), ("resnet50", 2048)])
def test_backbones_shapes_stems_and_grayscale(arch: str, width: int) -> None:
    model, feature_width = build_backbone(arch, in_channels=1, small_stem=True, zero_init_residual=True)
    assert feature_width == width
    assert model(torch.randn(2, 1, 16, 16)).shape == (2, width)
    if arch != "small-cnn":
        assert model.conv1.stride == (1, 1) and model.conv1.in_channels == 1
        assert isinstance(model.maxpool, nn.Identity)
        last_norm = model.layer1[0].bn3 if arch == "resnet50" else model.layer1[0].bn2
        assert torch.count_nonzero(last_norm.weight) == 0
        stock, _ = build_backbone(arch)
        assert stock.conv1.stride == (2, 2) and stock.conv1.in_channels == 3
    with pytest.raises(ValueError, match="arch must be one of"):
        build_backbone("vgg")
