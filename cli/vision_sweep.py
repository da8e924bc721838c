"""``mitool vision sweep``: a grid of pretraining runs with their evaluation (a thin shell over
:mod:`mitool.vision.sweep`)."""

from __future__ import annotations

import os
import sys

import click

from mitool import checks
from mitool.checks import ParameterError
from mitool.cli.common import log_line
from mitool.cli.errors import FriendlyCommand
from mitool.runtime import free_cores, set_threads_to_free_cores
from mitool.vision.backbones import ARCHITECTURES
from mitool.vision.config import DEVICES, GPU_AUGMENT_MODES, LOSSES, PRECISIONS
from mitool.vision.datasets import DATASETS
from mitool.vision.methods import METHODS
from mitool.vision.sweep import Grid

__all__ = ["sweep"]


def _values(parameter: str, text: str | None, kind: type) -> tuple:
    """A comma-separated option as a tuple of ``kind``; (None,) when not given (the method's
    default). ParameterError naming the option for an item that is not a ``kind`` or repeated."""
    if text is None:
        return (None,)
    items = [item.strip() for item in text.split(",") if item.strip()]
    try:
        values = tuple(kind(item) for item in items)
    except ValueError:
        name = {int: "whole numbers", float: "numbers"}.get(kind, "names")
        raise ParameterError(parameter, f"takes comma-separated {name}, got {text!r}") from None
    if not values or len(set(values)) < len(values):
        raise ParameterError(parameter, f"takes a comma-separated list without repeats, got {text!r}")
    return values


def _launcher_rank() -> tuple[int, int]:
    """(RANK, WORLD_SIZE) as torchrun sets them; (0, 1) without a launcher."""
    try:
        rank, world = int(os.environ.get("RANK", "0")), int(os.environ.get("WORLD_SIZE", "1"))
    except ValueError:
        raise ValueError("RANK and WORLD_SIZE must be whole numbers (as torchrun sets them)") from None
    if not 0 <= rank < world:
        raise ValueError(f"RANK must be in [0, WORLD_SIZE), got RANK={rank}, WORLD_SIZE={world}")
    return rank, world


def _device_of_this_process(device: str) -> None:
    import torch

    if device == "cuda" and not torch.cuda.is_available():
        raise ParameterError("device", "cuda was asked for but no CUDA GPU is available; use cpu")


@click.command("sweep", cls=FriendlyCommand)
@click.option(
    "--method", default="moco", show_default=True, help=f"Comma-separated methods: {', '.join(METHODS)}."
)
@click.option("--loss", default=None, help=f"Comma-separated bounds: {', '.join(LOSSES)} [the method's].")
@click.option(
    "--negatives", default=None, help="Comma-separated K (moco queue, simo negatives) [the method's]."
)
@click.option("--alpha", default=None, help="Comma-separated EqCo alphas (eqco loss only) [256].")
@click.option("--batch-size", default=None, help="Comma-separated global batch sizes [the method's].")
@click.option("--temperature", default=None, help="Comma-separated tau [the method's].")
@click.option("--seeds", default="0", show_default=True, help="Comma-separated seeds, e.g. 0,1.")
@click.option("--arch", type=click.Choice(ARCHITECTURES), default="resnet50", show_default=True)
@click.option("--dataset", type=click.Choice(DATASETS), default="imagefolder", show_default=True)
@click.option("--data", "data_dir", default=None, help="Dataset directory.")
@click.option("--image-size", type=int, default=None, help="Side of the views [the dataset's].")
@click.option("--epochs", type=int, default=None, help="[the method's]")
@click.option("--base-lr", type=float, default=None, help="lr = base lr x batch / 256 [the method's].")
@click.option("--warmup-epochs", type=float, default=None, help="[the method's]")
@click.option("--weight-decay", type=float, default=None, help="[the method's]")
@click.option("--key-momentum", type=float, default=None, help="Momentum encoder m [the method's].")
@click.option("--symmetric", is_flag=True, help="moco: symmetric loss.")
@click.option("--bn-splits", type=int, default=8, show_default=True, help="moco split-BN groups.")
@click.option("--precision", type=click.Choice(PRECISIONS), default=None, help="[bf16 cuda, fp32 cpu]")
@click.option(
    "--gpu-augment",
    type=click.Choice(GPU_AUGMENT_MODES),
    default="off",
    show_default=True,
    help="As pretrain.",
)
@click.option("--synthetic-size", type=int, default=None, help="Images in the synthetic dataset.")
@click.option("--max-minutes", type=float, default=None, help="Wall-time limit of each run.")
@click.option("--knn-k", type=int, default=200, show_default=True, help="k of the kNN evaluation.")
@click.option("--knn-temperature", type=float, default=0.1, show_default=True, help="t of the kNN vote.")
@click.option("--knn-max-samples", type=int, default=None, help="Cap on the kNN memory and query sets.")
@click.option(
    "--linear-epochs", type=int, default=0, show_default=True, help="Linear probe epochs after kNN (0: none)."
)
@click.option("--parallel", type=int, default=1, show_default=True, help="Runs side by side on the device.")
@click.option("--device", type=click.Choice(DEVICES), default="cpu", show_default=True)
@click.option("--workers", type=int, default=None, help="Data loader processes per run [sized to the cores].")
@click.option(
    "--checkpoint-every", type=int, default=200, show_default=True, help="Steps between checkpoints."
)
@click.option("--log-every", type=int, default=10, show_default=True, help="Steps between metrics records.")
@click.option("--out", required=True, type=click.Path(file_okay=False), help="Sweep directory.")
@click.option("--quiet", is_flag=True, help="No progress bar.")
def sweep(**options) -> None:
    """A grid of pretraining runs, each followed by its kNN (and linear) evaluation.

    \b
    The comma-separated --method, --loss, --negatives, --alpha, --batch-size, --temperature and
    --seeds expand into their product (K only for moco and simo, alpha only for eqco); an invalid
    combination is an error naming it. Run i goes to OUT/runs/<name>/ (run.json, checkpoint.pt,
    metrics.jsonl, log.txt, result.json written last). OUT/summary.csv has one row per run; the
    figures are OUT/knn_vs_k.png, OUT/knn_vs_batch.png (with the mean NPC q_B) and OUT/curves.png.
    The same command on the same OUT skips finished runs and resumes an interrupted one exactly.
    --parallel N runs N at once on one device; under torchrun run i goes to rank i mod N.

    \b
    EqCo's claim on Fashion-MNIST with the small CNN:
      mitool vision sweep --method simo --loss eqco,infonce --negatives 4,16,64,256 --alpha 256 \\
          --seeds 0,1 --arch small-cnn --dataset fashion-mnist --batch-size 256 --epochs 3 --out OUT
    """
    from mitool.vision.config import PretrainConfig
    from mitool.vision.sweep import Evaluation, SweepFailed, SweepInterrupted, expand, run_sweep

    set_threads_to_free_cores()
    grid = _grid(options)
    evaluation = Evaluation(**{key: options.pop(key) for key in EVALUATION_OPTIONS})
    parallel = checks.whole_number("parallel", options.pop("parallel"), minimum=1)
    quiet, out = options.pop("quiet"), options["out"]
    _device_of_this_process(options["device"])
    runs = expand(grid, PretrainConfig(knn_every=0, **options), out)
    rank, world = _launcher_rank()
    threads = max(1, free_cores() // parallel) if options["device"] == "cpu" else None
    if rank == 0:
        log_line(f"vision sweep: {len(runs)} runs into {os.path.join(out, 'runs')}, {parallel} at a time")
    try:
        summary = run_sweep(runs, evaluation, out, parallel, rank, world, not quiet, log_line, threads)
    except SweepInterrupted as stopped:
        _report_interruption(stopped, len(runs))
    except SweepFailed as error:
        raise click.ClickException(str(error)) from None
    if summary is not None:
        for name in ("summary.csv", "knn_vs_k.png", "knn_vs_batch.png", "curves.png"):
            click.echo(f"wrote {os.path.join(out, name)}")


EVALUATION_OPTIONS = ("knn_k", "knn_temperature", "knn_max_samples", "linear_epochs")


def _grid(options: dict) -> Grid:
    """The grid's axes, taken out of ``options`` (comma-separated; None: the method's default)."""
    return Grid(
        method=_values("method", options.pop("method"), str),
        loss=_values("loss", options.pop("loss"), str),
        negatives=_values("negatives", options.pop("negatives"), int),
        alpha=_values("alpha", options.pop("alpha"), float),
        batch_size=_values("batch_size", options.pop("batch_size"), int),
        temperature=_values("temperature", options.pop("temperature"), float),
        seeds=_values("seeds", options.pop("seeds"), int),
    )


def _report_interruption(stopped, total: int) -> None:
    """Which runs finished, which resume, the command to resume; exit 130 (SIGINT) or 143 (SIGTERM)."""
    log_line(f"stopped by signal {stopped.signal_number}: {len(stopped.finished)} of {total} runs finished")
    if stopped.interrupted:
        log_line(f"interrupted (they resume from their last checkpoint): {', '.join(stopped.interrupted)}")
    log_line("resume with the same command: " + " ".join(sys.argv))
    sys.exit(130 if stopped.signal_number == 2 else 143)
