"""``mitool vision``: pretrain, knn, linear, plot and sweep (thin click shells over :mod:`mitool.vision`).

The options of ``pretrain`` are made from :class:`mitool.vision.config.PretrainConfig` (names, help,
defaults), those of ``linear`` from :class:`~mitool.vision.config.LinearConfig`; the defaults shown
that depend on the method come from the registry (:data:`mitool.vision.method_specs.METHODS`, its
defaults per dataset). Option names are the Python names of the settings, so an error of the
library (``batch_size must be ...``) is shown with the flag the user typed (``--batch-size``).
torch, torchvision and matplotlib load when a command runs, not for its help.
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import sys
import textwrap

import click
from click.core import ParameterSource

from mitool.cli.errors import FriendlyGroup
from mitool.cli.options import given_options, option_specs, settings_options
from mitool.cli.vision_options import _flag, _loss_users, _number, pretrain_options
from mitool.cli.vision_sweep import sweep
from mitool.figures import FORMATS
from mitool.vision.choices import KNN_K, KNN_TEMPERATURE
from mitool.vision.config import DEFAULTS, LARS_DEFAULTS, LOSS_OPTION_SETTINGS, LinearConfig, PretrainConfig
from mitool.vision.method_specs import METHODS

__all__ = ["resume_command", "vision"]

_INDENT = " " * 10
_WIDTH = 78


def _wrap(text: str, width: int, **indents: str) -> list[str]:
    return textwrap.wrap(text, width, break_on_hyphens=False, **indents)


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
    large = [name for name, method in METHODS.items() if method.lars_from_batch is not None]
    lars = ", ".join(f"{_flag(key)} {_number(value)}" for key, value in LARS_DEFAULTS.items())
    lines += _wrap(
        f"{' and '.join(large)}: --optimizer lars from a global batch of "
        f"{' / '.join(sorted({str(METHODS[name].lars_from_batch) for name in large}))}, else sgd; "
        f"with lars: {lars} (over the dataset's and the method's rows).",
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


@click.group(cls=FriendlyGroup)
def vision() -> None:
    """Vision pretraining (MoCo v2, SiMo, SimCLR/DCL, NNCLR) and its evaluation."""


_PRETRAIN = pretrain_options()


@vision.command(help=_method_help())
@settings_options(_PRETRAIN)
@click.option("--out", required=True, help="Run directory: checkpoint.pt, metrics.jsonl.")
@click.option("--resume", is_flag=True, help="Continue the run in --out exactly where it stopped.")
@click.option("--quiet", is_flag=True, help="No progress bar.")
@click.pass_context
def pretrain(context: click.Context, out: str, resume: bool, quiet: bool, **_: object) -> None:
    from mitool.runtime import set_threads_to_free_cores
    from mitool.vision.step import TrainingDiverged
    from mitool.vision.train import TrainingInterrupted
    from mitool.vision.train import pretrain as run_pretraining

    set_threads_to_free_cores()
    config = PretrainConfig(out=out, **given_options(context, _PRETRAIN))
    try:
        summary = run_pretraining(config, resume=resume, progress=not quiet)
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
    """The command line that continues the run of ``ctx``: the program by the path that ran it,
    the options the user typed, then --resume (under a launcher such as torchrun, prefix it with
    the same launcher)."""
    from mitool.cli.common import program_words

    names, context = [], ctx
    while context.parent is not None:  # the sub-commands' names, whatever the program was called
        names.append(context.info_name)
        context = context.parent
    words = list(reversed(names))
    for param in ctx.command.params:
        if (
            param.name in ("resume", None)
            or ctx.get_parameter_source(param.name) is not ParameterSource.COMMANDLINE
        ):
            continue
        value = ctx.params[param.name]
        if isinstance(param, click.Option) and (param.is_flag or param.secondary_opts):
            flags = param.opts if value else param.secondary_opts
            words += flags[-1:] if value is True or param.secondary_opts else []
        else:
            words += [max(param.opts, key=len), str(value)]
    prefix = "the launcher, then " if int(os.environ.get("WORLD_SIZE", "1")) > 1 else ""
    return prefix + shlex.join([*program_words(), *words, "--resume"])


@vision.command()
@click.option("--checkpoint", required=True, help="A pretraining checkpoint (OUT/checkpoint.pt).")
@click.option("--dataset", default=None, help="Dataset [the pretraining run's].")
@click.option("--data", "data_dir", default=None, help="Dataset directory [the pretraining run's].")
@click.option("--image-size", type=int, default=None, help="[the pretraining run's]")
@click.option("-k", "k", type=int, default=KNN_K, show_default=True, help="Neighbours.")
@click.option("--temperature", type=float, default=KNN_TEMPERATURE, show_default=True, help="t of the vote.")
@click.option("--batch-size", type=int, default=256, show_default=True)
@click.option("--workers", type=int, default=None, help="Data loader processes [sized to the free cores].")
@click.option("--max-samples", type=int, default=None, help="Cap on memory and query sets (evenly spaced).")
@click.option("--device", default="cpu", show_default=True, help="cpu, cuda or cuda:N.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@click.option("--quiet", is_flag=True, help="No progress bar.")
def knn(as_json: bool, quiet: bool, device: str, **options) -> None:
    """kNN top-1/top-5 of the frozen backbone (cosine, weighted vote; train split as memory,
    test split scored). The result goes into the run's OUT/evaluations.json too, for vision plot."""
    from mitool.cli.common import check_device
    from mitool.runtime import set_threads_to_free_cores
    from mitool.vision.evaluate import knn_of_checkpoint

    set_threads_to_free_cores()
    check_device(device)
    result = knn_of_checkpoint(**options, device=device, progress=not quiet)
    if as_json:
        click.echo(json.dumps(result))
        return
    accuracy = f"top-1 {100 * result['knn_top1']:.2f}%  top-5 {100 * result['knn_top5']:.2f}%"
    from mitool.vision.choices import smoke_test_note

    smoke = f"; {smoke_test_note(result['dataset'])}" if smoke_test_note(result["dataset"]) else ""
    click.echo(
        f"kNN (k={result['k']}, t={result['temperature']:g}) {accuracy}  ({result['query_size']} test "
        "images, "
        f"step {result['step']}{smoke}); recorded in {result['recorded_in']}"
    )


_LINEAR = option_specs([("linear", LinearConfig)], skip=("checkpoint", "out"))


@vision.command()
@click.option("--checkpoint", required=True, help="A pretraining checkpoint (OUT/checkpoint.pt).")
@click.option("--out", required=True, help="Directory for linear.pt and linear.json.")
@settings_options(_LINEAR)
@click.option("--resume", is_flag=True, help="Continue from OUT/linear.pt.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@click.option("--quiet", is_flag=True, help="No progress bar.")
@click.pass_context
def linear(context: click.Context, checkpoint: str, out: str, resume: bool, as_json: bool, quiet: bool,
           **_: object) -> None:  # fmt: skip
    """Linear protocol on the frozen backbone (MoCo's: lr 30, 100 epochs, decay at 60 and 80)."""
    from mitool.runtime import set_threads_to_free_cores
    from mitool.vision.linear import linear_evaluation

    set_threads_to_free_cores()
    config = LinearConfig(checkpoint=checkpoint, out=out, **given_options(context, _LINEAR))
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
    """Curves of loss, MI estimate, NPC multiplier, top-1 accuracy (kNN monitor, vision knn,
    vision linear), and alignment and uniformity on the held-out batch, of the run in OUT, titled
    with its method, loss, negatives and batch."""
    from mitool.vision.plot import plot_run

    path = plot_run(out, output, file_format)
    if not quiet:
        click.echo(path, file=sys.stdout)


vision.add_command(sweep)
