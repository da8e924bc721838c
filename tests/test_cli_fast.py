"""The command line answers its help and bad options without loading torch, torchvision or
matplotlib (about 2 s of imports): each command's module, every ``--help`` and a bad option are
run in a fresh interpreter that then reports which of them it loaded."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from mitool.cli.main import COMMANDS

HEAVY = ("torch._C", "torchvision", "matplotlib")

_PROBE = """
import json, sys
from click.testing import CliRunner
from mitool.cli.main import main
result = CliRunner().invoke(main, sys.argv[1:])
print(json.dumps({"exit": result.exit_code, "output": result.output,
                  "loaded": [name for name in %r if name in sys.modules]}))
"""


def probe(*arguments: str) -> dict:
    found = subprocess.run(
        [sys.executable, "-c", _PROBE % (HEAVY,), *arguments], capture_output=True, text=True, check=True
    )
    return json.loads(found.stdout.strip().splitlines()[-1])


def test_importing_every_command_loads_no_heavy_module() -> None:
    modules = ", ".join(module for module, _, _ in COMMANDS.values())
    code = f"import sys, {modules}; print([m for m in {HEAVY!r} if m in sys.modules])"
    found = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert found.stdout.strip() == "[]", found.stdout


@pytest.mark.parametrize(
    "command",
    [[], ["estimate"], ["test"], ["benchmark"], ["toy"], ["toy", "run"], ["toy", "sweep"], ["toy", "demo"],
     ["toy", "plot"], ["vision"], ["vision", "pretrain"], ["vision", "sweep"], ["vision", "knn"],
     ["vision", "linear"], ["vision", "plot"]],
)  # fmt: skip
def test_every_help_loads_no_heavy_module(command: list[str]) -> None:
    report = probe(*command, "--help")
    assert report["exit"] == 0 and "Usage:" in report["output"], report
    assert report["loaded"] == [], report


def test_a_bad_option_is_answered_without_loading_torch() -> None:
    report = probe("vision", "pretrain", "--out", "x", "--no-such-option")
    assert report["exit"] == 2 and "No such option '--no-such-option'" in report["output"], report
    assert report["loaded"] == [], report
    report = probe("estimate", "x.npy", "y.npy", "--estimator", "magic")
    assert report["exit"] == 2 and report["loaded"] == [], report
