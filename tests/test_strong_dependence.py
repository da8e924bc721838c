"""Strong dependence (issue 27): no capped or saturating number is presented as the estimate; images
are samples like any other."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from scipy.special import digamma

import mitool
from mitool._infra.files import read_csv
from mitool.checks import ParameterError
from mitool.cli.main import main
from mitool.estimators.base import Estimate
from mitool.estimators.ksg import SATURATION_GAP, ksg_ceiling
from mitool.trust import FLOW_BIAS_ALLOWANCE, beyond_the_ceiling


def _pair(n: int, mi: float, dim: int = 1, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Correlated Gaussians with I(X; Y) = mi nats over ``dim`` coordinate pairs."""
    rng = np.random.default_rng(seed)
    rho = math.sqrt(-math.expm1(-2 * mi / dim))
    x = rng.normal(size=(n, dim))
    return x, rho * x + math.sqrt(1 - rho**2) * rng.normal(size=(n, dim))


def test_the_ksg_ceiling_is_psi_n_minus_psi_k_and_no_estimate_passes_it() -> None:
    assert ksg_ceiling(10_000, 5) == pytest.approx(digamma(10_000) - digamma(5))
    assert ksg_ceiling(1000, 3, 5) == pytest.approx(np.mean([digamma(1000) - digamma(k) for k in (3, 4, 5)]))
    x = np.random.default_rng(1).normal(size=(2000, 1))
    # y a strictly increasing function of x: infinite MI, and KSG stops at its ceiling
    result = mitool.estimate(x, np.sinh(x), estimator="ksg", ties="dequantise")
    assert result.value <= result.details["ceiling"] + 1e-9
    assert result.details["saturating"] is True and result.ci_high == math.inf


def test_ksg_on_a_small_sample_with_a_large_k_is_a_lower_bound_only_near_its_ceiling() -> None:
    """n = 178, k = 20 (the tests' k on a small table): the ceiling psi(n) - psi(k) is 2.21 nats, and
    the gap measured there (PLANE_GAPS, bench/ksg_saturation.py) flags from 0.46; the fixed 2.5
    flagged every estimate. A weak dependence is an estimate with a finite interval, a strong one
    a lower bound."""
    from mitool.estimators.ksg import PLANE_GAPS, saturation_gap

    assert saturation_gap(2, 178, 20) == PLANE_GAPS[178, 20] < SATURATION_GAP == saturation_gap(3, 178, 20)
    weak_x, weak_y = _pair(178, mi=0.3, dim=1)
    weak = mitool.estimate(weak_x, weak_y, estimator="ksg", k=20)
    assert weak.details["ceiling"] == pytest.approx(ksg_ceiling(178, 20))
    assert 0.21 < weak.value < ksg_ceiling(178, 20) - PLANE_GAPS[178, 20]  # flagged by the one gap of 2.0
    assert weak.details["saturating"] is False and math.isfinite(weak.ci_high)
    strong_x, strong_y = _pair(178, mi=4.0, dim=1)
    strong = mitool.estimate(strong_x, strong_y, estimator="ksg", k=20)
    assert strong.details["saturating"] is True and strong.ci_high == math.inf


def test_the_ksg_gaps_are_those_of_the_measurement_in_bench_results() -> None:
    """PLANE_GAPS is C - m + 3 s rounded up to 0.05, recomputed here from the measurement's rows: C
    the ceiling, m the mean estimate at the last truth within max(0.1, 10%) before the first that is
    not (the largest truth where none is not), s its standard deviation."""
    from mitool.estimators.ksg import PLANE_GAPS, PLANE_GAPS_II, SATURATION_GAP_PLANE, saturation_gap

    def measured(name: str) -> dict:
        rows = json.loads((Path(__file__).parent.parent / "bench/results" / name).read_text())
        gaps = {}
        for key in {(row["n"], row["k"]) for row in rows}:
            ladder = sorted(
                (row for row in rows if (row["n"], row["k"]) == key), key=lambda row: row["truth"]
            )
            misses = [
                i
                for i, row in enumerate(ladder)
                if abs(row["mean"] - row["truth"]) > max(0.1, 0.1 * row["truth"])
            ]
            last = ladder[misses[0] - 1] if misses else ladder[-1]
            gaps[key] = math.ceil(round((last["ceiling"] - last["mean"] + 3 * last["sd"]) * 20, 9)) / 20
        return gaps

    gaps = measured("ksg_saturation.json")
    assert gaps == PLANE_GAPS
    assert measured("ksg_saturation_ii.json") == PLANE_GAPS_II  # estimator II against its own ceiling
    # estimator II: the larger of the two tables' gaps where both are measured, estimator I's elsewhere
    assert saturation_gap(2, 3000, 3, variant=2) == PLANE_GAPS_II[3000, 3] > PLANE_GAPS[3000, 3]
    assert saturation_gap(2, 1000, 5, variant=2) == PLANE_GAPS[1000, 5] > PLANE_GAPS_II[1000, 5]
    assert saturation_gap(2, 1000, 20, variant=2) == saturation_gap(2, 1000, 20)
    assert SATURATION_GAP_PLANE == max(gaps.values())
    # between grid points the larger neighbour; outside the grid the largest gap
    assert saturation_gap(2, 2000, 7) == max(PLANE_GAPS[n, k] for n in (1000, 3000) for k in (5, 10))
    assert saturation_gap(2, 10**6, 5) == max(PLANE_GAPS[3000, 5], PLANE_GAPS[10000, 5])
    assert saturation_gap(2, 1000, 3, 20) == max(PLANE_GAPS[1000, k] for k in (3, 5, 10, 20))
    assert saturation_gap(2, 99, 5) == saturation_gap(2, 1000, 2) == saturation_gap(2, 1000, 21) == 2.0


def test_ksg_near_its_ceiling_is_a_lower_bound_open_above_and_says_what_to_use() -> None:
    x, y = _pair(3000, mi=12.0)
    result = mitool.estimate(x, y, estimator="ksg")
    ceiling = result.details["ceiling"]
    assert result.value >= ceiling - SATURATION_GAP and result.value < 12.0 - 3  # far short of the MI
    assert result.ci_high == math.inf and result.ci_low < result.value
    sentence = result.explain()
    assert f"is at least {result.value:.4f} nats" in sentence and "inf)" in sentence
    assert "estimator flow" in sentence and "gaussian" in sentence


def test_ksg_well_below_its_ceiling_keeps_its_two_sided_interval() -> None:
    x, y = _pair(2000, mi=0.5)
    result = mitool.estimate(x, y, estimator="ksg")
    assert result.details["saturating"] is False
    assert result.ci_low < 0.5 < result.ci_high < math.inf
    assert "at least" not in str(result)


def _estimate(value: float, low: float, high: float, name: str, **details: object) -> Estimate:
    return Estimate(value, (high - low) / 4, low, high, 0.95, "test", name, 100, 0.0, details=details)


def test_beyond_the_ceiling_takes_the_uncapped_estimate_that_agrees_with_the_lower_bound() -> None:
    capped = _estimate(6.8, 6.7, 6.9, "infonce", ceiling=6.9078).as_lower_bound("capped")
    uncapped = _estimate(10.2, 10.0, 10.4, "flow")
    chosen = beyond_the_ceiling(capped, uncapped)
    assert (chosen.value, chosen.ci_high, chosen.estimator) == (10.2, 10.4, "flow")
    assert chosen.details["capped"] == 6.8 and "infonce gave 6.8000 nats" in chosen.notes[-1]


def test_beyond_the_ceiling_keeps_the_lower_bound_when_the_uncapped_estimate_falls_below_it() -> None:
    capped = _estimate(6.8, 6.7, 6.9, "infonce", ceiling=6.9078).as_lower_bound("capped")
    uncapped = _estimate(5.0, 4.9, 5.1, "flow")
    chosen = beyond_the_ceiling(capped, uncapped)
    assert (chosen.value, chosen.ci_high, chosen.estimator) == (6.8, math.inf, "infonce")
    assert chosen.details["uncapped"] == 5.0 and "at least this much" in chosen.notes[-1]


def _bumps(n: int, pixels: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Images of a Gaussian bump at a latent point u in [0, 1]^2, and v = u + noise."""
    rng = np.random.default_rng(seed)
    u = rng.uniform(size=(n, 2))
    grid = (np.arange(pixels) + 0.5) / pixels
    gx, gy = np.meshgrid(grid, grid)
    images = np.exp(-((gx - u[:, 0, None, None]) ** 2 + (gy - u[:, 1, None, None]) ** 2) / (2 * 0.2**2))
    return images, u + 0.05 * rng.normal(size=(n, 2))


def test_images_are_rows_of_pixels_with_a_note() -> None:
    images, v = _bumps(1500, 6)
    as_images = mitool.estimate(images, v, estimator="ksg")
    as_rows = mitool.estimate(images.reshape(1500, -1), v, estimator="ksg")
    assert as_images.value == as_rows.value  # the same rows, the same estimate
    assert "x: 1500 images of 6 x 6, each flattened to a row of 36 pixels" in as_images.notes
    channels = mitool.estimate(images[:, None], v, estimator="ksg")  # (n, C, H, W)
    assert channels.value == as_rows.value and any("1 x 6 x 6" in note for note in channels.notes)
    with pytest.raises(ParameterError, match=r"^x must have one row per sample"):
        mitool.estimate(images[:, None, None], v)


def test_image_files_on_the_command_line(tmp_path: Path) -> None:
    images, v = _bumps(800, 5)
    np.save(tmp_path / "images.npy", images)
    np.save(tmp_path / "v.npy", v)
    files = [str(tmp_path / "images.npy"), str(tmp_path / "v.npy")]
    args = ["estimate", *files, "--estimator", "ksg", "--quiet"]
    report = json.loads(CliRunner().invoke(main, [*args, "--json"], catch_exceptions=False).stdout)
    expected = mitool.estimate(images.reshape(800, -1), v, estimator="ksg")
    assert report["value"] == pytest.approx(expected.value)
    assert sum(note.lower().startswith("x: 800 images of 5 x 5") for note in report["notes"]) == 1


@pytest.mark.slow
def test_image_files_on_the_command_line_go_to_the_encoded_flows_by_default(tmp_path: Path) -> None:
    """Both sides images of bumps (u and u + 0.05 noise, I = 3.334 nats by quadrature): the default
    encodes them and estimates with flow, as mitool.estimate does with the same arrays."""
    rng = np.random.default_rng(1)
    u = rng.uniform(size=(1500, 2))
    x, y = _bump_images(u, 8), _bump_images(u + 0.05 * rng.normal(size=(1500, 2)), 8)
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "y.npy", y)
    args = ["estimate", str(tmp_path / "x.npy"), str(tmp_path / "y.npy"), "--encoder-steps", "300",
            "--steps", "100", "--quiet", "--json"]  # fmt: skip
    report = json.loads(CliRunner().invoke(main, args, catch_exceptions=False).stdout)
    expected = mitool.estimate(x, y, encoder_steps=300, steps=100)
    assert report["estimator"] == expected.estimator == "flow"
    # the default's flow errs low as its InfoNCE does: the bias allowance measured on the highmi suite
    high = expected.ci_high + FLOW_BIAS_ALLOWANCE * expected.value
    assert expected.details["bias_high"] == pytest.approx(high)
    assert any("on the highmi suite at n = 10 000" in note for note in report["notes"])
    assert report["value"] == pytest.approx(expected.value) == pytest.approx(3.334, rel=0.15)
    for side in "xy":  # once each, as estimate() says it
        assert sum(note.startswith(f"{side}: 1500 images of 8 x 8") for note in report["notes"]) == 1


def test_toy_run_draws_whole_estimators_beside_the_bounds(tmp_path: Path) -> None:
    args = ["toy", "run", "--mi", "2,8", "--steps-per-stage", "20", "--dim", "2", "--estimators", "infonce",
            "--beside", "gaussian,ksg", "--beside-pairs", "3000", "--out", str(tmp_path / "run"),
            "--quiet"]  # fmt: skip
    result = CliRunner().invoke(main, args, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    rows = read_csv(tmp_path / "run" / "beside.csv")
    assert [(row["estimator"], float(row["true_mi"])) for row in rows] == [
        ("gaussian", 2.0), ("ksg", 2.0), ("gaussian", 8.0), ("ksg", 8.0)
    ]  # fmt: skip
    for row in rows:
        if row["estimator"] == "gaussian":  # the right model: within 5% of the staircase's MI
            assert float(row["estimate"]) == pytest.approx(float(row["true_mi"]), rel=0.05)
    ksg_at_8 = rows[3]  # 3000 pairs: KSG's ceiling psi(3000) - psi(5) = 6.5 nats, below the MI
    assert float(ksg_at_8["estimate"]) < 6.6 and float(ksg_at_8["ci_high"]) == math.inf
    assert (tmp_path / "run" / "staircase.png").stat().st_size > 0


def test_toy_run_refuses_an_unknown_estimator_beside_in_one_line(tmp_path: Path) -> None:
    args = ["toy", "run", "--beside", "flows", "--out", str(tmp_path / "run")]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 2 and len(result.stderr.strip().splitlines()) == 1
    assert "beside" in result.stderr and "ksg" in result.stderr
    assert not (tmp_path / "run").exists()  # refused before anything ran


@pytest.mark.slow
def test_the_default_hands_a_saturating_infonce_estimate_to_the_flow_route() -> None:
    """10 nats in 5 x 5 Gaussians: InfoNCE's held-out value cannot pass log(K + 1) (6.2 nats with
    600 test pairs); the default says so and reports the uncapped flow estimate instead."""
    x, y = _pair(3000, mi=10.0, dim=5, seed=3)
    result = mitool.estimate(x, y, steps=300, eval_every=50)
    assert result.estimator == "flow" and result.value == pytest.approx(10.0, rel=0.05)
    assert result.ci_low < result.value < result.ci_high < math.inf
    assert result.details["capped"] < 6.5
    assert any("infonce gave" in note and "near its ceiling" in note for note in result.notes)


def _bump_images(latent: np.ndarray, pixels: int) -> np.ndarray:
    grid = (np.arange(pixels) + 0.5) / pixels
    gx, gy = np.meshgrid(grid, grid)
    return np.exp(
        -((gx - latent[:, 0, None, None]) ** 2 + (gy - latent[:, 1, None, None]) ** 2) / (2 * 0.2**2)
    )


def _uniform_plus_noise_mi(sigma: float, dims: int = 2) -> float:
    """I(U; U + sigma N) for U uniform on [0, 1]^dims, by quadrature: dims (h(U + sigma N) - h(sigma N)),
    the density of U + sigma N being Phi(t / sigma) - Phi((t - 1) / sigma) in each coordinate."""
    from scipy import integrate, stats

    def density(t: float) -> float:
        return float(stats.norm.cdf(t / sigma) - stats.norm.cdf((t - 1) / sigma))

    entropy = -integrate.quad(lambda t: density(t) * math.log(max(density(t), 1e-300)), -10 * sigma,
                              1 + 10 * sigma, limit=200)[0]  # fmt: skip
    return dims * (entropy - 0.5 * math.log(2 * math.pi * math.e * sigma**2))


@pytest.mark.slow
def test_flow_encodes_images_to_their_surface_and_estimates_their_mi() -> None:
    """Images of bumps at u and at v = u + 0.05 noise (u uniform on the unit square): 64 pixels a
    side on a 2-dimensional surface, and I = I(U; V) = 3.334 nats by quadrature, since the drawing is
    injective. One autoencoder serves both sides (the same number of columns), to TwoNN's 2
    coordinates; the flows then estimate within 10% (3.14 measured; the full settings at n = 10 000
    are in docs/mi-benchmark.md)."""
    truth = _uniform_plus_noise_mi(0.05)
    assert truth == pytest.approx(3.334, abs=0.001)
    rng = np.random.default_rng(0)
    u = rng.uniform(size=(2000, 2))
    x, y = _bump_images(u, 8), _bump_images(u + 0.05 * rng.normal(size=(2000, 2)), 8)
    reports: list[tuple[int, int]] = []
    result = mitool.estimate(x, y, estimator="flow", encode=True, encoder_steps=400, steps=200,
                             progress=lambda done, total, value: reports.append((done, total)))  # fmt: skip
    assert result.value == pytest.approx(truth, rel=0.1)
    # one bar for the encoder's 400 steps and the flows' 200: the encoder every 100 steps, then the flows
    assert reports[:4] == [(100, 600), (200, 600), (300, 600), (400, 600)] and reports[4][0] > 400
    assert all(total == 600 for _, total in reports) and reports == sorted(reports)
    assert result.details["encoding_x"]["dimension"] == result.details["encoding_y"]["dimension"] == 2
    assert any(
        "encoded to 2 coordinates by an autoencoder shared by x and y" in note for note in result.notes
    )
    with pytest.raises(ParameterError, match=r"^x has 64 columns that lie near a subspace of lower"):
        mitool.estimate(x, y, estimator="flow")  # without encode=True


def test_the_default_sends_images_to_the_flows_and_tables_to_infonce() -> None:
    from mitool.estimation import prepare

    images, v = _bumps(1500, 8)
    prepared = prepare(images, _bump_images(v, 8))
    assert prepared.estimator.name == "flow"
    assert prepared.estimator.settings.encode is True
    assert any(
        "pixels lie near a lower-dimensional surface: estimator flow" in note for note in prepared.notes
    )
    assert prepare(images.reshape(1500, -1), v).estimator.name == "infonce"  # rows of a table, not images
    x, y = _pair(1500, mi=1.0, dim=5)
    collinear = np.column_stack([x, x[:, 0] + x[:, 1] + 1e-4 * x[:, 2]])  # a table with a near-sum column
    assert prepare(collinear, y).estimator.name == "infonce"


def test_twonn_gives_the_dimension_of_a_flat_or_curved_surface() -> None:
    """TwoNN's dimension of a 3-dimensional subspace of R^10 and of a torus (2-dimensional) in R^4."""
    from mitool.estimators.encoding import intrinsic_dimension

    rng = np.random.default_rng(0)
    flat = rng.uniform(size=(3000, 3)) @ rng.normal(size=(3, 10))
    assert intrinsic_dimension(flat) == pytest.approx(3.0, abs=0.3)
    a, b = rng.uniform(0, 2 * np.pi, size=(2, 3000))
    torus = np.stack([np.cos(a), np.sin(a), np.cos(b), np.sin(b)], axis=1)
    assert intrinsic_dimension(torus) == pytest.approx(2.0, abs=0.2)


def test_a_side_of_one_repeated_row_is_refused_by_its_own_name() -> None:
    """TwoNN on one image repeated: the error names the side it was given as (the flows pass it)."""
    from mitool.checks import ParameterError
    from mitool.estimators.encoding import intrinsic_dimension

    images = np.tile(np.random.default_rng(0).normal(size=(1, 64)), (600, 1))
    with pytest.raises(ParameterError, match=r"^y has fewer than two distinct rows"):
        intrinsic_dimension(images, name="y")


def test_where_flow_refuses_the_default_keeps_the_lower_bound_open_above(monkeypatch) -> None:
    from mitool import estimation
    from mitool.estimators import flow

    monkeypatch.setattr(flow, "COLLINEARITY", 2.0)  # every side refused, as images are without encoding
    monkeypatch.setattr(flow, "_encodings", lambda *arguments: ({}, False))
    monkeypatch.setattr(estimation, "on_a_surface", lambda rows: False)  # the default stays InfoNCE
    x, y = _pair(3000, mi=10.0, dim=5, seed=3)
    result = mitool.estimate(x, y, steps=300, eval_every=50)
    assert result.estimator == "infonce" and result.ci_high == math.inf and result.value < 6.5
    assert any("flow (not capped) does not take these data" in note for note in result.notes)
    assert f"is at least {result.value:.4f} nats" in str(result)


def test_quantile_scores_are_rank_scores_up_to_1024_rows_and_keep_close_values_apart_beyond() -> None:
    from mitool.estimators.preparation import normal_scores, quantile_scores

    rng = np.random.default_rng(4)
    small = rng.exponential(size=(800, 2))
    for got, want in zip(quantile_scores(small, small[:5]), normal_scores(small, small[:5]), strict=True):
        np.testing.assert_allclose(got, want, atol=1e-12)  # every training value is a knot
    train = rng.exponential(size=(20_000, 1))
    (scores,) = quantile_scores(train)
    assert np.all(np.diff(scores[np.argsort(train[:, 0]), 0]) > 0)  # strictly increasing on the training rows
    pairs = quantile_scores(train, np.array([[1.0], [1.0 + 1e-7]]))[1]
    assert 0 < pairs[1, 0] - pairs[0, 0] < 1e-5  # 1e-7 apart: apart, in proportion (ranks: 0 or a whole step)
    assert abs(scores.mean()) < 0.01 and abs(scores.std() - 1) < 0.01


def test_the_plugin_gaussian_mi_bias_is_what_independent_gaussians_give() -> None:
    """Independent Gaussians have MI 0, so the plug-in Gaussian MI's mean over samples is its bias."""
    from mitool.estimators.gaussian import gaussian_mi, plugin_mi_bias

    rng = np.random.default_rng(5)
    values = [gaussian_mi(*np.split(rng.normal(size=(300, 20)), 2, axis=1), bias_correction=False)
              for _ in range(200)]  # fmt: skip
    expected = plugin_mi_bias(10, 10, 299)
    assert expected == pytest.approx(100 / (2 * 300), rel=0.25)  # about dx dy / 2n
    assert np.mean(values) == pytest.approx(expected, abs=4 * np.std(values) / np.sqrt(len(values)))


def test_flow_refuses_a_model_whose_held_out_ratio_and_closed_form_disagree() -> None:
    from mitool.estimators.flow import _refuse_misfit

    _refuse_misfit(9.65, 9.22)  # rotated asinh at 10 nats: the flows fit, 4.5% apart
    _refuse_misfit(0.003, -0.001)
    with pytest.raises(ParameterError, match=r"^x and y could not be made jointly Gaussian by the flows"):
        _refuse_misfit(16.544, -3.784)  # rectangles as images, pixels dequantised
    with pytest.raises(ParameterError, match=r"16\.000 nats against its closed form 20\.000"):
        _refuse_misfit(20.0, 16.0)


def test_the_gaussian_estimator_refuses_images_whose_pixels_lie_on_a_surface() -> None:
    images, v = _bumps(2000, 8)
    with pytest.raises(ParameterError, match=r"^x has 64 columns that lie near a subspace of lower"):
        mitool.estimate(images, v, estimator="gaussian")
    x, y = _pair(2000, mi=3.0, dim=20)  # 20 correlated Gaussian columns a side are no surface
    assert mitool.estimate(x, y, estimator="gaussian").value == pytest.approx(3.0, abs=0.15)
