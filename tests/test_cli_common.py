"""The shell of the resumable commands: an interrupt, even one that torch turned into another
error on its way out, ends the command with one line and exit 128 + the signal."""

from __future__ import annotations

import signal

import click
import pytest
from click.testing import CliRunner

from mitool.cli.common import Terminated, resumable_run


def _command(raise_what: BaseException) -> click.Command:
    @click.command()
    def command() -> None:
        with resumable_run("job", lambda: "cells a, b saved; rerun to resume", []):
            raise raise_what

    return command


def _raised_while_handling(stop: KeyboardInterrupt) -> RuntimeError:
    try:
        try:
            raise stop
        except KeyboardInterrupt:
            raise RuntimeError("INTERNAL ASSERT FAILED (as torch.func's vmap on its way out)")  # noqa: B904
    except RuntimeError as error:
        return error


@pytest.mark.parametrize(
    ("stop", "number"), [(KeyboardInterrupt(), signal.SIGINT), (Terminated(), signal.SIGTERM)]
)
def test_an_interrupt_and_one_turned_into_another_error_stop_alike(stop, number) -> None:
    for raised in (stop, _raised_while_handling(stop)):
        result = CliRunner().invoke(_command(raised))
        assert result.exit_code == 128 + number, result.output
        assert result.stderr == f"job stopped by {number.name}: cells a, b saved; rerun to resume\n"


def test_other_errors_pass_through() -> None:
    result = CliRunner().invoke(_command(RuntimeError("a real failure")))
    assert result.exit_code == 1 and isinstance(result.exception, RuntimeError)
