"""The README's Python examples run as written: every ```python block of README.md is executed,
in order, in one namespace, in a temporary folder (so the examples may write files)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parent.parent / "README.md"


def python_blocks(text: str) -> list[str]:
    return re.findall(r"^```python\n(.*?)^```", text, flags=re.M | re.S)


def test_the_readme_has_python_examples():
    assert len(python_blocks(README.read_text())) >= 1


def test_the_readme_python_examples_run(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, object] = {"__name__": "readme"}
    for number, block in enumerate(python_blocks(README.read_text()), start=1):
        try:
            exec(compile(block, f"README.md python block {number}", "exec"), namespace)
        except Exception as error:  # pragma: no cover - the message names the block
            pytest.fail(f"README.md python block {number} failed: {type(error).__name__}: {error}")
