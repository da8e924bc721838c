"""The MI benchmark: tasks with closed-form MI in named suites (:mod:`~mitool.benchmark.suites`),
estimators x tasks x sizes x seeds as resumable cells (:mod:`~mitool.benchmark.run`), and the table
and figures of the results (:mod:`~mitool.benchmark.figures`)."""
