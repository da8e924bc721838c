"""The routes that train no network and draw no figure run where torch and matplotlib cannot be
imported: ``mitool estimate``, ``mitool test`` (also ``--per-feature``) and ``mitool matrix`` on
2000 one-dimensional pairs, and :func:`mitool.estimate` with the k-NN, Gaussian, plug-in and Ross
estimators, :func:`mitool.independence_test` and :func:`mitool.feature_scores`.

Each runs in a fresh interpreter whose first finder on ``sys.meta_path`` refuses torch, torchvision,
zuko and matplotlib as a missing package is refused (ModuleNotFoundError), and records every
attempt: a route passes only with no attempt at all (a ``try: import torch`` that fell back would
otherwise pass unseen) and the numbers of a run in this process, where torch is imported. A route
that needs torch (a network for 5 + 5 continuous dimensions) fails in one line naming what to
install, not a traceback; ``matrix`` writes its CSV and says why no figure came. The thread count
that a command sets waits for torch's import (:mod:`mitool.runtime`).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from click.testing import CliRunner

from mitool import runtime
from mitool.cli.main import main

BLOCKED = ("torch", "torchvision", "zuko", "matplotlib")

BLOCKER = f"""
import atexit, sys

class _Missing:
    tried = []

    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in {BLOCKED!r}:
            self.tried.append(name)
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
        return None

sys.meta_path.insert(0, _Missing())
atexit.register(lambda: print("TRIED " + ",".join(_Missing.tried), file=sys.stderr))
"""
"""Put first in the child: torch and the rest missing, and the names tried reported at exit."""

COMMAND = BLOCKER + "sys.argv[0] = 'mitool'\nfrom mitool.cli.main import main\nmain()\n"


def without_torch(code: str, *arguments: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """``code`` run in a child where torch and matplotlib are missing, one thread."""
    environment = {**os.environ, "MITOOL_THREADS": "1"}
    return subprocess.run(
        [sys.executable, "-c", code, *arguments], capture_output=True, text=True, cwd=cwd, env=environment,
        timeout=300,
    )  # fmt: skip


def tried(run: subprocess.CompletedProcess[str]) -> list[str]:
    """The blocked names the child tried to import."""
    line = [line for line in run.stderr.splitlines() if line.startswith("TRIED ")][-1]
    return [name for name in line[len("TRIED ") :].split(",") if name]


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("no_torch")
    rng = np.random.default_rng(54)
    x = rng.normal(size=2000)
    np.save(folder / "x.npy", x)
    np.save(folder / "y.npy", x + rng.normal(size=2000))
    table = rng.normal(size=(2000, 2))
    np.save(folder / "x2.npy", table)
    np.save(folder / "y2.npy", table[:, 0] + rng.normal(size=2000))
    wide = rng.normal(size=(400, 5))
    np.save(folder / "x5.npy", wide)
    np.save(folder / "y5.npy", wide + rng.normal(size=(400, 5)))
    return folder


@pytest.fixture
def here(monkeypatch: pytest.MonkeyPatch):
    """A command run in this process, one thread, torch's and mitool's thread counts restored."""
    monkeypatch.setenv("MITOOL_THREADS", "1")
    threads, chosen = torch.get_num_threads(), runtime._chosen

    def run(*arguments: str) -> str:
        result = CliRunner().invoke(main, list(arguments), catch_exceptions=False)
        assert result.exit_code == 0, result.output
        return result.stdout

    yield run
    torch.set_num_threads(threads)
    runtime._chosen = chosen


COMMANDS = {
    "estimate": ["estimate", "x.npy", "y.npy", "--quiet"],
    "test": ["test", "x.npy", "y.npy", "--permutations", "199"],
    "test --per-feature": ["test", "--per-feature", "x2.npy", "y2.npy", "--permutations", "99"],
}


@pytest.mark.parametrize("name", list(COMMANDS))
def test_a_command_without_torch_gives_the_numbers_it_gives_with_it(name: str, data: Path, here) -> None:
    arguments = COMMANDS[name]
    run = without_torch(COMMAND, *arguments, cwd=data)
    assert run.returncode == 0, run.stderr
    assert tried(run) == []
    absolute = [str(data / part) if part.endswith(".npy") else part for part in arguments]
    assert run.stdout == here(*absolute)
    assert "nats" in run.stdout


def test_matrix_without_matplotlib_writes_its_numbers_and_says_why_no_figure(data: Path, here) -> None:
    arguments = ["matrix", "x2.npy", "--permutations", "99", "--quiet", "--out"]
    run = without_torch(COMMAND, *arguments, "blocked", cwd=data)
    assert run.returncode == 0, run.stderr
    assert tried(run) == ["matplotlib"]  # the figure's import, refused: the one attempt
    assert "not matrix.png: the figure needs matplotlib; pip install matplotlib" in run.stdout
    assert not (data / "blocked" / "matrix.png").exists()
    output = here("matrix", str(data / "x2.npy"), *arguments[2:], str(data / "here"))
    assert (data / "here" / "matrix.png").exists()
    assert (data / "blocked" / "matrix.csv").read_text() == (data / "here" / "matrix.csv").read_text()
    assert run.stdout.splitlines()[:3] == output.splitlines()[:3]


LIBRARY = """
import json
import numpy as np
import mitool

rng = np.random.default_rng(7)
x = rng.normal(size=2000)
y = x + rng.normal(size=2000)
pair = rng.normal(size=(2000, 2))
target = pair[:, 0] + rng.normal(size=2000)
labels = (x > 0).astype(int)
kinds = rng.integers(0, 3, 2000)
other = (kinds + rng.integers(0, 2, 2000)) % 3
runs = {
    "1+1": mitool.estimate(x, y),
    "2+1": mitool.estimate(pair, target),
    "labels": mitool.estimate(y, labels),
    "discrete": mitool.estimate(kinds, other),
    "gaussian": mitool.estimate(x, y, estimator="gaussian"),
    "ksg": mitool.estimate(pair, target, estimator="ksg"),
}
values = {name: [run.estimator, run.value, run.ci_low, run.ci_high] for name, run in runs.items()}
test = mitool.independence_test(x, y, permutations=99)
values["test"] = [test.estimator, test.statistic, test.pvalue]
values["feature_scores"] = mitool.feature_scores(np.c_[pair, x], target).tolist()
print(json.dumps(values))
"""


def test_the_library_without_torch_gives_the_numbers_it_gives_with_it(tmp_path: Path) -> None:
    run = without_torch(BLOCKER + LIBRARY, cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    assert tried(run) == []
    values = json.loads(run.stdout)
    assert [values[name][0] for name in ("1+1", "2+1", "labels", "discrete", "gaussian", "ksg", "test")] == [
        "ksg", "ksg", "ross", "plugin", "gaussian", "ksg", "ksg",
    ]  # fmt: skip
    here: dict = {}
    exec(LIBRARY.replace("print(json.dumps(values))", ""), here)
    assert values == json.loads(json.dumps(here["values"]))


def test_a_route_that_needs_torch_names_it_in_one_line(data: Path) -> None:
    run = without_torch(COMMAND, "estimate", "x5.npy", "y5.npy", "--quiet", cwd=data)
    assert run.returncode == 1
    assert "Traceback" not in run.stderr
    message = [line for line in run.stderr.splitlines() if not line.startswith("TRIED ")]
    assert message == [
        "Error: this needs torch, which cannot be imported (No module named 'torch'); "
        "install it: pip install torch"
    ]
    assert tried(run)[0] == "torch"


def test_the_thread_count_waits_for_torch(tmp_path: Path) -> None:
    code = (
        "import os, sys\n"
        "from mitool.runtime import set_threads_to_free_cores\n"
        "os.environ['MITOOL_THREADS'] = '3'\n"
        "assert set_threads_to_free_cores() == 3 and 'torch' not in sys.modules\n"
        "import torch\n"
        "print(torch.get_num_threads())\n"
    )
    run = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, timeout=300
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout.split() == ["3"]
