"""Two-view images/s of the data pipelines, on a folder of generated ImageNet-size JPEGs.

Generates ``--images`` JPEGs (shorter side 300-500 pixels, aspect 3:4 to 4:3, smooth colour
fields with edges and noise, quality 90, about the size of ImageNet photographs) into a temporary
ImageNet-layout folder, then measures, on the same files and with the same number of workers:

* ``cpu``: the MoCo v2 two-view transform of :mod:`mitool.vision.augment` (torchvision on PIL images) in
  the DataLoader workers; the views are moved to ``--device``;
* ``device-decode``: the workers only decode (:class:`mitool.vision.gpu_augment.DecodeOnly`), the two
  views are made by :class:`mitool.vision.gpu_augment.GPUTwoViewAugment` on ``--device``;
* ``device-jpeg``: the workers only read the files' bytes (``load_dataset(..., encoded=True)``),
  decoded in one batched ``torchvision.io.decode_jpeg`` on the device, then augmented there;
* ``augment-only``: ``GPUTwoViewAugment`` alone on one decoded batch already on the device (the
  ceiling of the device path when nothing else waits).

images/s counts source images (each gives two views of ``--image-size`` pixels) over one whole
epoch, worker start-up included; keep ``--images`` at several batches per worker, or the workers'
start-up dominates (the script says so). ``--device cuda`` for the GPU path;
on CPU the device path runs on CPU tensors. Usage::

    MITOOL_THREADS=1 python bench/data.py --images 192 --workers 1 --json bench/results/data.json
"""

from __future__ import annotations

import multiprocessing
import os
import sys
import tempfile
import time

import numpy as np
import torch
from PIL import Image

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(1, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from harness import Progress, argument_parser, environment, synchronize, write_json  # noqa: E402

from mitool.runtime import free_cores, set_threads_to_free_cores  # noqa: E402
from mitool.vision.augment import two_view_transform  # noqa: E402
from mitool.vision.datasets import dataset_info, load_dataset  # noqa: E402
from mitool.vision.gpu_augment import DecodeOnly, GPUTwoViewAugment, decode_on_device  # noqa: E402
from mitool.vision.loader import make_loader  # noqa: E402

MODES = ("cpu", "device-decode", "device-jpeg", "augment-only")


def _write_jpeg(task: tuple[str, int, int]) -> None:
    """One generated JPEG (path, seed, index): a smooth colour field with an edge and noise."""
    path, seed, index = task
    generator = np.random.default_rng([seed, index])
    short = int(generator.integers(300, 501))
    aspect = float(np.exp(generator.uniform(np.log(3 / 4), np.log(4 / 3))))
    height, width = (short, round(short * aspect)) if aspect >= 1 else (round(short / aspect), short)
    rows = np.linspace(0, 1, height, dtype=np.float32)[:, None, None]
    columns = np.linspace(0, 1, width, dtype=np.float32)[None, :, None]
    frequency = generator.uniform(0.5, 4, size=(2, 3)).astype(np.float32)
    phase = generator.uniform(0, 6.3, size=3).astype(np.float32)
    image = 0.5 + 0.3 * np.sin(6.3 * (frequency[0] * rows + frequency[1] * columns) + phase)
    edge = generator.uniform(0.2, 0.8, size=2)
    image = np.where((rows > edge[0]) & (columns < edge[1]), 1.0 - image, image)
    image = image + generator.normal(0, 0.04, size=(height, width, 3)).astype(np.float32)
    Image.fromarray(np.clip(image * 255, 0, 255).astype(np.uint8)).save(path, quality=90)


def generate_jpegs(root: str, count: int, classes: int = 4, seed: int = 0, quiet: bool = False) -> None:
    """``count`` JPEGs of ImageNet size in ``root``/train/class_<k>/ (and one per class in val),
    written by as many processes as there are free cores."""
    tasks = []
    for split, number in (("train", count), ("val", classes)):
        for index in range(number):
            class_dir = os.path.join(root, split, f"class_{index % classes}")
            os.makedirs(class_dir, exist_ok=True)
            tasks.append((os.path.join(class_dir, f"{index:06d}.jpg"), seed + (split == "val"), index))
    progress = Progress(len(tasks), "generating JPEGs", enabled=not quiet)
    processes = max(1, free_cores())
    if processes == 1:
        for task in tasks:
            _write_jpeg(task)
            progress.update()
        return
    with multiprocessing.get_context("fork").Pool(processes) as pool:
        for _ in pool.imap_unordered(_write_jpeg, tasks, chunksize=16):
            progress.update()


def measure_loader(loader, consume, label: str, quiet: bool, device: torch.device) -> dict[str, float]:
    """Iterate ``loader`` once, calling ``consume(batch)`` on every batch; images/s over the whole
    epoch, from the start of the workers to the last batch consumed (so the workers' start-up and
    their filling of the prefetch queue count, as in training)."""
    progress = Progress(len(loader), label, enabled=not quiet)
    counted = 0
    synchronize(device)
    start = time.perf_counter()
    for batch in loader:
        consume(batch)
        counted += int(batch[1].shape[0])
        progress.update()
    synchronize(device)
    elapsed = time.perf_counter() - start
    return {"images": counted, "seconds": elapsed, "images_per_second": counted / elapsed}


def main(argv: list[str] | None = None) -> int:
    parser = argument_parser(__doc__)
    parser.add_argument("--device", default="cpu", help="cpu or cuda (default cpu)")
    parser.add_argument("--images", type=int, default=192, help="JPEGs to generate (default 192)")
    parser.add_argument("--batch-size", type=int, default=32, help="images per batch (default 32)")
    parser.add_argument("--workers", type=int, default=1, help="DataLoader worker processes (default 1)")
    parser.add_argument("--image-size", type=int, default=224, help="side of the views (default 224)")
    parser.add_argument("--modes", default=",".join(MODES), help=f"comma-separated, from {', '.join(MODES)}")
    parser.add_argument("--data", default=None, help="use this generated folder (kept) instead of a temp dir")
    parser.add_argument("--json", default=None, help="write the figures to this JSON file")
    parser.add_argument("--quiet", action="store_true", help="no progress lines")
    args = parser.parse_args(argv)

    threads = set_threads_to_free_cores()
    modes = [mode.strip() for mode in args.modes.split(",") if mode.strip()]
    for mode in modes:
        if mode not in MODES:
            raise SystemExit(f"error: --modes must be taken from {', '.join(MODES)}; got {mode!r}")
    for name in ("images", "batch_size", "image_size"):
        if getattr(args, name) < 1:
            raise SystemExit(f"error: --{name.replace('_', '-')} must be >= 1")
    if args.workers < 0:
        raise SystemExit("error: --workers must be >= 0")
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise SystemExit("error: --device cuda asked for, but CUDA is not available")

    with tempfile.TemporaryDirectory(prefix="mitool-bench-data-") as temporary:
        root = args.data or temporary
        if not os.path.isdir(os.path.join(root, "train")):
            generate_jpegs(root, args.images, quiet=args.quiet)
        info = dataset_info("imagefolder", data_dir=root)
        results: dict[str, dict[str, float]] = {}
        augment = GPUTwoViewAugment.for_dataset(info, args.image_size, seed=0)
        warm_up = load_dataset("imagefolder", "test", data_dir=root, transform=DecodeOnly())
        augment(decode_on_device([warm_up[i][0] for i in range(len(warm_up))], device)[0])  # kernels, CUDA

        def loader_for(**options):
            dataset = load_dataset("imagefolder", "train", data_dir=root, **options)
            return make_loader(dataset, args.batch_size, True, args.workers, seed=0, drop_last=False)

        if "cpu" in modes:
            loader = loader_for(transform=two_view_transform(info, args.image_size))
            results["cpu"] = measure_loader(
                loader,
                lambda batch: [view.to(device, non_blocking=True) for view in batch[0]],
                "cpu (torchvision in workers)",
                args.quiet,
                device,
            )
        # workers decode (device-decode) or only read the JPEG bytes (device-jpeg); the device
        # decodes what is left and makes the two views
        for mode, loader_options in (
            ("device-decode", {"transform": DecodeOnly()}),
            ("device-jpeg", {"encoded": True}),
        ):
            if mode in modes:
                results[mode] = measure_loader(
                    loader_for(**loader_options),
                    lambda batch: augment(decode_on_device(batch[0], device)[0]),
                    mode,
                    args.quiet,
                    device,
                )
        if "augment-only" in modes:
            dataset = load_dataset("imagefolder", "train", data_dir=root, transform=DecodeOnly())
            images = [dataset[i][0].to(device) for i in range(min(args.batch_size, len(dataset)))]
            augment(images)  # warm-up
            repeats = 5
            synchronize(device)
            start = time.perf_counter()
            for _ in range(repeats):
                augment(images)
            synchronize(device)
            elapsed = time.perf_counter() - start
            counted = repeats * len(images)
            results["augment-only"] = {
                "images": counted,
                "seconds": elapsed,
                "images_per_second": counted / elapsed,
            }

    batches_per_worker = args.images / args.batch_size / max(1, args.workers)
    if batches_per_worker < 3:
        print(f"note: only {batches_per_worker:.1f} batches per worker: start-up weighs on these figures")
    baseline = results.get("cpu", {}).get("images_per_second")
    print(
        f"two-view images/s, {args.images} JPEGs (shorter side 300-500 px) -> 2 x {args.image_size} px, "
        f"batch {args.batch_size}, {args.workers} worker(s), device {device}, {threads} torch thread(s)"
    )
    print(f"{'pipeline':<16}{'images/s':>10}{'x cpu':>8}")
    for mode, figures in results.items():
        ratio = figures["images_per_second"] / baseline if baseline else float("nan")
        figures["ratio_to_cpu"] = ratio
        print(f"{mode:<16}{figures['images_per_second']:>10.1f}{ratio:>8.2f}")
    if args.json:
        write_json(
            args.json,
            {
                "benchmark": "data",
                "environment": environment(device),
                "settings": {
                    "images": args.images,
                    "batch_size": args.batch_size,
                    "workers": args.workers,
                    "image_size": args.image_size,
                },
                "results": results,
            },
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
