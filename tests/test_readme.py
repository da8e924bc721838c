"""The README's Python examples run as written: every ```python block of README.md is executed,
in order, in one namespace, in a temporary folder (so the examples may write files)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch

README = Path(__file__).resolve().parent.parent / "README.md"


def python_blocks(text: str) -> list[str]:
    return re.findall(r"^```python\n(.*?)^```", text, flags=re.M | re.S)


def test_the_readme_has_python_examples():
    assert len(python_blocks(README.read_text())) >= 1


def test_the_readme_python_examples_run(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, object] = {"__name__": "readme"}
    threads = torch.get_num_threads()  # the examples size torch's threads; the other tests keep theirs
    try:
        for number, block in enumerate(python_blocks(README.read_text()), start=1):
            try:
                exec(compile(block, f"README.md python block {number}", "exec"), namespace)
            except Exception as error:  # pragma: no cover - the message names the block
                pytest.fail(f"README.md python block {number} failed: {type(error).__name__}: {error}")
    finally:
        torch.set_num_threads(threads)


def test_the_readme_links_only_to_files_in_the_repository():
    """Every relative link of README.md and docs/*.md names a file or folder that exists (the
    README once cited a REFERENCE.md that is not in the repository)."""
    root = README.parent
    for page in [README, *sorted((root / "docs").glob("*.md"))]:
        text = page.read_text()
        targets = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text)
        missing = [t for t in targets if "://" not in t and not (page.parent / t).exists()]
        assert not missing, (page.name, missing)
        assert "REFERENCE.md" not in text, page.name


def test_the_readme_estimate_example_reproduces(tmp_path, monkeypatch):
    """The README's `mitool estimate` example, run as written: the same sentence, numbers within
    0.02 nats (another CPU may round differently and stop training at another step)."""
    from click.testing import CliRunner

    from mitool.cli.main import main

    block = re.search(
        r"^\$ python -c \"(.*?)\"\n\$ mitool estimate (.*?)\n(.*?)\n```", README.read_text(), re.M | re.S
    )
    assert block, "the README's mitool estimate example"
    code, arguments, expected = block.group(1).replace("\\\n", ""), block.group(2).split(), block.group(3)
    monkeypatch.chdir(tmp_path)
    threads = torch.get_num_threads()
    try:
        exec(code, {})
        result = CliRunner().invoke(main, ["estimate", *arguments], catch_exceptions=False)
    finally:
        torch.set_num_threads(threads)
    number = r"-?\d+(?:\.\d+)?"
    got, want = result.stdout.strip(), expected.strip()
    assert re.sub(number, "#", got) == re.sub(number, "#", want), (got, want)
    got_value, want_value = (float(re.search(r"= (-?\d+\.\d+)", text).group(1)) for text in (got, want))
    assert abs(got_value - want_value) < 0.02, (got, want)


def defaults_table() -> list[str]:
    """The README's table of defaults, from mitool.estimators.DEFAULTS."""
    from mitool import estimators

    rows = []
    for case, default in estimators.DEFAULTS.items():
        rows.append(f"| {estimators.CASES[case]} | `{default.name}` | {default.describe()} |")
    within = "the estimator for X and Y within each group of Z, weighted by the groups' shares"
    rows.append(f"| {estimators.CASES['conditional-discrete-z']} | {within} | |")
    return [row.replace("Y | Z", "Y \\| Z") for row in rows]


def estimators_table() -> list[str]:
    """The README's table of estimators, from the registry."""
    from mitool import estimators

    classes = {name: estimators.estimator_class(name) for name in estimators.names()}
    rows = [f"| `{name}` | {kind.summary} | {kind.value_is} |" for name, kind in classes.items()]
    return [row.replace("Y | Z", "Y \\| Z") for row in rows]


def _table_after(marker: str) -> list[str]:
    lines = README.read_text().splitlines()
    start = next(index for index, line in enumerate(lines) if marker in line) + 3
    end = next(index for index in range(start, len(lines)) if not lines[index].startswith("|"))
    return lines[start:end]


def test_the_readme_tables_of_defaults_and_estimators_are_the_codes():
    assert _table_after("<!-- defaults:") == defaults_table()
    assert _table_after("<!-- estimators:") == estimators_table()


def readme_commands() -> list[list[str]]:
    """The `$ mitool ...` commands of the README's code blocks (continued lines joined)."""
    import shlex

    text = README.read_text().replace("\\\n", " ")
    return [
        shlex.split(line[len("$ mitool ") :]) for line in text.splitlines() if line.startswith("$ mitool ")
    ]


ONE_TASK_SUITES = ("bmi", "bmi-v2", "highmi")
"""Suites of many estimates: the README's commands run them on their first task and one seed (the rest
is a bench run)."""


def test_every_readme_command_runs_as_shown(tmp_path, monkeypatch):
    """Each `mitool` command of the README, with its defaults (a sweep without --workers, say), in
    the order shown, in one folder (the estimate example's files made as the README makes them).
    The benchmarks of bmi's suites and of highmi run on their first task and one seed (ONE_TASK_SUITES)."""
    import subprocess
    import sys

    from mitool.benchmark.suites import suite

    monkeypatch.chdir(tmp_path)
    python = (
        re.search(r'^\$ python -c "(.*?)"\n', README.read_text(), re.M | re.S).group(1).replace("\\\n", "")
    )
    subprocess.run([sys.executable, "-c", python], check=True)
    commands = readme_commands()
    assert {command[0] for command in commands} >= {"estimate", "benchmark", "toy", "vision"}
    for command in commands:
        if "--suite" in command and command[command.index("--suite") + 1] in ONE_TASK_SUITES:
            at = command.index("--suite")
            task = suite(command[at + 1])[0].name
            command = [*command[:at], *command[at + 2 :], "--tasks", task, "--seeds", "1"]
        result = subprocess.run([sys.executable, "-m", "mitool.cli.main", *command], capture_output=True,
                                text=True, timeout=600)  # fmt: skip
        assert result.returncode == 0, (command, result.stderr[-2000:])
