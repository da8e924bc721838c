"""LARS (mitool.vision.lars): its update against a plain per-parameter computation, the exclusion
of biases and BatchNorm parameters, the step a non-finite gradient cancels on the device; the
optimizer settings (per-method defaults at large batch, errors) and an exact resume with LARS."""

from __future__ import annotations

import dataclasses
import json
import os
import shlex
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner
from torch import nn

from mitool.checks import ParameterError
from mitool.cli.main import main
from mitool.vision import checkpoint as checkpoints
from mitool.vision.config import LARS_DEFAULTS, PretrainConfig, resolve_defaults
from mitool.vision.lars import LARS, lars_parameter_groups
from mitool.vision.method_specs import LARS_FROM_BATCH
from mitool.vision.step import make_optimizer, skips_on_device
from mitool.vision.train import pretrain


def _model() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(
        nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.ReLU(), nn.Flatten(), nn.Linear(4 * 4 * 4, 5),
        nn.BatchNorm1d(5), nn.Linear(5, 3, bias=False),
    )  # fmt: skip


def _plain_lars(
    named: dict[str, torch.Tensor],
    gradients: list[dict[str, torch.Tensor]],
    rates: list[float],
    momentum: float,
    decay: float,
    eta: float,
) -> dict[str, torch.Tensor]:
    """LARS written out per tensor in float64 (You et al. 2017, eq. 6; SimCLR's exclusions):
    tensors of 2+ dimensions take d = g + wd w and lambda = eta ||w|| / (||g|| + wd ||w||), the 1-d
    ones (biases, BatchNorm) d = g and lambda = 1; v <- m v + lambda d; w <- w - lr v."""
    weights = {name: value.detach().double().clone() for name, value in named.items()}
    velocity = {name: torch.zeros_like(value) for name, value in weights.items()}
    for grads, rate in zip(gradients, rates, strict=True):
        for name, w in weights.items():
            g = grads[name].double()
            if w.dim() > 1:
                w_norm, g_norm = float(w.norm()), float(g.norm())
                ratio = eta * w_norm / (g_norm + decay * w_norm) if w_norm > 0 and g_norm > 0 else 1.0
                direction = ratio * (g + decay * w)
            else:
                direction = g
            velocity[name] = momentum * velocity[name] + direction
            weights[name] = w - rate * velocity[name]
    return weights


@pytest.mark.parametrize("decay", [0.0, 1e-4])
def test_lars_matches_a_plain_per_parameter_implementation(decay: float) -> None:
    """Five steps with new gradients (norms 0.1 to 10 times the weights') and a moving learning rate,
    in float64: every parameter within 1e-6 of the plain computation."""
    model = _model().double()
    named = dict(model.named_parameters())
    start = {name: value.detach().clone() for name, value in named.items()}
    optimizer = make_optimizer(model.parameters(), 1.0, 0.9, decay, torch.device("cpu"), "lars", 0.02)
    generator = torch.Generator().manual_seed(1)
    gradients = [
        {
            name: torch.randn(value.shape, generator=generator, dtype=torch.float64) * 10.0 ** (index % 3 - 1)
            for name, value in named.items()
        }
        for index in range(5)
    ]
    rates = [0.5, 1.5, 4.8, 2.0, 0.1]
    for grads, rate in zip(gradients, rates, strict=True):
        for name, parameter in named.items():
            parameter.grad = grads[name].clone()
        for group in optimizer.param_groups:
            group["lr"] = rate
        optimizer.step()
    expected = _plain_lars(start, gradients, rates, 0.9, decay, 0.02)
    for name, parameter in named.items():
        assert torch.allclose(parameter.double(), expected[name], rtol=0, atol=1e-6), name
        assert not torch.equal(parameter, start[name]), name


def test_biases_and_batch_norm_parameters_take_plain_momentum_sgd_without_weight_decay() -> None:
    model = _model()
    groups = lars_parameter_groups(model.parameters(), 1e-3)
    adapted = {id(p) for p in groups[0]["params"]}
    excluded = {id(p) for p in groups[1]["params"]}
    names = {id(p): name for name, p in model.named_parameters()}
    assert sorted(names[i] for i in adapted) == ["0.weight", "4.weight", "6.weight"]
    assert sorted(names[i] for i in excluded) == [
        "0.bias",
        "1.bias",
        "1.weight",
        "4.bias",
        "5.bias",
        "5.weight",
    ]
    assert groups[0]["adapt"] and groups[0]["weight_decay"] == 1e-3
    assert not groups[1]["adapt"] and groups[1]["weight_decay"] == 0.0
    # their updates: the excluded tensors exactly as torch's SGD without weight decay, the weights not
    twin = _model()
    lars = LARS(groups, lr=0.7, momentum=0.9, weight_decay=1e-3)
    sgd = torch.optim.SGD(twin.parameters(), lr=0.7, momentum=0.9, weight_decay=0.0, foreach=False)
    generator = torch.Generator().manual_seed(2)
    for _ in range(3):
        for first, second in zip(model.parameters(), twin.parameters(), strict=True):
            first.grad = torch.randn(first.shape, generator=generator)
            second.grad = first.grad.clone()
        lars.step()
        sgd.step()
    for (name, first), second in zip(model.named_parameters(), twin.parameters(), strict=True):
        same = torch.allclose(first, second, rtol=0, atol=1e-6)
        assert same == (first.ndim == 1), name


def test_a_zero_weight_tensor_takes_the_unscaled_step() -> None:
    """lambda = 1 when ||w|| = 0 (SimCLR's rule): the first step is lr (g + wd w) = lr g."""
    weight = nn.Parameter(torch.zeros(3, 2))
    weight.grad = torch.ones(3, 2)
    LARS([weight], lr=0.5, momentum=0.9, weight_decay=0.1).step()
    assert torch.equal(weight.detach(), torch.full((3, 2), -0.5))


def test_a_non_finite_gradient_leaves_parameters_and_momentum_untouched() -> None:
    model = _model()
    optimizer = make_optimizer(model.parameters(), 0.5, 0.9, 1e-4, torch.device("cpu"), "lars")
    assert skips_on_device(optimizer)
    for parameter in model.parameters():
        parameter.grad = torch.ones_like(parameter)
    optimizer.step()
    before = [parameter.detach().clone() for parameter in model.parameters()]
    buffers = [optimizer.state[parameter]["momentum_buffer"].clone() for parameter in model.parameters()]
    next(model.parameters()).grad[0] = float("inf")
    optimizer.found_inf = torch.ones(())
    optimizer.step()
    for parameter, old, buffer in zip(model.parameters(), before, buffers, strict=True):
        assert torch.equal(parameter, old)
        assert torch.equal(optimizer.state[parameter]["momentum_buffer"], buffer)
    optimizer.found_inf = torch.zeros(())  # a finite step with the flag down is the plain step
    for parameter in model.parameters():
        parameter.grad = torch.ones_like(parameter)
    optimizer.step()
    flagged = [parameter.detach().clone() for parameter in model.parameters()]
    del optimizer.found_inf
    twin = _model()
    plain = make_optimizer(twin.parameters(), 0.5, 0.9, 1e-4, torch.device("cpu"), "lars")
    for _ in range(2):
        for parameter in twin.parameters():
            parameter.grad = torch.ones_like(parameter)
        plain.step()
    for parameter, other in zip(flagged, twin.parameters(), strict=True):
        assert torch.equal(parameter, other)


def test_the_optimizer_defaults_follow_the_method_and_the_batch() -> None:
    def resolved(method: str, **options) -> PretrainConfig:
        return resolve_defaults(PretrainConfig(method=method, dataset="cifar10", **options), 32)

    for method in ("simclr", "nnclr"):
        assert resolved(method).optimizer == "sgd"  # batch 256
        assert resolved(method, batch_size=LARS_FROM_BATCH // 2).optimizer == "sgd"
        large = resolved(method, batch_size=LARS_FROM_BATCH)
        assert large.optimizer == "lars"
        assert (large.base_lr, large.weight_decay, large.trust_coefficient) == (
            LARS_DEFAULTS["base_lr"],
            LARS_DEFAULTS["weight_decay"],
            LARS_DEFAULTS["trust_coefficient"],
        )
    assert resolved("moco", batch_size=4096).optimizer == "sgd"
    assert resolved("simo", batch_size=4096).optimizer == "sgd"
    assert resolved("moco", batch_size=4096).trust_coefficient is None
    # LARS's rows come before the dataset's (Fashion-MNIST's base lr 0.8 is SGD's); what is given stays
    fashion = resolve_defaults(PretrainConfig(method="simclr", dataset="fashion-mnist", optimizer="lars"), 28)
    assert (fashion.base_lr, fashion.weight_decay, fashion.warmup_epochs) == (0.3, 1e-6, 0.1)
    given = resolved("simclr", optimizer="lars", base_lr=1.0, trust_coefficient=0.02)
    assert (given.base_lr, given.weight_decay, given.trust_coefficient) == (1.0, 1e-6, 0.02)
    assert resolved("simclr", batch_size=4096, optimizer="sgd").weight_decay == 1e-4
    with pytest.raises(
        ParameterError, match="trust_coefficient is LARS's; it does not apply to optimizer sgd"
    ):
        resolved("simclr", trust_coefficient=0.01)
    with pytest.raises(ParameterError, match="optimizer must be one of sgd, lars, got 'adam'"):
        resolved("simclr", optimizer="adam")


def _config(out, **options) -> PretrainConfig:
    settings = dict(
        method="simclr", loss="dcl", optimizer="lars", arch="small-cnn", dataset="synthetic",
        synthetic_size=64, image_size=16, epochs=3, batch_size=16, workers=0, out=str(out), log_every=1,
        checkpoint_every=100, knn_every=1, knn_max_samples=32, embedding_dim=32, base_lr=2.0,
    )  # fmt: skip
    settings.update(options)
    return PretrainConfig(**settings)


@pytest.mark.parametrize("method", ["simclr", "nnclr"])
def test_resume_with_lars_gives_the_same_parameters_as_one_run(tmp_path, method: str) -> None:
    """8 steps in one go == 5 steps, resume, 3 more (mid-epoch), the LARS state in the checkpoint."""
    extra = {"support_size": 32} if method == "nnclr" else {}
    pretrain(_config(tmp_path / "once", method=method, max_steps=8, **extra), progress=False)
    pretrain(_config(tmp_path / "twice", method=method, max_steps=5, **extra), progress=False)
    state = checkpoints.load(os.path.join(tmp_path / "twice", "checkpoint.pt"), kind="pretrain")
    groups = state["optimizer"]["param_groups"]
    assert [group["adapt"] for group in groups] == [True, False]
    assert groups[0]["weight_decay"] == 1e-6 and groups[1]["weight_decay"] == 0.0
    assert all("momentum_buffer" in entry for entry in state["optimizer"]["state"].values())
    pretrain(_config(tmp_path / "twice", method=method, max_steps=8, **extra), resume=True, progress=False)
    once = checkpoints.load(os.path.join(tmp_path / "once", "checkpoint.pt"), kind="pretrain")
    twice = checkpoints.load(os.path.join(tmp_path / "twice", "checkpoint.pt"), kind="pretrain")
    for name in once["model"]:
        assert torch.equal(once["model"][name], twice["model"][name]), name
    for key, entry in once["optimizer"]["state"].items():
        assert torch.equal(entry["momentum_buffer"], twice["optimizer"]["state"][key]["momentum_buffer"])


def test_a_resumed_run_keeps_its_optimizer_and_a_run_from_before_lars_is_sgd(tmp_path) -> None:
    out = tmp_path / "run"
    pretrain(_config(out, optimizer=None, batch_size=16, max_steps=2, knn_every=0), progress=False)
    path = os.path.join(out, "checkpoint.pt")
    state = checkpoints.load(path, kind="pretrain")
    assert state["config"]["optimizer"] == "sgd"
    del state["config"]["optimizer"], state["config"]["trust_coefficient"]  # as a checkpoint of before
    del state["format"]
    checkpoints.save(path, state)
    summary = pretrain(_config(out, optimizer=None, max_steps=4, knn_every=0), resume=True, progress=False)
    assert summary["step"] == 4
    assert json.loads((out / "config.json").read_text())["optimizer"] == "sgd"
    with pytest.raises(ParameterError, match="option optimizer differs"):
        pretrain(_config(out, optimizer="lars", max_steps=6, knn_every=0), resume=True, progress=False)


def test_the_readme_command_with_lars_runs(tmp_path) -> None:
    """`mitool vision pretrain --method simclr --loss dcl --optimizer lars` as the README shows it."""
    readme = Path(__file__).resolve().parent.parent / "README.md"
    [line] = [
        line for line in readme.read_text().splitlines() if "--optimizer lars" in line and "$ mitool" in line
    ]
    arguments = shlex.split(line.split("$ mitool", 1)[1])
    out = arguments.index("--out")
    arguments[out + 1] = str(tmp_path / "run")
    result = CliRunner().invoke(main, [*arguments, "--quiet"])
    assert result.exit_code == 0, result.output
    config = json.loads((tmp_path / "run" / "config.json").read_text())
    assert config["method"] == "simclr" and config["loss"] == "dcl"
    assert (config["optimizer"], config["trust_coefficient"], config["weight_decay"]) == ("lars", 0.001, 1e-6)


@pytest.mark.parametrize(
    ("arguments", "fragment"),
    [
        (["--optimizer", "adam"], "Error: --optimizer must be one of sgd, lars, got 'adam'"),
        (
            ["--trust-coefficient", "0.01"],
            "Error: --trust-coefficient is LARS's; it does not apply to optimizer sgd",
        ),
        (
            ["--optimizer", "lars", "--trust-coefficient", "0"],
            "Error: --trust-coefficient must be a finite number > 0",
        ),
    ],
)
def test_bad_optimizer_options_are_one_line_errors(tmp_path, arguments: list[str], fragment: str) -> None:
    options = ["--dataset", "synthetic", "--synthetic-size", "32", "--arch", "small-cnn", "--batch-size", "8"]
    result = CliRunner().invoke(
        main, ["vision", "pretrain", *options, "--out", str(tmp_path / "run"), *arguments]
    )
    assert result.exit_code == 2, result.output
    lines = [line for line in result.output.strip().splitlines() if line.startswith("Error:")]
    assert len(lines) == 1 and lines[0].startswith(fragment), result.output
    assert "Traceback" not in result.output


def test_a_sweep_names_its_lars_runs() -> None:
    from mitool.vision.sweep.grid import Grid, expand

    base = PretrainConfig(
        method="simclr", arch="small-cnn", dataset="synthetic", synthetic_size=64, image_size=16,
        batch_size=16, epochs=1, workers=0, knn_every=0,
    )  # fmt: skip
    grid = Grid(method=("simclr",), loss=("dcl", "infonce"), batch_size=(16,))
    lars = [run.name for run in expand(grid, dataclasses.replace(base, optimizer="lars"), "sweep")]
    assert lars == ["simclr-dcl-b16-t0.1-lars-s0", "simclr-infonce-b16-t0.1-lars-s0"]
    sgd = [run.name for run in expand(grid, base, "sweep")]
    assert sgd == ["simclr-dcl-b16-t0.1-s0", "simclr-infonce-b16-t0.1-s0"]  # as before the option
