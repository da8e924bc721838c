"""NNCLR: the nearest-neighbour search, the loss against a plain implementation for every bound, the
support set (first in, first out, filled with view 1's embeddings after the lookup), its size rules,
the defaults, and an exact resume that includes the support set."""

from __future__ import annotations

import math
import os

import pytest
import torch
import torch.nn.functional as F
from click.testing import CliRunner

from mitool import bounds
from mitool.cli.main import main
from mitool.vision import checkpoint as checkpoints
from mitool.vision.backbones import build_backbone
from mitool.vision.config import PretrainConfig, resolve_defaults
from mitool.vision.method_specs import METHODS
from mitool.vision.methods import build_method, method_class
from mitool.vision.nnclr import NNCLR, nearest_neighbours, support_scores
from mitool.vision.train import pretrain

CPU = torch.device("cpu")


def _model(loss: str = "infonce", support_size: int = 40, **options) -> NNCLR:
    config = PretrainConfig(
        method="nnclr", loss=loss, arch="small-cnn", support_size=support_size, embedding_dim=16,
        temperature=0.2, alpha=64.0 if loss == "eqco" else None, **options,
    )  # fmt: skip
    return build_method(resolve_defaults(config, 16), 3, CPU)


def _views(seed: int, batch: int = 8) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    images = torch.randn(batch, 3, 16, 16, generator=generator)
    return (
        images + 0.2 * torch.randn(images.shape, generator=generator),
        images + 0.2 * torch.randn(images.shape, generator=generator),
    )


def test_nearest_neighbours_are_the_largest_inner_products_in_every_chunk() -> None:
    generator = torch.Generator().manual_seed(0)
    queries = F.normalize(torch.randn(10, 8, generator=generator), dim=1)
    support = F.normalize(torch.randn(50, 8, generator=generator), dim=1)
    expected = (queries @ support.t()).argmax(dim=1)
    for chunk in (1, 7, 50, 64):
        assert torch.equal(nearest_neighbours(queries, support, chunk=chunk), expected)
    # a tie keeps the first row, across chunks too
    doubled = torch.cat([support, support])
    assert torch.equal(nearest_neighbours(queries, doubled, chunk=13), expected)
    with pytest.raises(ValueError, match="the support set is empty"):
        nearest_neighbours(queries, support[:0])


def test_support_scores_pair_each_neighbour_with_the_other_views_prediction() -> None:
    """pos: the own image's column; neg: the N - 1 other columns in order (rank offset 3 of N = 7)."""
    generator = torch.Generator().manual_seed(1)
    neighbours_1, neighbours_2 = (
        torch.randn(2, 4, generator=generator),
        torch.randn(2, 4, generator=generator),
    )
    all_1, all_2 = torch.randn(7, 4, generator=generator), torch.randn(7, 4, generator=generator)
    pos, neg = support_scores(neighbours_1, neighbours_2, all_2, all_1, 3, 0.5)
    for row, (anchor, candidates) in enumerate(
        [
            (neighbours_1[0], all_2),
            (neighbours_1[1], all_2),
            (neighbours_2[0], all_1),
            (neighbours_2[1], all_1),
        ]
    ):
        own = 3 + row % 2
        assert pos[row].item() == pytest.approx((anchor @ candidates[own]).item() / 0.5, abs=1e-6)
        others = [anchor @ candidates[k] / 0.5 for k in range(7) if k != own]
        assert torch.allclose(neg[row], torch.stack(others), atol=1e-6)


@pytest.mark.parametrize("loss", bounds.INFONCE_FAMILY)
def test_nnclr_loss_is_the_bound_on_neighbour_prediction_scores(loss: str) -> None:
    """The method's loss, estimate, NPC and the gradients of every parameter against a plain
    implementation: neighbours searched by hand in the support set before the step, the symmetric
    scores (neighbour of one view against the predictions of the other), mitool.bounds on them. In
    float64: in float32 the two orders of summation differed by more than the tolerance in the first
    layer's small gradients on one machine (eqco, dclw)."""
    torch.manual_seed(0)
    model = _model(loss).double()
    with torch.no_grad():  # two steps fill the support set with 16 embeddings
        model(*(view.double() for view in _views(1)))
        model(*(view.double() for view in _views(2)))
    support = model.support[: int(model.support_filled)].clone()
    view_1, view_2 = (view.double() for view in _views(3))
    result = model(view_1, view_2)
    trained = [parameter for parameter in model.parameters() if parameter.requires_grad]
    gradients = torch.autograd.grad(result.loss, trained)
    # by hand, on the same BatchNorm statistics (one pass of both views, as the method's)
    projections = model.head(model.backbone(torch.cat([view_1, view_2])))
    predictions = F.normalize(model.predictor(projections), dim=1)
    embeddings = F.normalize(projections.detach(), dim=1)
    neighbours = support[(embeddings @ support.t()).argmax(dim=1)]
    p_1, p_2 = predictions[:8], predictions[8:]
    scores = [neighbours[i] @ (p_2 if i < 8 else p_1).t() / 0.2 for i in range(16)]
    pos = torch.stack([score[i % 8] for i, score in enumerate(scores)])
    neg = torch.stack([torch.cat([score[: i % 8], score[i % 8 + 1 :]]) for i, score in enumerate(scores)])
    options = {"eqco": {"alpha": 64.0}, "dclw": {"sigma": 0.5, "temperature": 0.2}}.get(loss, {})
    plain = bounds.get(loss, **options)(pos, neg)
    plain_gradients = torch.autograd.grad(plain.loss, trained, allow_unused=True)
    assert result.loss.item() == pytest.approx(plain.loss.item(), abs=1e-5)
    assert result.mi.item() == pytest.approx(plain.mi.item(), abs=1e-5)
    assert result.npc.item() == pytest.approx(plain.npc.item(), abs=1e-6)
    for name, ours, expected in zip(
        [n for n, p in model.named_parameters() if p.requires_grad], gradients, plain_gradients, strict=True
    ):
        assert torch.allclose(ours, expected, rtol=1e-4, atol=1e-6), name
    if loss == "infonce":  # the paper's estimate: log N - loss, N = 8 candidates
        assert result.mi.item() == pytest.approx(math.log(8) - result.loss.item(), abs=1e-5)
    # view 1's embeddings were written after the lookup, behind the 16 of the first steps
    assert torch.allclose(model.support[16:24], embeddings[:8], atol=1e-6)
    assert int(model.support_filled) == 24 and int(model.support_pointer) == 24


def test_the_support_set_is_first_in_first_out_and_searched_where_written() -> None:
    model = NNCLR(lambda: build_backbone("small-cnn"), support_size=5, embedding_dim=2)
    first = F.normalize(torch.tensor([[1.0, 0.0], [0.0, 1.0], [0.6, 0.8]]), dim=1)
    queries = F.normalize(torch.tensor([[0.9, 0.1], [-0.6, -0.8]]), dim=1)
    assert torch.equal(model.neighbours(queries), queries)  # nothing written yet: their own
    model.enqueue(first)
    assert (int(model.support_pointer), int(model.support_filled)) == (3, 3)
    # only the 3 rows written are searched: the second query's best is -0.6, below an unwritten zero row
    assert torch.equal(model.neighbours(queries), first[[0, 0]])
    second = F.normalize(torch.tensor([[0.0, -1.0], [1.0, 1.0], [-1.0, 1.0]]), dim=1)
    model.enqueue(second)  # slots 3, 4, 0: the oldest row goes first
    assert (int(model.support_pointer), int(model.support_filled)) == (1, 5)
    assert torch.equal(model.support, torch.cat([second[2:], first[1:], second[:2]]))
    assert torch.equal(model.neighbours(queries), second[[1, 0]])
    with pytest.raises(ValueError, match=r"support_size \(5\) must be >= the embeddings written per step"):
        model.enqueue(torch.zeros(6, 2))
    # the host's counters follow a loaded state
    other = NNCLR(lambda: build_backbone("small-cnn"), support_size=5, embedding_dim=2)
    other.load_state_dict(model.state_dict())
    other.enqueue(first[:1])
    assert (int(other.support_pointer), int(other.support_filled)) == (2, 5)


def test_defaults_are_the_papers_and_fit_the_datasets() -> None:
    """ImageNet folders: S 98 304, d 256, tau 0.1 (the paper's); the small datasets hold a support
    set smaller than their training set; the synthetic set of the README (256 images) trains."""
    assert "nnclr" in METHODS and method_class("nnclr") is NNCLR
    paper = resolve_defaults(PretrainConfig(method="nnclr"), 224)
    assert (paper.support_size, paper.embedding_dim, paper.temperature, paper.loss) == (
        98304,
        256,
        0.1,
        "infonce",
    )
    sizes = {"cifar10": 50_000, "stl10": 105_000, "fashion-mnist": 60_000, "synthetic": 256}
    for dataset, images in sizes.items():
        config = resolve_defaults(PretrainConfig(method="nnclr", dataset=dataset), 32)
        NNCLR.check_sizes(config, 1)
        NNCLR.check_training_set(config, images)
    fashion = resolve_defaults(PretrainConfig(method="nnclr", dataset="fashion-mnist"), 28)
    assert (fashion.support_size, fashion.batch_size, fashion.base_lr, fashion.temperature) == (
        4096,
        128,
        0.8,
        0.2,
    )
    assert resolve_defaults(PretrainConfig(method="simclr"), 32).embedding_dim == 128


def test_bad_sizes_are_refused_naming_the_setting() -> None:
    small = resolve_defaults(PretrainConfig(method="nnclr", support_size=100, batch_size=128), 32)
    with pytest.raises(
        ValueError, match="support_size .* must hold at least the 128 embeddings written per step"
    ):
        NNCLR.check_sizes(small, 1)
    with pytest.raises(ValueError, match="support_size .* must be less than the 4096 training images"):
        NNCLR.check_training_set(
            resolve_defaults(PretrainConfig(method="nnclr", support_size=4096), 32), 4096
        )
    with pytest.raises(ValueError, match="support_size does not apply to simclr"):
        resolve_defaults(PretrainConfig(method="simclr", support_size=64), 32)
    with pytest.raises(ValueError, match="negatives does not apply to nnclr"):
        resolve_defaults(PretrainConfig(method="nnclr", negatives=64), 32)


TINY = ["--arch", "small-cnn", "--image-size", "16", "--workers", "0", "--quiet"]


@pytest.mark.parametrize(
    ("arguments", "fragment"),
    [
        (
            ["--support-size", "4", "--batch-size", "8"],
            "--support-size (nnclr's support set) must hold at least",
        ),
        (
            ["--support-size", "256"],
            "--support-size (nnclr's support set) must be less than the 256 training",
        ),
        (["--loss", "nwj"], "--loss must be one of infonce, eqco, dcl, dclw, got 'nwj'"),
        (["--negatives", "16"], "--negatives does not apply to nnclr"),
    ],
)
def test_bad_settings_are_one_line_and_exit_2(tmp_path, arguments: list[str], fragment: str) -> None:
    options = ["--method", "nnclr", "--dataset", "synthetic", "--synthetic-size", "256", *TINY]
    result = CliRunner().invoke(
        main, ["vision", "pretrain", *options, *arguments, "--out", str(tmp_path / "r")]
    )
    assert result.exit_code == 2, result.output
    lines = [line for line in result.output.splitlines() if line.startswith("Error")]
    assert len(lines) == 1 and fragment in lines[0], result.output
    assert "Traceback" not in result.output and not (tmp_path / "r" / "checkpoint.pt").exists()


def test_the_readme_synthetic_example_runs_with_nnclr_and_dcl(tmp_path) -> None:
    out = tmp_path / "run"
    result = CliRunner().invoke(main, [
        "vision", "pretrain", "--method", "nnclr", "--loss", "dcl", "--dataset", "synthetic",
        "--arch", "small-cnn", "--image-size", "16", "--synthetic-size", "256", "--epochs", "1",
        "--workers", "0", "--quiet",
        "--out", str(out),
    ])  # fmt: skip
    assert result.exit_code == 0, result.output
    saved = checkpoints.load(str(out / "checkpoint.pt"), kind="pretrain")
    assert (
        saved["step"] == 4 and saved["config"]["support_size"] == 128 and saved["config"]["batch_size"] == 64
    )
    assert int(saved["model"]["support_filled"]) == 128  # 4 steps of 64, the oldest 2 overwritten


def _config(out, **options) -> PretrainConfig:
    settings = dict(
        method="nnclr", loss="dcl", arch="small-cnn", dataset="synthetic", synthetic_size=64, image_size=16,
        epochs=3, batch_size=16, support_size=40, workers=0, out=str(out), log_every=1, checkpoint_every=100,
        knn_every=1, knn_max_samples=32, embedding_dim=16,
    )  # fmt: skip
    return PretrainConfig(**{**settings, **options})


def test_resume_is_exact_support_set_included(tmp_path) -> None:
    """8 steps in one go == 3 steps, resume, 5 more: the parameters, the BatchNorm statistics and the
    support set with its pointer and fill count (40 rows, wrapped after 2.5 steps of 16)."""
    pretrain(_config(tmp_path / "once", max_steps=8), progress=False)
    pretrain(_config(tmp_path / "twice", max_steps=3), progress=False)
    middle = checkpoints.load(str(tmp_path / "twice" / "checkpoint.pt"), kind="pretrain")["model"]
    assert (int(middle["support_pointer"]), int(middle["support_filled"])) == (8, 40)
    pretrain(_config(tmp_path / "twice", max_steps=8), resume=True, progress=False)
    once, twice = (
        checkpoints.load(os.path.join(tmp_path, run, "checkpoint.pt"), kind="pretrain")["model"]
        for run in ("once", "twice")
    )
    assert once.keys() == twice.keys() and {"support", "support_pointer", "support_filled"} <= once.keys()
    for name in once:
        assert torch.equal(once[name], twice[name]), name
    assert (int(once["support_pointer"]), int(once["support_filled"])) == (8 * 16 % 40, 40)
    assert once["support"].norm(dim=1).sub(1).abs().max() < 1e-5  # every row a written unit vector
