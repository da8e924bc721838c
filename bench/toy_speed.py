"""Speed of the toy study's training: R runs as one batched model against a plain loop over runs.

Both paths train the same R runs (default: 16 InfoNCE runs with seeds 0..15, the default separable
critic with 256-wide MLPs and a 32-dim embedding, d = 20, batch 64, K = 63 in-batch negatives) for
the same number of steps, and are tested to give the same estimates (tests/test_toy_batched.py).

Printed: aggregate critic-steps/s of both paths (runs x steps / wall seconds, best of --repeats
interleaved timings), their ratio, and the achieved GFLOP/s of each against this machine's own
matmul GFLOP/s (a large square float32 matmul).
The FLOP count per critic step is analytic: forward = 2 multiply-adds per weight per row through
both MLPs (B rows each) plus the B x B x E score matrix; forward + backward is counted as 3 x
forward (the usual rule: the backward pass costs about two forwards).

    python bench/toy_speed.py                       # CPU, torch threads sized to the free cores
    python bench/toy_speed.py --device cuda --json runs/bench/toy_speed_cuda.json
"""

from __future__ import annotations

import platform
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from harness import argument_parser, write_json  # noqa: E402

from mitool.runtime import set_threads_to_free_cores  # noqa: E402
from mitool.toy.batched import train_sequential, train_vectorised  # noqa: E402
from mitool.toy.config import RunSpec, ToySettings  # noqa: E402


def matmul_gflops(device: torch.device, size: int, repeats: int) -> float:
    """The machine's float32 matmul rate on ``device``: best of ``repeats`` size x size products."""
    a = torch.randn(size, size, device=device)
    b = torch.randn(size, size, device=device)
    best = float("inf")
    for _ in range(repeats + 1):
        _synchronise(device)
        start = time.perf_counter()
        a @ b
        _synchronise(device)
        best = min(best, time.perf_counter() - start)
    return 2 * size**3 / best / 1e9


def _synchronise(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def flops_per_critic_step(settings: ToySettings) -> float:
    """Forward + backward FLOPs of one step of one separable-critic run with K = B - 1."""
    widths = [settings.dim] + [settings.hidden] * settings.hidden_layers + [settings.embed_dim]
    multiply_adds_per_row = sum(a * b for a, b in zip(widths[:-1], widths[1:], strict=True))
    batch = settings.batch_size
    forward = 2 * (2 * batch * multiply_adds_per_row) + 2 * batch * batch * settings.embed_dim
    return 3.0 * forward


def timed(function, device: torch.device) -> float:
    _synchronise(device)
    start = time.perf_counter()
    function()
    _synchronise(device)
    return time.perf_counter() - start


def main() -> None:
    parser = argument_parser(__doc__)
    parser.add_argument("--runs", type=int, default=16, help="R, the number of runs (seeds)")
    parser.add_argument("--steps", type=int, default=100, help="training steps per run and path")
    parser.add_argument("--repeats", type=int, default=3, help="timed repeats of each path (best is kept)")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--negatives", type=int, default=63, help="K (default B - 1, the other rows)")
    parser.add_argument("--estimator", default="infonce")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--matmul-size", type=int, default=0, help="default 2048 on CPU, 8192 on CUDA")
    parser.add_argument("--json", type=Path, default=None, help="also write the figures to this JSON file")
    args = parser.parse_args()

    threads = set_threads_to_free_cores()
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise SystemExit("error: --device cuda asked for but CUDA is not available")
    settings = ToySettings(
        mi_values=(4.0,), steps_per_stage=args.steps, batch_size=args.batch_size, device=args.device
    )
    specs = [RunSpec(args.estimator, "separable", args.negatives, seed) for seed in range(args.runs)]
    warm_up = ToySettings(mi_values=(4.0,), steps_per_stage=5, batch_size=args.batch_size, device=args.device)
    train_vectorised(specs, warm_up)
    train_sequential(specs[:2], warm_up)

    # best of --repeats, the two paths interleaved: other work on a shared machine only slows runs down
    vectorised_seconds = loop_seconds = float("inf")
    for _ in range(args.repeats):
        vectorised_seconds = min(vectorised_seconds, timed(lambda: train_vectorised(specs, settings), device))
        loop_seconds = min(loop_seconds, timed(lambda: train_sequential(specs, settings), device))
    critic_steps = args.runs * args.steps
    flops = flops_per_critic_step(settings) * critic_steps
    size = args.matmul_size or (8192 if device.type == "cuda" else 2048)
    peak = matmul_gflops(device, size, repeats=5)
    figures = {
        "device": str(device),
        "device_name": torch.cuda.get_device_name(device) if device.type == "cuda" else platform.processor(),
        "threads": threads,
        "runs": args.runs,
        "steps": args.steps,
        "repeats": args.repeats,
        "batch_size": args.batch_size,
        "negatives": args.negatives,
        "estimator": args.estimator,
        "vectorised_critic_steps_per_s": critic_steps / vectorised_seconds,
        "loop_critic_steps_per_s": critic_steps / loop_seconds,
        "speedup": loop_seconds / vectorised_seconds,
        "vectorised_gflops": flops / vectorised_seconds / 1e9,
        "loop_gflops": flops / loop_seconds / 1e9,
        "matmul_gflops": peak,
        "torch": torch.__version__,
    }
    print(f"device {figures['device']} ({figures['device_name']}), {threads} torch threads")
    print(f"R = {args.runs} runs x {args.steps} steps, batch {args.batch_size}, K = {args.negatives}")
    print(f"vectorised: {figures['vectorised_critic_steps_per_s']:9.1f} critic-steps/s "
          f"{figures['vectorised_gflops']:8.1f} GFLOP/s")  # fmt: skip
    print(f"plain loop: {figures['loop_critic_steps_per_s']:9.1f} critic-steps/s "
          f"{figures['loop_gflops']:8.1f} GFLOP/s")  # fmt: skip
    print(f"ratio vectorised / loop: {figures['speedup']:.2f}x")
    print(f"machine matmul ({size}x{size} float32): {peak:.1f} GFLOP/s; vectorised reaches "
          f"{100 * figures['vectorised_gflops'] / peak:.0f}% of it, the loop "
          f"{100 * figures['loop_gflops'] / peak:.0f}%")  # fmt: skip
    if args.json is not None:
        write_json(args.json, figures)
        print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
