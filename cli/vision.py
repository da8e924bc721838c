"""``mitool vision``: pretrain, knn, linear and plot (thin click shells over :mod:`mitool.vision`)."""

from __future__ import annotations

import json
import sys

import click

from mitool.cli.errors import FriendlyGroup
from mitool.runtime import set_threads_to_free_cores

METHOD_HELP = """Contrastive pretraining of a vision encoder, the loss being one of mitool's bounds.

\b
Defaults per method (options left out take these):
  moco   MoCo v2: loss infonce, --negatives 65536 (queue), tau 0.2, base lr 0.03,
         no warmup, key momentum 0.999, head w-w-128 no BN, shuffle-BN
         (split-BN with --bn-splits 8 on one process)
  simo   SiMo (EqCo): loss eqco, --negatives 16 sampled per query, --alpha 256,
         tau 0.2, base lr 0.03, 5 warmup epochs, key momentum 0.999, head with BN
  simclr SimCLR/DCL: loss infonce (dcl, dclw: DCL), all 2N-2 in-batch negatives,
         tau 0.1, base lr 0.3, 10 warmup epochs
All: SGD momentum 0.9, weight decay 1e-4, cosine schedule, 200 epochs, global batch
256, lr = base lr x batch / 256, resnet50, bf16 on CUDA.

\b
One process:   mitool vision pretrain --method simo --data DIR --out OUT
8 GPUs:        torchrun --nproc_per_node 8 --no-python mitool vision pretrain ... --device cuda
"""


@click.group(cls=FriendlyGroup)
def vision() -> None:
    """Vision pretraining (MoCo v2, SiMo, SimCLR/DCL) and its evaluation."""


def _common_data_options(function):
    function = click.option(
        "--data",
        "data_dir",
        default=None,
        help="Dataset directory (fashion-mnist: the Debian package's by default).",
    )(function)
    function = click.option(
        "--dataset",
        type=click.Choice(["imagefolder", "cifar10", "stl10", "fashion-mnist", "synthetic"]),
        default=None,
        help="Dataset (default: the pretraining run's).",
    )(function)
    return function


@vision.command(help=METHOD_HELP)
@click.option("--method", type=click.Choice(["moco", "simo", "simclr"]), default="moco", show_default=True)
@click.option("--loss", type=click.Choice(["infonce", "eqco", "dcl", "dclw"]), default=None, help="Bound.")
@click.option("--negatives", type=int, default=None, help="K: moco queue size, simo negatives per query.")
@click.option("--alpha", type=float, default=None, help="EqCo alpha (eqco loss only) [256].")
@click.option("--sigma", type=float, default=0.5, show_default=True, help="DCLW weighting sigma.")
@click.option("--temperature", type=float, default=None, help="tau of the cosine scores.")
@click.option(
    "--arch",
    type=click.Choice(["small-cnn", "resnet18", "resnet34", "resnet50"]),
    default="resnet50",
    show_default=True,
)
@click.option(
    "--dataset",
    type=click.Choice(["imagefolder", "cifar10", "stl10", "fashion-mnist", "synthetic"]),
    default="imagefolder",
    show_default=True,
)
@click.option("--data", "data_dir", default=None, help="Dataset directory (imagefolder: DIR/train, DIR/val).")
@click.option("--download", is_flag=True, help="Let torchvision download cifar10/stl10 into --data.")
@click.option(
    "--image-size", type=int, default=None, help="Side of the views [the dataset's: 224 for imagefolder]."
)
@click.option("--epochs", type=int, default=200, show_default=True)
@click.option("--batch-size", type=int, default=256, show_default=True, help="Global batch (all processes).")
@click.option("--base-lr", type=float, default=None, help="lr = base lr x batch / 256.")
@click.option("--warmup-epochs", type=float, default=None)
@click.option("--weight-decay", type=float, default=1e-4, show_default=True)
@click.option("--key-momentum", type=float, default=0.999, show_default=True, help="Momentum encoder m.")
@click.option("--symmetric", is_flag=True, help="moco: symmetric loss (both views as queries).")
@click.option(
    "--bn-mode", type=click.Choice(["shuffle", "sync"]), default="shuffle", show_default=True, help="moco."
)
@click.option(
    "--bn-splits", type=int, default=8, show_default=True, help="moco split-BN groups on one process."
)
@click.option(
    "--small-stem/--stock-stem", default=None, help="3x3 stride-1 ResNet stem [small for <= 96 px]."
)
@click.option("--zero-init-residual", is_flag=True, help="Zero-init the last BN of each residual block.")
@click.option(
    "--precision", type=click.Choice(["fp32", "bf16", "fp16"]), default=None, help="[bf16 cuda, fp32 cpu]"
)
@click.option("--compile", "compile_model", is_flag=True, help="torch.compile the model.")
@click.option("--out", required=True, help="Run directory: checkpoint.pt, metrics.jsonl.")
@click.option("--max-steps", type=int, default=None, help="Stop after this many steps (smoke tests).")
@click.option(
    "--max-minutes", type=float, default=None, help="Stop (with a checkpoint) after this wall time."
)
@click.option("--resume", is_flag=True, help="Continue the run in --out exactly where it stopped.")
@click.option("--device", type=click.Choice(["cpu", "cuda"]), default="cpu", show_default=True)
@click.option("--workers", type=int, default=4, show_default=True, help="Data loader processes per rank.")
@click.option(
    "--checkpoint-every", type=int, default=1000, show_default=True, help="Steps between checkpoints."
)
@click.option("--log-every", type=int, default=10, show_default=True, help="Steps between metrics records.")
@click.option(
    "--knn-every", type=int, default=10, show_default=True, help="Epochs between kNN monitors (0: off)."
)
@click.option("--knn-max-samples", type=int, default=None, help="Cap on the monitor's memory and query sets.")
@click.option(
    "--gpu-augment",
    type=click.Choice(["off", "decode", "jpeg"]),
    default="off",
    show_default=True,
    help="Make the two views on --device: workers only decode (decode) or read JPEG bytes (jpeg).",
)
@click.option("--synthetic-size", type=int, default=None, help="Images in the synthetic dataset [2048].")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--quiet", is_flag=True, help="No progress bar.")
def pretrain(**options) -> None:
    from mitool.vision.config import PretrainConfig
    from mitool.vision.train import TrainingDiverged
    from mitool.vision.train import pretrain as run_pretraining

    set_threads_to_free_cores()
    resume, quiet = options.pop("resume"), options.pop("quiet")
    options["compile"] = options.pop("compile_model")
    config = PretrainConfig(**options)
    try:
        summary = run_pretraining(config, resume=resume, progress=not quiet)
    except TrainingDiverged as error:
        raise click.ClickException(str(error)) from None
    if not quiet:
        click.echo(json.dumps({key: summary[key] for key in ("steps", "epochs", "metrics", "knn")}), err=True)


@vision.command()
@click.option("--checkpoint", required=True, help="A pretraining checkpoint (OUT/checkpoint.pt).")
@_common_data_options
@click.option("--image-size", type=int, default=None, help="[the pretraining run's]")
@click.option("-k", "k", type=int, default=200, show_default=True)
@click.option("--temperature", type=float, default=0.1, show_default=True)
@click.option("--batch-size", type=int, default=256, show_default=True)
@click.option("--workers", type=int, default=4, show_default=True)
@click.option("--max-samples", type=int, default=None, help="Cap on memory and query sets (evenly spaced).")
@click.option("--device", type=click.Choice(["cpu", "cuda"]), default="cpu", show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@click.option("--quiet", is_flag=True, help="No progress bar.")
def knn(checkpoint, dataset, data_dir, image_size, k, temperature, batch_size, workers, max_samples, device,
        as_json, quiet) -> None:  # fmt: skip
    """kNN top-1/top-5 of the frozen backbone (cosine, weighted vote; train split as memory,
    test split scored)."""
    import torch

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
@_common_data_options
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
@click.option("--workers", type=int, default=4, show_default=True)
@click.option("--device", type=click.Choice(["cpu", "cuda"]), default="cpu", show_default=True)
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
    result = linear_evaluation(LinearConfig(milestones=parsed, **options), resume=resume, progress=not quiet)
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
