"""The docstring examples of :mod:`mitool.bounds` and of every module of :mod:`mitool.estimators`,
run as doctests; and every bound function and every estimator has an Examples section."""

from __future__ import annotations

import doctest
import importlib
import inspect
import pkgutil
from types import ModuleType

import pytest

import mitool.estimators
from mitool import bounds, estimators

FLAGS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE


def _modules() -> list[str]:
    package = mitool.estimators
    return ["mitool.bounds", package.__name__] + [
        f"{package.__name__}.{info.name}" for info in pkgutil.iter_modules(package.__path__)
    ]


def _run(module: ModuleType) -> tuple[int, int, str]:
    """(examples run, failures, the report of the failures) of the doctests of ``module``."""
    report: list[str] = []
    runner = doctest.DocTestRunner(optionflags=FLAGS)
    for test in doctest.DocTestFinder().find(module):
        runner.run(test, out=report.append)
    return runner.tries, runner.failures, "".join(report)


@pytest.mark.parametrize("name", _modules())
def test_the_docstring_examples_run(name: str) -> None:
    tries, failures, report = _run(importlib.import_module(name))
    assert failures == 0, report


def _has_examples(item: object) -> bool:
    return ">>> " in (item.__doc__ or "").partition("    Examples\n    --------\n")[2]


def test_every_bound_function_and_estimator_has_an_example() -> None:
    public = [getattr(bounds, name) for name in bounds.__all__]
    documented = [item for item in public if inspect.isfunction(item)] + [bounds.Mine]
    missing = [item.__name__ for item in documented if not _has_examples(item)]
    missing += [name for name, estimator in estimators.registry().items() if not _has_examples(estimator)]
    assert not missing


def test_an_estimators_docstring_lists_its_settings() -> None:
    doc = estimators.estimator_class("ksg").__doc__
    assert "    Parameters\n    ----------\n" in doc and doc.index("Parameters") < doc.index("Examples")
    for setting in estimators.estimator_class("ksg").Settings.names():
        assert f"    {setting} : " in doc
