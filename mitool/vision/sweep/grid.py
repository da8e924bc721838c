"""The grid of a vision sweep: lists of methods, losses, negatives K, EqCo alphas, batch sizes,
temperatures and seeds expand into their product, each axis only where it applies (K for moco and
simo, not for simclr, which uses all 2N - 2 in-batch negatives; alpha for the eqco loss only; a
``support_size`` of the shared settings for nnclr only);
``None`` in a list is the method's default. A combination that cannot run (simo with K >= batch, a
moco queue shorter than the batch, a batch that split-BN cannot divide, ...) is an error naming
every such combination before anything runs. Each run is named by its settings (:func:`run_name`)
and resolved as ``mitool vision pretrain`` would resolve it (:func:`expand`)."""

from __future__ import annotations

import dataclasses
import itertools
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from mitool.bounds import INFONCE_FAMILY, takes_option
from mitool.checks import ParameterError
from mitool.vision.choices import KNN_K, KNN_TEMPERATURE
from mitool.vision.method_specs import method_spec
from mitool.vision.methods import method_class

__all__ = ["Evaluation", "Grid", "SweepRun", "expand", "run_name"]


@dataclass(frozen=True)
class Grid:
    """The sweep's axes (each a tuple; ``None`` = the method's default). Field names are the
    command's options' Python names, so errors name the option."""

    method: tuple[str, ...] = ("moco",)
    loss: tuple[str | None, ...] = (None,)
    negatives: tuple[int | None, ...] = (None,)
    alpha: tuple[float | None, ...] = (None,)
    batch_size: tuple[int | None, ...] = (None,)
    temperature: tuple[float | None, ...] = (None,)
    seeds: tuple[int, ...] = (0,)


@dataclass(frozen=True)
class Evaluation:
    """What follows each pretraining run: kNN (k, temperature, an optional cap on the memory and
    query sets) and, with ``linear_epochs`` > 0, the linear probe on cached features."""

    knn_k: int = KNN_K
    knn_temperature: float = KNN_TEMPERATURE
    knn_max_samples: int | None = None
    linear_epochs: int = 0


@dataclass(frozen=True)
class SweepRun:
    """One run: its directory name and its resolved pretraining config (a dict of PretrainConfig)."""

    name: str
    config: dict[str, Any]

    def value(self, key: str) -> Any:
        return self.config[key]


def _number_text(value: float) -> str:
    return f"{value:g}"


def run_name(config: dict[str, Any]) -> str:
    """``method-loss[-K<negatives>][-S<support>][-a<alpha>]-b<batch>-t<temperature>[-lars]-s<seed>`` (K
    for the methods that have it, S for nnclr's support set, alpha for eqco, ``lars`` for a run with
    the LARS optimizer)."""
    parts = [config["method"], config["loss"]]
    if config["negatives"] is not None:
        parts.append(f"K{config['negatives']}")
    if config.get("support_size") is not None:
        parts.append(f"S{config['support_size']}")
    if config["alpha"] is not None:
        parts.append(f"a{_number_text(config['alpha'])}")
    parts += [f"b{config['batch_size']}", f"t{_number_text(config['temperature'])}"]
    if config.get("optimizer") == "lars":
        parts.append("lars")
    parts.append(f"s{config['seed']}")
    return "-".join(parts)


def _combinations(grid: Grid, default_loss: Callable[[str], str]) -> list[dict[str, Any]]:
    """The product of the axes, each axis only where it applies (K for the methods that have it,
    alpha with the eqco loss, given or the method's default); duplicates removed, in order."""
    seen, combinations = set(), []
    for method, loss, negatives, alpha, batch, temperature, seed in itertools.product(
        grid.method, grid.loss, grid.negatives, grid.alpha, grid.batch_size, grid.temperature, grid.seeds
    ):
        if method_spec(method).negatives_meaning is None:
            negatives = None
        if not takes_option(loss or default_loss(method), "alpha"):
            alpha = None
        settings = dict(method=method, loss=loss, negatives=negatives, alpha=alpha, batch_size=batch,
                        temperature=temperature, seed=seed)  # fmt: skip
        key = tuple(settings.items())
        if key not in seen:
            seen.add(key)
            combinations.append(settings)
    return combinations


def _check_axes_apply(grid: Grid, default_loss: Callable[[str], str]) -> None:
    """An axis given values that no method or loss of the grid can use is an error."""
    if any(value is not None for value in grid.negatives) and all(
        method_spec(method).negatives_meaning is None for method in grid.method
    ):
        raise ParameterError("negatives", f"does not apply to {', '.join(grid.method)}; leave it out")
    losses = {loss or default_loss(method) for loss in grid.loss for method in grid.method}
    with_alpha = [name for name in INFONCE_FAMILY if takes_option(name, "alpha")]
    if any(value is not None for value in grid.alpha) and not losses & set(with_alpha):
        raise ParameterError("alpha", f"applies to the {', '.join(with_alpha)} loss only; add it to --loss")


def expand(grid: Grid, base: Any, out: str | os.PathLike) -> list[SweepRun]:
    """The runs of ``grid`` on top of ``base`` (a PretrainConfig with the shared settings), each
    resolved and checked as ``mitool vision pretrain`` would; out = ``OUT/runs/<name>``.
    ParameterError naming every invalid combination (the first problem's option)."""
    from mitool.vision.config import resolve_defaults

    native_size = _native_image_size(base)

    def default_loss(method: str) -> str:
        return method_spec(method).defaults_for(base.dataset)["loss"]

    _check_axes_apply(grid, default_loss)
    runs: dict[str, SweepRun] = {}
    problems: list[tuple[str, str]] = []
    for settings in _combinations(grid, default_loss):
        # a support set given for the sweep applies to the methods that have one (nnclr)
        support = {} if "support_size" in method_spec(settings["method"]).defaults else {"support_size": None}
        try:
            resolved = resolve_defaults(dataclasses.replace(base, **settings, **support), native_size)
            method_class(resolved.method).check_sizes(resolved, 1)  # each run is one process
        except ValueError as error:
            problems.append((getattr(error, "parameter", "method"), f"{_describe(settings)}: {error}"))
            continue
        name = run_name(dataclasses.asdict(resolved))
        resolved = dataclasses.replace(resolved, out=os.path.join(os.fspath(out), "runs", name))
        runs.setdefault(name, SweepRun(name, dataclasses.asdict(resolved)))
    if problems:
        listed = "; ".join(problem for _, problem in problems)
        raise ParameterError(problems[0][0], f"gives {len(problems)} invalid combination(s): {listed}")
    return list(runs.values())


def _describe(settings: dict[str, Any]) -> str:
    return " ".join(f"{key}={value}" for key, value in settings.items() if value is not None)


def _native_image_size(config: Any) -> int | None:
    from mitool.vision.datasets import dataset_info

    if config.image_size is not None or config.dataset == "imagefolder":
        return config.image_size
    return dataset_info(config.dataset, config.data_dir, **config.synthetic_options()).image_size
