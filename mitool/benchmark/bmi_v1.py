"""The 40 tasks of the "Beyond Normal" benchmark's first version (the ``bmi`` suite), whose laws
the second version (:mod:`mitool.benchmark.bmi_v2`) reuses."""

from __future__ import annotations

from mitool import maps
from mitool.tasks import AdditiveUniform, Mapped, Standardised, Task, dense_normal, sparse_normal, student_t

__all__ = ["bmi_v1_suite"]


def bmi_v1_suite() -> list[Task]:
    """The 40 tasks of the "Beyond Normal" benchmark (cbg-ethz/bmi, ``BENCHMARK_TASKS_LIST`` in
    ``src/bmi/benchmark/task_list.py``), named by their ids there, each sample standardised per
    column as its v1 pipeline rescales them (``workflows/benchmark/v1/config.py``)."""
    cdf = maps.MAPS["normal-cdf"]
    bmi = maps.BMI_MAPS

    def mapped(base: Task, x_map: maps.Map, y_map: maps.Map, prefix: str) -> Task:
        return Mapped(base, x_map, y_map, name=f"{prefix}-{base.name}")

    binormal = dense_normal(1, 1, 0.75)
    binormal.name = "1v1-normal-0.75"
    uniform = mapped(binormal, cdf, cdf, "normal_cdf")
    student_1 = student_t(1, 1, 1)
    student_1.name = "student-identity-1-1-1"

    def dense(dim: int) -> Task:
        task = dense_normal(dim, dim, 0.5)
        task.name = f"multinormal-dense-{dim}-{dim}-0.5"
        return task

    def two_pair(dim: int) -> Task:
        task = sparse_normal(dim, dim, 2, 0.8)
        task.name = f"multinormal-sparse-{dim}-{dim}-2-2.0"
        return task

    def student(dim: int, dof: int) -> Task:
        task = student_t(dim, dim, dof)
        task.name = f"student-identity-{dim}-{dim}-{dof}"
        return task

    def spiral(base: Task) -> Task:
        return mapped(base, bmi["bmi-spiral-x"], bmi["bmi-spiral-y"], "spiral")

    def half_cube(base: Task) -> Task:
        return mapped(base, maps.MAPS["half-cube"], maps.MAPS["half-cube"], "half_cube")

    def asinh(base: Task) -> Task:
        return mapped(base, maps.MAPS["asinh"], maps.MAPS["asinh"], "asinh")

    def normal_cdf(base: Task) -> Task:
        return mapped(base, cdf, cdf, "normal_cdf")

    additive = [AdditiveUniform(epsilon) for epsilon in (0.1, 0.75)]
    for task in additive:
        task.name = f"1v1-additive-{task.epsilon:g}"
    bimodal = Mapped(uniform, bmi["bmi-bimodal-x"], bmi["bmi-bimodal-y"], name="1v1-bimodal-0.75")
    wiggly = mapped(binormal, bmi["bmi-wiggly-x"], bmi["bmi-wiggly-y"], "wiggly")
    roll = Mapped(uniform, bmi["bmi-swiss-roll"], None, name=f"swissroll_x-{uniform.name}")
    groups = {
        "one-dimensional": [binormal, uniform, *additive, bimodal, wiggly, half_cube(binormal), student_1,
                            asinh(student_1)],
        "swiss roll": [roll],
        "multinormal dense": [dense(dim) for dim in (2, 3, 5, 25, 50)],
        "multinormal 2-pair": [two_pair(dim) for dim in (2, 3, 5, 25)],
        "student-t": [student(dim, dof) for dim, dof in ((2, 1), (2, 2), (3, 2), (3, 3), (5, 2), (5, 3))],
        "transformed normal": [f(two_pair(dim)) for f in (normal_cdf, half_cube) for dim in (3, 5, 25)],
        "spiral": [spiral(base) for base in [two_pair(dim) for dim in (3, 5, 25)]
                   + [normal_cdf(two_pair(dim)) for dim in (3, 5, 25)]],
        "transformed student-t": [asinh(student(2, 1)), asinh(student(3, 2)), asinh(student(5, 2))],
    }  # fmt: skip
    return [Standardised(task, family=family) for family, members in groups.items() for task in members]
