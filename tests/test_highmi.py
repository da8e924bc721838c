"""The ``highmi`` suite (:mod:`mitool.benchmark.highmi`): its grid and names, every task's MI against
an independent Monte Carlo (the optimal critic, scipy's Student-t density, the Gaussian MI of the
sample covariance with its exact Wishart bias removed), the fixed rotation, and the image tasks'
injectivity (the latent recovered from the image by a computation of the test's own) and copula MI."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest
import torch
from scipy.special import digamma
from scipy.stats import multivariate_t, norm

from mitool.benchmark import suites
from mitool.benchmark.highmi import (
    GaussianBumps,
    ImageTask,
    Rectangles,
    highmi_suite,
    rotated_map,
    rotation,
)

TASKS = highmi_suite()
DRAWS = 20_000


def _nominal(task) -> float:
    return float(re.fullmatch(r".*-([0-9.]+)nats", task.name).group(1))


def _draw(task, n: int, seed: int):
    return task._draw(n, torch.Generator().manual_seed(seed))


def _within(values: np.ndarray | torch.Tensor, target: float, errors: float = 4.0) -> None:
    values = np.asarray(values, dtype=np.float64)
    spread = errors * values.std() / math.sqrt(len(values))
    assert abs(values.mean() - target) <= spread, (values.mean(), target, spread)


def test_the_grid_names_and_registration() -> None:
    names = [task.name for task in TASKS]
    assert 30 <= len(TASKS) <= 40 and len(set(names)) == len(names)
    assert suites.task_names("highmi") == names
    assert {task.family for task in TASKS} == {"normal", "student-t", "mapped", "mixed-map", "images"}
    for task in TASKS:  # (1e-6: the 1 x 1 at 10 nats has 1 - rho^2 = 2e-9, its log-det loses 1e-8)
        assert task.mi == pytest.approx(_nominal(task), abs=1e-6), task.name
    normal = {(t.dim_x, round(t.mi, 6)) for t in TASKS if t.family == "normal"}
    square = {(d, mi) for d in (5, 20) for mi in (2, 5, 10, 15, 20)}
    assert normal == square | {(1, 2), (1, 5), (1, 10), (64, 10), (64, 20)}
    student = {(t.dof, t.dim_x, round(t.mi, 6)) for t in TASKS if t.family == "student-t"}
    assert student == {(3, 5, 5), (3, 5, 10), (5, 5, 5), (5, 5, 10), (3, 2, 10), (5, 20, 10)}
    assert all(t.name.startswith(f"student{t.dof:g}-") for t in TASKS if t.family == "student-t")
    for family in ("mapped", "mixed-map"):
        assert {round(t.mi, 6) for t in TASKS if t.family == family} == {5.0, 10.0}
    images = [t for t in TASKS if t.family == "images"]
    assert {round(t.mi, 6) for t in images} == {2.5, 5.0, 10.0}
    assert {t.name for t in images} >= {"bumps16-2.5nats", "bumps32-5nats", "rectangles16-10nats"}
    for task in images:
        assert task.dim_x == task.dim_y == math.prod(task.image_shape)
    assert [t.name for t in TASKS if t.family == "mixed-map"] == [
        "rotated-halfcube-5x5-5nats", "rotated-halfcube-5x5-10nats", "rotated-asinh-20x20-10nats",
        "spiral-5x5-5nats", "spiral-5x5-10nats",
    ]  # fmt: skip


def _wishart_offset(dim: int, n: int) -> float:
    """E log det S - log det Sigma for the sample covariance S (divisor n - 1) of n Gaussian rows:
    (n - 1) S is Wishart with n - 1 degrees of freedom."""
    return dim * math.log(2.0 / (n - 1)) + float(sum(digamma((n - 1 - i) / 2) for i in range(dim)))


@pytest.mark.parametrize("task", [t for t in TASKS if t.family != "images"], ids=lambda t: t.name)
def test_the_optimal_critic_averages_to_the_mi(task) -> None:
    """The mean of log p(x, y) / (p(x) p(y)) over 20 000 joint draws (through the maps' inverses,
    whose Jacobians cancel) is the closed-form MI, within 4 standard errors."""
    x, y = _draw(task, DRAWS, 7)
    assert x.shape == (DRAWS, task.dim_x) and x.dtype == torch.float64
    _within(task.log_density_ratio(x, y), task.mi)


@pytest.mark.parametrize("task", [t for t in TASKS if t.family == "normal"], ids=lambda t: t.name)
def test_the_gaussian_mi_of_the_sample_covariance(task) -> None:
    """1/2 log(det S_xx det S_yy / det S) over 20 000 draws, less its exact expected bias
    (Wishart: about d_x d_y / 2n), within 4 of its asymptotic standard deviations sqrt(sum rho^2 / n)
    (plus 1e-3 for the 1 x 1 tasks' float rounding)."""
    x, y = _draw(task, DRAWS, 8)
    joint = torch.cat([x, y], dim=1).T.cov()
    d = task.dim_x

    def logdet(matrix: torch.Tensor) -> float:
        return float(torch.linalg.slogdet(matrix)[1])

    plug_in = 0.5 * (logdet(joint[:d, :d]) + logdet(joint[d:, d:]) - logdet(joint))
    bias = 0.5 * (2 * _wishart_offset(d, DRAWS) - _wishart_offset(2 * d, DRAWS))
    rho_squared = -math.expm1(-2.0 * task.mi / d)
    assert plug_in - bias == pytest.approx(task.mi, abs=4 * math.sqrt(d * rho_squared / DRAWS) + 1e-3)


@pytest.mark.parametrize("task", [t for t in TASKS if t.family == "student-t"], ids=lambda t: t.name)
def test_scipys_student_t_density_gives_the_mi(task) -> None:
    """The log density ratio from scipy's multivariate_t (joint and marginal sub-blocks of the
    dispersion, same nu) averages to the MI, within 4 standard errors."""
    x, y = (part.numpy() for part in _draw(task, DRAWS, 9))
    shape, d = task.split.matrix.numpy(), task.dim_x

    def logpdf(rows: np.ndarray, block: np.ndarray) -> np.ndarray:
        return multivariate_t(np.zeros(len(block)), block, df=task.dof).logpdf(rows)

    ratio = logpdf(np.hstack([x, y]), shape) - logpdf(x, shape[:d, :d]) - logpdf(y, shape[d:, d:])
    _within(ratio, task.mi)


def test_the_rotation_is_orthogonal_fixed_and_mixes_coordinates() -> None:
    for dim, seed in ((5, 2703), (5, 2704), (20, 2703), (64, 1)):
        q = rotation(dim, seed)
        assert torch.allclose(q @ q.T, torch.eye(dim, dtype=torch.float64), atol=1e-12)
        assert torch.equal(q, rotation(dim, seed))
    assert not torch.allclose(rotation(5, 2703), rotation(5, 2704))
    fingerprint = [-0.4894478110853573, 0.2566437239836304, 0.20545916838681932, -0.7558464771821984]
    assert rotation(5, 2703)[0, :4].tolist() == pytest.approx(fingerprint, abs=1e-10)
    mixing = rotated_map("half-cube", 2703)
    assert not mixing.coordinatewise
    x = torch.randn(100, 5, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    assert torch.allclose(mixing.inverse(mixing(x)), x, atol=1e-10)
    nudged = x.clone()
    nudged[:, 0] += 0.1
    assert torch.all((mixing(nudged) - mixing(x)).abs() > 0)  # one input moves every output
    with pytest.raises(ValueError, match="coordinate-wise"):
        rotated_map("spiral", 1)


def _bump_centres(images: np.ndarray, width: float) -> np.ndarray:
    """The centre (horizontal, vertical) from ratios of neighbouring pixels: for pixel centres g and
    g + 1/W along an axis, log(I(g + 1/W) / I(g)) = (2u - 2g - 1/W) / (2 W s^2), so
    u = g + 1/(2W) + W s^2 log(I(g + 1/W) / I(g)); averaged over all neighbouring pairs."""
    _, height, size = images.shape
    logs = np.log(images)
    centres = (np.arange(size) + 0.5) / size
    horizontal = centres[:-1] + 0.5 / size + size * width**2 * np.diff(logs, axis=2)
    rows = (np.arange(height) + 0.5) / height
    vertical = rows[:-1, None] + 0.5 / height + height * width**2 * np.diff(logs, axis=1)
    return np.stack([horizontal.mean(axis=(1, 2)), vertical.mean(axis=(1, 2))], axis=1)


def _rectangle_latents(images: np.ndarray, task: Rectangles) -> np.ndarray:
    """The latent from coverage sums: the largest column sum is h H (a fully covered column exists),
    the coverage of column j is its sum / (h H), and x0 W is the uncovered length left of the first
    full column, sum of (1 - coverage); (1 - x1) W the same on the right."""
    latents = []
    for image in images:
        ends = []
        for sums in (image.sum(axis=0), image.sum(axis=1)):  # columns (x), then rows (y)
            coverage = sums / sums.max()
            full = np.flatnonzero(coverage > 1 - 1e-12)
            pixels = len(coverage)
            start = (1 - coverage[: full[0]]).sum() / pixels
            end = 1 - (1 - coverage[full[-1] + 1 :]).sum() / pixels
            ends.append((start, end))
        (x0, x1), (y0, y1) = ends
        span = task.max_side - task.min_side
        w, h = x1 - x0, y1 - y0
        latents.append([x0 / (1 - w), y0 / (1 - h), (w - task.min_side) / span, (h - task.min_side) / span])
    return np.array(latents)


IMAGES = [t for t in TASKS if isinstance(t, ImageTask)]


@pytest.mark.parametrize("task", IMAGES, ids=lambda t: t.name)
def test_the_image_is_injective_in_its_latent(task) -> None:
    n = 300 if task.image_shape[0] > 16 else 1000
    u, v = task.draw_latent(n, torch.Generator().manual_seed(5))
    x, y = _draw(task, n, 5)
    assert torch.equal(x, task.render(u)) and torch.equal(y, task.render(v))
    assert x.shape == (n, task.dim_x) and 0 <= x.min() and x.max() <= 1
    images = x.numpy().reshape(n, *task.image_shape)
    if isinstance(task, GaussianBumps):
        recovered = _bump_centres(images, task.width)
    else:
        recovered = _rectangle_latents(images, task)
        sides = task.min_side + (task.max_side - task.min_side) * u.numpy()[:, 2:]
        assert images.sum(axis=(1, 2)) == pytest.approx(sides.prod(axis=1) * task.dim_x, rel=1e-12)
    assert np.abs(recovered - u.numpy()).max() < 1e-6
    assert torch.allclose(task.decode(x), u, atol=1e-9) and torch.allclose(task.decode(y), v, atol=1e-9)
    assert (task.decode(x.float()) - u).abs().max() < 1e-5  # float32 images still hold the latent
    # the log density ratio through the decoded latents
    _within(task.log_density_ratio(x, y), task.mi, errors=5.0)


@pytest.mark.parametrize("task", IMAGES, ids=lambda t: t.name)
def test_the_latent_copula_has_the_mi(task) -> None:
    """z = Phi^-1(latent) are k pairs of unit Gaussians with correlation rho: their sample
    correlations, and the mean of sum_i [-1/2 log(1 - rho^2) - (z_y - rho z_x)^2 / (2(1 - rho^2))
    + z_y^2 / 2] within 4 standard errors of the nominal MI, with rho^2 = 1 - exp(-2 I / k)."""
    u, v = task.draw_latent(DRAWS, torch.Generator().manual_seed(6))
    k = task.latent_dim
    assert u.shape == v.shape == (DRAWS, k) and 0 < u.min() and u.max() < 1
    z_x, z_y = norm.ppf(u.numpy()), norm.ppf(v.numpy())
    one_minus = math.exp(-2.0 * _nominal(task) / k)
    rho = math.sqrt(1 - one_minus)
    correlations = np.corrcoef(z_x.T, z_y.T)[:k, k:]
    assert np.abs(np.diag(correlations) - rho).max() < 4 * (1 - rho**2) / math.sqrt(DRAWS) + 1e-3
    assert np.abs(correlations - np.diag(np.diag(correlations))).max() < 0.05
    ratio = (-0.5 * math.log(one_minus) - (z_y - rho * z_x) ** 2 / (2 * one_minus) + z_y**2 / 2).sum(1)
    _within(ratio, task.mi)
