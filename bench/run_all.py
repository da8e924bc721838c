"""``make bench``: the CPU parts of every benchmark in one run, within 10 minutes.

Runs each script below as its own process under a time limit, writes its JSON to bench/results/,
and prints a short table of the figures that answer the performance targets (ratios measured
in the same run, never absolute times). A script that is missing, fails or runs out of time is
reported and the others still run; the exit code is 1 when any failed, 0 otherwise.

    python bench/run_all.py [--only bounds,step] [--budget 570] [--quick]
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(1, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from harness import argument_parser  # noqa: E402

from mitool.runtime import set_threads_to_free_cores  # noqa: E402

BENCH = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(BENCH)
RESULTS = os.path.join(BENCH, "results")
"""The committed results; ``make bench`` writes to :data:`OUTPUT` instead and says how to update them."""
OUTPUT = os.path.join(ROOT, "runs", "bench")

# name, script, arguments (the CPU sizes), seconds allowed, arguments for --quick
PARTS: tuple[tuple[str, str, list[str], int, list[str]], ...] = (
    (
        "bounds",
        "bounds.py",
        ["--device", "cpu", "--rounds", "5"],
        240,
        ["--shapes", "64x2048x32", "--rounds", "2"],
    ),
    (
        "step",
        "step.py",
        [
            "--device",
            "cpu",
            "--arch",
            "small-cnn",
            "--image-size",
            "32",
            "--batch-size",
            "32",
            "--queue",
            "4096",
            "--rounds",
            "15",
        ],
        120,
        # batch 24: simo draws 16 negatives from the other keys, split-BN needs 8 groups
        ["--rounds", "1", "--warmup", "1", "--batch-size", "24", "--image-size", "16", "--queue", "64"],
    ),
    ("data", "data.py", ["--device", "cpu"], 120, []),
    ("toy_speed", "toy_speed.py", ["--device", "cpu"], 100, []),
)


def run_part(script: str, arguments: list[str], json_path: str, seconds: float) -> tuple[str, float, str]:
    """Run one bench script; returns (status, seconds taken, last lines of its output)."""
    path = os.path.join(BENCH, script)
    if not os.path.exists(path):
        return "missing", 0.0, f"{os.path.relpath(path, ROOT)} does not exist yet"
    with open(path) as source:
        takes_quiet = '"--quiet"' in source.read()
    command = [sys.executable, path, *arguments, "--json", json_path, *(["--quiet"] if takes_quiet else [])]
    start = time.perf_counter()
    try:
        completed = subprocess.run(
            command, cwd=ROOT, capture_output=True, text=True, timeout=max(1.0, seconds), check=False
        )
    except subprocess.TimeoutExpired as expired:
        output = (
            (expired.stdout or b"").decode() if isinstance(expired.stdout, bytes) else (expired.stdout or "")
        )
        return f"timed out after {seconds:.0f} s", time.perf_counter() - start, output[-2000:]
    taken = time.perf_counter() - start
    output = completed.stdout + completed.stderr
    if completed.returncode != 0:
        return f"failed (exit {completed.returncode})", taken, output[-2000:]
    if not os.path.exists(json_path):
        return "ran but wrote no JSON", taken, output[-2000:]
    return "ok", taken, output


def summary_lines(name: str, data: dict) -> list[str]:
    """The figures that answer the targets, from one part's JSON."""
    lines = []
    if name == "bounds":
        for record in data.get("records", []):
            shape = f"{record['batch']}x{record['negatives']}x{record['dim']}"
            rows = record["candidates"]
            for candidate in ("floor", "plain-infonce", "fused-infonce", "fused-recompute-infonce"):
                row = rows.get(candidate)
                if row is None:
                    continue
                memory = row.get("memory_ratio")
                memory_text = f", memory {memory:.2f} of (a)" if memory is not None else ""
                lines.append(f"{shape} {candidate}: time {row['ratio']:.2f} of (a){memory_text}")
        verdicts = data.get("targets", [])
        met = sum(1 for verdict in verdicts if verdict["time_met"] and verdict["memory_met"])
        lines.append(f"targets (fused infonce/eqco/dcl, time and memory): {met} of {len(verdicts)} met")
        for verdict in verdicts:
            if not (verdict["time_met"] and verdict["memory_met"]):
                lines.append(
                    f"target not met: {'x'.join(map(str, verdict['shape']))} {verdict['candidate']}"
                    f" time {verdict['time_ratio']:.2f} memory {verdict['memory_ratio']}"
                )
    elif name == "step":
        for method, row in data.get("methods", {}).items():
            lines.append(
                f"{method}: {row['method_images_per_second']:.0f} images/s, bare backbone "
                f"{row['bare_images_per_second']:.0f}, overhead {row['overhead_percent']:.0f}%"
            )
    else:
        lines.extend(_generic_figures(data))
    return lines


def _generic_figures(data: object, prefix: str = "", depth: int = 0) -> list[str]:
    """Ratios, speed-ups, throughputs and target verdicts found anywhere in a JSON document."""
    found: list[str] = []
    if depth > 4:
        return found
    if isinstance(data, dict):
        for key, value in data.items():
            label = f"{prefix}{key}"
            if isinstance(value, (dict, list)):
                found.extend(_generic_figures(value, label + ".", depth + 1))
            elif isinstance(value, (int, float, bool)) and any(
                word in key.lower() for word in ("ratio", "speedup", "per_second", "met", "target")
            ):
                found.append(f"{label}: {value:.3g}" if isinstance(value, float) else f"{label}: {value}")
    elif isinstance(data, list):
        for index, value in enumerate(data[:8]):
            found.extend(_generic_figures(value, f"{prefix}{index}.", depth + 1))
    return found[:12]


def main(argv: list[str] | None = None) -> int:
    parser = argument_parser(__doc__)
    parser.add_argument(
        "--only", default=None, help="comma-separated parts: " + ", ".join(p[0] for p in PARTS)
    )
    parser.add_argument("--budget", type=float, default=570.0, help="seconds for everything (default 570)")
    parser.add_argument("--quick", action="store_true", help="tiny sizes (a check that the scripts run)")
    parser.add_argument(
        "--results", default=OUTPUT,
        help=f"folder of the JSON files (default {os.path.relpath(OUTPUT, ROOT)}; "
        f"{os.path.relpath(RESULTS, ROOT)} holds the committed ones)",
    )  # fmt: skip
    args = parser.parse_args(argv)
    names = [part[0] for part in PARTS]
    chosen = names if args.only is None else [name.strip() for name in args.only.split(",") if name.strip()]
    unknown = [name for name in chosen if name not in names]
    if unknown or not chosen:
        print(f"Error: --only takes names from {', '.join(names)}, got {args.only!r}", file=sys.stderr)
        return 2
    if args.budget <= 0:
        print(f"Error: --budget must be > 0 seconds, got {args.budget}", file=sys.stderr)
        return 2
    threads = set_threads_to_free_cores()
    os.environ.setdefault("MITOOL_THREADS", str(threads))
    results = os.path.join(args.results, "quick") if args.quick else args.results
    os.makedirs(results, exist_ok=True)
    start = time.perf_counter()
    outcomes = []
    failures = 0
    for name, script, arguments, allowed, quick_arguments in PARTS:
        if name not in chosen:
            continue
        remaining = args.budget - (time.perf_counter() - start)
        seconds = min(allowed, remaining)
        json_path = os.path.join(results, f"{name}_cpu.json")
        extra = quick_arguments if args.quick else []
        print(f"[{time.perf_counter() - start:5.0f} s] {name}: {script} (limit {seconds:.0f} s)", flush=True)
        if remaining <= 1:
            status, taken, output = "skipped: out of time", 0.0, ""
        else:
            status, taken, output = run_part(script, [*arguments, *extra], json_path, seconds)
        if status not in ("ok", "missing"):
            failures += 1
            print(output.rstrip()[-1500:], flush=True)
        lines = []
        if status == "ok":
            with open(json_path) as handle:
                lines = summary_lines(name, json.load(handle))
        outcomes.append((name, status, taken, lines))

    where = os.path.relpath(results, ROOT)
    print(f"\nmake bench: {time.perf_counter() - start:.0f} s on {threads} thread(s); JSON in {where}/")
    if os.path.abspath(results) != RESULTS:
        print(f"(the committed figures are in {os.path.relpath(RESULTS, ROOT)}/; to update them: "
              f"python bench/run_all.py --results {os.path.relpath(RESULTS, ROOT)})")  # fmt: skip
    for name, status, taken, lines in outcomes:
        print(f"{name:<10} {status:<24} {taken:6.0f} s")
        for line in lines:
            print(f"    {line}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
