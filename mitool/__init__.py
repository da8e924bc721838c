"""mitool: mutual-information estimation with learned critics and classic estimators, and the
variational bounds as pure functions of critic scores.

    import mitool
    result = mitool.estimate(x, y)        # I(X; Y) in nats: print(result), float(result), result.ci_low
    mitool.estimate(x, y, z)              # I(X; Y | Z)
    mitool.estimators.names()             # every estimator; mitool.estimate(x, y, estimator="ksg")
    mitool.independence_test(x, y)        # is the dependence real? result.pvalue, print(result)
    mitool.feature_mi(X, y)               # each column against y: MI, interval, p, BH q-value

    from mitool import bounds
    result = bounds.infonce(pos, neg)     # result.loss to minimise, result.mi in nats

Importing ``mitool`` loads nothing heavy: what it offers is imported when first reached
(``mitool.estimate``, ``mitool.bounds``, ...), and torch when first used.
"""

from __future__ import annotations

from importlib import import_module
from importlib.metadata import PackageNotFoundError, version
from typing import TYPE_CHECKING

try:
    __version__ = version("mitool")
except PackageNotFoundError:  # running from a source tree that is not installed
    __version__ = "0+unknown"

if TYPE_CHECKING:
    from mitool import bounds, critics, estimators, matrix, tasks, ties
    from mitool.estimation import estimate
    from mitool.estimators.base import Estimate
    from mitool.independence import feature_mi, feature_scores, independence_test

__all__ = [
    "Estimate",
    "__version__",
    "bounds",
    "critics",
    "estimate",
    "estimators",
    "feature_mi",
    "feature_scores",
    "independence_test",
    "matrix",
    "tasks",
    "ties",
]

_LAZY: dict[str, tuple[str, str | None]] = {
    "estimate": ("mitool.estimation", "estimate"),
    "Estimate": ("mitool.estimators.base", "Estimate"),
    "independence_test": ("mitool.independence", "independence_test"),
    "feature_mi": ("mitool.independence", "feature_mi"),
    "feature_scores": ("mitool.independence", "feature_scores"),
    "bounds": ("mitool.bounds", None),
    "critics": ("mitool.critics", None),
    "estimators": ("mitool.estimators", None),
    "matrix": ("mitool.matrix", None),
    "tasks": ("mitool.tasks", None),
    "ties": ("mitool.ties", None),
}
"""What ``mitool.NAME`` gives, by the module it lives in (and the attribute, for a function or class)."""


def __getattr__(name: str) -> object:
    if name not in _LAZY:
        raise AttributeError(f"module 'mitool' has no attribute {name!r}")
    module_name, attribute = _LAZY[name]
    module = import_module(module_name)
    return module if attribute is None else getattr(module, attribute)


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})
