"""``mitool vision``: pretrain, knn, linear and plot (thin click shells over :mod:`mitool.vision`).

The choices and the defaults shown in the help come from the registries: the methods
(:data:`mitool.vision.methods.METHODS`, their defaults per dataset), the bounds
(:data:`mitool.bounds.BOUNDS`), the architectures, the datasets and the settings of
:mod:`mitool.vision.config`. Option names are the Python names of the settings, so an error of
the library (``batch_size must be ...``) is shown with the flag the user typed (``--batch-size``).
"""

from __future__ import annotations

import json
import sys
import textwrap
from collections.abc import Callable

import click

from mitool import bounds
from mitool.cli.errors import FriendlyGroup
from mitool.cli.vision_sweep import sweep
from mitool.runtime import set_threads_to_free_cores
from mitool.vision.backbones import ARCHITECTURES
from mitool.vision.config import (
    BN_MODES,
    DEFAULTS,
    DEVICES,
    GPU_AUGMENT_MODES,
    LOSS_OPTION_SETTINGS,
    LOSSES,
    PRECISIONS,
)
from mitool.vision.data import DATASETS
from mitool.vision.methods import METHODS

__all__ = ["vision"]

_INDENT = " " * 10
_WIDTH = 78


def _wrap(text: str, width: int, **indents: str) -> list[str]:
    return textwrap.wrap(text, width, break_on_hyphens=False, **indents)


def _number(value: object) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def _flag(setting: str) -> str:
    return "--" + setting.replace("_", "-")


def _loss_users(option: str) -> list[str]:
    """The losses that take ``option`` (from the table of bounds)."""
    return [name for name in LOSSES if option in bounds.BOUNDS[name].option_names]


def default_text(setting: str) -> str:
    """The default of ``setting`` for the help: "[200]" when the methods agree, else one value
    per method ("[moco 0.03, simo 0.03, simclr 0.3]"), then the datasets that change it."""
    values = {name: method.defaults.get(setting, DEFAULTS.get(setting)) for name, method in METHODS.items()}
    given = {name: value for name, value in values.items() if value is not None}
    if not given:
        return ""
    if len({_number(value) for value in given.values()}) == 1 and len(given) == len(values):
        text = _number(next(iter(given.values())))
    else:
        text = ", ".join(f"{name} {_number(value)}" for name, value in given.items())
    for name, method in METHODS.items():
        for dataset, row in method.dataset_defaults.items():
            if setting in row:
                text += f"; {name} on {dataset}: {_number(row[setting])}"
    return f"[{text}]"


def _method_help() -> str:
    """The help of ``vision pretrain``: every method with its defaults, from the registry."""
    lines = []
    for name, method in METHODS.items():
        lines += _wrap(f"{name:<7} {method.summary}", _WIDTH, initial_indent="  ", subsequent_indent=_INDENT)
        settings = []
        for setting, value in method.defaults.items():
            text = f"{_flag(setting)} {_number(value)}"
            if setting == "negatives":
                text += f" ({method.negatives_meaning})"
            if setting in LOSS_OPTION_SETTINGS:
                text += f" (with {' or '.join(_loss_users(setting))})"
            settings.append(text)
        if method.negatives_meaning is None:
            settings.append("no --negatives")
        lines += _wrap(", ".join(settings), _WIDTH, initial_indent=_INDENT, subsequent_indent=_INDENT)
        for dataset, row in method.dataset_defaults.items():
            changed = ", ".join(f"{_flag(key)} {_number(value)}" for key, value in row.items())
            lines += _wrap(f"on {dataset}: {changed}", 88, initial_indent=_INDENT, subsequent_indent=_INDENT)
    common = ", ".join(f"{_flag(key)} {_number(value)}" for key, value in DEFAULTS.items())
    lines += _wrap(
        f"All: {common}; lr = base lr x batch / 256, cosine schedule after the warmup; "
        "--batch-size is the global batch.",
        _WIDTH,
        subsequent_indent="  ",
    )
    return f"""Contrastive pretraining of a vision encoder, the loss being one of mitool's bounds.

\b
Methods and their defaults (options left out take these):
{chr(10).join(lines)}

\b
One process:   mitool vision pretrain --method simo --data DIR --out OUT
8 GPUs:        torchrun --nproc_per_node 8 --no-python mitool vision pretrain ... --device cuda
"""


def _loss_option_options(function: Callable) -> Callable:
    """--alpha, --sigma, ...: the options of the losses, from the table of bounds."""
    for setting in reversed(LOSS_OPTION_SETTINGS):
        users = _loss_users(setting)
        meaning = next(o.meaning for o in bounds.BOUNDS[users[0]].options if o.name == setting)
        table_default = next(o.default for o in bounds.BOUNDS[users[0]].options if o.name == setting)
        shown = default_text(setting) or (f"[{_number(table_default)}]" if table_default is not None else "")
        function = click.option(
            _flag(setting), setting, type=float, default=None,
            help=f"{' and '.join(users)} loss only: {meaning} {shown}",
        )(function)  # fmt: skip
    return function


def _dataset_options(default: str | None, help_text: str) -> Callable:
    def add(function: Callable) -> Callable:
        function = click.option(
            "--data", "data_dir", default=None,
            help="Dataset directory (imagefolder: DIR/train, DIR/val; fashion-mnist: the Debian "
            "package's by default).",
        )(function)  # fmt: skip
        return click.option(
            "--dataset",
            type=click.Choice(DATASETS),
            default=default,
            show_default=default is not None,
            help=help_text,
        )(function)

    return add


@click.group(cls=FriendlyGroup)
def vision() -> None:
    """Vision pretraining (MoCo v2, SiMo, SimCLR/DCL) and its evaluation."""


_LOSS_HELP = "Bound: " + "; ".join(f"{name}: {bounds.BOUNDS[name].summary}" for name in LOSSES)
_NEGATIVES_HELP = "K: " + "; ".join(
    f"{name}: {method.negatives_meaning}" for name, method in METHODS.items() if method.negatives_meaning
)
_WORKERS_HELP = "Data loader processes per process [sized to the free cores]."


@vision.command(help=_method_help())
@click.option("--method", type=click.Choice(tuple(METHODS)), default="moco", show_default=True)
@click.option("--loss", type=click.Choice(LOSSES), default=None, help=f"{_LOSS_HELP} {default_text('loss')}")
@click.option("--negatives", type=int, default=None, help=f"{_NEGATIVES_HELP} {default_text('negatives')}")
@_loss_option_options
@click.option(
    "--temperature", type=float, default=None, help=f"tau of the cosine scores {default_text('temperature')}"
)
@click.option("--arch", type=click.Choice(ARCHITECTURES), default="resnet50", show_default=True)
@_dataset_options("imagefolder", "Dataset.")
@click.option("--download", is_flag=True, help="Let torchvision download cifar10/stl10 into --data.")
@click.option(
    "--image-size", type=int, default=None, help="Side of the views [the dataset's: 224 for imagefolder]."
)
@click.option("--epochs", type=int, default=None, help=default_text("epochs"))
@click.option(
    "--batch-size", type=int, default=None, help=f"Global batch (all processes) {default_text('batch_size')}"
)
@click.option(
    "--base-lr", type=float, default=None, help=f"lr = base lr x batch / 256 {default_text('base_lr')}"
)
@click.option("--warmup-epochs", type=float, default=None, help=default_text("warmup_epochs"))
@click.option("--weight-decay", type=float, default=None, help=default_text("weight_decay"))
@click.option(
    "--key-momentum", type=float, default=None, help=f"Momentum encoder m {default_text('key_momentum')}"
)
@click.option("--symmetric", is_flag=True, help="moco: symmetric loss (both views as queries).")
@click.option("--bn-mode", type=click.Choice(BN_MODES), default="shuffle", show_default=True, help="moco.")
@click.option(
    "--bn-splits", type=int, default=8, show_default=True, help="moco split-BN groups on one process."
)
@click.option(
    "--small-stem/--stock-stem", default=None, help="3x3 stride-1 ResNet stem [small for <= 96 px]."
)
@click.option("--zero-init-residual", is_flag=True, help="Zero-init the last BN of each residual block.")
@click.option("--precision", type=click.Choice(PRECISIONS), default=None, help="[bf16 cuda, fp32 cpu]")
@click.option("--compile", "compile", is_flag=True, help="torch.compile the model.")
@click.option("--out", required=True, help="Run directory: checkpoint.pt, metrics.jsonl.")
@click.option("--max-steps", type=int, default=None, help="Stop after this many steps (smoke tests).")
@click.option(
    "--max-minutes", type=float, default=None, help="Stop (with a checkpoint) after this wall time."
)
@click.option("--resume", is_flag=True, help="Continue the run in --out exactly where it stopped.")
@click.option("--device", type=click.Choice(DEVICES), default="cpu", show_default=True)
@click.option("--workers", type=int, default=None, help=_WORKERS_HELP)
@click.option(
    "--checkpoint-every", type=int, default=1000, show_default=True, help="Steps between checkpoints."
)
@click.option("--log-every", type=int, default=10, show_default=True, help="Steps between metrics records.")
@click.option(
    "--knn-every", type=int, default=10, show_default=True, help="Epochs between kNN monitors (0: off)."
)
@click.option("--knn-max-samples", type=int, default=None, help="Cap on the monitor's memory and query sets.")
@click.option(
    "--gpu-augment", type=click.Choice(GPU_AUGMENT_MODES), default="off", show_default=True,
    help="Make the two views on --device: workers only decode (decode) or read JPEG bytes (jpeg).",
)  # fmt: skip
@click.option("--synthetic-size", type=int, default=None, help="Images in the synthetic dataset [2048].")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--quiet", is_flag=True, help="No progress bar.")
def pretrain(resume: bool, quiet: bool, **settings) -> None:
    from mitool.vision.config import PretrainConfig
    from mitool.vision.train import TrainingDiverged
    from mitool.vision.train import pretrain as run_pretraining

    set_threads_to_free_cores()
    try:
        summary = run_pretraining(PretrainConfig(**settings), resume=resume, progress=not quiet)
    except TrainingDiverged as error:
        raise click.ClickException(str(error)) from None
    if not quiet:
        click.echo(json.dumps({key: summary[key] for key in ("steps", "epochs", "metrics", "knn")}), err=True)


@vision.command()
@click.option("--checkpoint", required=True, help="A pretraining checkpoint (OUT/checkpoint.pt).")
@_dataset_options(None, "Dataset [the pretraining run's].")
@click.option("--image-size", type=int, default=None, help="[the pretraining run's]")
@click.option("-k", "k", type=int, default=200, show_default=True)
@click.option("--temperature", type=float, default=0.1, show_default=True)
@click.option("--batch-size", type=int, default=256, show_default=True)
@click.option("--workers", type=int, default=None, help=_WORKERS_HELP)
@click.option("--max-samples", type=int, default=None, help="Cap on memory and query sets (evenly spaced).")
@click.option("--device", type=click.Choice(DEVICES), default="cpu", show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@click.option("--quiet", is_flag=True, help="No progress bar.")
def knn(checkpoint, dataset, data_dir, image_size, k, temperature, batch_size, workers, max_samples, device,
        as_json, quiet) -> None:  # fmt: skip
    """kNN top-1/top-5 of the frozen backbone (cosine, weighted vote; train split as memory,
    test split scored)."""
    import torch

    from mitool.vision.data import default_workers
    from mitool.vision.evaluate import evaluate_knn, load_backbone

    set_threads_to_free_cores()
    for name, value in (("k", k), ("batch-size", batch_size)):
        if value < 1:
            raise ValueError(f"--{name} must be >= 1, got {value}")
    if device == "cuda" and not torch.cuda.is_available():
        raise ValueError("--device cuda was asked for but no CUDA GPU is available; use --device cpu")
    backbone, _, config, _ = load_backbone(checkpoint, torch.device(device))
    name = dataset or config["dataset"]
    directory = data_dir or (config["data_dir"] if name == config["dataset"] else None)
    synthetic = (
        {"size": config["synthetic_size"]} if name == "synthetic" and config.get("synthetic_size") else {}
    )
    workers = default_workers() if workers is None else workers
    result = evaluate_knn(
        backbone, name, directory, image_size or config["image_size"], torch.device(device), k, temperature,
        batch_size, workers, max_samples, progress=not quiet, synthetic_options=synthetic,
    )  # fmt: skip
    if as_json:
        click.echo(json.dumps(result))
    else:
        accuracy = f"top-1 {100 * result['knn_top1']:.2f}%  top-5 {100 * result['knn_top5']:.2f}%"
        click.echo(f"kNN (k={k}, t={temperature}) {accuracy}  ({result['query_size']} test images)")


@vision.command()
@click.option("--checkpoint", required=True, help="A pretraining checkpoint (OUT/checkpoint.pt).")
@click.option("--out", required=True, help="Directory for linear.pt and linear.json.")
@_dataset_options(None, "Dataset [the pretraining run's].")
@click.option("--image-size", type=int, default=None, help="[the pretraining run's]")
@click.option("--epochs", type=int, default=100, show_default=True)
@click.option(
    "--max-epochs", type=int, default=None, help="Stop after this many epochs (--resume continues)."
)
@click.option("--batch-size", type=int, default=256, show_default=True)
@click.option("--lr", type=float, default=30.0, show_default=True)
@click.option("--momentum", type=float, default=0.9, show_default=True)
@click.option("--weight-decay", type=float, default=0.0, show_default=True)
@click.option(
    "--milestones", default="60,80", show_default=True, help="Epochs where the lr is divided by 10."
)
@click.option(
    "--augment/--no-augment", default=True, show_default=True, help="Crop+flip (else cached features)."
)
@click.option("--workers", type=int, default=None, help=_WORKERS_HELP)
@click.option("--device", type=click.Choice(DEVICES), default="cpu", show_default=True)
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--resume", is_flag=True, help="Continue from OUT/linear.pt.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@click.option("--quiet", is_flag=True, help="No progress bar.")
def linear(resume, as_json, quiet, milestones, workers, **options) -> None:
    """Linear protocol on the frozen backbone (MoCo's: lr 30, 100 epochs, decay at 60 and 80)."""
    from mitool.vision.data import default_workers
    from mitool.vision.linear import LinearConfig, linear_evaluation

    set_threads_to_free_cores()
    try:
        parsed = tuple(int(part) for part in milestones.split(",") if part.strip())
    except ValueError:
        raise ValueError(
            f"--milestones must be comma-separated epochs such as 60,80, got {milestones!r}"
        ) from None
    workers = default_workers() if workers is None else workers
    config = LinearConfig(milestones=parsed, workers=workers, **options)
    result = linear_evaluation(config, resume=resume, progress=not quiet)
    if as_json:
        click.echo(json.dumps({key: result[key] for key in ("top1", "top5", "epochs")}))
    else:
        click.echo(f"linear top-1 {100 * result['top1']:.2f}%  top-5 {100 * result['top5']:.2f}%")


@vision.command()
@click.argument("out")
@click.option("--output", default=None, help="PNG path [OUT/curves.png].")
def plot(out: str, output: str | None) -> None:
    """PNG curves of loss, MI estimate, NPC multiplier and kNN top-1 of the run in OUT."""
    from mitool.vision.plot import plot_run

    set_threads_to_free_cores()
    click.echo(plot_run(out, output), file=sys.stdout)


vision.add_command(sweep)
