"""Is the dependence real? Permutation tests of independence with the MI as the statistic.

    import mitool
    result = mitool.independence_test(x, y)        # H0: X and Y are independent
    print(result)                                  # I(X; Y) = 0.123 nats, p = 0.004 (999 permutations ...)
    result.statistic, result.pvalue, result.null   # the estimate, its p-value, the null's summary
    mitool.independence_test(x, y, z)              # H0: X and Y are independent given Z
    mitool.feature_mi(X, y)                        # each column of X against y, with BH q-values
    SelectKBest(mitool.feature_scores, k=3)        # scikit-learn's feature selection by MI

One module a job:

* ``permutation_test``: the test (data prepared, statistic chosen, null drawn, p-value, words);
* ``results``: what a test returns;
* ``statistics``: KSG, Ross, plug-in, Frenzel-Pompe and linear statistics, what the permutations
  keep fixed computed once;
* ``pvalues``: the permutation p-value, the min-p combination, the FDR q-values;
* ``tails``: a generalised Pareto fit beyond the permutations;
* ``permutations``: Runge's local permutation;
* ``conditional``: given a continuous Z, regressions on Z, the GCM and the neighbourhood diagnostic;
* ``features``: each column against a target (``feature_mi``, ``feature_scores``).
"""

from __future__ import annotations

from mitool.independence.conditional import (
    CO_SPREAD_WARNING,
    REGRESSION_MODELS,
    Z_METHODS,
    ZRegression,
    gcm_statistic,
    neighbourhood_spread,
    regress_on_z,
)
from mitool.independence.features import feature_mi, feature_scores
from mitool.independence.permutation_test import DEFAULT_PERMUTATIONS, LINEAR_COMPANIONS, independence_test
from mitool.independence.permutations import Z_NEIGHBOURS, completed_permutation, local_permutation
from mitool.independence.pvalues import (
    FDR_METHODS,
    benjamini_hochberg,
    benjamini_yekutieli,
    fdr_qvalues,
    min_p_combination,
    permutation_pvalue,
)
from mitool.independence.results import Component, FeatureMI, IndependenceTest, NullSummary
from mitool.independence.statistics import (
    POINT_STATISTICS,
    TEST_DEFAULTS,
    frenzel_pompe_statistic,
    ksg_statistic,
    linear_statistic,
    plugin_statistic,
)
from mitool.independence.tails import (
    TAIL_EXCEEDANCES,
    TAIL_METHODS,
    TailFit,
    bonferroni_tails,
    fit_tail,
    tail_pvalue,
)

__all__ = [
    "CO_SPREAD_WARNING",
    "DEFAULT_PERMUTATIONS",
    "FDR_METHODS",
    "LINEAR_COMPANIONS",
    "POINT_STATISTICS",
    "TAIL_EXCEEDANCES",
    "TAIL_METHODS",
    "REGRESSION_MODELS",
    "TEST_DEFAULTS",
    "Z_METHODS",
    "Z_NEIGHBOURS",
    "Component",
    "FeatureMI",
    "IndependenceTest",
    "NullSummary",
    "TailFit",
    "ZRegression",
    "benjamini_hochberg",
    "benjamini_yekutieli",
    "bonferroni_tails",
    "completed_permutation",
    "fdr_qvalues",
    "feature_mi",
    "feature_scores",
    "fit_tail",
    "frenzel_pompe_statistic",
    "gcm_statistic",
    "independence_test",
    "ksg_statistic",
    "linear_statistic",
    "local_permutation",
    "min_p_combination",
    "neighbourhood_spread",
    "permutation_pvalue",
    "plugin_statistic",
    "regress_on_z",
    "tail_pvalue",
]
