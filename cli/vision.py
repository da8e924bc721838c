"""``mitool vision``: pretrain, knn, linear and plot (thin click shells over :mod:`mitool.vision`).

The choices and the defaults shown in the help come from the registries: the methods
(:data:`mitool.vision.methods.METHODS`, their defaults per dataset), the bounds
(:data:`mitool.bounds.BOUNDS`), the architectures, the datasets and the settings of
:mod:`mitool.vision.config`. Option names are the Python names of the settings, so an error of
the library (``batch_size must be ...``) is shown with the flag the user typed (``--batch-size``).
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import sys
import textwrap
from collections.abc import Callable

import click
from click.core import ParameterSource

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
from mitool.vision.datasets import DATASETS
from mitool.vision.methods import METHODS
from mitool.vision.plot import FORMATS

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
@click.option(
    "--fit-schedule/--cut-schedule", default=True, show_default=True,
    help="With --max-minutes: size the cosine schedule to the steps that fit in the time (measured over "
    "the first steps, kept on --resume), or keep the epochs' schedule and cut it at the time.",
)  # fmt: skip
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
    from mitool.vision.train import TrainingDiverged, TrainingInterrupted
    from mitool.vision.train import pretrain as run_pretraining

    set_threads_to_free_cores()
    try:
        summary = run_pretraining(PretrainConfig(**settings), resume=resume, progress=not quiet)
    except TrainingDiverged as error:
        raise click.ClickException(str(error)) from None
    except TrainingInterrupted as stop:
        click.echo(
            f"interrupted by {stop.signal} at step {stop.step} (epoch {stop.epoch:g}): checkpoint written to "
            f"{stop.checkpoint}; resume with: {resume_command(click.get_current_context())}",
            err=True,
        )
        number = getattr(signal.Signals, stop.signal, signal.SIGINT)
        sys.exit(128 + int(number))
    if not quiet:
        click.echo(json.dumps(summary), err=True)


def resume_command(ctx: click.Context) -> str:
    """The command line that continues the run of ``ctx``: the options the user typed, then
    --resume (under a launcher such as torchrun, prefix it with the same launcher)."""
    names, context = [], ctx
    while context.parent is not None:  # the sub-commands' names, whatever the program was called
        names.append(context.info_name)
        context = context.parent
    words = ["mitool", *reversed(names)]
    for param in ctx.command.params:
        if (
            param.name in ("resume", None)
            or ctx.get_parameter_source(param.name) is not ParameterSource.COMMANDLINE
        ):
            continue
        value = ctx.params[param.name]
        if isinstance(param, click.Option) and param.is_flag:
            flags = param.opts if value else param.secondary_opts
            words += flags[-1:] if value is True or param.secondary_opts else []
        else:
            words += [max(param.opts, key=len), str(value)]
    prefix = "the launcher, then " if int(os.environ.get("WORLD_SIZE", "1")) > 1 else ""
    return prefix + shlex.join([*words, "--resume"])


@vision.command()
@click.option("--checkpoint", required=True, help="A pretraining checkpoint (OUT/checkpoint.pt).")
@_dataset_options(None, "Dataset [the pretraining run's].")
@click.option("--image-size", type=int, default=None, help="[the pretraining run's]")
@click.option("-k", "k", type=int, default=200, show_default=True)
@click.option("--temperature", type=float, default=0.1, show_default=True)
@click.option("--batch-size", type=int, default=256, show_default=True)
@click.option("--workers", type=int, default=None, help=_WORKERS_HELP)
@click.option("--max-samples", type=int, default=None, help="Cap on memory and query sets (evenly spaced).")
@click.option("--device", default="cpu", show_default=True, help="cpu, cuda or cuda:N.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@click.option("--quiet", is_flag=True, help="No progress bar.")
def knn(as_json: bool, quiet: bool, device: str, **options) -> None:
    """kNN top-1/top-5 of the frozen backbone (cosine, weighted vote; train split as memory,
    test split scored). The result goes into the run's OUT/evaluations.json too, for vision plot."""
    from mitool.cli.common import check_device
    from mitool.vision.evaluate import knn_of_checkpoint

    set_threads_to_free_cores()
    check_device(device)
    result = knn_of_checkpoint(**options, device=device, progress=not quiet)
    if as_json:
        click.echo(json.dumps(result))
    else:
        accuracy = f"top-1 {100 * result['knn_top1']:.2f}%  top-5 {100 * result['knn_top5']:.2f}%"
        click.echo(
            f"kNN (k={result['k']}, t={result['temperature']:g}) {accuracy}  ({result['query_size']} test "
            f"images, step {result['step']}); recorded in {result['recorded_in']}"
        )


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
def linear(resume, as_json, quiet, milestones, **options) -> None:
    """Linear protocol on the frozen backbone (MoCo's: lr 30, 100 epochs, decay at 60 and 80)."""
    from mitool.vision.linear import LinearConfig, linear_evaluation

    set_threads_to_free_cores()
    try:
        parsed = tuple(int(part) for part in milestones.split(",") if part.strip())
    except ValueError:
        raise ValueError(
            f"--milestones must be comma-separated epochs such as 60,80, got {milestones!r}"
        ) from None
    config = LinearConfig(milestones=parsed, **options)
    result = linear_evaluation(config, resume=resume, progress=not quiet)
    if as_json:
        click.echo(json.dumps({key: result[key] for key in ("top1", "top5", "epochs")}))
    else:
        click.echo(f"linear top-1 {100 * result['top1']:.2f}%  top-5 {100 * result['top5']:.2f}%")


@vision.command()
@click.argument("out")
@click.option("--output", default=None, help="Figure path [OUT/curves.FORMAT].")
@click.option(
    "--format", "file_format", type=click.Choice(FORMATS), default=None,
    help="Figure format [the --output extension's, else png]; pdf and svg are vector.",
)  # fmt: skip
@click.option("--quiet", is_flag=True, help="Do not print the figure's path.")
def plot(out: str, output: str | None, file_format: str | None, quiet: bool) -> None:
    """Curves of loss, MI estimate, NPC multiplier and top-1 accuracy (kNN monitor, vision knn,
    vision linear) of the run in OUT, titled with its method, loss, negatives and batch."""
    from mitool.vision.plot import plot_run

    set_threads_to_free_cores()
    path = plot_run(out, output, file_format)
    if not quiet:
        click.echo(path, file=sys.stdout)


vision.add_command(sweep)
