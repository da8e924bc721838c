"""The wheel installs everything under the one name ``mitool``: no top-level ``toy``, ``vision`` or
``cli`` package that would shadow (or be shadowed by) another project's."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def wheel_files(tmp_path_factory) -> dict[str, bytes]:
    out = tmp_path_factory.mktemp("wheel")
    # built from a copy: setuptools leaves build/ and *.egg-info in the folder it builds
    source = tmp_path_factory.mktemp("source")
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    for folder in ("mitool", "toy", "vision", "cli"):
        shutil.copytree(ROOT / folder, source / folder, ignore=shutil.ignore_patterns("__pycache__"))
    command = [
        sys.executable,
        "-m",
        "pip",
        "wheel",
        "--no-deps",
        "--no-build-isolation",
        "-q",
        "-w",
        str(out),
    ]
    completed = subprocess.run([*command, str(source)], capture_output=True, text=True, timeout=300)
    if completed.returncode != 0:
        pytest.fail(f"pip wheel failed: {completed.stderr[-2000:]}")
    (wheel,) = out.glob("mitool-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        return {name: archive.read(name) for name in archive.namelist()}


def test_wheel_holds_one_top_level_package(wheel_files):
    top_level = {name.split("/")[0] for name in wheel_files if not name.split("/")[0].endswith(".dist-info")}
    assert top_level == {"mitool"}


def test_wheel_holds_the_subpackages_and_the_console_script(wheel_files):
    for module in ("mitool/bounds.py", "mitool/toy/study.py", "mitool/vision/train.py", "mitool/cli/main.py"):
        assert module in wheel_files
    assert not any(name.startswith(("mitool/tests/", "mitool/bench/")) for name in wheel_files)
    (entry_points,) = [
        data for name, data in wheel_files.items() if name.endswith(".dist-info/entry_points.txt")
    ]
    assert "mitool = mitool.cli.main:main" in entry_points.decode()


def test_console_script_points_into_mitool():
    import importlib.metadata

    (script,) = [ep for ep in importlib.metadata.entry_points(group="console_scripts") if ep.name == "mitool"]
    assert script.value == "mitool.cli.main:main"
    assert callable(script.load())
