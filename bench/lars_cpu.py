"""SGD against LARS at a large batch on the CPU: SimCLR + DCL and NNCLR + DCL on Fashion-MNIST with
the small CNN, a global batch of 512, a whole warm-up + cosine schedule of --steps steps for each
run, each optimizer with its defaults (SGD: the Fashion-MNIST row, base lr 0.8, weight decay 1e-4;
LARS: SimCLR's base lr 0.3, weight decay 1e-6, trust coefficient 0.001; both warm up for 0.1 epoch
of the schedule, momentum 0.9, tau 0.2), then kNN top-1 (k = 200, t = 0.1) of the backbone with
--knn-max-samples training images as memory, scored on the test images. One run at a time, one torch
thread; a run whose result is in --json is skipped, an interrupted one resumes from its checkpoint.

    MITOOL_THREADS=1 python bench/lars_cpu.py --steps 50 --seeds 0,1,2 \\
        --json bench/results/claims/lars/cpu.json --table bench/results/claims/lars/cpu.md
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import argument_parser  # noqa: E402

from mitool.vision.config import PretrainConfig  # noqa: E402
from mitool.vision.evaluate import knn_of_checkpoint  # noqa: E402
from mitool.vision.records import read_records  # noqa: E402
from mitool.vision.step import TrainingDiverged  # noqa: E402
from mitool.vision.train import pretrain  # noqa: E402


def run_one(method: str, arm: str, seed: int, arguments) -> dict:
    """Pretrain one run (or resume it), then its kNN; the row of the results. ``arm``: the optimizer,
    with its defaults, or ``optimizer:base_lr`` (e.g. ``sgd:0.3``)."""
    optimizer, _, base_lr = arm.partition(":")
    name = f"{method}-dcl-{arm.replace(':', '')}-b{arguments.batch_size}-s{seed}"
    out = os.path.join(arguments.scratch, name)
    config = PretrainConfig(
        base_lr=float(base_lr) if base_lr else None,
        method=method, loss="dcl", optimizer=optimizer, arch="small-cnn", dataset="fashion-mnist",
        batch_size=arguments.batch_size, epochs=1, schedule_steps=arguments.steps, max_steps=arguments.steps,
        seed=seed, gpu_augment="decode", workers=0, knn_every=0, log_every=10,
        checkpoint_every=arguments.steps, out=out,
    )  # fmt: skip
    started = time.perf_counter()
    row = {
        "name": name,
        "method": method,
        "optimizer": arm,
        "seed": seed,
        "batch_size": arguments.batch_size,
    }
    try:
        summary = pretrain(config, resume=os.path.exists(os.path.join(out, "checkpoint.pt")), progress=False)
    except TrainingDiverged as error:
        return {**row, "status": f"diverged: {error}", "wall_seconds": time.perf_counter() - started}
    records = read_records(out)
    training = [record for record in records if "loss" in record]
    knn = knn_of_checkpoint(
        os.path.join(out, "checkpoint.pt"), workers=0, max_samples=arguments.knn_max_samples, record=False
    )
    saved = json.loads(Path(out, "config.json").read_text())
    return {
        **row, "status": "done", "steps": summary["step"], "base_lr": saved["base_lr"],
        "weight_decay": saved["weight_decay"], "trust_coefficient": saved.get("trust_coefficient"),
        "peak_lr": saved["base_lr"] * arguments.batch_size / 256,
        "loss_final": training[-1]["loss"],
        "npc_final": training[-1]["npc"], "grad_norm_final": training[-1]["grad_norm"],
        "alignment": summary["alignment"]["alignment"], "uniformity": summary["alignment"]["uniformity"],
        "knn_top1": knn["knn_top1"], "knn_top5": knn["knn_top5"],
        "wall_seconds": time.perf_counter() - started,
    }  # fmt: skip


def reference(seed: int, arguments) -> dict:
    """kNN of the network at step 0 (seeded and built as a run of ``seed`` builds it; the backbone
    is the same for simclr and nnclr)."""
    import random

    import numpy as np

    from mitool.vision.config import resolve_defaults
    from mitool.vision.evaluate import evaluate_knn
    from mitool.vision.methods import build_method

    random.seed(seed), np.random.seed(seed), torch.manual_seed(seed)
    config = resolve_defaults(PretrainConfig(method="simclr", arch="small-cnn", dataset="fashion-mnist"), 28)
    model = build_method(config, 1, torch.device("cpu"))
    knn = evaluate_knn(
        model.backbone, "fashion-mnist", None, 28, torch.device("cpu"), batch_size=256, workers=0,
        max_samples=arguments.knn_max_samples,
    )  # fmt: skip
    return {
        "name": f"init-s{seed}", "method": "step 0", "optimizer": "-", "seed": seed, "status": "done",
        "knn_top1": knn["knn_top1"], "knn_top5": knn["knn_top5"],
    }  # fmt: skip


def table(rows: list[dict]) -> str:
    """Markdown: per method and optimizer, kNN top-1 of each seed and their mean and spread."""
    lines = [
        "| method | optimizer | base lr (peak lr) | weight decay | kNN top-1 per seed (%) | mean | "
        "max - min | alignment | uniformity |",
        "| --- | --- | --- | --- | --- | ---: | ---: | ---: | ---: |",
    ]
    for method in dict.fromkeys(row["method"] for row in rows):
        for optimizer in dict.fromkeys(row["optimizer"] for row in rows):
            group = [row for row in rows if row["method"] == method and row["optimizer"] == optimizer]
            done = [row for row in group if row["status"] == "done"]
            if not group:
                continue
            if not done:
                lines.append(f"| {method} + dcl | {optimizer} | | | diverged | | | | |")
                continue
            accuracies = [100 * row["knn_top1"] for row in done]
            each = " / ".join(f"{value:.2f}" for value in accuracies)
            spread = f"{statistics.mean(accuracies):.2f}% | {max(accuracies) - min(accuracies):.2f}"
            first = done[0]
            if method == "step 0":
                lines.append(f"| the networks at step 0 | - | - | - | {each} | {spread} | | |")
                continue
            lines.append(
                f"| {method} + dcl | {optimizer} | {first['base_lr']:g} ({first['peak_lr']:.3g}) | "
                f"{first['weight_decay']:g} | {each} | {spread} | "
                f"{statistics.mean(row['alignment'] for row in done):.3f} | "
                f"{statistics.mean(row['uniformity'] for row in done):.3f} |"
            )
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argument_parser(__doc__)
    parser.add_argument("--methods", default="simclr,nnclr")
    parser.add_argument(
        "--optimizers", default="sgd,lars", help="Comma-separated: sgd, lars, or optimizer:base_lr (sgd:0.3)."
    )
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--steps", type=int, default=50, help="Steps of each run (its whole schedule).")
    parser.add_argument("--batch-size", type=int, default=512)
    parser.add_argument("--knn-max-samples", type=int, default=10000)
    parser.add_argument("--scratch", default="/tmp/mitool-lars-cpu", help="The runs' folders.")
    parser.add_argument("--json", required=True, help="The results (one row per run; read back to skip).")
    parser.add_argument("--table", help="Write the markdown table here too.")
    parser.add_argument(
        "--reference", action="store_true", help="Also the kNN of each seed's step-0 network."
    )
    arguments = parser.parse_args()
    torch.set_num_threads(1)
    path = Path(arguments.json)
    rows = json.loads(path.read_text()) if path.is_file() else []
    for seed in (int(seed) for seed in arguments.seeds.split(",")):
        if arguments.reference and not any(r["method"] == "step 0" and r["seed"] == seed for r in rows):
            rows.append(reference(seed, arguments))
            print(json.dumps(rows[-1]), flush=True)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(rows, indent=1) + "\n")
        for method in arguments.methods.split(","):
            for optimizer in arguments.optimizers.split(","):
                if any(
                    r["method"] == method and r["optimizer"] == optimizer and r["seed"] == seed for r in rows
                ):
                    continue
                rows.append(run_one(method, optimizer, seed, arguments))
                print(json.dumps(rows[-1]), flush=True)
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(json.dumps(rows, indent=1) + "\n")
    text = table(rows)
    print(text)
    if arguments.table:
        Path(arguments.table).write_text(text)


if __name__ == "__main__":
    main()
