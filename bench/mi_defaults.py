"""How mitool estimate's defaults were chosen: variants of the neural estimator on the benchmark
suite, measured with the benchmark runner (resumable: a rerun skips finished cells).

Each variant is a name and the options of :func:`mitool.estimate.estimate` it changes from the
library's defaults (``steps``, ``hidden``, ``normalise``, the estimator or critic, ...). Results go
to OUT/results.csv and OUT/summary.md as for ``mitool benchmark``::

    python bench/mi_defaults.py --variants old,rank --seeds 1 --out runs/mi-defaults
    python bench/mi_defaults.py --list
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from mitool import suite
from mitool.benchmark import figures as benchmark_figures
from mitool.runtime import set_threads_to_free_cores
from mitool.toy.benchmark import EstimatorSpec, Plan, parse_estimator, run_benchmark

OLD = {"normalise": "standard", "hidden": 256, "batch_size": 128}
"""The defaults before the benchmark (infonce, separable critic 256-256-32, batch 128, z-scores)."""

_RANK = {"estimator": "infonce", "critic": "separable", **OLD, "normalise": "rank"}

VARIANTS: dict[str, dict[str, object]] = {
    "old": {"estimator": "infonce", "critic": "separable", **OLD},
    "rank": _RANK,
    "rank-concat64": {**_RANK, "critic": "concat", "hidden": 64},
    "rank-h128": {**_RANK, "hidden": 128},
    "rank-b256": {**_RANK, "batch_size": 256},
    "rank-lr1e-3": {**_RANK, "lr": 1e-3},
    "rank-patience20": {**_RANK, "patience": 20},
    "rank-smile": {**_RANK, "estimator": "smile"},
    "rank-eval-dcl": {**_RANK, "evaluator": "dcl"},
    "rank-ens3": {**_RANK, "ensemble": 3},
    "rank-ens3-eval-dcl": {**_RANK, "ensemble": 3, "evaluator": "dcl"},
    "rank-steps4000": {**_RANK, "steps": 4000},
    "rank-h64": {**_RANK, "hidden": 64},
    "rank-embed64": {**_RANK, "embed_dim": 64},
    "rank-b64": {**_RANK, "batch_size": 64},
    "rank-layers1": {**_RANK, "hidden_layers": 1},
    "rank-cca": {**_RANK, "canonical": True},
    "rank-cca-ens3": {**_RANK, "canonical": True, "ensemble": 3},
}
"""Variant name -> the options of mitool.estimate.estimate."""


def spec(name: str) -> EstimatorSpec:
    """A variant by name, or any estimator name of ``mitool benchmark`` (default, ksg, ...)."""
    if name not in VARIANTS:
        return parse_estimator(name)
    options = dict(VARIANTS[name])
    return EstimatorSpec(name, options.pop("estimator"), options.pop("critic"), options)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--variants", default="old,rank", help="comma-separated variants or estimator names")
    parser.add_argument("--tasks", default=None, help="comma-separated tasks (default: the main suite)")
    parser.add_argument("--seeds", type=int, default=1)
    parser.add_argument("--size", type=int, default=5000)
    parser.add_argument("--out", default="runs/mi-defaults")
    parser.add_argument("--list", action="store_true", help="list the variants and stop")
    args = parser.parse_args(argv)
    if args.list:
        for name, options in VARIANTS.items():
            print(f"{name}: {options}")
        return 0
    set_threads_to_free_cores()
    tasks = [suite.get_task(t) for t in args.tasks.split(",")] if args.tasks else suite.suite("main")
    plan = Plan(
        tuple(spec(v) for v in args.variants.split(",")), tuple(tasks), (args.size,), tuple(range(args.seeds))
    )
    start = time.perf_counter()

    def factory(total: int):
        def progress(done: int, note: str) -> None:
            print(f"[{time.perf_counter() - start:7.1f}s] {done}/{total} {note}", file=sys.stderr, flush=True)

        return progress

    run_benchmark(
        Path(args.out), plan, progress_factory=factory, log=lambda line: print(line, file=sys.stderr)
    )
    benchmark_figures.redraw(Path(args.out))
    print((Path(args.out) / "summary.md").read_text())
    print(f"wall time {time.perf_counter() - start:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
