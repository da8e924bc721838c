"""The Gaussian critic, the selection of critics on validation pairs and cross-fitting (issue 16's
routes), each against what it must equal."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from scipy import stats

from mitool import estimators
from mitool.benchmark import bmi_v2
from mitool.checks import ParameterError
from mitool.critics.gaussian import (
    GaussianCritics,
    canonical_fit,
    fit_gaussian_critics,
    infonce_of_mixture,
    infonce_of_scores,
    radial_features,
    related_correlations,
)
from mitool.estimation import estimate
from mitool.estimators.neural import AUTO_MARGIN, _Runs
from mitool.tasks import CorrelatedGaussian, student_t


def _correlated_rows(n: int, dim_x: int, dim_y: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    generator = np.random.default_rng(seed)
    mixing = generator.normal(size=(dim_x + dim_y, dim_x + dim_y))
    joint = generator.normal(size=(n, dim_x + dim_y)) @ mixing.T + generator.normal(size=dim_x + dim_y)
    return joint[:, :dim_x], joint[:, dim_x:]


def test_the_gaussian_critic_is_the_log_density_ratio_of_the_fitted_gaussian() -> None:
    """At full rank, f(x_i, y_j) = log N([x_i, y_j]; m, C) - log N(x_i; m_x, C_xx) - log N(y_j; m_y, C_yy)
    with the rows' mean and covariance (ddof 1), computed here by scipy on the joint."""
    x, y = _correlated_rows(400, 3, 2, seed=0)
    critic = GaussianCritics(*(torch.as_tensor(part)[None] for part in canonical_fit(x, y)))
    scores = critic.run(0)(torch.as_tensor(x[:7]), torch.as_tensor(y[:5])).numpy()
    joint = np.hstack([x, y])
    mean, covariance = joint.mean(0), np.cov(joint.T)
    pairs = np.array([[*x[i], *y[j]] for i in range(7) for j in range(5)])
    expected = (
        stats.multivariate_normal(mean, covariance).logpdf(pairs)
        - stats.multivariate_normal(mean[:3], covariance[:3, :3]).logpdf(pairs[:, :3])
        - stats.multivariate_normal(mean[3:], covariance[3:, 3:]).logpdf(pairs[:, 3:])
    ).reshape(7, 5)
    np.testing.assert_allclose(scores, expected, rtol=1e-8, atol=1e-8)


def test_the_critic_with_unrelated_pairs_is_the_log_density_ratio_of_the_mixture() -> None:
    """With weight w and related correlations rho = r / w: f_w(x_i, y_j) = log(w p_r(x_i, y_j) /
    (p(x_i) p(y_j)) + 1 - w), p_r the Gaussian of the rows' marginal moments and cross-covariance
    C_xy / w (its canonical correlations are r / w), computed here by scipy on the joint."""
    x, y = _correlated_rows(400, 3, 2, seed=0)
    y = y + 3 * np.random.default_rng(1).normal(size=y.shape)  # weak correlations, so r / w < 1
    weight = 0.6
    *parts, observed = canonical_fit(x, y)
    related = related_correlations(observed, weight)
    assert np.all(np.abs(related) < 0.95)
    critic = GaussianCritics(*(torch.as_tensor(part)[None] for part in (*parts, related, np.float64(weight))))
    scores = critic.run(0)(torch.as_tensor(x[:7]), torch.as_tensor(y[:5])).numpy()
    joint = np.hstack([x, y])
    mean, covariance = joint.mean(0), np.cov(joint.T)
    covariance[:3, 3:] /= weight
    covariance[3:, :3] /= weight
    pairs = np.array([[*x[i], *y[j]] for i in range(7) for j in range(5)])
    ratio = np.exp(
        stats.multivariate_normal(mean, covariance).logpdf(pairs)
        - stats.multivariate_normal(mean[:3], covariance[:3, :3]).logpdf(pairs[:, :3])
        - stats.multivariate_normal(mean[3:], covariance[3:, 3:]).logpdf(pairs[:, 3:])
    )
    expected = np.log(weight * ratio + 1 - weight).reshape(7, 5)
    np.testing.assert_allclose(scores, expected, rtol=1e-8, atol=1e-8)


@pytest.mark.slow
def test_a_share_of_unrelated_pairs_is_found_and_scores_as_the_true_critic() -> None:
    """bmi's sparse Gaussian with 20% of the pairs unrelated (5 x 5, two pairs of correlation 0.8):
    the weight kept is 0.8, and on held-out pairs the critic's InfoNCE is that of the exact log
    density ratio (the task's, up to the noise of 2000 pairs) and above the Gaussian critic's; on
    Gaussian pairs the weight kept is 1."""
    task = bmi_v2.task_inliers(5, 0.2)
    x, y = (side.double() for side in task.sample(8000, torch.Generator().manual_seed(0)))
    fit = (x[:4000].numpy(), y[:4000].numpy())
    critic, (rank,), _ = fit_gaussian_critics(
        [fit], [(x[4000:6000].float(), y[4000:6000].float())], block=2000
    )
    assert float(critic.weight[0]) == pytest.approx(0.8, abs=0.05)
    assert 2 <= rank <= 3  # the two related pairs, and perhaps one of noise
    x_test, y_test = x[6000:], y[6000:]
    mixture = infonce_of_scores(critic.run(0)(x_test.float(), y_test.float()))
    exact = infonce_of_scores(task.log_density_ratio(x_test[:, None], y_test[None]))
    *parts, observed = canonical_fit(*fit)
    plain = np.where(np.arange(len(observed)) < 2, observed, 0.0)
    gaussian = GaussianCritics(
        *(torch.as_tensor(part, dtype=torch.float32)[None] for part in (*parts, plain))
    )
    assert mixture == pytest.approx(exact, abs=0.03)
    assert mixture > infonce_of_scores(gaussian.run(0)(x_test.float(), y_test.float())) + 0.05
    generator = np.random.default_rng(2)
    x, y = generator.normal(size=(2, 4000, 5))
    y[:, :2] = 0.8 * x[:, :2] + 0.6 * y[:, :2]
    as_tensors = [torch.as_tensor(side[2000:], dtype=torch.float32) for side in (x, y)]
    critic, _, _ = fit_gaussian_critics([(x[:2000], y[:2000])], [as_tensors], block=2000)
    assert float(critic.weight[0]) == 1.0


def test_regularised_cca_whitens_the_shrunk_covariances_and_diagonalises_the_cross_covariance() -> None:
    """canonical_maps with shrinkage s: A ((1 - s) S_xx + s diag S_xx) A' = I, the same for B, and
    A S_xy B' diagonal, its entries in decreasing order; s = 0 is plain CCA (A S_xx A' = I)."""
    from mitool.critics.gaussian import canonical_maps

    x, y = _correlated_rows(300, 6, 4, seed=3)
    joint = np.cov(np.hstack([x, y]).T)
    s_xx, s_yy, s_xy = joint[:6, :6], joint[6:, 6:], joint[:6, 6:]
    for shrinkage in (0.0, 0.5):
        map_x, map_y = canonical_maps(x, y, shrinkage)
        for side, covariance in ((map_x, s_xx), (map_y, s_yy)):
            shrunk = (1 - shrinkage) * covariance + shrinkage * np.diag(np.diag(covariance))
            np.testing.assert_allclose(side @ shrunk @ side.T, np.eye(len(side)), atol=1e-9)
        cross = map_x @ s_xy @ map_y.T  # (6, 4)
        diagonal = np.diagonal(cross).copy()
        off = cross.copy()
        np.fill_diagonal(off, 0.0)
        np.testing.assert_allclose(off, 0.0, atol=1e-9)
        assert np.all(np.diff(diagonal) <= 1e-12) and diagonal[0] > 0.1


def test_shrinking_the_base_helps_a_dense_gaussian_in_many_dimensions_from_few_pairs() -> None:
    """40 x 40 dimensions, one shared factor seen by every coordinate of both sides (truth in
    closed form, 0.88 nats), 640 fit rows: plain CCA's directions overfit, so the critic with
    the shrinkage kept on the validation rows scores higher on 2000 unseen pairs, and no higher
    than the truth (up to the noise of 2000 pairs); with one factor in 6 x 6 dimensions (directions
    easy to fit) the shrinkage changes the value by little."""

    def rows(n: int, dims: int, generator: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        factor = generator.normal(size=(n, 1))
        x, y = (factor + 2.0 * generator.normal(size=(n, dims)) for _ in range(2))
        return x, y

    def truth(dims: int) -> float:
        ones = np.ones((2 * dims, 2 * dims))
        joint = ones + 4.0 * np.eye(2 * dims)
        side = joint[:dims, :dims]
        return 0.5 * (2 * np.linalg.slogdet(side)[1] - np.linalg.slogdet(joint)[1])

    generator = np.random.default_rng(4)
    for dims, least_gain in ((40, 0.05), (6, -0.02)):
        fit, validation, test = (rows(n, dims, generator) for n in (640, 160, 2000))
        as_tensors = tuple(torch.as_tensor(side, dtype=torch.float32) for side in validation)
        test_values = []
        for shrink in (False, True):
            critic, _, _ = fit_gaussian_critics([fit], [as_tensors], block=160, shrink=shrink)
            scores = critic.run(0)(*(torch.as_tensor(side, dtype=torch.float32) for side in test))
            test_values.append(infonce_of_scores(scores))
        plain, shrunk = test_values
        assert shrunk - plain > least_gain, (dims, plain, shrunk, truth(dims))
        assert shrunk < truth(dims) + 0.05


@pytest.mark.parametrize("weight", [1.0, 0.8, 0.3])
def test_the_mixture_value_from_row_sums_is_infonce_of_the_mixture_scores(weight: float) -> None:
    """The scan's InfoNCE of f_w = log(w e^S + 1 - w) from S's row sums against InfoNCE of f_w formed
    entry by entry (float64), on scores with strong positives (up to 40 nats: no overflow)."""
    generator = torch.Generator().manual_seed(0)
    scores = 8.0 * torch.randn(300, 300, dtype=torch.float64, generator=generator)
    scores.diagonal().add_(25.0)
    mixture = torch.log(weight * torch.exp(scores) + 1.0 - weight)
    assert infonce_of_mixture(scores, weight) == pytest.approx(infonce_of_scores(mixture), abs=1e-10)


@pytest.mark.slow
def test_the_rank_kept_is_the_one_whose_validation_value_is_highest() -> None:
    """20 x 20 dimensions, one correlated pair (rho 0.8, MI 0.511): the 19 sampled others only cost
    on held-out pairs, so the rank kept is small, its validation value is InfoNCE of its scores, it
    is at least the full rank's and near the truth."""
    generator = np.random.default_rng(1)
    x, y = generator.normal(size=(2, 4000, 20))
    y[:, 0] = 0.8 * x[:, 0] + 0.6 * y[:, 0]
    fit = (x[:2000], y[:2000])
    validation = tuple(torch.as_tensor(side[2000:], dtype=torch.float32) for side in (x, y))
    critic, (rank,), (value,) = fit_gaussian_critics([fit], [validation], block=2000)
    assert 1 <= rank <= 3
    scores = critic.run(0)(*validation)
    assert value == pytest.approx(infonce_of_scores(scores), abs=1e-5)
    parts = canonical_fit(*fit)
    full = GaussianCritics(*(torch.as_tensor(part, dtype=torch.float32)[None] for part in parts))
    assert value > infonce_of_scores(full.run(0)(*validation)) + 0.01
    assert value == pytest.approx(-0.5 * math.log(1 - 0.64), abs=0.06)


class _RadialCandidates:
    """Stands in for the radial Gaussian critics: run r is the string "radial r"; run 1 keeps two
    terms, the others one."""

    weight = torch.ones(3)
    terms = torch.tensor([1, 2, 1])

    def run(self, index: int) -> str:
        return f"radial {index}"


def test_selection_keeps_each_runs_candidate_of_the_higher_validation_value() -> None:
    runs = _Runs(fit=None, validation=[None] * 3, test=[], splits=[], member_seeds=[], members=1,
                 n_pairs=0, dims=(1, 1), radial=_RadialCandidates(), radial_ranks=[2, 2, 2])  # fmt: skip
    radial_values = [0.4, 0.6, 0.3]
    chosen = runs.chosen_critics(
        ["net 0", "net 1", "net 2"], [0.5, 0.2, 0.3], lambda critics, _: radial_values
    )
    assert chosen == ["net 0", "radial 1", "net 2"]  # a tie keeps the network
    assert runs.kept[0] == "the network alone"
    assert runs.kept[1] == "the gaussian critic on radial features to c^2, rank 2"


def test_selection_picks_the_radial_critic_where_the_dependence_is_through_the_norm() -> None:
    """y = x (|x|^2 / 2 - 2) + noise is uncorrelated with x, so the plain Gaussian critic (the base of
    an untrained network) is worth little: 0.34 nats, as a mixture in which 30% of the pairs are
    related (those of large norm) and the rest not; y is linear in the radial features of x, and that
    candidate, higher on the validation pairs, is kept."""
    generator = np.random.default_rng(2)
    x = generator.normal(size=(3000, 2))
    y = x * ((x**2).sum(1, keepdims=True) / 2 - 2) + 0.3 * generator.normal(size=(3000, 2))
    settings = {"steps": 1, "eval_every": 1, "batch_size": 64, "ensemble": 1, "seed": 0}
    plain = estimate(x, y, estimator="infonce", radial=False, **settings)
    selected = estimate(x, y, estimator="infonce", radial=True, **settings)
    assert abs(plain.value) < 0.4
    assert selected.value > plain.value + 1.0
    assert selected.details["kept"][0].startswith("the gaussian critic on radial features")


def test_the_radial_features_of_t_terms_are_x_times_the_powers_of_the_centred_squared_norm() -> None:
    """phi_t(x) = [x, x c, ..., x c^t], c = |x|^2/d - 1, computed here row by row, for numpy and torch."""
    rows = np.random.default_rng(5).normal(size=(4, 3))
    expected = []
    for row in rows:
        c = row @ row / 3 - 1
        expected.append(np.concatenate([row, row * c, row * c * c]))
    np.testing.assert_allclose(radial_features(rows, 2), expected, rtol=1e-12)
    np.testing.assert_allclose(radial_features(torch.as_tensor(rows), 2).numpy(), expected, rtol=1e-12)
    np.testing.assert_allclose(radial_features(rows), np.asarray(expected)[:, :6], rtol=1e-12)


def _turned_rows(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """y = x turned by the angle 0.4 |x|^2, plus noise, on x of 2 coordinates: x cos(angle) and
    J x sin(angle) are series in c = |x|^2/2 - 1, and one term of them is too few."""
    generator = np.random.default_rng(seed)
    x = generator.normal(size=(n, 2))
    angle = 0.4 * (x**2).sum(1)
    cos, sin = np.cos(angle), np.sin(angle)
    turned = np.stack([cos * x[:, 0] - sin * x[:, 1], sin * x[:, 0] + cos * x[:, 1]], axis=1)
    return x, turned + 0.3 * generator.normal(size=(n, 2))


def test_the_radial_candidate_keeps_the_terms_whose_validation_value_is_highest() -> None:
    """Where y turns with the norm of x, the fit of up to two terms keeps two and scores more on its
    validation pairs than the fit of one term (1.68 and 2.13 nats when measured); a critic of one
    term widened by zeros to the features of two scores exactly as it did (the columns of the term
    it did not keep add nothing)."""
    x, y = _turned_rows(4000, seed=6)
    fit = [(x[:3000], y[:3000])]
    validation = [tuple(torch.as_tensor(side[3000:], dtype=torch.float32) for side in (x, y))]
    one, _, (value_one,) = fit_gaussian_critics(fit, validation, 500, features="radial", terms=1)
    two, _, (value_two,) = fit_gaussian_critics(fit, validation, 500, features="radial", terms=2)
    assert (int(one.terms[0]), int(two.terms[0])) == (1, 2)
    assert (one.map_x.shape[-1], two.map_x.shape[-1]) == (4, 6)
    assert value_two > value_one + 0.3
    pad = torch.nn.functional.pad
    widened = GaussianCritics(
        pad(one.mean_x, (0, 2)), pad(one.mean_y, (0, 2)), pad(one.map_x, (0, 2, 0, 2)),
        pad(one.map_y, (0, 2, 0, 2)), pad(one.rho, (0, 2)), one.weight, one.terms, features="radial",
    )  # fmt: skip
    probe = validation[0][0][:50], validation[0][1][:50]
    torch.testing.assert_close(widened.run(0)(*probe), one.run(0)(*probe))


def test_the_estimate_reports_the_radial_terms_kept_and_refuses_none() -> None:
    """Through ``estimate``: on y turned with the norm of x, ``radial_terms=2`` keeps the radial
    candidate of two terms, says so, and gives more than one term; 0 terms is refused by name."""
    x, y = _turned_rows(3000, seed=8)
    settings = {"steps": 1, "eval_every": 1, "batch_size": 64, "ensemble": 1, "seed": 0}
    one = estimate(x, y, estimator="infonce", radial_terms=1, **settings)
    two = estimate(x, y, estimator="infonce", radial_terms=2, **settings)
    assert two.details["kept"][0].startswith("the gaussian critic on radial features to c^2")
    assert two.value > one.value + 0.2
    with pytest.raises(ParameterError, match="radial_terms"):
        estimate(x, y, estimator="infonce", radial_terms=0, **settings)


def test_cross_fitting_agrees_with_the_plain_split_and_scores_every_pair() -> None:
    """A 2 x 2 Gaussian of 0.5 nats: 3 folds and the one split give the truth within their noise;
    the folds score all n pairs, the split its 20%."""
    sample = CorrelatedGaussian(2, mi=0.5).sample(3000, generator=torch.Generator().manual_seed(3))
    x, y = (side.numpy() for side in sample)
    settings = {"steps": 300, "hidden": 32, "batch_size": 128, "eval_every": 50, "ensemble": 1, "seed": 1}
    split, folds = (
        estimate(x, y, estimator="infonce", **settings),
        estimate(x, y, estimator="infonce", folds=3, **settings),
    )
    assert (split.details["n_test"], folds.details["n_test"]) == (600, 3000)
    assert split.value == pytest.approx(0.5, abs=0.1) and folds.value == pytest.approx(0.5, abs=0.1)
    assert folds.ci_low <= 0.5 + 0.05 and "3 folds" in folds.interval


def test_auto_keeps_rank_scores_unless_another_preparation_is_clearly_ahead_on_validation() -> None:
    """normalise="auto" gives, for each data set, the estimate that rank or standard alone gives on
    the same split (the same value up to float rounding): rank scores unless z-scores' kept critics score
    higher on the validation pairs by more than AUTO_MARGIN standard errors of the paired chunk
    values. On Student-t pairs of one degree of freedom (2 x 2; the dependence is through a shared
    scale, the tails heavy) z-scores leave the critic a few extreme rows and rank scores win by far;
    the choice follows the validation pairs, not the test pairs."""
    task = student_t(2, 2, dof=1.0)
    samples = [task.sample(1500, torch.Generator().manual_seed(seed)) for seed in (0, 1)]
    rows = [(x.double().numpy(), y.double().numpy(), None) for x, y in samples]
    settings = {"steps": 200, "hidden": 32, "hidden_layers": 2, "eval_every": 25, "ensemble": 1}
    auto = estimators.get("infonce", normalise="auto", **settings)._estimate_many(rows, [3, 4], None)
    alone = {
        name: estimators.get("infonce", normalise=name, **settings)._estimate_many(rows, [3, 4], None)
        for name in ("rank", "standard")
    }
    for dataset, result in enumerate(auto):
        values = result.details["validation_by_normalise"]
        assert result.details["normalise"] == "rank"
        assert result.value == pytest.approx(alone["rank"][dataset].value, abs=1e-5)
        for name in values:  # the kept critic's value on the validation pairs, chunk by chunk
            assert values[name] == pytest.approx(alone[name][dataset].details["validation_value"], abs=0.02)
        assert values["rank"] > values["standard"] + 0.05
        assert result.details["advantage_by_normalise"]["standard"] < -AUTO_MARGIN
        assert "validation_chunks" not in result.details


@pytest.mark.slow
def test_auto_keeps_z_scores_where_the_dependence_is_in_the_scale_that_rank_scores_bend() -> None:
    """Y names one of five scales of X (10 dimensions, X ~ N(0, s^2 I), s = 1 .. 5, as bmi's
    concentric Gaussians): rank scores of each column bend the norm that carries the information,
    z-scores keep it, and their critics are ahead on the validation pairs by far more than the
    margin; the estimate is z-scores' own, and higher on the test pairs too."""
    generator = np.random.default_rng(0)
    component = generator.integers(1, 6, size=3000)
    x = component[:, None] * generator.normal(size=(3000, 10))
    y = component[:, None] + 0.01 * generator.normal(size=(3000, 1))
    settings = {"steps": 600, "hidden": 64, "hidden_layers": 2, "eval_every": 50, "seed": 1}
    auto = estimate(x, y, estimator="infonce", normalise="auto", **settings)
    alone = {
        name: estimate(x, y, estimator="infonce", normalise=name, **settings) for name in ("rank", "standard")
    }
    # the same estimate up to float rounding (auto trains both preparations as one batched model)
    assert auto.details["normalise"] == "standard"
    assert auto.value == pytest.approx(alone["standard"].value, abs=1e-5)
    assert auto.details["advantage_by_normalise"]["standard"] > AUTO_MARGIN
    assert alone["standard"].value > alone["rank"].value


def test_auto_does_not_follow_a_lead_within_the_noise_of_the_validation_pairs() -> None:
    """The choice itself (:func:`mitool.estimators.neural._kept_preparation`): z-scores ahead of rank
    scores by 0.03 nats on average over 20 chunks that differ by 0.3 from chunk to chunk (about half
    a standard error) keep rank scores; ahead by 0.3 (about 5 standard errors), z-scores."""
    from mitool.estimators.base import Estimate
    from mitool.estimators.neural import _kept_preparation

    noise = np.random.default_rng(0).normal(scale=0.3, size=20)
    noise -= noise.mean()

    def result(value: float, chunks: np.ndarray) -> Estimate:
        return Estimate.from_stderr(value, 0.01, 0.95, interval="normal", estimator="infonce", n_pairs=1000,
                                    details={"validation_chunks": chunks})  # fmt: skip

    rank = result(0.5, np.full(20, 0.4))
    close = _kept_preparation({"rank": rank, "standard": result(0.6, 0.43 + noise)})
    ahead = _kept_preparation({"rank": rank, "standard": result(0.6, 0.7 + noise)})
    assert close.details["normalise"] == "rank" and close.value == 0.5
    assert 0 < close.details["advantage_by_normalise"]["standard"] < AUTO_MARGIN
    assert ahead.details["normalise"] == "standard" and ahead.value == 0.6
    assert ahead.details["validation_by_normalise"] == pytest.approx({"rank": 0.4, "standard": 0.7})
    one_chunk = _kept_preparation(
        {"rank": result(0.5, np.full(1, 0.4)), "standard": result(0.6, np.full(1, 0.9))}
    )
    assert one_chunk.details["normalise"] == "rank"  # a lead without a measure of its noise is no evidence


def test_auto_trains_once_where_rank_scores_and_z_scores_barely_differ() -> None:
    """Gaussian columns: rank scores and z-scores differ by about 0.02 (RMS), under AUTO_SAME, so
    auto trains on rank scores alone and gives rank's estimate; the cube of a Gaussian column
    differs by far more, and auto tries both."""
    generator = np.random.default_rng(0)
    x = generator.normal(size=(2000, 3))
    y = x + generator.normal(size=(2000, 3))
    settings = {"steps": 60, "hidden": 16, "hidden_layers": 1, "eval_every": 20, "seed": 0}
    auto = estimate(x, y, estimator="infonce", normalise="auto", **settings)
    assert list(auto.details["validation_by_normalise"]) == ["rank"]
    assert auto.value == estimate(x, y, estimator="infonce", normalise="rank", **settings).value
    cubed = estimate(x**3, y, estimator="infonce", normalise="auto", **settings)
    assert list(cubed.details["validation_by_normalise"]) == ["rank", "standard"]


def test_a_run_without_its_gaussian_scores_zero_and_leaves_the_others_as_they_were() -> None:
    """base="mixed": the members that start alone get the zero critic (rho = 0, w = 1): every score
    exactly 0, whatever the inputs; the other runs score as before, a share of unrelated pairs kept."""
    x, y = _correlated_rows(300, 3, 2, seed=2)
    *parts, observed = canonical_fit(x, y)
    one = [torch.as_tensor(part) for part in (*parts, related_correlations(observed, 0.7), np.float64(0.7))]
    critics = GaussianCritics(*(torch.stack([part, part]) for part in one))
    kept = critics.without([1])
    x_batch, y_batch = (
        torch.as_tensor(x[:6])[None].expand(2, -1, -1),
        torch.as_tensor(y[:4])[None].expand(2, -1, -1),
    )
    before, after = critics.all_pairs(x_batch, y_batch), kept.all_pairs(x_batch, y_batch)
    assert torch.equal(after[0], before[0]) and before[1].abs().min() > 0
    assert torch.equal(after[1], torch.zeros(6, 4, dtype=after.dtype))
    assert torch.equal(critics.rho[1], torch.as_tensor(one[4]))  # the original is not changed


def test_mixed_base_keeps_the_member_on_the_gaussian_where_it_validates_highest() -> None:
    """A dense Gaussian in 10 + 10 dimensions: the member on the Gaussian base validates far above the
    one that starts alone, so the estimate is that member's alone, equal to the lone run on the base
    with the same seed (the same initial weights and batches; neither stops early); details say so."""
    generator = np.random.default_rng(0)
    x = generator.normal(size=(800, 10))
    y = 0.8 * x + 0.6 * generator.normal(size=(800, 10))
    common = {"steps": 40, "eval_every": 10, "patience": 100, "hidden": 16, "hidden_layers": 1,
              "batch_size": 64, "radial": False}  # fmt: skip
    mixed = estimators.get("infonce", base="mixed", ensemble=2, **common).estimate(x, y, seed=0)
    alone = estimators.get("infonce", base="gaussian", ensemble=1, **common).estimate(x, y, seed=0)
    assert mixed.details["ensemble_kept"] == ["member 0"] and mixed.details["base"] == "mixed"
    assert mixed.details["kept"][1] == "the network alone"
    assert mixed.details["kept"][0].startswith("the network on the gaussian base of rank 10")
    assert mixed.value == pytest.approx(alone.value, abs=1e-5)
    assert mixed.value > 3.5  # true MI: -5 log(1 - 0.8^2) = 5.1 nats (a lower bound, capped by its block)
