"""mitool and lightly side by side: the same contrastive method trained by each, on the same
backbone, data, augmentation, epochs, batch, optimiser and kNN evaluator.

lightly (https://github.com/lightly-ai/lightly, ``pip install lightly``; the ``bench`` extra of
pyproject.toml) is used as a library, in the plain-PyTorch training loop its documentation shows
for each method:

* ``simclr``: lightly's ``SimCLRProjectionHead`` and ``NTXentLoss(temperature)``, both views
  through the model, ``loss = criterion(z0, z1)``;
* ``dcl``, ``dclw``: the same model with ``DCLLoss(temperature)`` / ``DCLWLoss(temperature, sigma)``;
* ``moco``: ``MoCoProjectionHead``, a momentum copy of backbone and head (``update_momentum``
  with mitool's key momentum, fixed), ``NTXentLoss(temperature, memory_bank_size=(K, 128))``:
  the memory bank is lightly's MoCo queue; no shuffle-BN (lightly's example has none).

Shared with mitool's run (``mitool.vision.train.pretrain`` with the same settings): the backbone
(``mitool.vision.backbones.build_backbone``, fresh with the seed), the Fashion-MNIST training
images (``mitool.vision.data.load_dataset``), the augmentation settings (mitool's for the dataset,
given to lightly's ``MoCoV2Transform``: crop scale, jitter, blur probability and sigmas, flip;
lightly's transforms run on PIL images in the loader workers; its blur is PIL's, not a 3-tap
kernel), epochs, batch, SGD with momentum 0.9 and weight decay, the warmup + cosine learning rate
per step (``mitool.vision.lr_schedule.learning_rate``), the temperature, and the kNN evaluator
(``mitool.vision.evaluate.evaluate_knn``, k 200, t 0.1, the 10 000 test images). mitool runs with
its own defaults for the rest (split-BN and the shuffle for moco on one process, its heads).

Each (library, method, seed) run is a process of its own (so peak memory is its own); ``--pair``
runs mitool's and lightly's run of a method side by side, one torch thread each on a CPU, so that
both see the same machine. Reported per run: kNN top-1, training images/s (images, two views each,
over the wall time of the training loop), peak memory (CPU: the process's peak resident set;
CUDA: ``torch.cuda.max_memory_allocated``).

    python bench/lightly_compare.py --methods simclr,dcl,dclw,moco --seeds 0 --epochs 3 \\
        --batch-size 128 --json bench/results/lightly/cpu.json
    python bench/lightly_compare.py --device cuda --arch resnet18 --methods simclr,dcl,moco \\
        --epochs 2 --batch-size 512 --gpu-augment decode --workers 8 --json OUT/lightly_cuda.json
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from typing import Any

import torch
from torch import nn

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from harness import argument_parser, write_json  # noqa: E402

METHODS = {
    "simclr": ("simclr", "infonce"),
    "dcl": ("simclr", "dcl"),
    "dclw": ("simclr", "dclw"),
    "moco": ("moco", "infonce"),
}
"""The compared runs: name -> mitool's (method, loss)."""
SETTINGS_REPORTED = (
    "arch", "epochs", "batch_size", "base_lr", "temperature", "warmup_epochs", "weight_decay",
    "key_momentum", "negatives", "workers", "gpu_augment", "precision",
)  # fmt: skip


def mitool_config(arguments: argparse.Namespace, name: str, seed: int, out: str):
    from mitool.vision.config import PretrainConfig, resolve_defaults
    from mitool.vision.datasets import dataset_info

    method, loss = METHODS[name]
    config = PretrainConfig(
        method=method, loss=loss, arch=arguments.arch, dataset="fashion-mnist", data_dir=arguments.data,
        epochs=arguments.epochs, batch_size=arguments.batch_size, base_lr=arguments.base_lr,
        temperature=arguments.temperature, warmup_epochs=arguments.warmup_epochs,
        negatives=arguments.queue if method == "moco" else None,
        key_momentum=arguments.key_momentum if method == "moco" else None,
        device=arguments.device, workers=arguments.workers, gpu_augment=arguments.gpu_augment,
        knn_every=0, log_every=50, checkpoint_every=10**9, seed=seed, out=out, max_steps=arguments.max_steps,
        knn_max_samples=arguments.knn_max_samples,
    )  # fmt: skip
    return resolve_defaults(config, dataset_info("fashion-mnist", arguments.data).image_size)


def peak_memory_mib(device: torch.device) -> float:
    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device) / 2**20
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def knn_top1(backbone: nn.Module, config, device: torch.device) -> float:
    from mitool.vision.evaluate import evaluate_knn

    result = evaluate_knn(
        backbone, "fashion-mnist", config.data_dir, config.image_size, device, 200, 0.1,
        batch_size=512, workers=config.workers or 0, max_samples=config.knn_max_samples,
    )  # fmt: skip
    return result["knn_top1"]


def run_mitool(config, device: torch.device) -> dict[str, Any]:
    from mitool.vision.evaluate import load_backbone
    from mitool.vision.train import pretrain

    started = time.perf_counter()
    summary = pretrain(config, progress=False)
    seconds = time.perf_counter() - started
    backbone, *_ = load_backbone(os.path.join(config.out, "checkpoint.pt"), device)
    return {
        "steps": summary["step"],
        "train_seconds": seconds,
        "knn_top1": knn_top1(backbone, config, device),
    }


class LightlyModel(nn.Module):
    """lightly's documented model: backbone + its projection head (and momentum copies for MoCo)."""

    def __init__(self, backbone: nn.Module, width: int, momentum_copy: bool) -> None:
        from lightly.models.modules.heads import MoCoProjectionHead, SimCLRProjectionHead
        from lightly.models.utils import deactivate_requires_grad

        super().__init__()
        self.backbone = backbone
        head = MoCoProjectionHead if momentum_copy else SimCLRProjectionHead
        self.projection_head = head(width, width, 128)
        if momentum_copy:
            self.backbone_momentum = copy.deepcopy(self.backbone)
            self.projection_head_momentum = copy.deepcopy(self.projection_head)
            deactivate_requires_grad(self.backbone_momentum)
            deactivate_requires_grad(self.projection_head_momentum)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        return self.projection_head(self.backbone(images).flatten(start_dim=1))

    def forward_momentum(self, images: torch.Tensor) -> torch.Tensor:
        features = self.backbone_momentum(images).flatten(start_dim=1)
        return self.projection_head_momentum(features).detach()


def lightly_transform(config):
    """lightly's MoCo v2 transform with mitool's augmentation settings for the dataset."""
    from lightly.transforms import MoCoV2Transform

    from mitool.vision.augment import moco_v2_settings
    from mitool.vision.datasets import dataset_info

    info = dataset_info(config.dataset, config.data_dir)
    settings = moco_v2_settings(info, config.image_size)
    return MoCoV2Transform(
        input_size=config.image_size, cj_prob=settings.jitter_probability, cj_bright=settings.brightness,
        cj_contrast=settings.contrast, cj_sat=settings.saturation, cj_hue=settings.hue,
        min_scale=settings.crop_scale[0], random_gray_scale=settings.grayscale_probability,
        gaussian_blur=settings.blur_probability, sigmas=settings.blur_sigma,
        hf_prob=settings.flip_probability,
        normalize={"mean": list(info.mean), "std": list(info.std)},
    )  # fmt: skip


def lightly_criterion(name: str, config) -> nn.Module:
    from lightly.loss import DCLLoss, DCLWLoss, NTXentLoss

    if name == "moco":
        return NTXentLoss(temperature=config.temperature, memory_bank_size=(config.negatives, 128))
    if name == "dcl":
        return DCLLoss(temperature=config.temperature)
    if name == "dclw":
        return DCLWLoss(temperature=config.temperature, sigma=config.sigma)
    return NTXentLoss(temperature=config.temperature)


def run_lightly(name: str, config, device: torch.device) -> dict[str, Any]:
    """lightly's plain-PyTorch loop for ``name`` with the settings of mitool's ``config``."""
    from lightly.models.utils import update_momentum
    from torch.utils.data import DataLoader

    from mitool.vision.backbones import build_backbone
    from mitool.vision.datasets import load_dataset
    from mitool.vision.lr_schedule import learning_rate

    torch.manual_seed(config.seed)
    backbone, width = build_backbone(config.arch, 1, config.small_stem, config.zero_init_residual)
    model = LightlyModel(backbone, width, momentum_copy=name == "moco").to(device)
    criterion = lightly_criterion(name, config).to(device)
    dataset = load_dataset(config.dataset, "train", config.data_dir, transform=lightly_transform(config))
    workers = config.workers or 0
    loader = DataLoader(
        dataset, batch_size=config.batch_size, shuffle=True, drop_last=True, num_workers=workers,
        persistent_workers=workers > 0, collate_fn=_views_and_labels,
        generator=torch.Generator().manual_seed(config.seed),
    )  # fmt: skip
    steps_per_epoch, peak = len(loader), config.base_lr * config.batch_size / 256
    total, warmup = config.epochs * steps_per_epoch, round(config.warmup_epochs * steps_per_epoch)
    parameters = [parameter for parameter in model.parameters() if parameter.requires_grad]
    optimizer = torch.optim.SGD(
        parameters, lr=peak, momentum=config.sgd_momentum, weight_decay=config.weight_decay
    )
    autocast = torch.autocast(device.type, dtype=torch.bfloat16, enabled=config.precision == "bf16")
    step, started = 0, time.perf_counter()
    for _epoch in range(config.epochs):
        for view_0, view_1 in loader:
            for group in optimizer.param_groups:
                group["lr"] = learning_rate(step, total, warmup, peak)
            view_0, view_1 = view_0.to(device, non_blocking=True), view_1.to(device, non_blocking=True)
            with autocast:
                if name == "moco":
                    update_momentum(model.backbone, model.backbone_momentum, m=config.key_momentum)
                    update_momentum(
                        model.projection_head, model.projection_head_momentum, m=config.key_momentum
                    )
                    loss = criterion(model(view_0), model.forward_momentum(view_1))
                else:
                    loss = criterion(model(view_0), model(view_1))
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
            step += 1
            if config.max_steps is not None and step >= config.max_steps:
                break
        if config.max_steps is not None and step >= config.max_steps:
            break
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    seconds = time.perf_counter() - started
    return {
        "steps": step,
        "train_seconds": seconds,
        "knn_top1": knn_top1(model.backbone.eval(), config, device),
    }


def _views_and_labels(batch):
    """lightly's transforms return [view_0, view_1]; mitool's dataset yields (views, label)."""
    views = [item[0] for item in batch]
    return torch.stack([view[0] for view in views]), torch.stack([view[1] for view in views])


def one_run(arguments: argparse.Namespace) -> dict[str, Any]:
    from mitool.runtime import set_threads_to_free_cores

    threads = set_threads_to_free_cores()
    device = torch.device(arguments.device)
    name, seed = arguments.one_method, arguments.one_seed
    out = os.path.join(arguments.scratch, f"{arguments.one_library}-{name}-s{seed}")
    config = mitool_config(arguments, name, seed, out)
    if arguments.one_library == "mitool":
        result = run_mitool(config, device)
    else:
        result = run_lightly(name, config, device)
    images = result["steps"] * config.batch_size
    return {
        "library": arguments.one_library, "method": name, "seed": seed, "threads": threads, **result,
        "images_per_second": images / result["train_seconds"], "peak_memory_mib": peak_memory_mib(device),
        "settings": {key: getattr(config, key) for key in SETTINGS_REPORTED},
    }  # fmt: skip


def _child(
    arguments: argparse.Namespace, library: str, method: str, seed: int, threads: int | None
) -> subprocess.Popen:
    command = [sys.executable, os.path.abspath(__file__), *sys.argv[1:], "--scratch", arguments.scratch,
               "--one", library, method, str(seed)]  # fmt: skip
    environment = dict(os.environ)
    if threads is not None:
        environment["MITOOL_THREADS"] = str(threads)
    return subprocess.Popen(command, stdout=subprocess.PIPE, text=True, env=environment)


def _parser() -> argparse.ArgumentParser:
    parser = argument_parser(__doc__)
    parser.add_argument(
        "--methods", default="simclr,dcl,dclw,moco", help=f"comma-separated, of {', '.join(METHODS)}"
    )
    parser.add_argument("--seeds", default="0", help="comma-separated seeds")
    parser.add_argument("--arch", default="small-cnn")
    parser.add_argument("--data", default=None, help="Fashion-MNIST directory [the Debian package's]")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--base-lr", type=float, default=None, help="[mitool's default for the method]")
    parser.add_argument("--temperature", type=float, default=None, help="[mitool's default for the method]")
    parser.add_argument("--warmup-epochs", type=float, default=None, help="[mitool's default for the method]")
    parser.add_argument("--key-momentum", type=float, default=None, help="moco [mitool's default]")
    parser.add_argument("--queue", type=int, default=4096, help="moco's queue / lightly's memory bank")
    parser.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    parser.add_argument("--workers", type=int, default=0, help="loader workers of both (default 0)")
    parser.add_argument(
        "--gpu-augment", default="off", choices=("off", "decode"), help="mitool's views on the device"
    )
    parser.add_argument("--max-steps", type=int, default=None, help="stop both after this many steps")
    parser.add_argument("--knn-max-samples", type=int, default=None, help="cap on the kNN sets")
    parser.add_argument(
        "--sequential", action="store_true", help="one run at a time (default: pairs side by side)"
    )
    parser.add_argument(
        "--scratch",
        default=None,
        help="run directories [a new private folder in the temporary folder, removed at the end]",
    )
    parser.add_argument("--json", default=None, help="write the table here")
    parser.add_argument("--one", nargs=3, metavar=("LIBRARY", "METHOD", "SEED"), help=argparse.SUPPRESS)
    return parser


def scratch_folder(arguments: argparse.Namespace) -> bool:
    """Give ``arguments.scratch`` a new private folder (tempfile.mkdtemp: mode 0700, a name no other
    process has) unless one was named; True when it was made here (to remove at the end)."""
    if arguments.scratch is not None:
        return False
    arguments.scratch = tempfile.mkdtemp(prefix="mitool-lightly-")
    return True


def main() -> int:
    arguments = _parser().parse_args()
    made = scratch_folder(arguments)
    try:
        return _main(arguments)
    finally:
        if made:
            shutil.rmtree(arguments.scratch, ignore_errors=True)


def _main(arguments: argparse.Namespace) -> int:
    if arguments.one:
        arguments.one_library, arguments.one_method, arguments.one_seed = (
            arguments.one[0],
            arguments.one[1],
            int(arguments.one[2]),
        )
        print(json.dumps(one_run(arguments)))
        return 0
    methods = [name for name in arguments.methods.split(",") if name]
    unknown = [name for name in methods if name not in METHODS]
    if unknown:
        print(f"Error: --methods takes {', '.join(METHODS)}, got {', '.join(unknown)}", file=sys.stderr)
        return 2
    try:
        import lightly  # noqa: F401
    except ImportError:
        print(
            "Error: lightly is not installed (pip install lightly, or pip install -e '.[bench]')",
            file=sys.stderr,
        )
        return 2
    threads = 1 if arguments.device == "cpu" and not arguments.sequential else None
    rows = []
    for name in methods:
        for seed in [int(seed) for seed in arguments.seeds.split(",") if seed]:
            pair = []
            for library in ("mitool", "lightly"):
                pair.append(_child(arguments, library, name, seed, threads))
                if arguments.sequential:
                    pair[-1].wait()
            for process in pair:
                output, _ = process.communicate()
                if process.returncode:
                    print(f"{name} seed {seed}: a run failed (exit {process.returncode})", file=sys.stderr)
                    continue
                rows.append(json.loads(output.strip().splitlines()[-1]))
                row = rows[-1]
                accuracy, speed = 100 * row["knn_top1"], row["images_per_second"]
                print(
                    f"{row['library']:8s} {name:7s} seed {seed}: kNN top-1 {accuracy:.2f}%  {speed:.0f} "
                    f"images/s  peak {row['peak_memory_mib']:.0f} MiB",
                    flush=True,
                )
            if arguments.json:
                write_json(
                    arguments.json, {"bench": "lightly_compare", "device": arguments.device, "runs": rows}
                )
    _print_table(rows)
    return 0


def _print_table(rows: list[dict[str, Any]]) -> None:
    print("\n| method | library | kNN top-1 (seeds) | images/s | peak memory (MiB) |")
    print("|---|---|---|---|---|")
    for name in dict.fromkeys(row["method"] for row in rows):
        for library in ("mitool", "lightly"):
            mine = [row for row in rows if row["method"] == name and row["library"] == library]
            if not mine:
                continue
            accuracy = ", ".join(f"{100 * row['knn_top1']:.2f}" for row in mine)
            speed = sum(row["images_per_second"] for row in mine) / len(mine)
            memory = max(row["peak_memory_mib"] for row in mine)
            print(f"| {name} | {library} | {accuracy} | {speed:.0f} | {memory:.0f} |")


if __name__ == "__main__":
    sys.exit(main())
