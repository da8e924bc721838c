"""The shell of the resumable commands: an interrupt, even one that torch turned into another
error on its way out, ends the command with one line and exit 128 + the signal."""

from __future__ import annotations

import math
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


# ------------------------------------------------------------------------------------------------
# option help: defaults that differ on the default route (no --estimator)


def test_a_setting_the_default_route_sets_otherwise_says_both_defaults() -> None:
    """Driven by the routes mapping, not by the setting: a route's value that differs from its
    owner's default is said with the kind of data; one equal to it, or of an owner that lacks the
    setting, is not; where the owners' defaults differ, the route's owner is named."""
    import dataclasses

    from mitool.cli.options import option_specs
    from mitool.estimators import Default
    from mitool.estimators.base import CASES

    @dataclasses.dataclass
    class First:
        rounds: int = 1
        width: int = 8
        mode: str = "fast"

    @dataclasses.dataclass
    class Second:
        rounds: int = 1
        width: int = 16

    classes = [("first", First), ("second", Second)]
    routes = {
        "continuous": Default("first", {"rounds": 3, "width": 8}),  # width 8: first's own default
        "discrete": Default("second", {"mode": "slow", "width": 4}),  # second has no mode
    }
    plain, routed = option_specs(classes), option_specs(classes, routes=routes)
    assert plain["rounds"].help == "[default: 1]"  # backward compatible without routes
    assert (
        routed["rounds"].help == f"[default: 1; 3 when --estimator is not given, for {CASES['continuous']}]"
    )
    assert (
        routed["width"].help
        == f"[first 8, second 16; second 4 when --estimator is not given, for {CASES['discrete']}]"
    )
    assert routed["mode"].help == plain["mode"].help == "(first only) [default: fast]"
    chosen = option_specs(classes, routes=routes, chooser="--method")
    assert "3 when --method is not given" in chosen["rounds"].help


def test_the_help_says_which_sizes_a_routed_value_holds_for() -> None:
    """A route's settings for some sizes only (Default.small_sample below SMALL_SAMPLE pairs,
    large_sample from LARGE_SAMPLE) are named with those sizes, and the value they replace with
    the others."""
    import dataclasses

    from mitool.cli.options import option_specs
    from mitool.estimators import LARGE_SAMPLE, SMALL_SAMPLE, Default

    @dataclasses.dataclass
    class First:
        rounds: int = 1
        width: int = 8

    @dataclasses.dataclass
    class Second:
        width: int = 16

    routes = {
        "continuous": Default("first", {"rounds": 3}, small_sample={"rounds": 2}, large_sample={"width": 32})
    }
    routed = option_specs([("first", First), ("second", Second)], routes=routes)
    kind = "when --estimator is not given, for X and Y continuous"
    by_size = f"3 {kind}, from {SMALL_SAMPLE} pairs; 2 {kind}, below {SMALL_SAMPLE} pairs"
    assert routed["rounds"].help == f"(first only) [default: 1; {by_size}]"
    assert routed["width"].help == f"[first 8, second 16; first 32 {kind}, from {LARGE_SAMPLE} pairs]"
    assert routes["continuous"].settings_for(SMALL_SAMPLE - 1) == {"rounds": 2}
    assert routes["continuous"].settings_for(LARGE_SAMPLE) == {"rounds": 3, "width": 32}
    assert routes["continuous"].describe() == (
        f"rounds=3; below {SMALL_SAMPLE} pairs: rounds=2; from {LARGE_SAMPLE} pairs: width=32"
    )


def test_the_estimate_help_gives_both_defaults_of_ensemble() -> None:
    """`mitool estimate` with no --estimator uses infonce with ensemble 2 for continuous data
    (estimators.DEFAULTS): --ensemble's help says 1 and 2, and when."""
    from mitool.cli.main import main
    from mitool.estimators import DEFAULTS

    assert DEFAULTS["continuous"].settings["ensemble"] == 2
    result = CliRunner().invoke(main, ["estimate", "--help-all"])
    assert result.exit_code == 0
    text = " ".join(result.output.split())  # click wraps the help
    ensemble = text[text.index("--ensemble") : text.index("--canonical")]
    assert "[default: 1; 2 when --estimator is not given, for X and Y continuous]" in ensemble
    normalise = text[text.index("--normalise") : text.index("--radial")]
    assert "ksg rank when --estimator is not given" in normalise  # the low-dimension route: ksg with rank


# ------------------------------------------------------------------------------------------------
# the estimate's progress line


def test_the_progress_note_says_what_the_value_is() -> None:
    """Critic training reports validation values, then at its end a best one; a k-NN estimator
    reports NaN, then its estimate on all pairs (the result printed next): the notes say which,
    never "latest value", and leave out a last value that is not labelled."""
    from mitool.cli.common import EstimateProgress

    neural = EstimateProgress("infonce", enabled=False)
    assert neural.note(50, 2000, 6.1) == "validation value 6.100 nats after 50 steps"
    assert neural.note(650, 2000, math.nan) == ""
    assert neural.note(2000, 2000, 6.397) == (
        "validation value 6.397 nats; the estimate is scored on the held-out pairs"
    )
    knn = EstimateProgress("ksg", enabled=False)
    assert knn.note(2000, 20000, math.nan) == ""
    assert knn.note(20000, 20000, 1.234) == ""  # the estimate itself: the result line says it


def test_a_neural_estimate_labels_its_progress_values(tmp_path) -> None:
    """A real (short) infonce run through `mitool estimate`: every value on the progress lines is
    a validation value, and the last says the estimate is scored on the held-out pairs."""
    import re

    import numpy as np

    from mitool.cli.main import main

    generator = np.random.default_rng(0)
    x = generator.normal(size=(400, 2))
    y = x + generator.normal(size=(400, 2))  # 0.69 nats: far below the ceiling of 79 held-out negatives
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "y.npy", y)
    args = ["estimate", str(tmp_path / "x.npy"), str(tmp_path / "y.npy"), "--estimator", "infonce",
            "--steps", "60", "--eval-every", "20", "--hidden", "16", "--hidden-layers", "1"]  # fmt: skip
    result = CliRunner().invoke(main, args, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    lines = [line for line in result.stderr.splitlines() if line.startswith("infonce ")]
    assert lines and "latest value" not in result.stderr
    for line in lines:  # a number in nats only after "validation value"
        assert len(re.findall(r"[-\d.]+ nats", line)) == len(
            re.findall(r"validation value [-\d.]+ nats", line)
        )
    assert lines[-1].endswith("the estimate is scored on the held-out pairs")
    assert result.stdout.startswith("I(X; Y) = ")


def test_the_quiet_time_line_of_critic_training_says_its_units_are_a_cap(monkeypatch, capsys) -> None:
    """Critic training reports validation values against its cap of steps, which early stopping
    rarely reaches: its line says so; a k-NN estimate's units are all done, and its line does not."""
    from mitool.cli import common

    monkeypatch.setattr(common, "LONG_RUN_SECONDS", 0.0)
    training = common.EstimateProgress("estimate", enabled=False)
    for done in (50, 100):
        training(done, 20_000, 0.4)
    subsets = common.EstimateProgress("ksg", enabled=False)
    for done in (1, 2):
        subsets(done, 10, float("nan"))
    lines = capsys.readouterr().err.splitlines()
    assert lines[0].startswith("estimate: expected to take up to about ") and lines[0].endswith(
        "; that is at the cap of steps, and early stopping usually ends training sooner)"
    )
    assert lines[1].startswith("ksg: expected to take up to about ") and "cap of steps" not in lines[1]
