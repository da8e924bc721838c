"""Several threads of one process estimate at once, and each gets the value it gets alone.

Each test runs a fresh interpreter, torch not yet imported, so that the threads reach the lazy
import of torch together (:mod:`mitool._infra.lazy`). The probe first makes four calls in four threads
released at once by a barrier, then the same four calls one after the other, and prints both; they
must agree to the bit. Each call draws its networks' initial weights and its batches from
generators of its own (:mod:`mitool._infra.seeding`), so the sequential calls also leave torch's
process-wide generator as they found it. The networks are small and briefly trained to keep the
tests short: what is compared is only that threads change nothing.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

_PROBE = """
import json, sys, threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np

import mitool

assert "torch" not in sys.modules
rng = np.random.default_rng(57)
data = []
for _ in range(4):
    x = rng.normal(size=(600, 4))
    data.append((x, x + rng.normal(size=(600, 4))))
FLOW = {"estimator": "flow", "flow": "maf", "steps": 40, "hidden": 16, "hidden_layers": 1, "eval_every": 20}
SETTINGS = [
    FLOW,
    {"steps": 60, "hidden": 16, "hidden_layers": 1, "ensemble": 1, "eval_every": 20},
    {"estimator": "classifier", "steps": 60, "hidden": 16, "hidden_layers": 1, "eval_every": 20},
    {"steps": 60, "hidden": 16, "hidden_layers": 1, "eval_every": 20},
]


def estimate(i):
    x, y = data[i]
    if SETTINGS[i].get("estimator") == "classifier":
        y = np.digitize(y[:, 0], [-1.0, 0.0, 1.0])
    result = mitool.estimate(x, y, seed=i, **SETTINGS[i])
    return [result.estimator, float(result), result.ci_low, result.ci_high]


def test(i):
    result = mitool.independence_test(*data[i], seed=i, permutations=2, **FLOW)
    return [result.estimator, result.statistic, result.pvalue, [float(v) for v in result.null_values]]


call = {"estimate": estimate, "test": test}[sys.argv[1]]
start = threading.Barrier(4)


def together(i):
    start.wait()
    return call(i)


with ThreadPoolExecutor(4) as pool:
    threaded = list(pool.map(together, range(4)))
import torch

state = torch.get_rng_state()
alone = [call(i) for i in range(4)]
untouched = torch.equal(state, torch.get_rng_state())
print(json.dumps({"threaded": threaded, "alone": alone, "untouched": untouched}))
"""


def _threaded_and_alone(call: str) -> dict:
    environment = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    found = subprocess.run(
        [sys.executable, "-c", _PROBE, call], capture_output=True, text=True, env=environment, timeout=600
    )
    assert found.returncode == 0, found.stderr[-3000:]
    return json.loads(found.stdout.strip().splitlines()[-1])


@pytest.mark.slow
def test_estimates_from_four_threads_equal_those_made_alone() -> None:
    report = _threaded_and_alone("estimate")
    assert [row[0] for row in report["alone"]] == ["flow", "infonce", "classifier", "infonce"], report
    assert report["threaded"] == report["alone"]
    assert report["untouched"], "an estimate drew from or seeded torch's process-wide generator"


@pytest.mark.slow
def test_independence_tests_from_four_threads_equal_those_made_alone() -> None:
    report = _threaded_and_alone("test")
    assert {row[0] for row in report["alone"]} == {"flow"}, report
    assert report["threaded"] == report["alone"]
    assert report["untouched"], "a test drew from or seeded torch's process-wide generator"


_LAZY_PROBE = """
import sys, threading

from mitool._infra.lazy import lazy_import

torch = lazy_import("torch")
assert "torch._C" not in sys.modules
start = threading.Barrier(8)
found = [None] * 8


def read(i):
    start.wait()
    try:
        found[i] = torch.as_tensor([float(i)]).item() == i and torch.nn.functional.relu is not None
    except Exception as error:
        found[i] = repr(error)


threads = [threading.Thread(target=read, args=(i,)) for i in range(8)]
for thread in threads:
    thread.start()
for thread in threads:
    thread.join()
print(found, torch.as_tensor is sys.modules["torch"].as_tensor)
"""


def test_threads_that_reach_a_lazy_import_together_all_see_the_whole_module() -> None:
    environment = {**os.environ, "OMP_NUM_THREADS": "1"}
    found = subprocess.run(
        [sys.executable, "-c", _LAZY_PROBE], capture_output=True, text=True, env=environment, timeout=300
    )
    assert found.returncode == 0, found.stderr[-3000:]
    assert found.stdout.strip() == f"{[True] * 8} True", found.stdout
