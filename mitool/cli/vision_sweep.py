"""``mitool vision sweep``: a grid of pretraining runs with their evaluation (a thin shell over
:mod:`mitool.vision.sweep`).

Its options: the grid's axes (comma-separated lists of the settings of
:class:`mitool.vision.sweep.Grid`), every per-run option of ``vision pretrain`` (made, as there, from
:class:`mitool.vision.config.PretrainConfig`: the two commands cannot disagree), and the evaluation
that follows each run (:class:`mitool.vision.sweep.Evaluation`).
"""

from __future__ import annotations

import os

import click

from mitool import checks
from mitool.cli.common import command_line, log_line, parse_list, resumable_run
from mitool.cli.errors import FriendlyCommand
from mitool.cli.options import given_options, option_specs, settings_options
from mitool.cli.vision_options import pretrain_options
from mitool.vision.method_specs import METHODS
from mitool.vision.sweep.grid import Evaluation, Grid

__all__ = ["sweep"]

_AXES = {"method": str, "loss": str, "negatives": int, "alpha": float, "batch_size": int,
         "temperature": float, "seeds": int}  # fmt: skip
"""The grid's axes and the type of their items (comma-separated on the command line)."""

_RUN = pretrain_options(skip=(*_AXES, "seed", "knn_every", "knn_k", "knn_temperature", "knn_max_samples"))
_EVALUATION = option_specs([("evaluation", Evaluation)])


def _axis_options(function):
    helps = {
        "method": f"Comma-separated methods: {', '.join(METHODS)} [moco].",
        "loss": "Comma-separated bounds: infonce, eqco, dcl, dclw [the method's].",
        "negatives": "Comma-separated K (moco queue, simo negatives) [the method's].",
        "alpha": "Comma-separated EqCo alphas (eqco loss only) [the method's].",
        "batch_size": "Comma-separated global batch sizes [the method's].",
        "temperature": "Comma-separated tau [the method's].",
        "seeds": "Comma-separated seeds, e.g. 0,1 [0].",
    }
    for name in reversed(_AXES):
        function = click.option("--" + name.replace("_", "-"), name, default=None, help=helps[name])(function)
    return function


@click.command("sweep", cls=FriendlyCommand)
@_axis_options
@settings_options(_RUN)
@settings_options(_EVALUATION)
@click.option("--parallel", type=int, default=1, show_default=True, help="Runs side by side on the device.")
@click.option("--out", required=True, type=click.Path(file_okay=False), help="Sweep directory.")
@click.option("--quiet", is_flag=True, help="No progress bar.")
@click.pass_context
def sweep(context: click.Context, parallel: int, out: str, quiet: bool, **options) -> None:
    """A grid of pretraining runs, each followed by its kNN (and linear) evaluation.

    \b
    The comma-separated --method, --loss, --negatives, --alpha, --batch-size, --temperature and
    --seeds expand into their product (K only for moco and simo, alpha only for eqco, a
    --support-size for nnclr only); an invalid combination is an error naming it. Run i goes to
    OUT/runs/<name>/ (run.json, checkpoint.pt, metrics.jsonl, log.txt, result.json written last).
    OUT/summary.csv has one row per run (with alignment and uniformity on the held-out batch at the
    run's last step); the figures are OUT/knn_vs_k.png, OUT/knn_vs_batch.png (with the mean NPC
    q_B) and OUT/curves.png.
    The same command on the same OUT skips finished runs and resumes an interrupted one exactly.
    --parallel N runs N at once on one device; under torchrun run i goes to rank i mod N.

    \b
    EqCo's claim on Fashion-MNIST with the small CNN:
      mitool vision sweep --method simo --loss eqco,infonce --negatives 4,16,64,256 --alpha 256 \\
          --seeds 0,1 --arch small-cnn --dataset fashion-mnist --batch-size 256 --epochs 3 --out OUT
    """
    from mitool._infra.runner import Launch
    from mitool.runtime import free_cores, set_threads_to_free_cores
    from mitool.vision.config import PretrainConfig
    from mitool.vision.sweep import SweepFailed, expand, run_sweep

    set_threads_to_free_cores()
    grid = Grid(
        **{
            name: tuple(parse_list(name, options[name], kind))
            for name, kind in _AXES.items()
            if options[name]
        }
    )
    evaluation = Evaluation(**given_options(context, _EVALUATION))
    parallel = checks.whole_number("parallel", parallel, minimum=1)
    run_settings = given_options(context, _RUN)
    _check_device(run_settings.get("device", "cpu"))
    runs = expand(grid, PretrainConfig(knn_every=0, out=out, **run_settings), out)
    launch = Launch.from_environment()
    threads = max(1, free_cores() // parallel) if run_settings.get("device", "cpu") == "cpu" else None
    try:
        with resumable_run("vision sweep", lambda: _interruption_note(runs), []):
            summary = run_sweep(runs, evaluation, out, parallel, launch, not quiet, log_line, threads)
    except SweepFailed as error:
        raise click.ClickException(str(error)) from None
    if summary is not None:
        for name in ("summary.csv", "knn_vs_k.png", "knn_vs_batch.png", "curves.png"):
            click.echo(f"wrote {os.path.join(out, name)}")


def _check_device(device: str) -> None:
    from mitool.checks import ParameterError

    if device == "cuda":
        import torch

        if not torch.cuda.is_available():
            raise ParameterError("device", "cuda was asked for but no CUDA GPU is available; use cpu")


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
