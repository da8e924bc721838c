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


NUMBER = r"-?\d+(?:\.\d+)?"


def stated_outputs(text: str) -> list[list[str]]:
    """For each ```python block, the outputs the README says it prints: the backquoted spans of the
    paragraph after the block when that paragraph begins with "prints", each cut at its first "…"
    (what follows is elided), spans without a digit left out."""
    after = re.split(r"^```python\n.*?^```\n", text, flags=re.M | re.S)[1:]
    stated = []
    for prose in after:
        paragraph = prose.strip().split("\n\n")[0]
        spans = re.findall(r"`([^`]+)`", paragraph) if paragraph.startswith("prints") else []
        spans = [" ".join(span.split("…")[0].split("...")[0].split()) for span in spans]
        stated.append([span for span in spans if re.search(r"\d", span)])
    return stated


def check_stated(span: str, printed: str) -> None:
    """``span`` (numbers and all) appears in ``printed``, each number within max(0.02, 1%) of the
    printed one: another CPU may round differently and stop training at another step."""
    pieces = re.split(f"({NUMBER})", span)
    pattern = r"\s+".join(
        "".join(f"({NUMBER})" if index % 2 else re.escape(piece) for index, piece in enumerate(pieces)).split(
            r"\ "
        )
    )
    match = re.search(pattern, " ".join(printed.split()))
    assert match, f"the README says it prints {span!r}; it printed {printed!r}"
    for want, got in zip(pieces[1::2], match.groups(), strict=True):
        assert abs(float(got) - float(want)) <= max(0.02, 0.01 * abs(float(want))), (span, match.group(0))


def test_check_stated_tells_a_stale_number_from_rounding():
    check_stated("gave 0.703 [0.629, 0.777]", "it gave 0.71 [0.630,  0.777] in all")
    with pytest.raises(AssertionError, match="0.703"):
        check_stated("gave 0.703 [0.629, 0.777]", "it gave 0.740 [0.629, 0.777]")
    with pytest.raises(AssertionError, match="the README says it prints"):
        check_stated("labels: ross 0.386", "labels: ksg 0.386")


@pytest.mark.slow
def test_the_readme_python_examples_run_and_print_what_it_says(tmp_path, monkeypatch):
    """Every block runs, and prints what the paragraph after it says (:func:`stated_outputs`)."""
    import contextlib
    import io

    monkeypatch.chdir(tmp_path)
    namespace: dict[str, object] = {"__name__": "readme"}
    threads = torch.get_num_threads()  # the examples size torch's threads; the other tests keep theirs
    text = README.read_text()
    blocks, stated = python_blocks(text), stated_outputs(text)
    assert len(blocks) == len(stated) and sum(map(len, stated)) >= 8
    try:
        for number, (block, spans) in enumerate(zip(blocks, stated, strict=True), start=1):
            printed = io.StringIO()
            try:
                with contextlib.redirect_stdout(printed):
                    exec(compile(block, f"README.md python block {number}", "exec"), namespace)
            except Exception as error:  # pragma: no cover - the message names the block
                pytest.fail(f"README.md python block {number} failed: {type(error).__name__}: {error}")
            for span in spans:
                check_stated(span, printed.getvalue())
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


@pytest.mark.slow
def test_the_readme_estimate_example_reproduces(tmp_path, monkeypatch):
    """The README's `mitool estimate` examples (the line, and the paragraph of --explain), run as
    written: the same words, numbers within 0.02 nats (another CPU may round differently and stop
    training at another step)."""
    from click.testing import CliRunner

    from mitool.cli.main import main

    block = re.search(
        r"^\$ python -c \"(.*?)\"\n(\$ mitool estimate .*?)\n```", README.read_text(), re.M | re.S
    )
    assert block, "the README's mitool estimate example"
    code = block.group(1).replace("\\\n", "")
    commands = re.findall(r"^\$ mitool estimate (.*?)\n(.*?)(?=\n\$ |\Z)", block.group(2), re.M | re.S)
    assert len(commands) == 2 and "--explain" in commands[1][0]
    monkeypatch.chdir(tmp_path)
    threads = torch.get_num_threads()
    number = r"-?\d+(?:\.\d+)?"
    try:
        exec(code, {})
        for arguments, expected in commands:
            result = CliRunner().invoke(main, ["estimate", *arguments.split()], catch_exceptions=False)
            got, want = result.stdout.strip(), expected.strip()
            assert re.sub(number, "#", got) == re.sub(number, "#", want), (got, want)
            got_value, want_value = (
                float(re.search(r"= (-?\d+\.\d+)", text).group(1)) for text in (got, want)
            )
            assert abs(got_value - want_value) < 0.02, (got, want)
    finally:
        torch.set_num_threads(threads)


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


@pytest.mark.slow
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
