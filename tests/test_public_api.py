"""What a user types first: `import mitool` (fast, nothing heavy loaded), `mitool.estimate`,
`mitool.Estimate`, `mitool.estimators`, and the docstring examples of the public functions, run as
doctests."""

from __future__ import annotations

import doctest
import subprocess
import sys

import pytest

import mitool


def test_importing_mitool_loads_neither_numpy_nor_torch() -> None:
    code = "import sys, mitool; print(sorted(m for m in ('numpy', 'torch', 'scipy') if m in sys.modules))"
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert loaded.stdout.strip() == "[]"


def test_the_top_level_names_are_the_functions_and_modules_they_say() -> None:
    from mitool import estimation, estimators, matrix
    from mitool.estimators.base import Estimate

    assert mitool.estimate is estimation.estimate and callable(mitool.estimate)
    assert mitool.matrix is matrix and callable(mitool.matrix.mi_matrix)  # as docs/independence.md writes it
    assert mitool.Estimate is Estimate and mitool.estimators is estimators
    assert {"estimate", "Estimate", "estimators", "bounds"} <= set(dir(mitool)) and set(
        mitool.__all__
    ) <= set(dir(mitool))
    with pytest.raises(AttributeError, match="has no attribute 'estimat'"):
        _ = mitool.estimat


def test_after_z_every_argument_is_a_keyword() -> None:
    import inspect

    parameters = inspect.signature(mitool.estimate).parameters
    assert list(parameters)[:3] == ["x", "y", "z"]
    assert all(p.kind is inspect.Parameter.KEYWORD_ONLY for p in list(parameters.values())[3:-1])


@pytest.mark.parametrize("function", ["mitool.estimation.estimate"])
def test_the_docstring_examples_run(function: str) -> None:
    module_name, name = function.rsplit(".", 1)
    module = __import__(module_name, fromlist=[name])
    finder = doctest.DocTestFinder()
    (test,) = [t for t in finder.find(getattr(module, name), name, globs={}) if t.examples]
    result = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS).run(test)
    assert result.attempted > 0 and result.failed == 0
