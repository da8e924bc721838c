"""Framework overhead: images/s of one pretraining step of each method against the bare backbone.

For each method (moco, simo, simclr) one full training step as ``mitool vision pretrain`` runs it
(vision.config.build_method and vision.train.training_step: the momentum update, the key
encoder, the queue, the bound, the loss check, backward, SGD step) is timed against the bare
backbone doing the work the method cannot avoid, at the same batch and image size:

* moco, simo: backbone forward + backward on the B query views, one no-grad forward of a
  second backbone (the key encoder) on the B key views, SGD step;
* simclr: backbone forward + backward on the 2B views (both views carry gradients), SGD step.

The overhead 100 * (t_method / t_bare - 1) is then mitool's own cost (head, normalisation,
scores and bound, momentum update, queue, bookkeeping). Both run in channels_last, under the
same autocast (bf16 on CUDA by default), both compiled with ``--compile``. Times are medians
of per-pair ratios of interleaved runs (bench/harness.py). Images/s counts images (two views each).

    python bench/step.py --device cpu --arch small-cnn --image-size 32 --batch-size 32
    python bench/step.py --device cuda --arch resnet50 --image-size 224 --batch-size 256
"""

from __future__ import annotations

import copy
import os
import sys
from collections.abc import Callable

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(1, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from harness import Progress, argument_parser, environment, interleaved_ratios, write_json  # noqa: E402

from mitool.runtime import set_threads_to_free_cores  # noqa: E402

METHODS = ("moco", "simo", "simclr")
AUTOCAST = {"fp32": torch.float32, "bf16": torch.bfloat16}


def bare_backbone_step(
    arch: str,
    views: tuple[torch.Tensor, torch.Tensor],
    with_key_encoder: bool,
    precision: str,
    small_stem: bool,
    compile_model: bool,
) -> Callable[[], None]:
    """The floor of a method's step: backbone forward + backward (+ the key encoder's forward)."""
    from mitool.vision.backbones import build_backbone

    device = views[0].device
    backbone = build_backbone(arch, 3, small_stem)[0].to(device, memory_format=torch.channels_last)
    key_backbone = copy.deepcopy(backbone).requires_grad_(False) if with_key_encoder else None
    optimizer = torch.optim.SGD(backbone.parameters(), lr=0.01, momentum=0.9, weight_decay=1e-4)
    forward = torch.compile(backbone) if compile_model else backbone
    key_forward = torch.compile(key_backbone) if compile_model and key_backbone is not None else key_backbone
    query_images = views[0] if with_key_encoder else torch.cat(views)

    def step() -> None:
        with torch.autocast(device.type, dtype=AUTOCAST[precision], enabled=precision != "fp32"):
            if key_forward is not None:
                with torch.no_grad():
                    key_forward(views[1])
            loss = forward(query_images).float().mean()
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()

    return step


def method_step(
    method: str,
    arch: str,
    views: tuple[torch.Tensor, torch.Tensor],
    precision: str,
    small_stem: bool,
    compile_model: bool,
    queue_size: int,
    bn_mode: str = "shuffle",
) -> Callable[[], None]:
    """One training step of ``method`` exactly as vision.train runs it (``bn_mode``: moco's
    shuffle-BN with split BatchNorm on one process, or plain/synchronised BatchNorm)."""
    from mitool.vision.config import PretrainConfig, resolve_defaults
    from mitool.vision.methods import build_method
    from mitool.vision.step import training_step

    device = views[0].device
    options = {"negatives": queue_size, "bn_mode": bn_mode} if method == "moco" else {}
    config = resolve_defaults(
        PretrainConfig(
            method=method,
            arch=arch,
            device=device.type,
            image_size=views[0].shape[-1],
            batch_size=views[0].shape[0],
            precision=precision,
            small_stem=small_stem,
            dataset="synthetic",
            **options,
        )
    )
    model = build_method(config, 3, device)
    trained = [parameter for parameter in model.parameters() if parameter.requires_grad]
    optimizer = torch.optim.SGD(trained, lr=0.01, momentum=0.9, weight_decay=1e-4)
    scaler = torch.amp.GradScaler(device.type, enabled=False)
    step_model = torch.compile(model) if compile_model else model
    counter = [0]

    def step() -> None:
        training_step(step_model, optimizer, scaler, views[0], views[1], 0.01, precision, counter[0])
        counter[0] += 1

    return step


def main(argv: list[str] | None = None) -> int:
    parser = argument_parser(__doc__)
    parser.add_argument("--device", default="cpu", help="cpu or cuda (default cpu)")
    parser.add_argument("--arch", default=None, help="small-cnn, resnet18, resnet34, resnet50 [resnet50]")
    parser.add_argument("--image-size", type=int, default=224, help="pixels (default 224)")
    parser.add_argument("--batch-size", type=int, default=256, help="images per step (default 256)")
    parser.add_argument("--methods", default=",".join(METHODS), help="comma-separated (default all)")
    parser.add_argument("--precision", default=None, choices=sorted(AUTOCAST), help="[bf16 cuda, fp32 cpu]")
    parser.add_argument("--queue", type=int, default=65536, help="moco's queue size K (default 65536)")
    parser.add_argument("--compile", action="store_true", help="torch.compile the method and the backbone")
    parser.add_argument(
        "--bn-mode", default="shuffle", choices=("shuffle", "sync"), help="moco's BatchNorm (default shuffle)"
    )
    parser.add_argument("--rounds", type=int, default=5, help="interleaved pairs per method (default 5)")
    parser.add_argument("--warmup", type=int, default=2, help="untimed steps of each first (default 2)")
    parser.add_argument("--json", default=None, help="write the figures to this JSON file")
    parser.add_argument("--quiet", action="store_true", help="no progress line")
    args = parser.parse_args(argv)

    try:
        from mitool.vision.backbones import ARCHITECTURES

        arch = args.arch or "resnet50"
        if arch not in ARCHITECTURES:
            raise ValueError(f"--arch must be one of {', '.join(ARCHITECTURES)}, got {arch!r}")
        methods = [name.strip() for name in args.methods.split(",") if name.strip()]
        unknown = [name for name in methods if name not in METHODS]
        if unknown or not methods:
            raise ValueError(f"--methods takes names from {', '.join(METHODS)}, got {args.methods!r}")
        if args.device not in ("cpu", "cuda"):
            raise ValueError(f"--device must be cpu or cuda, got {args.device!r}")
        if args.device == "cuda" and not torch.cuda.is_available():
            raise ValueError("--device cuda: no CUDA device is available")
        for name, value, low in (
            ("--image-size", args.image_size, 8),
            ("--batch-size", args.batch_size, 8),
            ("--rounds", args.rounds, 1),
            ("--warmup", args.warmup, 0),
            ("--queue", args.queue, 1),
        ):
            if value < low:
                raise ValueError(f"{name} must be >= {low}, got {value}")
    except ValueError as error:
        print(f"Error: {error}", file=sys.stderr)
        return 2
    threads = set_threads_to_free_cores()
    device = torch.device(args.device)
    precision = args.precision or ("bf16" if device.type == "cuda" else "fp32")
    small_stem = args.image_size <= 96
    if device.type == "cuda":
        torch.backends.cudnn.benchmark = True
    generator = torch.Generator().manual_seed(0)
    views = tuple(
        torch.randn(args.batch_size, 3, args.image_size, args.image_size, generator=generator)
        .to(device)
        .contiguous(memory_format=torch.channels_last)
        for _ in range(2)
    )
    progress = Progress(len(methods) * args.rounds, "bench/step.py", enabled=not args.quiet)
    records: dict[str, dict[str, object]] = {}
    errors: dict[str, str] = {}
    for method in methods:
        try:
            step = method_step(
                method, arch, views, precision, small_stem, args.compile, args.queue, args.bn_mode
            )
            bare = bare_backbone_step(arch, views, method != "simclr", precision, small_stem, args.compile)
            for _ in range(args.warmup):
                step()
                bare()
            timing = interleaved_ratios(bare, {method: step}, device, args.rounds, progress=progress)
        except (ValueError, RuntimeError) as error:  # one method failing leaves the others measured
            errors[method] = f"{type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}"
            print(f"{method}: {errors[method]}", file=sys.stderr)
            if device.type == "cuda":
                torch.cuda.empty_cache()
            continue
        ratio = timing[method]["ratio"]
        records[method] = {
            "method_seconds": timing[method]["seconds"],
            "bare_seconds": timing["baseline"]["seconds"],
            "method_images_per_second": args.batch_size / timing[method]["seconds"],
            "bare_images_per_second": args.batch_size / timing["baseline"]["seconds"],
            "time_ratio": ratio,
            "ratio_low": timing[method]["ratio_low"],
            "ratio_high": timing[method]["ratio_high"],
            "overhead_percent": 100.0 * (ratio - 1.0),
            "bare_includes_key_encoder": method != "simclr",
        }
        del step, bare
        if device.type == "cuda":
            torch.cuda.empty_cache()

    title = (
        f"{arch}, {args.image_size} px, batch {args.batch_size}, {precision}, channels_last"
        f"{', compiled' if args.compile else ''}, {device.type}"
    )
    print(f"\none pretraining step against the bare backbone ({title})")
    print(f"{'method':<8}{'images/s':>10}{'bare images/s':>15}{'overhead %':>12}{'range %':>16}")
    for method, message in errors.items():
        print(f"{method:<8}failed: {message}")
    for method, row in records.items():
        spread = f"{100 * (row['ratio_low'] - 1):.0f} to {100 * (row['ratio_high'] - 1):.0f}"
        print(
            f"{method:<8}{row['method_images_per_second']:>10.1f}{row['bare_images_per_second']:>15.1f}"
            f"{row['overhead_percent']:>12.1f}{spread:>16}"
        )
    if args.json:
        write_json(
            args.json,
            {
                "bench": "step",
                "environment": {**environment(device), "threads": threads},
                "arch": arch,
                "image_size": args.image_size,
                "batch_size": args.batch_size,
                "precision": precision,
                "channels_last": True,
                "compile": args.compile,
                "moco_queue": args.queue,
                "moco_bn_mode": args.bn_mode,
                "rounds": args.rounds,
                "target_overhead_percent_gpu": 10.0,
                "methods": records,
                "errors": errors,
            },
        )
        print(f"wrote {args.json}")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
