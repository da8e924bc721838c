"""Every estimator of the registry on the inputs users bring (as scikit-learn's check_estimator does
for its estimators): float32, float64, integers, lists, tensors, a few and many tied rows, a constant
column, 1-D arrays, the fewest pairs it takes. Each gives a finite value or refuses in one line
naming the parameter; never a traceback from inside, never NaN."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import pytest
import torch

import mitool
from mitool import estimators
from mitool.checks import ParameterError

FAST = {"steps": 20, "hidden": 8, "batch_size": 32, "eval_every": 10, "ensemble": 1, "subsets": 3}
"""Settings that make each estimator quick here (those it has)."""

N = 300


def fast_settings(name: str) -> dict[str, object]:
    known = estimators.estimator_class(name).Settings.names()
    settings = {key: value for key, value in FAST.items() if key in known}
    if name in ("dcl", "dclw"):  # their loss needs bounded scores (they refuse the separable critic)
        settings["critic"] = "cosine"
    return settings


def base_data(name: str, n: int = N, seed: int = 0) -> tuple[np.ndarray, ...]:
    """Data of the kind the estimator takes: (x, y) or (x, y, z), float64, (n, 1) or (n, 2)."""
    rng = np.random.default_rng(seed)
    cases = estimators.estimator_class(name).cases
    x = rng.normal(size=(n, 2))
    if "conditional" in cases and not cases & {"continuous", "low-dimension"}:
        z = rng.normal(size=(n, 1))
        return x + z, x[:, :1] + z + rng.normal(size=(n, 1)), z
    if cases & {"continuous", "low-dimension"}:
        return x, x[:, :1] + rng.normal(size=(n, 1))
    classes = rng.integers(0, 3, size=(n, 1)).astype(float)
    if "discrete-y" in cases:
        return x + classes, classes
    if "discrete" in cases:
        return (classes + rng.integers(0, 2, size=(n, 1))), classes
    inflated = np.where(rng.random((n, 1)) < 0.3, 0.0, x[:, :1] + rng.normal(size=(n, 1)))
    return x[:, :1], inflated  # ties: a zero-inflated y


def _continuous(name: str) -> bool:
    cases = estimators.estimator_class(name).cases
    return bool(cases & {"continuous", "low-dimension", "conditional", "ties"})


VARIANTS: dict[str, Callable[[tuple[np.ndarray, ...]], tuple[object, ...]]] = {
    "float64": lambda data: data,
    "float32": lambda data: tuple(part.astype(np.float32) for part in data),
    "integers": lambda data: tuple(np.round(100 * part).astype(np.int64) for part in data),
    "lists": lambda data: tuple(part.tolist() for part in data),
    "tensors": lambda data: tuple(torch.from_numpy(part) for part in data),
    "few tied rows": lambda data: tuple(np.concatenate([part[:-3], part[:3]]) for part in data),
    "many tied rows": lambda data: tuple(np.round(part, 1) for part in data),
    "constant column": lambda data: (np.hstack([data[0], np.ones((len(data[0]), 1))]), *data[1:]),
    "1-D": lambda data: tuple(part[:, 0] for part in data),
}


def check_outcome(name: str, call: Callable[[], object]) -> None:
    """The call gives an Estimate with a finite value, or a one-line ParameterError naming a
    parameter of mitool.estimate or a setting of the estimator."""
    try:
        result = call()
    except ParameterError as error:
        parameters = {
            "x",
            "y",
            "z",
            "ties",
            "discrete",
            "estimator",
            *estimators.estimator_class(name).Settings.names(),
        }
        assert "\n" not in str(error) and str(error).split()[0] in parameters
        return
    assert math.isfinite(result.value), result
    open_above = "open above" in result.interval  # a lower bound near a ceiling
    interval_given = math.isfinite(result.ci_low) and (math.isfinite(result.ci_high) or open_above)
    assert interval_given or "none" in result.interval or not math.isfinite(result.ci_level)


NEURAL_BOUNDS = [
    name for name in estimators.names() if "critic" in estimators.estimator_class(name).Settings.names()
]
"""The neural estimators share their input handling: infonce and neural-chain meet every variant,
the other bounds a few (the test suite's time)."""


def cases() -> list[tuple[str, str]]:
    few = ("float32", "many tied rows", "1-D")
    return [
        (name, variant)
        for name in estimators.names()
        for variant in VARIANTS
        if name in ("infonce", "neural-chain") or name not in NEURAL_BOUNDS or variant in few
    ]


@pytest.mark.parametrize(("name", "variant"), cases())
def test_every_estimator_takes_what_users_bring(name: str, variant: str) -> None:
    data = VARIANTS[variant](base_data(name))
    x, y, *rest = data
    z = rest[0] if rest else None
    check_outcome(name, lambda: mitool.estimate(x, y, z, estimator=name, **fast_settings(name)))
    estimator = estimators.get(name, **fast_settings(name))
    check_outcome(name, lambda: estimator.estimate(x, y, z))


@pytest.mark.parametrize("name", estimators.names())
def test_the_fewest_pairs_run_and_one_fewer_is_refused_in_one_line(name: str) -> None:
    estimator = estimators.get(name, **fast_settings(name))
    data = base_data(name)
    fewest = estimator.minimum_pairs(*(part.shape[1] for part in data))
    x, y, *rest = base_data(name, n=fewest, seed=1)
    check_outcome(name, lambda: estimator.estimate(x, y, *rest))
    with pytest.raises(ParameterError, match=rf"^x has too few samples \({fewest - 1}; "):
        estimator.estimate(*(part[: fewest - 1] for part in (x, y, *rest)))


def test_the_protocol_refuses_bad_input_in_one_line() -> None:
    x = np.random.default_rng(2).normal(size=(100, 1))
    for bad, match in (
        (np.full((100, 1), np.inf), "^y holds infinite values"),
        (np.full((100, 1), np.nan), "^y and the other variables leave no row without a missing value"),
        (np.zeros((100, 2, 2, 2, 2)), "^y must have one row per sample"),  # (n, H, W), (n, C, H, W): images
        (np.zeros((99, 1)), "^y must have the same number of rows"),
        (np.array([{"a": 1}] * 100, dtype=object), "^y must hold numbers or labels"),
    ):
        with pytest.raises(ParameterError, match=match):
            mitool.estimate(x, bad, estimator="ksg")


def test_settings_that_estimators_share_are_declared_once() -> None:
    """The interval's level of every estimator, the training fields of the neural estimators and
    the classifier, and the networks' fields of the neural estimators, the classifier and the toy
    study: one meaning and one check each, where they are declared."""
    import dataclasses

    from mitool.critics import CriticSettings, NetworkSettings
    from mitool.estimators.base import TrainingSettings, level_setting
    from mitool.toy.config import ToySettings

    def declared(settings: type, name: str) -> tuple[object, object]:
        item = {item.name: item for item in dataclasses.fields(settings)}[name]
        return item.metadata["help"], item.metadata["check"]

    def settings_of(name: str) -> type:
        return estimators.estimator_class(name).Settings

    level = level_setting().metadata
    for name in estimators.names():
        assert declared(settings_of(name), "level") == (level["help"], level["check"])
    for name in ("infonce", "smile", "neural-chain", "classifier"):
        for field in TrainingSettings.names():
            assert declared(settings_of(name), field) == declared(TrainingSettings, field)
    for field in CriticSettings.names():
        shared = declared(CriticSettings, field)
        assert declared(ToySettings, field) == declared(settings_of("infonce"), field) == shared
    for field in NetworkSettings.names():
        assert declared(settings_of("classifier"), field) == declared(NetworkSettings, field)
    assert (ToySettings().hidden_layers, estimators.get("infonce").settings.hidden_layers) == (2, 4)
