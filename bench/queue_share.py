"""How many queries meet an older key of their own image in a first-in, first-out queue (MoCo's
queue of K keys, NNCLR's support set of S embeddings): a simulation of the training order (a fresh
random permutation of the N images every epoch, the last partial batch dropped, B keys written
after each step) against the formula of mitool.vision.common.own_image_share. The share is counted
over the epochs after the first (the first has no older keys). Prints a markdown table and, with
--json, writes its rows.

    python bench/queue_share.py --json bench/results/claims/lars/queue_share.json
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import argument_parser  # noqa: E402

from mitool.vision.common import own_image_share  # noqa: E402

CASES: tuple[tuple[str, int, int, int, int], ...] = (
    # (what, N images, batch B, queue K, epochs simulated)
    ("Fashion-MNIST, moco/nnclr default", 60000, 128, 4096, 4),
    ("Fashion-MNIST, batch 512", 60000, 512, 4096, 4),
    ("CIFAR-10, MoCo CIFAR demo", 50000, 256, 4096, 4),
    ("ImageNet, MoCo v2", 1281167, 256, 65536, 3),
    ("ImageNet, NNCLR", 1281167, 4096, 98304, 3),
    ("K = N / 10", 10000, 100, 1000, 12),
    ("K = N / 2", 10000, 100, 5000, 12),
    ("K = N", 10000, 100, 10000, 12),
    ("K = 1.5 N", 10000, 100, 15000, 12),
    ("K = 2 N", 10000, 100, 20000, 12),
)


def simulate(images: int, batch: int, queue: int, epochs: int, seed: int = 0) -> float:
    """The share of queries, over epochs 2..``epochs``, whose own image's latest key is among the
    ``queue`` keys written before their step."""
    rng = np.random.default_rng(seed)
    last_written = np.full(images, -1, dtype=np.int64)  # index of the image's latest key, -1: none
    written = hits = queries = 0
    steps = images // batch
    for epoch in range(epochs):
        order = rng.permutation(images)[: steps * batch]
        for step in range(steps):
            batch_images = order[step * batch : (step + 1) * batch]
            if epoch > 0:
                latest = last_written[batch_images]
                hits += int(np.count_nonzero((latest >= 0) & (latest >= written - queue)))
                queries += batch_images.size
            last_written[batch_images] = written + np.arange(batch_images.size)
            written += batch_images.size
    return hits / queries


def main() -> None:
    parser = argument_parser(__doc__)
    parser.add_argument("--json", help="Write the rows here.")
    arguments = parser.parse_args()
    rows = []
    print("| case | N | B | K | K / N | simulated | formula | (K / N)^2 / 2 (K <= N) |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for what, images, batch, queue, epochs in CASES:
        row = dict(
            case=what, images=images, batch=batch, queue=queue, epochs=epochs,
            simulated=simulate(images, batch, queue, epochs),
            formula=own_image_share(images, queue, batch), square_half=(queue / images) ** 2 / 2,
        )  # fmt: skip
        rows.append(row)
        small = f"{row['square_half']:.2%}" if queue <= images else "-"
        print(
            f"| {what} | {images} | {batch} | {queue} | {queue / images:.3g} | {row['simulated']:.2%} | "
            f"{row['formula']:.2%} | {small} |",
            flush=True,
        )
    if arguments.json:
        Path(arguments.json).parent.mkdir(parents=True, exist_ok=True)
        Path(arguments.json).write_text(json.dumps(rows, indent=1) + "\n")


if __name__ == "__main__":
    main()
