"""The wheel is the whole package, installed under the one name ``mitool``, and works without the
repository.

The wheel is built once from a copy of the source. Its file list is checked against the source tree:
every module of mitool/ (mitool/toy/, mitool/vision/ and mitool/cli/ among them), the PEP 561
marker py.typed, and no top-level name but ``mitool`` (no ``toy``, ``vision`` or ``cli`` to shadow
another project's; no tests/ or bench/). A hand-kept package list once left mitool.estimators, mitool.critics,
mitool.benchmark and mitool.vision.sweep out, so that ``mitool estimate`` ended in ImportError
after ``pip install .`` while every test of the editable install passed.

Then the wheel is installed, not editable, into a fresh virtual environment outside the repository,
and each command of the ``mitool`` console script runs there on tiny inputs, from a folder outside
the repository and without PYTHONPATH: only the installed files can answer.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent

# repository folder -> the package it installs as
SOURCE_FOLDERS = {"mitool": "mitool"}
# the files outside those folders that building the wheel reads
BUILD_FILES = ("pyproject.toml", "README.md")


@pytest.fixture(scope="module")
def source_copy(tmp_path_factory) -> Path:
    """The files the build reads, copied: setuptools leaves build/ and *.egg-info in the folder it
    builds, and the checkout is left as it was."""
    source = tmp_path_factory.mktemp("source")
    for name in BUILD_FILES:
        shutil.copy(ROOT / name, source / name)
    for folder in SOURCE_FOLDERS:
        shutil.copytree(ROOT / folder, source / folder, ignore=shutil.ignore_patterns("__pycache__"))
    return source


@pytest.fixture(scope="module")
def wheel(source_copy, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
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
    completed = subprocess.run([*command, str(source_copy)], capture_output=True, text=True, timeout=300)
    if completed.returncode != 0:
        pytest.fail(f"pip wheel failed: {completed.stderr[-2000:]}")
    (built,) = out.glob("mitool-*.whl")
    return built


@pytest.fixture(scope="module")
def wheel_files(wheel) -> dict[str, bytes]:
    with zipfile.ZipFile(wheel) as archive:
        return {name: archive.read(name) for name in archive.namelist()}


def installed_module_paths(source: Path) -> set[str]:
    """Every .py file under the source folders, as the path it has in the wheel."""
    paths = set()
    for folder, package_path in SOURCE_FOLDERS.items():
        for module in (source / folder).rglob("*.py"):
            paths.add(f"{package_path}/{module.relative_to(source / folder).as_posix()}")
    return paths


def test_wheel_holds_every_module_of_the_source_tree(source_copy, wheel_files):
    """Not a sample of modules: every one the source has, so that a new subpackage (or a folder
    that forgot its __init__.py) cannot be left out unnoticed."""
    expected = installed_module_paths(source_copy)
    # the subpackages a hand-kept list once missed, so that a mapping that found nothing fails too
    assert {
        "mitool/estimators/__init__.py",
        "mitool/critics/__init__.py",
        "mitool/benchmark/__init__.py",
        "mitool/vision/sweep/__init__.py",
        "mitool/cli/main.py",
        "mitool/toy/study.py",
    } <= expected
    missing = sorted(expected - set(wheel_files))
    assert not missing, f"modules of the source missing from the wheel: {missing}"
    extra = sorted(name for name in wheel_files if name.endswith(".py") and name not in expected)
    assert not extra, f"modules in the wheel that the source does not have: {extra}"


def test_wheel_ships_the_type_marker(wheel_files):
    """PEP 561: without mitool/py.typed type checkers ignore the installed package's hints."""
    assert "mitool/py.typed" in wheel_files


def test_wheel_holds_one_top_level_package(wheel_files):
    """Nothing but mitool and its dist-info: no top-level toy, vision or cli, no tests or bench."""
    top_level = {name.split("/")[0] for name in wheel_files}
    dist_info = {name for name in top_level if name.endswith(".dist-info")}
    assert len(dist_info) == 1
    assert top_level - dist_info == {"mitool"}
    assert not any(name.startswith(("mitool/tests/", "mitool/bench/")) for name in wheel_files)
    (top_level_txt,) = [
        data for name, data in wheel_files.items() if name.endswith(".dist-info/top_level.txt")
    ]
    assert top_level_txt.decode().split() == ["mitool"]


def test_wheel_declares_the_console_script(wheel_files):
    (entry_points,) = [
        data for name, data in wheel_files.items() if name.endswith(".dist-info/entry_points.txt")
    ]
    assert "mitool = mitool.cli.main:main" in entry_points.decode()


def test_console_script_points_into_mitool():
    """The same entry point in the project's own (editable) install."""
    import importlib.metadata

    (script,) = [ep for ep in importlib.metadata.entry_points(group="console_scripts") if ep.name == "mitool"]
    assert script.value == "mitool.cli.main:main"
    assert callable(script.load())


@dataclass(frozen=True)
class FreshEnvironment:
    """A virtual environment holding the installed wheel, and how to run commands in it."""

    prefix: Path
    site_packages: Path
    workdir: Path  # outside the repository: the current folder must not be the source
    environ: dict[str, str]

    @property
    def python(self) -> Path:
        return self.prefix / "bin" / "python"

    @property
    def mitool(self) -> Path:
        return self.prefix / "bin" / "mitool"

    def run(self, *arguments: str | os.PathLike, timeout: float = 120) -> subprocess.CompletedProcess:
        completed = subprocess.run(
            [str(argument) for argument in arguments],
            cwd=self.workdir,
            env=self.environ,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        output = f"{completed.stdout[-2000:]}\n{completed.stderr[-3000:]}"
        assert completed.returncode == 0, f"{arguments} exited {completed.returncode}:\n{output}"
        return completed


@pytest.fixture(scope="module")
def fresh_environment(wheel, tmp_path_factory) -> FreshEnvironment:
    """``python -m venv --without-pip``, the wheel installed into it by this environment's pip
    (``--python`` makes pip install for the fresh interpreter: its site-packages, and a ``mitool``
    script in its bin whose shebang is the fresh python), then the dependencies (torch, numpy, ...)
    lent by a .pth line naming this environment's site-packages.

    The .pth line is written after the install, so that pip does not see this environment's
    editable mitool as already installed. A directory added by a .pth line does not have its own
    .pth files read, so the editable install's finder there is never loaded: ``import mitool``
    finds the wheel's files or nothing.
    """
    prefix = tmp_path_factory.mktemp("fresh-env")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(prefix)], check=True, timeout=120)
    install = [sys.executable, "-m", "pip", "--python", str(prefix / "bin" / "python"), "install"]
    completed = subprocess.run(
        [*install, "--no-deps", "--no-index", "-q", str(wheel)], capture_output=True, text=True, timeout=300
    )
    if completed.returncode != 0:
        pytest.fail(f"pip install of the wheel failed: {completed.stderr[-2000:]}")
    site_packages = Path(
        subprocess.run(
            [
                str(prefix / "bin" / "python"),
                "-c",
                "import sysconfig; print(sysconfig.get_paths()['purelib'])",
            ],
            capture_output=True,
            text=True,
            check=True,
            timeout=60,
        ).stdout.strip()
    )
    dependency_dirs = dict.fromkeys([sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]])
    (site_packages / "project-dependencies.pth").write_text("".join(f"{path}\n" for path in dependency_dirs))

    environ = {key: value for key, value in os.environ.items() if key not in ("PYTHONPATH", "VIRTUAL_ENV")}
    workdir = tmp_path_factory.mktemp("workdir")
    environ.update(
        PATH=f"{prefix / 'bin'}{os.pathsep}{environ.get('PATH', '')}",
        PYTHONNOUSERSITE="1",  # nothing from ~/.local either
        OMP_NUM_THREADS="1",
        MITOOL_THREADS="1",  # mitool's own thread count (mitool/runtime.py), else it samples free cores
        MPLBACKEND="Agg",
        MPLCONFIGDIR=str(workdir / ".matplotlib"),
    )
    return FreshEnvironment(prefix=prefix, site_packages=site_packages, workdir=workdir, environ=environ)


def test_fresh_environment_imports_the_installed_wheel(fresh_environment):
    """Guards the checks below: they prove nothing if the source or the editable install answers."""
    env = fresh_environment
    for folder in (env.prefix, env.workdir):
        assert not folder.resolve().is_relative_to(ROOT)
    assert env.mitool.is_file()
    assert env.mitool.read_text().splitlines()[0] == f"#!{env.python}"
    probe = (
        "import importlib.util, json, mitool; "
        "names = ['mitool.estimators', 'mitool.critics', 'mitool.benchmark', 'mitool.vision.sweep']; "
        "print(json.dumps([mitool.__file__] + [importlib.util.find_spec(n).origin for n in names]))"
    )
    origins = [Path(origin) for origin in json.loads(env.run(env.python, "-c", probe).stdout)]
    for origin in origins:
        assert origin.is_relative_to(env.site_packages / "mitool"), origin
        assert not origin.resolve().is_relative_to(ROOT), origin


def test_installed_command_help(fresh_environment):
    env = fresh_environment
    help_text = env.run(env.mitool, "--help").stdout
    for command in ("estimate", "benchmark", "toy", "vision"):
        assert command in help_text
    assert "Estimate I(X; Y)" in env.run(env.mitool, "estimate", "--help").stdout


def test_installed_estimate_of_a_correlated_gaussian(fresh_environment):
    """2000 pairs of a bivariate normal with correlation 0.8: I = -log(1 - 0.8^2) / 2 = 0.511 nats;
    the default estimator must land within 0.1 of it."""
    env = fresh_environment
    correlation, n = 0.8, 2000
    generator = np.random.default_rng(0)
    x = generator.standard_normal((n, 1))
    y = correlation * x + math.sqrt(1 - correlation**2) * generator.standard_normal((n, 1))
    np.save(env.workdir / "x.npy", x)
    np.save(env.workdir / "y.npy", y)
    result = json.loads(env.run(env.mitool, "estimate", "x.npy", "y.npy", "--quiet", "--json").stdout)
    assert result["value"] == pytest.approx(-0.5 * math.log(1 - correlation**2), abs=0.1)


def test_installed_toy_run(fresh_environment):
    """A few training steps of one bound on a 2-D, one-stage staircase: the run writes its files."""
    env = fresh_environment
    out = env.workdir / "toy-run"
    tiny = ["--estimators", "infonce", "--negatives", "7", "--dim", "2", "--mi", "1"]
    tiny += ["--steps-per-stage", "5", "--batch-size", "8", "--hidden", "16", "--embed-dim", "8"]
    env.run(env.mitool, "toy", "run", *tiny, "--out", out, "--quiet")
    for name in ("curves.csv", "summary.csv", "staircase.png", "config.json"):
        assert (out / name).is_file(), name


@pytest.mark.slow
def test_installed_benchmark_lists_the_bmi_suite(fresh_environment):
    """``--list-tasks`` prints ``suite<TAB>task<TAB>...`` lines; the bmi suite's are the 40 tasks of
    the "Beyond Normal" benchmark, the same names as the source's."""
    from mitool.benchmark.suites import task_names

    env = fresh_environment
    lines = env.run(env.mitool, "benchmark", "--list-tasks").stdout.splitlines()
    listed = [line.split("\t")[1] for line in lines if line.startswith("bmi\t")]
    assert len(listed) == 40
    assert listed == task_names("bmi")


def test_installed_vision_pretrain_on_synthetic_images(fresh_environment):
    """Two SimCLR steps of the small CNN on 32 synthetic 16-pixel images: checkpoint and metrics."""
    env = fresh_environment
    out = env.workdir / "pretrain"
    tiny = ["--arch", "small-cnn", "--image-size", "16", "--batch-size", "8", "--workers", "0"]
    env.run(env.mitool, "vision", "pretrain", "--method", "simclr", "--dataset", "synthetic",
            "--synthetic-size", "32", "--max-steps", "2", *tiny, "--out", out, "--quiet")  # fmt: skip
    records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert records[-1]["step"] == 2
    assert (out / "checkpoint.pt").is_file()
