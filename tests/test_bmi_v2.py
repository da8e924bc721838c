"""The ``bmi-v2`` suite (:mod:`mitool.benchmark.bmi_v2`) against bmi itself: its 26 task ids in
order, the true MI bmi reports, and bmi's own samples (../shared/bmi-samples/v2, or the folder named
by MITOOL_BMI_SAMPLES; those tests skip without it); the mixtures' Monte Carlo truths against a
smaller Monte Carlo and against independent low-dimensional quadratures, and the closed-form truths
against scipy's entropies and textbook formulas."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import numpy as np
import pytest
import torch
from scipy import integrate, special, stats

from mitool.benchmark import bmi_v2
from mitool.benchmark.suites import suite
from mitool.tasks import Standardised


def _samples_folder() -> Path | None:
    named = os.environ.get("MITOOL_BMI_SAMPLES")
    base = Path(named) if named else Path(__file__).resolve().parents[2] / "shared" / "bmi-samples"
    for folder in (base / "v2", base):
        if (folder / "tasks.json").is_file():
            return folder
    return None


SAMPLES = _samples_folder()
needs_samples = pytest.mark.skipif(SAMPLES is None, reason="bmi's samples (shared/bmi-samples) are absent")
TASKS = {task.name: task for task in suite("bmi-v2")}
MIXTURES = [name for name, task in TASKS.items() if bmi_v2.is_mixture(task)]
BMI_MC_DRAWS, OUR_MC_DRAWS = 100_000, 2_000_000


def _bmi_entries() -> list[dict]:
    return json.loads((SAMPLES / "tasks.json").read_text())["tasks"]


def _standardised(values: np.ndarray) -> np.ndarray:
    values = np.asarray(values, dtype=np.float64)
    scale = values.std(axis=0)
    return (values - values.mean(axis=0)) / np.where(scale > 0, scale, 1.0)


def test_the_suite_is_registered_standardised_and_its_mixtures_carry_their_errors() -> None:
    tasks = suite("bmi-v2")
    assert [task.name for task in tasks] == [task.name for task in bmi_v2.bmi_v2_suite()]
    assert len(tasks) == 26 and all(isinstance(task, Standardised) for task in tasks)
    assert len(MIXTURES) == 13 and set(MIXTURES) == set(bmi_v2.MONTE_CARLO_MI)
    for name in MIXTURES:
        mi, error = bmi_v2.MONTE_CARLO_MI[name]
        assert TASKS[name].mi == mi and 0 < error <= 0.005
    x, y = tasks[0].sample(1000, torch.Generator().manual_seed(0), dtype=torch.float64)
    assert abs(float(x.mean())) < 1e-12 and float(x.std(correction=0)) == pytest.approx(1.0)


@needs_samples
def test_ids_order_dimensions_and_mutual_information_are_bmis() -> None:
    entries = _bmi_entries()
    assert list(TASKS) == [entry["task_id"] for entry in entries]
    files = sorted(path.name.rpartition("__seed")[0] for path in SAMPLES.glob("*__seed*.npz"))
    assert sorted(set(files)) == sorted(TASKS)
    for entry in entries:
        task = TASKS[entry["task_id"]]
        assert (task.dim_x, task.dim_y) == (entry["dim_x"], entry["dim_y"])
        if entry["task_id"] in MIXTURES:  # bmi's Monte Carlo: 100 000 draws, so an error sqrt(20) ours
            error = bmi_v2.MONTE_CARLO_MI[task.name][1] * math.sqrt(1 + OUR_MC_DRAWS / BMI_MC_DRAWS)
            assert task.mi == pytest.approx(entry["mi_true_nats"], abs=max(0.01, 4 * error)), task.name
        else:
            assert task.mi == pytest.approx(entry["mi_true_nats"], rel=1e-6), task.name


@pytest.mark.parametrize("name", MIXTURES)
def test_the_monte_carlo_truth_is_reproduced_by_a_smaller_monte_carlo(name: str) -> None:
    stored, stored_error = bmi_v2.MONTE_CARLO_MI[name]
    mi, error = bmi_v2.monte_carlo_mi(TASKS[name], 20_000, seed=5)
    assert mi == pytest.approx(stored, abs=4 * math.hypot(error, stored_error))


# ----------------------------------------------------------------------------------------------
# independent truths: quadratures of the mixtures, formulas of the closed-form tasks


def _normal_2d(x, y, mean_x, mean_y, var_x, var_y, cov):
    det = var_x * var_y - cov * cov
    dx, dy = x - mean_x, y - mean_y
    return np.exp(-0.5 * (var_y * dx * dx - 2 * cov * dx * dy + var_x * dy * dy) / det) / (
        2 * math.pi * math.sqrt(det)
    )


def _grid_mi(components, xs: np.ndarray, ys: np.ndarray) -> float:
    """I(X; Y) of a mixture of bivariate normals (weight, mean_x, mean_y, var_x, var_y, cov) by the
    trapezoid rule on a grid (spectrally accurate for such smooth, fast-decaying integrands)."""
    grid_x, grid_y = np.meshgrid(xs, ys, indexing="ij")
    joint = sum(w * _normal_2d(grid_x, grid_y, *rest) for w, *rest in components)
    p_x = sum(w * stats.norm.pdf(xs, mx, math.sqrt(vx)) for w, mx, my, vx, vy, c in components)
    p_y = sum(w * stats.norm.pdf(ys, my, math.sqrt(vy)) for w, mx, my, vx, vy, c in components)
    assert joint.sum() * (xs[1] - xs[0]) * (ys[1] - ys[0]) == pytest.approx(1.0, abs=1e-9)
    positive = joint > 1e-300
    terms = joint[positive] * np.log(joint[positive] / np.outer(p_x, p_y)[positive])
    return float(terms.sum() * (xs[1] - xs[0]) * (ys[1] - ys[0]))


def _concentric_mi(dim: int, components: int) -> float:
    """I(X; K) = I(|X|; K), |X| given K = i being i times a chi law with ``dim`` degrees of freedom;
    Y ~ N(i, 1e-4) names i (the components lie 100 standard deviations apart)."""
    radius = np.linspace(1e-9, components * (math.sqrt(dim) + 12), 200_001)
    log_chi = np.stack([
        (dim - 1) * np.log(radius / i) - radius**2 / (2 * i * i) - math.log(i)
        - (dim / 2 - 1) * math.log(2) - math.lgamma(dim / 2)
        for i in range(1, components + 1)
    ])  # fmt: skip
    log_mixture = special.logsumexp(log_chi, axis=0) - math.log(components)
    terms = (np.exp(log_chi) * (log_chi - log_mixture)).sum(0)
    return float(terms.sum() * (radius[1] - radius[0]) / components)


def _inliers_mi(fraction: float, rho: float = 0.8) -> float:
    """With a = (x + y)/sqrt 2, b = (x - y)/sqrt 2 per correlated pair, the Gaussian pointwise MI is
    g = -log(1 - rho^2) + rho/(2(1+rho)) sum a^2 - rho/(2(1-rho)) sum b^2; the marginals are the
    same Gaussians in both components, so the mixture's is log((1 - f) e^g + f). Under the
    correlated component g = c + rho (s - t) for s, t ~ Exp(1) (s - t Laplace); under the product
    g = c + rho s / (1 + rho) - rho t / (1 - rho)."""
    constant = -math.log(1 - rho * rho)

    def pointwise(g: float) -> float:
        return float(np.logaddexp(math.log(1 - fraction) + g, math.log(fraction)))

    def expectation(density) -> float:
        return sum(integrate.quad(density, *limits, limit=200)[0] for limits in ((-np.inf, 0), (0, np.inf)))

    signal = expectation(lambda d: 0.5 * math.exp(-abs(d)) * pointwise(constant + rho * d))
    up, down = rho / (1 + rho), rho / (1 - rho)

    def product_density(w: float) -> float:
        return (math.exp(-w / up) if w >= 0 else math.exp(w / down)) / (up + down)

    product = expectation(lambda w: product_density(w) * pointwise(constant + w))
    return (1 - fraction) * signal + fraction * product


def _quadrature(name: str) -> float:
    if name == "1v1-X-0.9":
        grid = np.linspace(-9, 9, 721)
        return _grid_mi([(0.5, 0, 0, 1, 1, 0.9), (0.5, 0, 0, 1, 1, -0.9)], grid, grid)
    if name == "1v1-AI":
        leg = 0.95 * math.sqrt(0.04 * 0.2)
        letters = [(1, 0, .01, .2, 0), (1, 1, .05, .001, 0), (1, -1, .05, .001, 0), (-.8, -.2, .03, .001, 0),
                   (-1.2, 0, .04, .2, leg), (-.4, 0, .04, .2, -leg)]  # fmt: skip
        grid_x, grid_y = np.linspace(-3, 3, 601), np.linspace(-3.5, 3.5, 701)
        return _grid_mi([(1 / 6, *letter) for letter in letters], grid_x, grid_y)
    if name.startswith("2v1-waves"):  # the second coordinate of X is independent N(0, 1) noise
        waves = [(1 / 12, 1.5 * k, 1.5 * (k % 4), 0.1, 0.1, 0) for k in range(12)]
        return _grid_mi(waves, np.linspace(-4, 21, 1251), np.linspace(-4, 9, 651))
    if name.startswith("2v1-galaxy"):  # (x1 + x2)/sqrt 2 is sufficient, (x1 - x2)/sqrt 2 noise
        halves = [(0.5, s * 1.5 * math.sqrt(2), s * 1.5, 1, 1, 0) for s in (-1, 1)]
        return _grid_mi(halves, np.linspace(-11, 11, 441), np.linspace(-10, 10, 401))
    if "concentric" in name:
        dim, _, components = name.partition("v1-concentric_gaussians-")
        return _concentric_mi(int(dim), int(components))
    return _inliers_mi(float(name.rpartition("-")[2]))


@pytest.mark.parametrize("name", MIXTURES)
def test_the_monte_carlo_truth_agrees_with_a_quadrature(name: str) -> None:
    stored, error = bmi_v2.MONTE_CARLO_MI[name]
    assert stored == pytest.approx(_quadrature(name), abs=4 * error)


def _student_mi(dim: int, dof: int) -> float:
    entropy = [stats.multivariate_t(np.zeros(k), np.eye(k), df=dof).entropy() for k in (dim, 2 * dim)]
    return 2 * entropy[0] - entropy[1]


def _dense_mi(dim: int, correlation: float = 0.5) -> float:
    covariance = np.full((2 * dim, 2 * dim), correlation) + (1 - correlation) * np.eye(2 * dim)
    whiten = np.linalg.inv(np.linalg.cholesky(covariance[:dim, :dim]))
    canonical = np.linalg.svd(whiten @ covariance[:dim, dim:] @ whiten.T, compute_uv=False)
    return float(-0.5 * np.log1p(-(canonical**2)).sum())


CLOSED_FORM = {
    "1v1-additive-0.75": 1 / (4 * 0.75),
    "asinh-student-identity-1-1-1": _student_mi(1, 1),
    "swissroll_x-normal_cdf-1v1-normal-0.75": -0.5 * math.log(1 - 0.75**2),
    **{f"multinormal-dense-{d}-{d}-0.5": _dense_mi(d) for d in (5, 25, 50)},
    **{f"multinormal-sparse-{d}-{d}-2-2.0": -math.log(1 - 0.8**2) for d in (5, 25)},
    **{f"asinh-student-identity-{d}-{d}-{nu}": _student_mi(d, nu) for d, nu in ((2, 1), (3, 2), (5, 2))},
    **{f"spiral-multinormal-sparse-{d}-{d}-2-2.0": -math.log(1 - 0.8**2) for d in (3, 5)},
}


def test_the_closed_form_truths_against_independent_formulas() -> None:
    assert set(CLOSED_FORM) == set(TASKS) - set(MIXTURES)
    for name, truth in CLOSED_FORM.items():
        assert TASKS[name].mi == pytest.approx(truth, rel=1e-9, abs=1e-12), name


def test_the_mixture_densities_against_scipy_and_the_maps_inverses() -> None:
    galaxy = TASKS["2v1-galaxy-0.5-3.0"].base  # Mapped(GaussianMixture)
    mixture = galaxy.base
    x, y = mixture._draw(200, torch.Generator().manual_seed(2))
    rows = torch.cat([x, y], 1).numpy()
    means, covariances = mixture.means.numpy(), mixture.covariances.numpy()

    def log_mixture(values: np.ndarray, part: slice) -> np.ndarray:
        return special.logsumexp(
            [np.log(0.5) + stats.multivariate_normal(m[part], c[part, part]).logpdf(values)
             for m, c in zip(means, covariances, strict=True)], axis=0,
        )  # fmt: skip

    expected = log_mixture(rows, slice(0, 3)) - log_mixture(rows[:, :2], slice(0, 2))
    expected -= log_mixture(rows[:, 2:], slice(2, 3))
    assert np.allclose(mixture.log_density_ratio(x, y).numpy(), expected, atol=1e-10)
    mapped = galaxy.x_map(x)
    assert torch.allclose(galaxy.log_density_ratio(mapped, y), mixture.log_density_ratio(x, y), atol=1e-9)
    assert mixture.log_density_ratio(x[:5, None], y[None, :7]).shape == (5, 7)
    waves = TASKS["2v1-waves-12-5.0-3.0"].base
    x, _ = waves.base._draw(500, torch.Generator().manual_seed(3))
    assert torch.allclose(waves.x_map.inverse(waves.x_map(x)), x, atol=1e-9)
    assert torch.allclose(galaxy.x_map.inverse(galaxy.x_map(x)), x, atol=1e-9)


# ----------------------------------------------------------------------------------------------
# our draws against bmi's


@needs_samples
@pytest.mark.parametrize("name", list(TASKS))
def test_our_samples_and_bmis_agree_in_distribution(name: str) -> None:
    """A two-sample Kolmogorov-Smirnov test per column, for the norms of the rows of X and of Y and
    for x_1 y_1 (p above 0.001 over the number of tests: Bonferroni); and the Spearman correlation
    matrices of all the columns within 0.05. Both samples are drawn unscaled and standardised alike
    (by the mean and deviation of bmi's columns): a sample's own standardisation moves the sharp
    edges of the swiss roll's marginals enough for the test to tell two of bmi's own seeds apart."""
    entry = next(entry for entry in _bmi_entries() if entry["task_id"] == name)
    theirs = []
    for item in entry["files"].values():
        with np.load(SAMPLES / item["file"]) as archive:
            theirs.append(np.hstack([archive["x"], archive["y"]]).astype(np.float64))
    theirs = np.vstack(theirs)
    x, y = TASKS[name].base._draw(40_000, torch.Generator().manual_seed(17))  # unscaled
    ours = np.hstack([x.numpy(), y.numpy()])
    centre, scale = theirs.mean(axis=0), theirs.std(axis=0)
    ours, theirs = (ours - centre) / scale, (theirs - centre) / scale
    dim_x = x.shape[1]

    def features(rows: np.ndarray) -> np.ndarray:
        norms = [np.linalg.norm(rows[:, :dim_x], axis=1), np.linalg.norm(rows[:, dim_x:], axis=1)]
        return np.column_stack([rows, *norms, rows[:, 0] * rows[:, dim_x]])

    ours_features, theirs_features = features(ours), features(theirs)
    columns = ours_features.shape[1]
    p_values = [stats.ks_2samp(ours_features[:, j], theirs_features[:, j]).pvalue for j in range(columns)]
    assert min(p_values) > 1e-3 / columns, (name, int(np.argmin(p_values)), min(p_values))
    ranks = [stats.spearmanr(rows).statistic for rows in (ours, theirs)]
    assert np.abs(np.subtract(*ranks)).max() <= 0.05
