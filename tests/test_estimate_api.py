"""The neural estimators from Python: the split, the standardisation, the held-out evaluation, the
interval, the evaluator rules, R runs trained together, and the result of ``estimate``."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from scipy import stats

from mitool import bounds, estimators
from mitool.checks import ParameterError
from mitool.critics import make_critic
from mitool.critics.gaussian import canonical_maps
from mitool.estimation import DivergenceError, estimate
from mitool.estimators.base import Estimate, as_rows, normal_interval, student_interval
from mitool.estimators.critic_training import MeanCritic, held_out_values
from mitool.estimators.neural import check_evaluator
from mitool.estimators.preparation import fold_splits, split_pairs, standardise
from mitool.tasks import CorrelatedGaussian

SMALL = {"steps": 60, "hidden": 16, "batch_size": 32, "eval_every": 20}


def gaussian(n: int = 600, dim: int = 2, mi: float = 0.5, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    x, y = CorrelatedGaussian(dim, mi=mi).sample(n, generator=torch.Generator().manual_seed(seed))
    return x.numpy(), y.numpy()


def test_split_is_a_seeded_partition_with_the_documented_sizes() -> None:
    split = split_pairs(100, 0.2, 0.25, seed=3)
    assert (len(split.fit), len(split.validation), len(split.test)) == (60, 20, 20)
    every = np.concatenate([split.fit, split.validation, split.test])
    assert sorted(every.tolist()) == list(range(100))
    assert np.array_equal(split_pairs(100, 0.2, 0.25, seed=3).test, split.test)
    assert not np.array_equal(split_pairs(100, 0.2, 0.25, seed=4).test, split.test)


def test_folds_test_every_pair_once_and_train_on_the_others() -> None:
    splits = fold_splits(103, 5, 0.1, seed=2)
    tests = np.concatenate([split.test for split in splits])
    assert sorted(tests.tolist()) == list(range(103))
    for split in splits:
        assert not set(split.train.tolist()) & set(split.test.tolist())
        assert len(split.train) + len(split.test) == 103 and len(split.validation) == round(
            0.1 * len(split.train)
        )


def test_too_few_samples_names_the_minimum() -> None:
    estimator = estimators.get("infonce")
    minimum = estimator.minimum_pairs(1, 1)
    x, y = gaussian(n=minimum)
    estimator._check_size(as_rows(x, y))  # enough
    with pytest.raises(
        ParameterError,
        match=rf"^x has too few samples \(20; at least {minimum} for a training batch of 128 pairs",
    ):
        estimator.estimate(x[:20], y[:20])
    with pytest.raises(ParameterError, match=f"too few samples \\({minimum - 1}; at least {minimum} "):
        estimator.estimate(x[: minimum - 1], y[: minimum - 1])


def test_the_fewest_pairs_count_the_folds() -> None:
    """With folds the minimum is that of the smallest fold split: pairs enough for one split but not
    for two folds are refused in one line naming the folds, and what the folds need runs."""
    settings = {**SMALL, "steps": 20}
    one_split, two_folds = (estimators.get("infonce", folds=folds, **settings) for folds in (0, 2))
    fewest = two_folds.minimum_pairs(1, 1)
    assert fewest > one_split.minimum_pairs(1, 1)
    x, y = gaussian(n=fewest)
    one_split.estimate(x[: fewest - 1], y[: fewest - 1])  # enough for one split
    with pytest.raises(ParameterError) as refused:
        two_folds.estimate(x[: fewest - 1], y[: fewest - 1])
    message, head = str(refused.value), f"x has too few samples ({fewest - 1}; at least {fewest} "
    assert "\n" not in message and message.startswith(head)
    assert "2 cross-fitting folds" in message
    assert two_folds.estimate(x, y).details["folds"] == 2
    # many folds need fewer pairs than one split holding out 20%
    assert estimators.get("infonce", folds=10, **settings).minimum_pairs(1, 1) < one_split.minimum_pairs(1, 1)


def test_standardise_uses_the_training_rows_only() -> None:
    train = np.array([[1.0, 10.0], [3.0, 10.0]])
    other = np.array([[5.0, 12.0]])
    standard_train, standard_other = standardise(train, other)
    np.testing.assert_allclose(standard_train, [[-1.0, 0.0], [1.0, 0.0]])
    np.testing.assert_allclose(standard_other, [[3.0, 2.0]])  # constant column: shifted only


def test_as_rows_checks_shapes_and_values() -> None:
    x, y, z = as_rows([1.0, 2.0, 3.0], torch.ones(3, 2))
    assert x.shape == (3, 1) and y.shape == (3, 2) and x.dtype == np.float64 and z is None
    with pytest.raises(ParameterError, match="^y must have the same number of rows"):
        as_rows(np.ones((3, 1)), np.ones((4, 1)))
    with pytest.raises(ParameterError, match="^z must have the same number of rows"):
        as_rows(np.ones((3, 1)), np.ones((3, 1)), np.ones((2, 1)))
    with pytest.raises(ParameterError, match=r"^x holds infinite values \(first in row 1\)"):
        as_rows(np.array([1.0, np.inf]), np.ones(2))
    with pytest.raises(ParameterError, match=r"^y has a missing value .* in row 1, 1 rows in all"):
        as_rows(np.ones(3), np.array([1.0, np.nan, 2.0]))
    with pytest.raises(ParameterError, match=r"^x has too few samples \(1; an MI needs at least 2 pairs"):
        as_rows([1.0], [2.0])
    x, y, _ = as_rows([1.0, None, 3.0, 4.0], np.array([1.0, 2.0, np.nan, 5.0]), missing="drop")
    assert x[:, 0].tolist() == [1.0, 4.0] and y[:, 0].tolist() == [1.0, 5.0]  # pairwise complete, in order


def test_held_out_values_equal_the_bound_on_each_chunk() -> None:
    """An independent plain computation: all-pairs scores of each block, the bound per chunk; a
    block of 100 anchors is cut into 10 chunks of 10 (at least 10 chunks where they hold 5)."""
    torch.manual_seed(0)
    critic = make_critic("separable", 2, 2, hidden=8)
    x, y = (torch.from_numpy(a).float() for a in gaussian(n=200))
    values, negatives = held_out_values(critic, x, y, lambda p, n: float(bounds.infonce(p, n).mi), 100, 50)
    assert negatives.tolist() == [99] * 20 and len(values) == 20
    with torch.no_grad():
        expected = []
        for block in (slice(0, 100), slice(100, 200)):
            pos, neg = bounds.split_scores(critic(x[block], y[block]))
            expected += [
                float(bounds.infonce(pos[c : c + 10], neg[c : c + 10]).mi) for c in range(0, 100, 10)
            ]
    np.testing.assert_allclose(values, expected, rtol=1e-5, atol=1e-6)


def test_extrapolated_values_are_richardsons_rule_on_each_chunk() -> None:
    """An independent plain computation: per chunk, twice InfoNCE against the whole block minus
    InfoNCE with each anchor against its own half (a chunk of 7 that straddles the halves of a block
    of 70 takes each anchor's half)."""
    torch.manual_seed(1)
    critic = make_critic("separable", 2, 2, hidden=8)
    x, y = (torch.from_numpy(a).float() for a in gaussian(n=70, mi=1.0))
    infonce = lambda p, n: float(bounds.infonce(p, n).mi)  # noqa: E731
    values, negatives = held_out_values(critic, x, y, infonce, 70, 7, extrapolate=True)
    assert negatives.tolist() == [69] * 10
    with torch.no_grad():
        scores = critic(x, y).numpy().astype(float)

    def per_anchor(rows: range) -> dict[int, float]:
        block = scores[np.ix_(rows, rows)]
        return {row: block[i, i] - np.log(np.mean(np.exp(block[i]))) for i, row in enumerate(rows)}

    whole, halves = per_anchor(range(70)), {**per_anchor(range(35)), **per_anchor(range(35, 70))}
    expected = [2 * np.mean([whole[a] for a in chunk]) - np.mean([halves[a] for a in chunk])
                for chunk in np.array_split(np.arange(70), 10)]  # fmt: skip
    np.testing.assert_allclose(values, expected, rtol=1e-5, atol=1e-5)


def test_extrapolation_closes_most_of_infonces_finite_k_gap_at_the_optimal_critic() -> None:
    """The analytic critic log p(y|x)/p(y) of a Gaussian of 3 nats, blocks of 200 (K = 199): its
    InfoNCE value falls 0.12 short of the truth, its limit in K is the truth itself, and Richardson's
    rule leaves 0.03 of the gap (2 x 2 dimensions, 20 000 pairs)."""
    task = CorrelatedGaussian(2, mi=3.0)
    x, y = task.sample(20_000, generator=torch.Generator().manual_seed(0))
    critic = lambda a, b: task.log_density_ratio(a[:, None, :], b[None, :, :])  # noqa: E731
    infonce = lambda p, n: float(bounds.infonce(p, n).mi)  # noqa: E731
    plain = held_out_values(critic, x, y, infonce, 200, 20)[0].mean()
    extrapolated = held_out_values(critic, x, y, infonce, 200, 20, extrapolate=True)[0].mean()
    assert plain < 3.0 - 0.08 and abs(extrapolated - 3.0) < 0.05


def test_an_extrapolated_value_stays_under_its_ceiling_and_reaches_it() -> None:
    """A critic that ranks every positive far above its negatives gives each anchor 2 c(K) - c(K')
    exactly; the bound of _ceiling_of_mean; a critic that is not there stays below it."""
    from mitool.estimators.neural import _ceiling_of_mean

    x = torch.arange(101.0)[:, None]
    infonce = lambda p, n: float(bounds.infonce(p, n).mi)  # noqa: E731
    sharp = lambda a, b: -100 * (a - b.T) ** 2  # noqa: E731 (a neighbour e^-100 below the positive)
    values, negatives = held_out_values(sharp, x, x, infonce, 101, 10, extrapolate=True)
    ceiling = _ceiling_of_mean("infonce", negatives, {}, extrapolated=True)
    assert ceiling == pytest.approx(2 * math.log(101) - math.log(50))
    assert ceiling - 0.015 < values.mean() <= ceiling  # its larger half's anchors: 2 log 101 - log 51
    soft = lambda a, b: -0.3 * (a - b.T) ** 2  # noqa: E731
    assert held_out_values(soft, x, x, infonce, 101, 10, extrapolate=True)[0].mean() < ceiling - 0.1


def test_extrapolation_is_refused_outside_the_infonce_family() -> None:
    with pytest.raises(ParameterError, match="^extrapolate_negatives applies to the InfoNCE family's"):
        estimators.get("nwj", extrapolate_negatives=True)
    assert estimators.get("infonce", extrapolate_negatives=True).settings.extrapolate_negatives


def test_confidence_interval_is_the_student_t_interval() -> None:
    values = np.array([1.0, 1.2, 0.9, 1.1, 1.3])
    mean, stderr, low, high = student_interval(values, 0.9)
    expected = stats.t.interval(0.9, 4, loc=values.mean(), scale=stats.sem(values))
    assert mean == pytest.approx(1.1) and stderr == pytest.approx(stats.sem(values))
    assert (low, high) == pytest.approx(expected)


@pytest.mark.parametrize(
    ("trained", "evaluator", "allowed"),
    [("infonce", "nwj", False), ("infonce", "dcl", True), ("js", "nwj", False), ("js", "smile", True),
     ("nwj", "nwj", True), ("smile", "dv", True), ("nwj", "js", False), ("nwj", "infonce", True)],
)  # fmt: skip
def test_only_bounds_tight_at_the_trained_critic_may_evaluate_it(trained, evaluator, allowed) -> None:
    if allowed:
        assert check_evaluator(trained, evaluator) == evaluator
    else:
        with pytest.raises(
            ParameterError, match=f"^evaluator '{evaluator}' is not tight for a critic trained"
        ):
            check_evaluator(trained, evaluator)


def test_decoupled_bounds_refuse_unbounded_critics() -> None:
    x, y = gaussian()
    for estimator in ("dcl", "dclw"):
        with pytest.raises(ParameterError, match="^critic 'separable' has unbounded scores"):
            estimate(x, y, estimator=estimator, critic="separable", **SMALL)
    result = estimate(x, y, estimator="dcl", critic="cosine", **SMALL)
    assert (
        math.isfinite(result.value) and result.details["ceiling"] is None and not result.details["at_ceiling"]
    )


def test_a_runaway_estimate_is_a_divergence_error_naming_the_alternatives() -> None:
    x, y = gaussian(mi=2.0)
    with pytest.raises(DivergenceError, match="nwj estimate .* ran away .* use infonce"):
        estimate(x, y, estimator="nwj", lr=5.0, **{**SMALL, "steps": 100})


def test_estimate_fields_and_interval() -> None:
    x, y = gaussian()
    result = estimate(x, y, estimator="infonce", **SMALL)
    details = result.details
    assert (result.n_pairs, details["n_test"], details["n_fit"] + details["n_validation"]) == (600, 120, 480)
    assert details["negatives_train"] == 31 and details["negatives_test"] == 119
    assert details["ceiling"] == pytest.approx(math.log(120))
    assert result.ci_low < result.value < result.ci_high and result.ci_level == 0.95
    assert "chunks of held-out anchors" in result.interval
    assert result.as_dict()["value"] == result.as_dict()["estimate"] == result.value == float(result)


def test_runs_trained_together_equal_runs_trained_alone() -> None:
    """estimate_many trains the data sets' critics as one model, and each data set stops where it
    would alone (patience 2): here at different steps, and each estimate is its lone run's (steps,
    kept step, value)."""
    data = [gaussian(seed=1), gaussian(seed=2, mi=0.0), gaussian(seed=3, mi=1.0)]
    settings = {**SMALL, "steps": 400, "patience": 2, "ensemble": 2}
    together = estimators.get("infonce", **settings).estimate_many(data, seeds=[5, 6, 7])
    alone = [
        estimate(x, y, estimator="infonce", seed=seed, **settings)
        for (x, y), seed in zip(data, (5, 6, 7), strict=True)
    ]
    steps = [single.details["steps"] for single in alone]
    assert len(set(steps)) > 1, steps  # they stopped at different steps
    for joint, single in zip(together, alone, strict=True):
        assert joint.details["steps"] == single.details["steps"]
        assert joint.details["best_step"] == single.details["best_step"]
        assert joint.value == pytest.approx(single.details.get("raw_value", single.value), abs=1e-5)


def test_unknown_options_name_themselves() -> None:
    x, y = gaussian()
    with pytest.raises(ParameterError, match="^clip is not a setting of infonce .its settings: critic, "):
        estimate(x, y, estimator="infonce", clip=3.0)
    with pytest.raises(ParameterError, match="^steps must be a whole number >= 1"):
        estimate(x, y, estimator="infonce", steps=0)
    with pytest.raises(ParameterError, match="^estimator must be one of"):
        estimate(x, y, estimator="magic")


@pytest.mark.parametrize("estimator", ["ksg", "gaussian"])
def test_baselines_through_estimate(estimator: str) -> None:
    x, y = gaussian(n=1000, mi=0.5)
    result = estimate(x, y, estimator=estimator)
    assert abs(result.value - 0.5) < 0.15 and result.ci_low < result.value < result.ci_high
    assert "critic" not in result.details and "disjoint subsets" in result.interval


@pytest.mark.parametrize("name", ["infonce", "nwj", "dv", "js", "dcl"])
def test_the_mean_critic_scores_at_least_the_mean_of_its_members(name: str) -> None:
    """These bounds are concave in the scores, so their value at the mean critic is at least the
    mean of the members' values (on the same pairs)."""
    torch.manual_seed(1)
    members = [make_critic("separable", 2, 2, hidden=8) for _ in range(3)]
    x, y = (torch.from_numpy(a).float() for a in gaussian(n=64, mi=1.0))
    evaluate = bounds.get(name)
    with torch.no_grad():
        alone = [float(evaluate(*bounds.split_scores(m(x, y))).mi) for m in members]
        together = float(evaluate(*bounds.split_scores(MeanCritic(members)(x, y))).mi)
    assert together >= np.mean(alone) - 1e-6


def test_an_ensemble_trains_several_critics_per_data_set() -> None:
    x, y = gaussian()
    settings = {
        **SMALL,
        "radial": False,
    }  # trained critics only (a Gaussian one kept twice would be the same)
    single, double = (
        estimate(x, y, estimator="infonce", **settings),
        estimate(x, y, estimator="infonce", ensemble=2, **settings),
    )
    assert double.details["negatives_test"] == single.details["negatives_test"]
    assert double.value != single.value and abs(double.value - single.value) < 0.3
    assert "of training (the spread of the 2 critics of the ensemble)" in double.interval
    assert "not retraining" in single.interval


def test_canonical_maps_whiten_and_diagonalise_the_training_rows() -> None:
    """After the maps the joint covariance is [[I, D], [D', I]] with D diagonal and decreasing,
    and the Gaussian MI of the rows (a function of the canonical correlations) is unchanged."""
    from mitool.estimators.gaussian import gaussian_mi
    from mitool.tasks import dense_normal

    x, y = (
        a.numpy()
        for a in dense_normal(4, 3, 0.4).sample(2000, torch.Generator().manual_seed(0), dtype=torch.float64)
    )
    map_x, map_y = canonical_maps(x, y)
    turned_x, turned_y = x @ map_x.T, y @ map_y.T
    joint = np.cov(np.hstack([turned_x, turned_y]).T)
    np.testing.assert_allclose(joint[:4, :4], np.eye(4), atol=1e-8)
    np.testing.assert_allclose(joint[4:, 4:], np.eye(3), atol=1e-8)
    cross = joint[:4, 4:]
    diagonal = np.diagonal(cross)
    np.testing.assert_allclose(cross, np.pad(np.diag(diagonal), ((0, 1), (0, 0))), atol=1e-8)
    assert np.all(np.diff(np.abs(diagonal)) <= 1e-12)
    assert gaussian_mi(turned_x, turned_y, False) == pytest.approx(gaussian_mi(x, y, False), rel=1e-9)


def test_an_estimate_from_its_standard_error_has_the_student_t_interval() -> None:
    result = Estimate.from_stderr(1.0, 0.1, 0.9, 4, interval="test", estimator="test", n_pairs=10)
    assert (result.ci_low, result.ci_high) == normal_interval(1.0, 0.1, 0.9, 4)
    assert result.ci_high - 1.0 == pytest.approx(0.1 * stats.t.ppf(0.95, 4))
    assert (result.ci_level, result.seconds, result.notes, dict(result.details)) == (0.9, 0.0, (), {})
    unknown = Estimate.from_stderr(1.0, math.nan, 0.95, interval="none", estimator="test", n_pairs=1)
    assert math.isnan(unknown.ci_low) and math.isnan(unknown.ci_high)


def test_the_protocol_times_the_estimate_not_the_estimator() -> None:
    x, y = gaussian()
    for name, settings in (("ksg", {}), ("infonce", SMALL)):
        estimator = estimators.get(name, **settings)
        assert estimator._estimate(*as_rows(x, y), seed=0, progress=None).seconds == 0.0
        assert estimator.estimate(x, y).seconds > 0
    together = estimators.get("infonce", **SMALL).estimate_many([gaussian(seed=s) for s in (1, 2)], [1, 2])
    assert together[0].seconds == together[1].seconds > 0  # trained together: the time of both


def test_every_bound_has_a_neural_estimator_importable_by_its_name() -> None:
    import pickle

    from mitool.estimators import neural

    assert [estimator.bound for estimator in neural.ESTIMATORS] == list(bounds.BOUNDS)
    for estimator in neural.ESTIMATORS:
        assert getattr(neural, estimator.__name__) is estimator is estimators.estimator_class(estimator.name)
        assert getattr(neural, estimator.Settings.__qualname__.split(".")[0]).Settings is estimator.Settings
    eqco = neural.EqCo(alpha=64.0, **SMALL)
    again = pickle.loads(pickle.dumps(eqco))
    assert type(again) is neural.EqCo and again.settings == eqco.settings
    assert again.train_options == {"alpha": 64.0}


def test_a_small_table_of_many_columns_is_estimated_not_refused() -> None:
    """100 pairs of 4 + 2 dimensions: the default's trained critic needs 188 pairs and refused the
    table; the default takes KSG instead, with a note, and gives a finite interval that holds the
    truth (2 x log(2) / 2 = 0.693 nats)."""
    rng = np.random.default_rng(0)
    x = rng.normal(size=(100, 4))
    y = x[:, :2] + rng.normal(size=(100, 2))
    result = estimate(x, y)
    assert result.estimator == "ksg" and np.isfinite([result.ci_low, result.ci_high]).all()
    assert any(
        "100 pairs are too few for the default's infonce (at least 188)" in note for note in result.notes
    )
    assert any(note.startswith("X and Y continuous: estimator ksg") for note in result.notes)
    assert result.ci_low < 0.693 < result.ci_high
