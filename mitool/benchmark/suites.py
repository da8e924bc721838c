"""Named suites of MI benchmark tasks (:mod:`mitool.tasks`) with closed-form MI.

The ``main`` suite follows "Beyond Normal" (Czyz et al. 2023): bivariate tasks, dense, sparse and
block Gaussians, Student-t with identity dispersion (all the dependence in the shared scale), the
same bases under invertible maps (half-cube, asinh, normal CDF, wiggly, bimodal, spiral, swiss
roll), and a few tasks of high MI, from 1 to 50 dimensions per side and 0.18 to 4.2 nats.
``quick`` is a small subset for smoke tests; ``bmi`` (:mod:`mitool.benchmark.bmi_v1`) the "Beyond Normal"
benchmark's 40 tasks;
``discrete`` (:mod:`mitool.benchmark.discrete`) and ``conditional`` (:mod:`mitool.benchmark.conditional`)
tasks with discrete or mixed variables and with conditional MI. :func:`get_task` finds any task of
any suite by name.
``highmi`` (:mod:`mitool.benchmark.highmi`): strong dependence, 2 to 20 nats, images among the tasks.
``bmi-v2`` (:mod:`mitool.benchmark.bmi_v2`): the 26 tasks of "Beyond Normal"'s v2 config, mixtures among them.
``families`` (:mod:`mitool.benchmark.families`): laws of our own, unlike bmi's, every task drawn from a seed.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

from mitool import checks
from mitool.tasks import (
    AdditiveUniform,
    Mapped,
    Task,
    block_normal,
    dense_normal,
    sparse_normal,
    student_t,
)

__all__ = ["SUITES", "get_task", "suite", "task_names"]


def _mapped(base: Task, x_map: str | None, y_map: str | None, prefix: str) -> Task:
    return Mapped(base, x_map, y_map, name=f"{prefix}-{base.name}")


def _both(map_name: str, base: Task) -> Task:
    """``map_name`` applied to X and to Y, named ``<map>-<base>``."""
    return _mapped(base, map_name, map_name, map_name)


def _bivariate(correlation: float = 0.75) -> Task:
    return dense_normal(1, 1, correlation)


def _main_suite() -> list[Task]:
    return [
        # bivariate
        _bivariate(),
        AdditiveUniform(0.1),
        AdditiveUniform(0.75),
        _both("bimodal", _bivariate()),
        _both("wiggly", _bivariate()),
        _both("half-cube", _bivariate()),
        _mapped(_bivariate(), "swiss-roll", None, "swiss-roll"),
        # Gaussians: dense, sparse (two pairs with correlation 0.8), block
        dense_normal(2, 2),
        dense_normal(3, 3),
        dense_normal(5, 5),
        dense_normal(25, 25),
        dense_normal(50, 50),
        sparse_normal(2, 2),
        sparse_normal(3, 3),
        sparse_normal(5, 5),
        sparse_normal(25, 25),
        block_normal(6, 6),
        block_normal(20, 20, blocks=4, loading=0.6),
        # Student-t, identity dispersion
        student_t(1, 1, 1),
        student_t(2, 2, 1),
        student_t(2, 2, 2),
        student_t(3, 3, 2),
        student_t(3, 3, 3),
        student_t(5, 5, 2),
        student_t(5, 5, 3),
        # invertible maps of those bases
        _both("asinh", student_t(1, 1, 1)),
        _both("asinh", student_t(2, 2, 1)),
        _both("half-cube", sparse_normal(5, 5)),
        _both("half-cube", dense_normal(25, 25)),
        _both("normal-cdf", dense_normal(5, 5)),
        _both("normal-cdf", sparse_normal(25, 25)),
        _both("wiggly", sparse_normal(5, 5)),
        _both("bimodal", sparse_normal(3, 3)),
        _both("spiral", sparse_normal(3, 3)),
        _both("spiral", sparse_normal(5, 5)),
        _both("spiral", sparse_normal(25, 25)),
        # high MI
        _bivariate(0.99),
        sparse_normal(10, 10, pairs=5, correlation=0.8),
        sparse_normal(5, 5, pairs=5, correlation=0.9),
        _both("spiral", sparse_normal(5, 5, pairs=5, correlation=0.9)),
        AdditiveUniform(0.02),
    ]


def _quick_suite() -> list[Task]:
    return [
        _bivariate(),
        AdditiveUniform(0.1),
        dense_normal(5, 5),
        student_t(2, 2, 1),
        _both("spiral", sparse_normal(3, 3)),
    ]


def _bmi_suite() -> list[Task]:
    from mitool.benchmark.bmi_v1 import bmi_v1_suite

    return bmi_v1_suite()


def _discrete_suite() -> list[Task]:
    from mitool.benchmark.discrete import discrete_suite

    return discrete_suite()


def _conditional_suite() -> list[Task]:
    from mitool.benchmark.conditional import conditional_suite

    return conditional_suite()


def _highmi_suite() -> list[Task]:
    from mitool.benchmark.highmi import highmi_suite

    return highmi_suite()


def _bmi_v2_suite() -> list[Task]:
    from mitool.benchmark.bmi_v2 import bmi_v2_suite

    return bmi_v2_suite()


def _families_suite() -> list[Task]:
    from mitool.benchmark.families import families_suite

    return families_suite()


SUITES: dict[str, Callable[[], list[Task]]] = {
    "main": _main_suite,
    "quick": _quick_suite,
    "bmi": _bmi_suite,
    "discrete": _discrete_suite,
    "conditional": _conditional_suite,
    "highmi": _highmi_suite,
    "bmi-v2": _bmi_v2_suite,
    "families": _families_suite,
}
"""Suite name -> a function building its tasks (built on demand: some take a moment)."""


def suite(name: str = "main") -> list[Task]:
    """The tasks of suite ``name`` (one of :data:`SUITES`), in their fixed order (built once)."""
    return list(_built(checks.choice("suite", name, SUITES)))


@functools.cache
def _built(name: str) -> tuple[Task, ...]:
    return tuple(SUITES[name]())


def task_names(name: str = "main") -> list[str]:
    return [task.name for task in suite(name)]


def get_task(name: str) -> Task:
    """The task called ``name`` in any suite (ParameterError "tasks ..." naming the known ones)."""
    known: dict[str, Task] = {}
    for suite_name in SUITES:
        for task in suite(suite_name):
            known.setdefault(task.name, task)
    return known[checks.choice("tasks", name, known)]
