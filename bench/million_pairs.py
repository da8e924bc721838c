"""10^6 pairs of 1 + 1 dimensions: KSG and the default estimate, each timed from the files as a
user runs them (``mitool estimate x.npy y.npy [--estimator ksg]``), with the estimate and truth.

    python bench/million_pairs.py --json bench/results/benchmark/million_pairs.json
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from harness import argument_parser, write_json  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argument_parser(__doc__)
    parser.add_argument("--n", type=int, default=10**6)
    parser.add_argument("--rho", type=float, default=0.6)
    parser.add_argument("--json", default=None)
    args = parser.parse_args(argv)
    rng = np.random.default_rng(0)
    x = rng.normal(size=(args.n, 1))
    y = args.rho * x + np.sqrt(1 - args.rho**2) * rng.normal(size=(args.n, 1))
    truth = -0.5 * np.log(1 - args.rho**2)
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        paths = [os.path.join(folder, name) for name in ("x.npy", "y.npy")]
        for path, data in zip(paths, (x, y), strict=True):
            np.save(path, data)
        for extra in (["--estimator", "ksg"], []):
            command = [
                sys.executable,
                "-m",
                "mitool.cli.main",
                "estimate",
                *paths,
                "--json",
                "--quiet",
                *extra,
            ]
            start = time.perf_counter()
            done = subprocess.run(command, capture_output=True, text=True, check=True)
            seconds = time.perf_counter() - start
            result = json.loads(done.stdout)
            row = {"command": " ".join(["mitool estimate x.npy y.npy", *extra]), "seconds": seconds}
            rows.append({**row, "estimator": result["estimator"], "value": result["value"], "truth": truth})
            print(
                f"{rows[-1]['command']}: {result['value']:.4f} (truth {truth:.4f}) in {seconds:.1f} s",
                flush=True,
            )
    if args.json:
        write_json(args.json, {"n": args.n, "rows": rows, "load_average": os.getloadavg()})
    return 0


if __name__ == "__main__":
    sys.exit(main())
