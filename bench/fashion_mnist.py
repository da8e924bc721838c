"""Fashion-MNIST on a small CPU: does contrastive pretraining with mitool's bounds beat the same
network at random initialisation, and raw pixels, in kNN accuracy?

For each run (method + bound, seed): pretrain the small CNN (or --arch) on the 60000 training
images for --minutes of wall time at batch 32 (the cosine schedule is sized to the steps that fit),
then score the kNN classifier (cosine, k = 200, t = 0.1 weighted vote; train split as memory, the
10000 test images scored) on the pooled backbone features of

* the pretrained encoder,
* the same network at its random initialisation (same seed, same weights as step 0),

and once, raw pixels in [0, 1] (L2-normalised by the classifier). The DCL paper's claim that its
loss helps most at small batches is checked by simclr + dcl against simclr + infonce at batch 32,
over two seeds.

It also measures, on in-memory tensors (no data loading), the training images/s of each method
next to the bare backbone's forward + backward + SGD step at the same batch: the cost of the
second view, the head, the momentum encoder and the bound.

    python bench/fashion_mnist.py --minutes 25 --out runs/bench_fashion_mnist.json     # the real run
    python bench/fashion_mnist.py --minutes 1 --out runs/smoke.json                    # smoke setting
    python bench/fashion_mnist.py --throughput-only --device cuda --arch resnet50 --image-size 224 \\
        --channels 3 --precision bf16 --batch-size 64                                  # GPU throughput

Measured with this script on the 2-core CPU (README, "Fashion-MNIST on a 2-core CPU"): raw pixels
78.85%, the small CNN at its random initialisation 79.42% and 78.77% (seeds 0 and 1), pretrained
82.5% to 83.8% after 11 to 14 minutes.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time

import torch
from torch import nn

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from harness import argument_parser, write_json  # noqa: E402

from mitool.runtime import set_threads_to_free_cores  # noqa: E402
from mitool.vision.backbones import build_backbone  # noqa: E402
from mitool.vision.config import PretrainConfig, resolve_defaults  # noqa: E402
from mitool.vision.datasets import dataset_info  # noqa: E402
from mitool.vision.evaluate import evaluate_knn, load_backbone  # noqa: E402
from mitool.vision.methods import build_method  # noqa: E402
from mitool.vision.step import training_step  # noqa: E402
from mitool.vision.train import pretrain  # noqa: E402

RUNS = ("simo-eqco", "simclr-infonce", "simclr-dcl")


class RawPixels(nn.Module):
    """Undo the loader's Normalize and flatten: the kNN classifier then sees raw pixels in [0, 1]."""

    def __init__(self, mean: tuple[float, ...], std: tuple[float, ...]) -> None:
        super().__init__()
        self.register_buffer("mean", torch.tensor(mean).view(1, -1, 1, 1))
        self.register_buffer("std", torch.tensor(std).view(1, -1, 1, 1))

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        return (images * self.std + self.mean).flatten(1)


def _time_steps(step, steps: int, warmup: int, device: torch.device) -> float:
    """Seconds per call of ``step`` after ``warmup`` calls (synchronised on CUDA)."""
    for _ in range(warmup):
        step()
    if device.type == "cuda":
        torch.cuda.synchronize()
    started = time.perf_counter()
    for _ in range(steps):
        step()
    if device.type == "cuda":
        torch.cuda.synchronize()
    return (time.perf_counter() - started) / steps


def method_images_per_second(
    config: PretrainConfig, channels: int, device: torch.device, steps: int
) -> float:
    """Images (pairs of views) per second of full training steps of the method on random tensors."""
    torch.manual_seed(0)
    model = build_method(config, channels, device)
    optimizer = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=1e-3, momentum=0.9)
    scaler = torch.amp.GradScaler(device.type, enabled=config.precision == "fp16")
    shape = (config.batch_size, channels, config.image_size, config.image_size)
    view_1 = torch.randn(shape, device=device).contiguous(memory_format=torch.channels_last)
    view_2 = torch.randn(shape, device=device).contiguous(memory_format=torch.channels_last)
    counter = iter(range(10**9))

    def step() -> None:
        training_step(model, optimizer, scaler, view_1, view_2, 1e-3, config.precision, next(counter))

    return config.batch_size / _time_steps(step, steps, max(2, steps // 5), device)


def backbone_images_per_second(
    config: PretrainConfig, channels: int, device: torch.device, steps: int
) -> float:
    """Images per second of the bare backbone: one forward and backward of the batch, an SGD step."""
    torch.manual_seed(0)
    backbone, _ = build_backbone(config.arch, channels, config.small_stem)
    backbone = backbone.to(device, memory_format=torch.channels_last)
    optimizer = torch.optim.SGD(backbone.parameters(), lr=1e-3, momentum=0.9)
    shape = (config.batch_size, channels, config.image_size, config.image_size)
    images = torch.randn(shape, device=device).contiguous(memory_format=torch.channels_last)
    dtype = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}[config.precision]

    def step() -> None:
        with torch.autocast(device.type, dtype=dtype, enabled=config.precision != "fp32"):
            loss = backbone(images).float().square().mean()
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()

    return config.batch_size / _time_steps(step, steps, max(2, steps // 5), device)


def throughput(arguments: argparse.Namespace, runs: list[str]) -> dict[str, float]:
    device = torch.device(arguments.device)
    results = {}
    base = _config(arguments, "simclr", "infonce", 0, "unused")
    results["backbone forward+backward"] = backbone_images_per_second(
        base, arguments.channels, device, arguments.throughput_steps
    )
    for run in runs:
        method, loss = run.split("-")
        config = _config(arguments, method, loss, 0, "unused")
        results[run] = method_images_per_second(
            config, arguments.channels, device, arguments.throughput_steps
        )
    for name, rate in results.items():
        print(f"  {name:28s} {rate:9.1f} images/s", file=sys.stderr)
    return results


def _config(arguments: argparse.Namespace, method: str, loss: str, seed: int, out: str) -> PretrainConfig:
    options = dict(
        method=method, loss=loss, arch=arguments.arch, dataset="fashion-mnist", data_dir=arguments.data,
        image_size=arguments.image_size, epochs=1, batch_size=arguments.batch_size, out=out,
        device=arguments.device, workers=arguments.workers, base_lr=arguments.base_lr, warmup_epochs=0.0,
        temperature=arguments.temperature, key_momentum=arguments.key_momentum, knn_every=0,
        log_every=50, checkpoint_every=10**9, seed=seed, precision=arguments.precision,
        negatives={"moco": 4096, "simo": 16}.get(method), max_minutes=arguments.minutes,
    )  # fmt: skip
    return resolve_defaults(PretrainConfig(**options), arguments.image_size)


def _knn(backbone: nn.Module, arguments: argparse.Namespace) -> float:
    device = torch.device(arguments.device)
    result = evaluate_knn(
        backbone, "fashion-mnist", arguments.data, arguments.image_size, device, k=200, temperature=0.1,
        batch_size=512, workers=arguments.workers, max_samples=arguments.knn_max_samples,
    )  # fmt: skip
    return result["knn_top1"]


def main() -> None:
    parser = argument_parser(__doc__)
    parser.add_argument("--minutes", type=float, default=25.0, help="wall time of each pretraining run")
    parser.add_argument(
        "--runs", default=",".join(RUNS), help=f"method-loss pairs (default {','.join(RUNS)})"
    )
    parser.add_argument("--seeds", default="0,1", help="seeds of each run")
    parser.add_argument(
        "--arch", default="small-cnn", choices=["small-cnn", "resnet18", "resnet34", "resnet50"]
    )
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--base-lr", type=float, default=0.8, help="lr = base-lr x batch / 256 (0.1 at 32)")
    parser.add_argument("--temperature", type=float, default=0.2)
    parser.add_argument("--key-momentum", type=float, default=0.99, help="simo/moco (0.999 is for long runs)")
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--data", default=None, help="Fashion-MNIST IDX directory [the Debian package's]")
    parser.add_argument("--knn-max-samples", type=int, default=None, help="cap memory/test sets (faster)")
    parser.add_argument("--out", default="runs/bench_fashion_mnist.json")
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument("--precision", default=None, choices=["fp32", "bf16", "fp16"])
    parser.add_argument("--image-size", type=int, default=28)
    parser.add_argument("--channels", type=int, default=1, help="input channels for --throughput-only")
    parser.add_argument("--throughput-steps", type=int, default=20)
    parser.add_argument("--throughput-only", action="store_true", help="only the images/s measurement")
    arguments = parser.parse_args()
    threads = set_threads_to_free_cores()
    runs = [run.strip() for run in arguments.runs.split(",") if run.strip()]
    seeds = [int(seed) for seed in arguments.seeds.split(",") if seed.strip()]
    started = time.time()
    print(
        f"images/s, batch {arguments.batch_size}, {arguments.arch}, {threads} torch thread(s):",
        file=sys.stderr,
    )
    report: dict = {"settings": vars(arguments) | {"torch_threads": threads}}
    report["throughput_images_per_second"] = throughput(arguments, runs)
    if arguments.throughput_only:
        write_json(arguments.out, report)
        print(json.dumps(report["throughput_images_per_second"], indent=2))
        return

    info = dataset_info("fashion-mnist")
    report["raw_pixels_top1"] = _knn(RawPixels(info.mean, info.std), arguments)
    print(f"raw pixels: kNN top-1 {100 * report['raw_pixels_top1']:.2f}%", file=sys.stderr)
    report["runs"] = []
    random_init_top1: dict[int, float] = {}
    out_directory = os.path.splitext(arguments.out)[0] + "_runs"
    for run in runs:
        method, loss = run.split("-")
        for seed in seeds:
            directory = os.path.join(out_directory, f"{run}-seed{seed}")
            config = _config(arguments, method, loss, seed, directory)
            # size the cosine schedule to the steps expected in the time (75% of the measured rate,
            # for the data loading the throughput measurement leaves out)
            steps = (
                arguments.minutes
                * 60
                * 0.75
                * report["throughput_images_per_second"][run]
                / config.batch_size
            )
            config.epochs = max(1, math.ceil(steps * config.batch_size / 60000))
            if seed not in random_init_top1:  # the same initial weights for every method at a seed
                torch.manual_seed(seed)
                random_backbone, _ = build_backbone(config.arch, info.channels, config.small_stem)
                random_init_top1[seed] = _knn(random_backbone, arguments)
            random_top1 = random_init_top1[seed]
            if os.path.exists(os.path.join(directory, "checkpoint.pt")):
                os.replace(
                    os.path.join(directory, "checkpoint.pt"), os.path.join(directory, "old-checkpoint.pt")
                )
            run_started = time.time()
            summary = pretrain(config, progress=False)
            minutes = (time.time() - run_started) / 60
            pretrained, _, _, _ = load_backbone(
                os.path.join(directory, "checkpoint.pt"), torch.device(arguments.device)
            )
            pretrained_top1 = _knn(pretrained, arguments)
            entry = {
                "run": run, "seed": seed, "steps": summary["step"], "minutes": round(minutes, 2),
                "epochs_scheduled": config.epochs, "last_loss": summary["metrics"].get("loss"),
                "random_init_top1": random_top1, "pretrained_top1": pretrained_top1,
                "gain_over_random_points": 100 * (pretrained_top1 - random_top1),
                "gain_over_raw_pixels_points": 100 * (pretrained_top1 - report["raw_pixels_top1"]),
            }  # fmt: skip
            report["runs"].append(entry)
            print(
                f"{run} seed {seed}: {summary['step']} steps in {minutes:.1f} min, kNN top-1 "
                f"{100 * pretrained_top1:.2f}% (random init {100 * random_top1:.2f}%)",
                file=sys.stderr,
            )
            write_json(arguments.out, report)
    report["total_minutes"] = round((time.time() - started) / 60, 1)
    write_json(arguments.out, report)
    print(json.dumps({key: report[key] for key in ("raw_pixels_top1", "runs")}, indent=2))


if __name__ == "__main__":
    main()
