"""``mitool vision sweep``: a grid of pretraining runs with their evaluation (a thin shell over
:mod:`mitool.vision.sweep`)."""

from __future__ import annotations

import os

import click

from mitool import checks
from mitool.checks import ParameterError
from mitool.cli.common import command_line, log_line, parse_list, resumable_run
from mitool.cli.errors import FriendlyCommand
from mitool.vision.backbones import ARCHITECTURES
from mitool.vision.config import DEVICES, GPU_AUGMENT_MODES, LOSSES, PRECISIONS
from mitool.vision.datasets import DATASETS
from mitool.vision.methods import METHODS
from mitool.vision.sweep import Grid

__all__ = ["sweep"]


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
    from mitool.runner import Launch
    from mitool.runtime import free_cores, set_threads_to_free_cores
    from mitool.vision.config import PretrainConfig
    from mitool.vision.sweep import Evaluation, SweepFailed, expand, run_sweep

    set_threads_to_free_cores()
    grid = _grid(options)
    evaluation = Evaluation(**{key: options.pop(key) for key in EVALUATION_OPTIONS})
    parallel = checks.whole_number("parallel", options.pop("parallel"), minimum=1)
    quiet, out = options.pop("quiet"), options["out"]
    _device_of_this_process(options["device"])
    runs = expand(grid, PretrainConfig(knn_every=0, **options), out)
    launch = Launch.from_environment()
    threads = max(1, free_cores() // parallel) if options["device"] == "cpu" else None
    if launch.rank == 0:
        log_line(f"vision sweep: {len(runs)} runs into {os.path.join(out, 'runs')}, {parallel} at a time")
    try:
        with resumable_run("vision sweep", lambda: _interruption_note(runs), []):
            summary = run_sweep(runs, evaluation, out, parallel, launch, not quiet, log_line, threads)
    except SweepFailed as error:
        raise click.ClickException(str(error)) from None
    if summary is not None:
        for name in ("summary.csv", "knn_vs_k.png", "knn_vs_batch.png", "curves.png"):
            click.echo(f"wrote {os.path.join(out, name)}")


EVALUATION_OPTIONS = ("knn_k", "knn_temperature", "knn_max_samples", "linear_epochs")


_GRID_TYPES = {"method": str, "loss": str, "negatives": int, "alpha": float, "batch_size": int,
               "temperature": float, "seeds": int}  # fmt: skip


def _grid(options: dict) -> Grid:
    """The grid's axes, taken out of ``options`` (comma-separated; not given: the method's default)."""
    axes = {}
    for name, kind in _GRID_TYPES.items():
        text = options.pop(name)
        axes[name] = (None,) if text is None else tuple(parse_list(name, text, kind))
    return Grid(**axes)


def _interruption_note(runs) -> str:
    """Which runs finished, which resume from their checkpoint, and the command that resumes."""
    from pathlib import Path

    finished = [run.name for run in runs if (Path(run.config["out"]) / "result.json").is_file()]
    started = [run.name for run in runs if run.name not in finished
               and (Path(run.config["out"]) / "checkpoint.pt").is_file()]  # fmt: skip
    resuming = (
        f"; interrupted, they resume from their last checkpoint: {', '.join(started)}" if started else ""
    )
    done = f"{len(finished)} of {len(runs)} runs finished{resuming}"
    return f"{done}; resume with the same command: {command_line()}"
