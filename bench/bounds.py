"""Contrastive losses over many negatives: mitool against the usual formulation, forward + backward.

For each (B, K, d), L2-normalised queries q (B, d), positive keys k (B, d) and negatives n (K, d),
temperature 0.2, one forward and backward pass of:

* ``cat_ce`` (a), the baseline: MoCo v2's formulation, logits = cat([q.k, q @ n.T], 1) / tau and
  cross_entropy with label 0 (written below in a few lines);
* ``floor`` (b): the bare matrix products q @ n.T forward and backward, nothing else;
* ``plain-<bound>``: mitool.bounds on pos = q.k / tau, neg = q @ n.T / tau;
* ``fused-<bound>``: mitool.fused.contrastive_bound from the embeddings, its default backend: on
  CPU chunked torch operators (1/tau folded into q, the chunks' softmax weights kept), on CUDA the
  Triton kernels of mitool.fused_triton (no (B, K) buffer at all);
* ``fused-recompute-infonce``: the chunked torch path keeping nothing of size (B, K) (the chunks
  recomputed in the backward pass); on CUDA also ``chunked-infonce``, the chunked torch path
  with kept weights. ``--chunk-size`` sets the chunks of these torch paths.

With K > B (a queue) only q requires a gradient, as in MoCo; with K < B (the other samples of a
batch, SimCLR-style) the negatives require one too. Times are medians of per-pair ratios against
(a), the pairs interleaved (see bench/harness.py), with more pairs for short calls on CPU
(about 1.5 s of pairs per candidate, at most 25); memory is the peak allocated beyond the inputs
during one call, against (a)'s. On CUDA also the GPU kernel time of one call (torch.profiler)
against (a)'s: at these sizes wall-clock time is set by the host issuing
the operators, kernel time by the passes over the (B, K) scores.

    python bench/bounds.py --device cpu --json bench/results/bounds_cpu.json
"""

from __future__ import annotations

import math
import os
import sys
from collections.abc import Callable

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(1, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from harness import (  # noqa: E402
    Progress,
    argument_parser,
    device_seconds,
    environment,
    interleaved_ratios,
    peak_extra_bytes,
    time_call,
    write_json,
)

from mitool import bounds  # noqa: E402
from mitool.fused import chosen_backend, contrastive_bound, default_chunk_size  # noqa: E402
from mitool.runtime import set_threads_to_free_cores  # noqa: E402

SHAPES = ((256, 16384, 128), (256, 65536, 128), (4096, 4095, 128))
TEMPERATURE = 0.2
EQCO_ALPHA = 256.0
BOUNDS = ("infonce", "eqco", "dcl")
TARGET_TIME = {"cpu": 0.85, "cuda": 0.5}
TARGET_MEMORY = 0.5
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}
MIN_SECONDS_PER_CANDIDATE = 1.5
MAX_ROUNDS = 25


def cat_cross_entropy(
    query: torch.Tensor, positive_key: torch.Tensor, negatives: torch.Tensor
) -> torch.Tensor:
    """(a): the usual formulation, logits (B, K+1) with the positive in column 0."""
    positive_logit = torch.einsum("nc,nc->n", query, positive_key).unsqueeze(-1)
    negative_logits = query @ negatives.T
    logits = torch.cat([positive_logit, negative_logits], dim=1) / TEMPERATURE
    labels = torch.zeros(logits.shape[0], dtype=torch.long, device=logits.device)
    return F.cross_entropy(logits.float(), labels)


def plain_bound(name: str) -> Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]:
    """mitool.bounds on the scores q.k / tau and q @ n.T / tau."""
    function = bounds.get(name, alpha=EQCO_ALPHA if name == "eqco" else None)

    def loss(query: torch.Tensor, positive_key: torch.Tensor, negatives: torch.Tensor) -> torch.Tensor:
        pos = torch.einsum("nc,nc->n", query, positive_key) / TEMPERATURE
        neg = query @ negatives.T / TEMPERATURE
        return function(pos, neg).loss

    return loss


def fused_bound(
    name: str, chunk_size: int | None, recompute: bool = False, backend: str = "auto"
) -> Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]:
    """mitool.fused.contrastive_bound on the embeddings."""

    def loss(query: torch.Tensor, positive_key: torch.Tensor, negatives: torch.Tensor) -> torch.Tensor:
        return contrastive_bound(
            query,
            positive_key,
            negatives,
            TEMPERATURE,
            bound=name,
            alpha=EQCO_ALPHA if name == "eqco" else None,
            chunk_size=chunk_size,
            recompute=recompute,
            backend=backend,
        ).loss

    return loss


def measure_shape(
    batch: int,
    negatives_count: int,
    dim: int,
    device: torch.device,
    dtype: torch.dtype,
    rounds: int,
    chunk_size: int | None,
    progress: Progress,
) -> dict[str, object]:
    """Time and memory of every candidate at one (B, K, d); returns the JSON record."""
    generator = torch.Generator().manual_seed(0)
    query = F.normalize(torch.randn(batch, dim, generator=generator), dim=1).to(device, dtype)
    positive_key = F.normalize(torch.randn(batch, dim, generator=generator), dim=1).to(device, dtype)
    negatives = F.normalize(torch.randn(negatives_count, dim, generator=generator), dim=1).to(device, dtype)
    negatives_need_grad = negatives_count < batch
    query.requires_grad_(True)
    negatives.requires_grad_(negatives_need_grad)
    score_gradient = torch.randn(batch, negatives_count, generator=generator).to(device, dtype)

    def step(loss_function: Callable[..., torch.Tensor]) -> Callable[[], None]:
        def run() -> None:
            query.grad = None
            negatives.grad = None
            loss_function(query, positive_key, negatives).backward()

        return run

    def floor() -> None:
        query.grad = None
        negatives.grad = None
        (query @ negatives.T).backward(score_gradient)

    candidates: dict[str, Callable[[], None]] = {"floor": floor}
    for name in BOUNDS:
        candidates[f"plain-{name}"] = step(plain_bound(name))
    for name in BOUNDS:
        candidates[f"fused-{name}"] = step(fused_bound(name, chunk_size))
    # the chunked torch path: mitool's default on CPU (with and without kept weights); on CUDA,
    # where "fused" means the Triton kernels, shown for comparison
    if device.type == "cuda":
        candidates["chunked-infonce"] = step(fused_bound("infonce", chunk_size, backend="torch"))
    candidates["fused-recompute-infonce"] = step(
        fused_bound("infonce", chunk_size, recompute=True, backend="torch")
    )
    baseline = step(cat_cross_entropy)

    for function in (baseline, *candidates.values()):  # warm-up: kernels, allocator, caches
        function()
        function()
    if device.type == "cpu":
        # short calls need more pairs for a steady median on a shared machine: at least about
        # MIN_SECONDS_PER_CANDIDATE of pairs per candidate
        pair_seconds = 2 * time_call(baseline, device)
        wanted = max(rounds, min(MAX_ROUNDS, math.ceil(MIN_SECONDS_PER_CANDIDATE / pair_seconds)))
        progress.total += (wanted - rounds) * len(candidates)
        rounds = wanted
    memory = {"baseline": peak_extra_bytes(baseline, device)}
    kernel_seconds = {"baseline": _device_seconds_or_none(baseline, device)}
    for name, function in candidates.items():
        memory[name] = peak_extra_bytes(function, device)
        kernel_seconds[name] = _device_seconds_or_none(function, device)
    timing = interleaved_ratios(
        baseline,
        candidates,
        device,
        rounds,
        target_seconds=0.02 if device.type == "cuda" else 0.0,
        progress=progress,
    )
    rows = {}
    for name, figures in timing.items():
        row = dict(figures)
        row["peak_extra_bytes"] = memory[name]
        if memory[name] is not None and memory["baseline"]:
            row["memory_ratio"] = memory[name] / memory["baseline"]
        if kernel_seconds[name] is not None and kernel_seconds["baseline"]:
            row["device_seconds"] = kernel_seconds[name]
            row["device_ratio"] = kernel_seconds[name] / kernel_seconds["baseline"]
        rows[name] = row
    return {
        "batch": batch,
        "negatives": negatives_count,
        "dim": dim,
        "dtype": str(dtype).replace("torch.", ""),
        "negatives_require_grad": negatives_need_grad,
        "fused_backend": chosen_backend(query, negatives),
        "chunk_size": chunk_size or default_chunk_size(batch, negatives_count, device),
        "rounds": rounds,
        "baseline": "cat_ce",
        "candidates": rows,
    }


def _device_seconds_or_none(function: Callable[[], None], device: torch.device) -> float | None:
    """GPU kernel time of one call (bench/harness.py), None where the profiler cannot give it."""
    try:
        return device_seconds(function, device, repeat=1)
    except Exception as error:  # a profiler that differs: the column is left out, the bench goes on
        print(f"device time not measured: {type(error).__name__}: {error}", file=sys.stderr)
        return None


def targets(records: list[dict[str, object]], device: torch.device) -> list[dict[str, object]]:
    """For each shape and fused bound: the time and memory targets, met or not, with the figures."""
    limit = TARGET_TIME.get(device.type, TARGET_TIME["cpu"])
    verdicts = []
    for record in records:
        for name in BOUNDS:
            row = record["candidates"][f"fused-{name}"]
            verdicts.append(
                {
                    "shape": [record["batch"], record["negatives"], record["dim"]],
                    "dtype": record["dtype"],
                    "candidate": f"fused-{name}",
                    "time_ratio": row["ratio"],
                    "time_target": limit,
                    "time_met": row["ratio"] <= limit,
                    "kernel_time_ratio": row.get("device_ratio"),
                    "memory_ratio": row.get("memory_ratio"),
                    "memory_target": TARGET_MEMORY,
                    "memory_met": (
                        row.get("memory_ratio") is not None and row["memory_ratio"] <= TARGET_MEMORY
                    ),
                }
            )
    return verdicts


def print_table(records: list[dict[str, object]]) -> None:
    for record in records:
        base_ms = record["candidates"]["baseline"]["seconds"] * 1e3
        print(
            f"\nB={record['batch']} K={record['negatives']} d={record['dim']} {record['dtype']}"
            f" (negatives require grad: {record['negatives_require_grad']}); (a) cat_ce = {base_ms:.2f} ms"
        )
        kernel_times = any("device_ratio" in row for row in record["candidates"].values())
        print(
            f"{'candidate':<26}{'ms':>9}{'time/(a)':>10}{'range':>15}{'peak MiB':>10}{'mem/(a)':>9}"
            + (f"{'kernel ms':>11}{'kernel/(a)':>11}" if kernel_times else "")
        )
        for name, row in record["candidates"].items():
            label = "(a) cat_ce" if name == "baseline" else ("(b) floor" if name == "floor" else name)
            spread = f"{row['ratio_low']:.2f}-{row['ratio_high']:.2f}" if "ratio_low" in row else ""
            peak = row["peak_extra_bytes"]
            peak_text = f"{peak / 2**20:.1f}" if peak is not None else "n/a"
            memory_text = f"{row['memory_ratio']:.2f}" if "memory_ratio" in row else ""
            kernel_text = ""
            if "device_seconds" in row:
                kernel_text = f"{row['device_seconds'] * 1e3:>11.3f}{row['device_ratio']:>11.3f}"
            print(
                f"{label:<26}{row['seconds'] * 1e3:>9.2f}{row['ratio']:>10.3f}{spread:>15}"
                f"{peak_text:>10}{memory_text:>9}{kernel_text}"
            )


def parse_shapes(text: str) -> list[tuple[int, int, int]]:
    shapes = []
    for part in text.split(","):
        try:
            batch, negatives_count, dim = (int(value) for value in part.lower().split("x"))
        except ValueError:
            raise ValueError(f"--shapes takes BxKxd[,BxKxd...], e.g. 256x16384x128; got {part!r}") from None
        if min(batch, negatives_count, dim) < 1:
            raise ValueError(f"--shapes: every size must be >= 1, got {part!r}")
        shapes.append((batch, negatives_count, dim))
    return shapes


def main(argv: list[str] | None = None) -> int:
    parser = argument_parser(__doc__)
    parser.add_argument("--device", default="cpu", help="cpu or cuda (default cpu)")
    parser.add_argument("--dtype", default="float32", choices=sorted(DTYPES), help="embedding dtype")
    parser.add_argument(
        "--shapes", default=",".join(f"{b}x{k}x{d}" for b, k, d in SHAPES), help="BxKxd, comma-separated"
    )
    parser.add_argument(
        "--rounds", type=int, default=7, help="interleaved pairs per candidate, at least (default 7)"
    )
    parser.add_argument("--chunk-size", type=int, default=None, help="fused chunk size [mitool default]")
    parser.add_argument("--json", default=None, help="write the figures to this JSON file")
    parser.add_argument("--quiet", action="store_true", help="no progress line")
    args = parser.parse_args(argv)

    try:
        shapes = parse_shapes(args.shapes)
        if args.rounds < 1:
            raise ValueError(f"--rounds must be >= 1, got {args.rounds}")
        if args.chunk_size is not None and args.chunk_size < 1:
            raise ValueError(f"--chunk-size must be >= 1, got {args.chunk_size}")
        if args.device.split(":")[0] not in ("cpu", "cuda"):
            raise ValueError(f"--device must be cpu or cuda, got {args.device!r}")
        device = torch.device(args.device)
        if device.type == "cuda" and not torch.cuda.is_available():
            raise ValueError("--device cuda: no CUDA device is available")
    except (ValueError, RuntimeError) as error:
        print(f"Error: {error}", file=sys.stderr)
        return 2
    threads = set_threads_to_free_cores()
    dtype = DTYPES[args.dtype]
    candidates_count = 1 + 2 * len(BOUNDS) + (2 if device.type == "cuda" else 1)
    progress = Progress(
        len(shapes) * candidates_count * args.rounds, "bench/bounds.py", enabled=not args.quiet
    )
    records = [
        measure_shape(b, k, d, device, dtype, args.rounds, args.chunk_size, progress) for b, k, d in shapes
    ]
    print_table(records)
    verdicts = targets(records, device)
    print("\ntargets (fused vs (a)):")
    for verdict in verdicts:
        memory = verdict["memory_ratio"]
        memory_text = f"{memory:.2f}" if memory is not None else "n/a"
        print(
            f"  {'x'.join(map(str, verdict['shape']))} {verdict['candidate']:<14}"
            f" time {verdict['time_ratio']:.3f} (<= {verdict['time_target']}: "
            f"{'met' if verdict['time_met'] else 'NOT met'}),"
            f" memory {memory_text} (<= {TARGET_MEMORY}: {'met' if verdict['memory_met'] else 'NOT met'})"
            + (
                f", GPU kernel time {verdict['kernel_time_ratio']:.3f} of (a)'s"
                if verdict["kernel_time_ratio"] is not None
                else ""
            )
        )
    if args.json:
        write_json(
            args.json,
            {
                "bench": "bounds",
                "environment": {**environment(device), "threads": threads},
                "temperature": TEMPERATURE,
                "eqco_alpha": EQCO_ALPHA,
                "records": records,
                "targets": verdicts,
            },
        )
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
