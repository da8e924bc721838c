"""mitool.bounds against plain float64 implementations written independently here (numpy/scipy),
and the algebraic identities between the bounds."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from scipy.special import logsumexp, softmax

from mitool import bounds


def random_scores(
    batch: int, negatives: int, scale: float = 3.0, seed: int = 0
) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    pos = torch.randn(batch, generator=generator) * scale + 1.0
    neg = torch.randn(batch, negatives, generator=generator) * scale
    return pos, neg


# -- plain references, float64, written from the formulas in the issue ------------------------


def reference(name: str, pos: np.ndarray, neg: np.ndarray, **options: float) -> tuple[float, float]:
    pos = pos.astype(np.float64)
    neg = neg.astype(np.float64)
    batch, negatives = neg.shape
    log_mean_exp_neg = logsumexp(neg) - math.log(neg.size)
    if name == "infonce":
        loss = np.mean([logsumexp(np.concatenate([[pos[i]], neg[i]])) - pos[i] for i in range(batch)])
        return loss, math.log(negatives + 1) - loss
    if name == "eqco":
        alpha = options["alpha"]
        loss = np.mean(
            [
                logsumexp(np.concatenate([[pos[i]], neg[i] + math.log(alpha / negatives)])) - pos[i]
                for i in range(batch)
            ]
        )
        return loss, math.log(alpha + 1) - loss
    if name == "dcl":
        loss = np.mean(logsumexp(neg, axis=1) - pos)
        return loss, math.log(negatives) - loss
    if name == "dclw":
        weight = 2 - batch * softmax(pos * options["temperature"] / options["sigma"])
        loss = np.mean(logsumexp(neg, axis=1) - weight * pos)
        return loss, math.log(negatives) - np.mean(logsumexp(neg, axis=1) - pos)
    if name == "nwj":
        mi = pos.mean() - math.exp(-1) * np.exp(neg).mean()
        return -mi, mi
    if name == "dv":
        mi = pos.mean() - log_mean_exp_neg
        return -mi, mi
    if name == "js":
        softplus = np.logaddexp(0.0, -pos).mean() + np.logaddexp(0.0, neg).mean()
        return softplus, pos.mean() + 1 - np.exp(neg).mean()
    if name == "smile":
        clip = options["clip"]
        softplus = np.logaddexp(0.0, -pos).mean() + np.logaddexp(0.0, neg).mean()
        clipped = np.clip(neg, -clip, clip)
        return softplus, pos.mean() - (logsumexp(clipped) - math.log(neg.size))
    raise AssertionError(name)


CASES = [
    ("infonce", {}),
    ("eqco", {"alpha": 37.0}),
    ("eqco", {"alpha": 4096.0}),
    ("dcl", {}),
    ("dclw", {"sigma": 0.5, "temperature": 0.2}),
    ("nwj", {}),
    ("dv", {}),
    ("js", {}),
    ("smile", {"clip": 5.0}),
    ("smile", {"clip": 0.7}),
]


@pytest.mark.parametrize(("name", "options"), CASES)
@pytest.mark.parametrize(("batch", "negatives"), [(1, 1), (7, 1), (16, 5), (33, 200)])
def test_formula_matches_plain_float64(name: str, options: dict, batch: int, negatives: int) -> None:
    pos, neg = random_scores(batch, negatives, scale=2.0, seed=batch * 1000 + negatives)
    result = bounds.get(name, **options)(pos, neg)
    expected_loss, expected_mi = reference(name, pos.numpy(), neg.numpy(), **options)
    assert result.loss.dtype == torch.float32 and result.loss.dim() == 0
    assert result.loss.item() == pytest.approx(expected_loss, rel=1e-5, abs=1e-5)
    assert result.mi.item() == pytest.approx(expected_mi, rel=1e-5, abs=1e-5)


@pytest.mark.parametrize("name", ["infonce", "eqco", "dcl", "dclw", "dv", "smile"])
def test_large_scores_and_many_negatives_are_finite_and_exact(name: str) -> None:
    """K = 65536 with scores of magnitude 1e3: no overflow, no NaN, and still the exact value."""
    generator = torch.Generator().manual_seed(1)
    pos = (torch.rand(4, generator=generator) * 2 - 1) * 1000
    neg = (torch.rand(4, 65536, generator=generator) * 2 - 1) * 1000
    options = {"eqco": {"alpha": 256.0}, "dclw": {"sigma": 0.5, "temperature": 0.2}, "smile": {"clip": 5.0}}
    pos.requires_grad_(True)
    neg.requires_grad_(True)
    result = bounds.get(name, **options.get(name, {}))(pos, neg)
    result.loss.backward()
    assert torch.isfinite(result.loss) and torch.isfinite(result.mi)
    assert torch.isfinite(pos.grad).all() and torch.isfinite(neg.grad).all()
    expected_loss, expected_mi = reference(
        name, pos.detach().numpy(), neg.detach().numpy(), **options.get(name, {})
    )
    assert result.loss.item() == pytest.approx(expected_loss, rel=1e-5, abs=1e-3)
    assert result.mi.item() == pytest.approx(expected_mi, rel=1e-5, abs=1e-3)


def test_large_batch_all_pairs_is_finite() -> None:
    """B = 4096 (K = 4095 from the all-pairs matrix) with scores of magnitude 1e3."""
    generator = torch.Generator().manual_seed(2)
    scores = ((torch.rand(4096, 4096, generator=generator) * 2 - 1) * 1000).requires_grad_(True)
    pos, neg = bounds.split_scores(scores)
    for name in ("infonce", "dcl"):
        result = bounds.get(name)(pos, neg)
        (grad,) = torch.autograd.grad(result.loss, scores)
        assert torch.isfinite(result.loss) and torch.isfinite(grad).all()
        # the softmax weights of a row sum to one: sum_j |d loss / d S_ij| over the negatives of row i
        # equals |d loss / d S_ii| for infonce, and 1/B for dcl
        off_diagonal = grad.detach().abs().sum(1) - grad.detach().diagonal().abs()
        if name == "infonce":
            assert torch.allclose(off_diagonal, grad.detach().diagonal().abs(), atol=1e-7)
        else:
            assert torch.allclose(off_diagonal, torch.full((4096,), 1 / 4096), rtol=1e-4)


def test_nwj_and_js_overflow_to_minus_infinity_not_nan() -> None:
    pos = torch.tensor([1000.0, -1000.0])
    neg = torch.tensor([[1000.0, -1000.0], [0.0, 1.0]], requires_grad=True)
    for function in (bounds.nwj, bounds.js):
        result = function(pos, neg)
        assert result.mi.item() == -math.inf
        assert not torch.isnan(result.loss)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("name", ["infonce", "eqco", "dcl", "dv", "smile"])
def test_low_precision_inputs_are_computed_in_float32(name: str, dtype: torch.dtype) -> None:
    pos, neg = random_scores(64, 4096, scale=20.0, seed=3)
    pos_low, neg_low = pos.to(dtype), neg.to(dtype)
    options = {"alpha": 256.0} if name == "eqco" else {}
    result = bounds.get(name, **options)(pos_low, neg_low)
    assert result.loss.dtype == torch.float32
    # the same (rounded) values in float32 give the same number: no low-precision arithmetic inside
    exact = bounds.get(name, **options)(pos_low.float(), neg_low.float())
    assert result.loss.item() == pytest.approx(exact.loss.item(), rel=1e-6, abs=1e-6)
    pos_low.requires_grad_(True)
    bounds.get(name, **options)(pos_low, neg_low).loss.backward()
    assert pos_low.grad.dtype == dtype and torch.isfinite(pos_low.grad.float()).all()


def test_under_cpu_autocast_the_bound_stays_float32() -> None:
    generator = torch.Generator().manual_seed(4)
    query = torch.nn.functional.normalize(torch.randn(32, 16, generator=generator), dim=1)
    keys = torch.nn.functional.normalize(torch.randn(32, 16, generator=generator), dim=1)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        scores = query @ keys.T / 0.07
        assert scores.dtype == torch.bfloat16
        result = bounds.infonce(*bounds.split_scores(scores))
    assert result.loss.dtype == torch.float32
    plain = bounds.infonce(*bounds.split_scores(scores.float()))
    assert result.loss.item() == pytest.approx(plain.loss.item(), rel=1e-6)


# -- identities ---------------------------------------------------------------------------------


def test_eqco_with_alpha_equal_to_k_is_infonce_exactly() -> None:
    pos, neg = random_scores(50, 64, seed=5)
    plain = bounds.infonce(pos, neg)
    calibrated = bounds.eqco(pos, neg, alpha=64)
    assert torch.equal(plain.loss, calibrated.loss) and torch.equal(plain.mi, calibrated.mi)


@pytest.mark.parametrize("alpha", [1.0, 16.0, 65536.0])
def test_eqco_margin_form_equals_alpha_over_k_form(alpha: float) -> None:
    """The paper's margin form: cross-entropy with label 0 over [s_0 - m/tau, s_1..s_K] where
    m = tau * log(alpha / K), written with the usual concatenation."""
    temperature = 0.2
    generator = torch.Generator().manual_seed(6)
    similarity_pos = torch.rand(40, generator=generator) * 2 - 1
    similarity_neg = torch.rand(40, 128, generator=generator) * 2 - 1
    margin = temperature * math.log(alpha / 128)
    logits = torch.cat([(similarity_pos - margin)[:, None], similarity_neg], dim=1) / temperature
    margin_loss = F.cross_entropy(logits, torch.zeros(40, dtype=torch.long))
    result = bounds.eqco(similarity_pos / temperature, similarity_neg / temperature, alpha=alpha)
    assert result.loss.item() == pytest.approx(margin_loss.item(), rel=1e-6)


def test_infonce_equals_cross_entropy_with_label_zero() -> None:
    pos, neg = random_scores(30, 300, seed=7)
    logits = torch.cat([pos[:, None], neg], dim=1)
    assert bounds.infonce(pos, neg).loss.item() == pytest.approx(
        F.cross_entropy(logits, torch.zeros(30, dtype=torch.long)).item(), rel=1e-6
    )


def test_dcl_is_infonce_without_the_positive_in_the_denominator() -> None:
    pos, neg = random_scores(30, 50, seed=8)
    with_positive = bounds.infonce(pos, neg).loss
    without = bounds.dcl(pos, neg).loss
    # -log e^{pos} / sum_k e^{neg_k}, written with the concatenation and a masked positive
    logits = torch.cat([pos[:, None], neg], dim=1)
    masked = logits.clone()
    masked[:, 0] = -math.inf
    plain = (torch.logsumexp(masked, dim=1) - pos).mean()
    assert without.item() == pytest.approx(plain.item(), rel=1e-6)
    assert with_positive.item() > without.item()  # the positive only ever adds to the denominator


def test_dclw_weight_is_detached_and_averages_to_one() -> None:
    pos, neg = random_scores(12, 9, seed=9)
    pos.requires_grad_(True)
    bounds.dclw(pos, neg, sigma=0.5, temperature=0.1).loss.backward()
    weight = 2 - 12 * torch.softmax(pos.detach() * 0.1 / 0.5, dim=0)
    assert weight.mean().item() == pytest.approx(1.0, abs=1e-6)
    assert torch.allclose(pos.grad, -weight / 12, atol=1e-7)


def test_npc_multiplier_is_one_minus_positive_softmax_weight() -> None:
    pos, neg = random_scores(20, 10, seed=10)
    logits = torch.cat([pos[:, None], neg], dim=1)
    expected = (1 - torch.softmax(logits, dim=1)[:, 0]).mean()
    assert bounds.infonce(pos, neg).npc.item() == pytest.approx(expected.item(), rel=1e-5)
    assert bounds.dcl(pos, neg).npc.item() == pytest.approx(expected.item(), rel=1e-5)
    assert bounds.dv(pos, neg).npc is None


def test_infonce_gradient_identity() -> None:
    """For the InfoNCE family, the softmax weights of the negatives of anchor i sum to 1 - p_0."""
    pos, neg = random_scores(25, 40, seed=11)
    pos.requires_grad_(True)
    neg.requires_grad_(True)
    bounds.eqco(pos, neg, alpha=10).loss.backward()
    assert torch.allclose(neg.grad.sum(1), -pos.grad, atol=1e-7)


def test_mine_value_is_dv_and_gradient_uses_moving_average() -> None:
    pos1, neg1 = random_scores(16, 8, scale=1.0, seed=12)
    pos2, neg2 = random_scores(16, 8, scale=1.0, seed=13)
    mine = bounds.Mine(rate=0.25)
    first = mine(pos1.requires_grad_(True), neg1.requires_grad_(True))
    first.loss.backward()
    dv_first = bounds.dv(pos1.detach(), neg1.detach())
    assert first.loss.item() == pytest.approx(dv_first.loss.item(), rel=1e-6)
    # on the first batch the average is the batch mean: the plain DV gradient
    neg_copy = neg1.detach().clone().requires_grad_(True)
    bounds.dv(pos1.detach(), neg_copy).loss.backward()
    assert torch.allclose(neg1.grad, neg_copy.grad, atol=1e-7)

    second = mine(pos2.requires_grad_(True), neg2.requires_grad_(True))
    second.loss.backward()
    assert second.mi.item() == pytest.approx(bounds.dv(pos2.detach(), neg2.detach()).mi.item(), rel=1e-6)
    average = (
        0.75 * np.exp(neg1.detach().numpy().astype(np.float64)).mean()
        + 0.25 * np.exp(neg2.detach().numpy().astype(np.float64)).mean()
    )
    expected_grad = np.exp(neg2.detach().numpy().astype(np.float64)) / (neg2.numel() * average)
    assert np.allclose(neg2.grad.numpy(), expected_grad, rtol=1e-5)
    assert math.exp(mine.log_average.item()) == pytest.approx(average, rel=1e-5)

    mine.reset()
    assert mine.log_average is None
    # evaluation without gradients does not move the average
    mine(pos1.detach(), neg1.detach())
    assert mine.log_average is None


def test_leading_dimensions_are_independent_sets_of_scores() -> None:
    """Stacked runs (5 runs of 8 anchors, and a 2 x 3 grid of them) in one call: each entry of loss,
    mi and npc, and the gradient of the summed losses, equal those of its own scores alone; and the
    same under torch.func.vmap (the toy's training mapped the bounds so before)."""
    pos, neg = random_scores(8 * 6, 6, seed=14)
    for lead in [(6,), (2, 3)]:
        batched_pos = pos.view(*lead, 8).clone().requires_grad_(True)
        batched_neg = neg.view(*lead, 8, 6).clone().requires_grad_(True)
        for name, options in CASES:
            if name == "mine":
                continue
            function = bounds.get(name, **options)
            together = function(batched_pos, batched_neg)
            assert together.mi.shape == together.loss.shape == lead, name
            grads = torch.autograd.grad(together.loss.sum(), (batched_pos, batched_neg))
            flat_pos, flat_neg = batched_pos.reshape(-1, 8), batched_neg.reshape(-1, 8, 6)
            for run in range(6):
                alone_pos = flat_pos[run].detach().clone().requires_grad_(True)
                alone_neg = flat_neg[run].detach().clone().requires_grad_(True)
                alone = function(alone_pos, alone_neg)
                alone_grads = torch.autograd.grad(alone.loss, (alone_pos, alone_neg))
                assert torch.allclose(together.mi.reshape(-1)[run], alone.mi, atol=1e-6), name
                assert torch.allclose(together.loss.reshape(-1)[run], alone.loss, atol=1e-6), name
                if alone.npc is not None:
                    assert torch.allclose(together.npc.reshape(-1)[run], alone.npc, atol=1e-6), name
                assert torch.allclose(grads[0].reshape(-1, 8)[run], alone_grads[0], atol=1e-6), name
                assert torch.allclose(grads[1].reshape(-1, 8, 6)[run], alone_grads[1], atol=1e-6), name
        mapped = torch.func.vmap(lambda p, n: bounds.dclw(p, n).mi)(pos.view(6, 8), neg.view(6, 8, 6))
        assert torch.allclose(mapped, bounds.dclw(pos.view(6, 8), neg.view(6, 8, 6)).mi, atol=1e-6)


def test_split_scores_keeps_leading_dimensions() -> None:
    scores = torch.randn(2, 3, 5, 5)
    pos, neg = bounds.split_scores(scores)
    assert pos.shape == (2, 3, 5) and neg.shape == (2, 3, 5, 4)
    for i in range(2):
        for j in range(3):
            alone = bounds.split_scores(scores[i, j])
            assert torch.equal(pos[i, j], alone[0]) and torch.equal(neg[i, j], alone[1])


# -- split_scores and the registry --------------------------------------------------------------


@pytest.mark.parametrize("batch", [2, 3, 10])
def test_split_scores_against_mask(batch: int) -> None:
    scores = torch.arange(batch * batch, dtype=torch.float32).view(batch, batch)
    pos, neg = bounds.split_scores(scores)
    mask = ~torch.eye(batch, dtype=torch.bool)
    assert torch.equal(pos, scores.diagonal())
    assert torch.equal(neg, scores[mask].view(batch, batch - 1))


def test_registry_names_and_errors() -> None:
    assert set(bounds.NAMES) == {"infonce", "eqco", "dcl", "dclw", "nwj", "dv", "mine", "js", "smile"}
    with pytest.raises(ValueError, match="name must be one of infonce, eqco, .*, got 'infonc'"):
        bounds.get("infonc")
    with pytest.raises(ValueError, match="alpha must be given for bound 'eqco'"):
        bounds.get("eqco")
    with pytest.raises(ValueError, match="alpha is not an option of bound 'infonce' \\(its options: none\\)"):
        bounds.get("infonce", alpha=3.0)
    assert bounds.get("infonce", alpha=None) is bounds.infonce
    first, second = bounds.get("mine"), bounds.get("mine")
    assert isinstance(first, bounds.Mine) and first is not second


@pytest.mark.parametrize("name", bounds.NAMES)
def test_table_defaults_are_the_functions_defaults(name: str) -> None:
    """The table's defaults are the ones a direct call uses: each option is a keyword of the
    function (or of Mine) with the same default, and the function takes no other option."""
    import inspect

    entry = bounds.BOUNDS[name]
    parameters = inspect.signature(entry.function).parameters
    keywords = {key: p.default for key, p in parameters.items() if key not in ("self", "pos", "neg")}
    assert set(keywords) == set(entry.option_names)
    for option in entry.options:
        expected = inspect.Parameter.empty if option.default is None else option.default
        assert keywords[option.name] == expected


def test_table_family_and_ceilings() -> None:
    assert bounds.INFONCE_FAMILY == ("infonce", "eqco", "dcl", "dclw")
    assert bounds.BOUNDS["infonce"].ceiling(63) == pytest.approx(math.log(64))
    assert bounds.BOUNDS["eqco"].ceiling(16, {"alpha": 255}) == pytest.approx(math.log(256))
    assert bounds.BOUNDS["dcl"].ceiling(16) is None and bounds.BOUNDS["nwj"].ceiling(16) is None
    # the ceiling is reached: InfoNCE with a perfect critic (positives far above the negatives)
    pos, neg = torch.full((8,), 50.0), torch.zeros(8, 63)
    assert float(bounds.infonce(pos, neg).mi) == pytest.approx(bounds.BOUNDS["infonce"].ceiling(63), abs=1e-6)


def test_table_picks_a_bounds_options_from_wider_settings() -> None:
    settings = {"alpha": 1024, "sigma": 0.3, "clip": 2.0, "rate": None, "temperature": 0.2, "lr": 1e-3}
    assert bounds.BOUNDS["eqco"].pick_options(settings) == {"alpha": 1024.0}
    assert bounds.BOUNDS["dclw"].pick_options(settings) == {"sigma": 0.3, "temperature": 0.2}
    assert bounds.BOUNDS["mine"].pick_options(settings) == {"rate": 0.01}
    assert bounds.BOUNDS["infonce"].pick_options(settings) == {}
    with pytest.raises(ValueError, match="alpha must be given"):
        bounds.BOUNDS["eqco"].pick_options({"sigma": 0.3})
    with pytest.raises(ValueError, match="clip must be a finite number > 0, got -1"):
        bounds.BOUNDS["smile"].pick_options({"clip": -1})


def test_evaluators_for_follow_the_critics_optimum() -> None:
    """Checked on the analytic optimum of a Gaussian: the critic log-ratio + c(x) (what InfoNCE
    training reaches) is scored right by the InfoNCE family only, and nwj needs log-ratio + 1."""
    assert bounds.evaluators_for("infonce") == bounds.INFONCE_FAMILY
    assert "nwj" not in bounds.evaluators_for("js") and "smile" in bounds.evaluators_for("js")
    assert "nwj" in bounds.evaluators_for("nwj") and "dv" in bounds.evaluators_for("nwj")
    generator = torch.Generator().manual_seed(3)
    rho, batch = 0.8, 4096
    x = torch.randn(batch, generator=generator, dtype=torch.float64)
    y = rho * x + math.sqrt(1 - rho**2) * torch.randn(batch, generator=generator, dtype=torch.float64)
    true_mi = -0.5 * math.log(1 - rho**2)

    def log_ratio(a, b):  # log p(b | a) / p(b) for the bivariate normal
        return -0.5 * math.log(1 - rho**2) - (b - rho * a) ** 2 / (2 * (1 - rho**2)) + b**2 / 2

    shift = 3.0 * x  # a function of the anchor: invisible to the InfoNCE family, fatal to nwj
    scores = log_ratio(x[:, None], y[None, :]) + shift[:, None]
    pos, neg = bounds.split_scores(scores)
    assert float(bounds.dcl(pos, neg).mi) == pytest.approx(true_mi, abs=0.05)
    assert float(bounds.nwj(pos, neg).mi) < true_mi - 1.0
    plus_one = bounds.split_scores(log_ratio(x[:, None], y[None, :]) + 1.0)
    assert float(bounds.nwj(*plus_one).mi) == pytest.approx(true_mi, abs=0.05)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: bounds.infonce(torch.zeros(()), torch.zeros(3)), "pos must have shape"),
        (lambda: bounds.infonce(torch.zeros(3, 1), torch.zeros(3, 4)), r"neg must have shape \(3, 1, K\)"),
        (lambda: bounds.infonce(torch.zeros(3), torch.zeros(3)), r"neg must have shape \(3, K\)"),
        (lambda: bounds.infonce(torch.zeros(3), torch.zeros(4, 2)), "same B anchors"),
        (lambda: bounds.infonce(torch.zeros(2, 3), torch.zeros(3, 3, 2)), r"\(2, 3, K\)"),
        (lambda: bounds.infonce(torch.zeros(3), torch.zeros(3, 0)), "K .* >= 1"),
        (
            lambda: bounds.dv(torch.zeros(3, dtype=torch.long), torch.zeros(3, 2, dtype=torch.long)),
            "floating",
        ),
        (lambda: bounds.eqco(torch.zeros(3), torch.zeros(3, 2), alpha=0), "alpha must be"),
        (lambda: bounds.eqco(torch.zeros(3), torch.zeros(3, 2), alpha=-1), "alpha must be"),
        (lambda: bounds.dclw(torch.zeros(3), torch.zeros(3, 2), sigma=0), "sigma must be"),
        (lambda: bounds.dclw(torch.zeros(3), torch.zeros(3, 2), temperature=-1), "temperature must be"),
        (lambda: bounds.smile(torch.zeros(3), torch.zeros(3, 2), clip=0), "clip must be"),
        (lambda: bounds.Mine(rate=1.5), "rate must be a finite number > 0 and <= 1, got 1.5"),
        (lambda: bounds.split_scores(torch.zeros(3, 4)), "square"),
        (lambda: bounds.split_scores(torch.zeros(1, 1)), "B >= 2"),
    ],
)
def test_bad_arguments_raise_value_error_naming_them(call, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        call()


@pytest.mark.parametrize(
    ("name", "options"), [("infonce", {}), ("eqco", {"alpha": 5.0}), ("dcl", {}), ("dclw", {"sigma": 0.3})]
)
def test_family_from_negative_logsumexp_equals_the_plain_bound(name: str, options: dict) -> None:
    pos, neg = random_scores(11, 23, seed=15)
    plain = bounds.get(name, **options)(pos, neg)
    reduced = bounds.from_negative_logsumexp(name, pos, torch.logsumexp(neg, dim=1), 23, **options)
    for field in ("loss", "mi", "npc"):
        expected = getattr(plain, field).item()
        assert getattr(reduced, field).item() == pytest.approx(expected, rel=1e-6, abs=1e-7)
    with pytest.raises(ValueError, match="name must be one of infonce, eqco, dcl, dclw"):
        bounds.from_negative_logsumexp("nwj", pos, neg[:, 0], 23)
    with pytest.raises(ValueError, match="num_negatives"):
        bounds.from_negative_logsumexp(name, pos, neg[:, 0], 0, **options)


def test_gradients_and_second_derivatives_match_the_cross_entropy_formulation() -> None:
    """The lean log-sum-exp backward against autograd of cat + cross_entropy (first and second
    derivatives, the latter as a Hessian-vector product)."""
    pos, neg = random_scores(6, 9, seed=16)
    pos = pos.double().requires_grad_(True)
    neg = neg.double().requires_grad_(True)
    direction = torch.randn(6, 9, generator=torch.Generator().manual_seed(17), dtype=torch.float64)

    def gradients(loss_function):
        (grad,) = torch.autograd.grad(loss_function(), neg, create_graph=True)
        (hessian_vector,) = torch.autograd.grad((grad * direction).sum(), neg)
        return grad.detach(), hessian_vector

    # mitool computes in float32; compare in float32 against the float64 reference
    ours = gradients(lambda: bounds.infonce(pos, neg).loss)
    reference = gradients(
        lambda: F.cross_entropy(torch.cat([pos[:, None], neg], 1), torch.zeros(6, dtype=torch.long))
    )
    assert torch.allclose(ours[0], reference[0], atol=1e-6)
    assert torch.allclose(ours[1], reference[1], atol=1e-6)


@pytest.mark.parametrize("mapped_by_vmap", [False, True])
def test_pure_mine_on_stacked_runs_equals_one_mine_object_per_run(mapped_by_vmap: bool) -> None:
    """Three steps of five runs, (pos, neg, log average) with a leading run dimension (in one call, or
    mapped by vmap) against five Mine objects."""
    runs = [bounds.Mine(rate=0.1) for _ in range(5)]
    log_average = torch.full((5,), float("nan"))

    def step_of_one_run(p, n, a):
        result, updated = bounds.mine(p, n, a, rate=0.1)
        return result.loss, result.mi, updated

    mapped = torch.func.vmap(step_of_one_run) if mapped_by_vmap else step_of_one_run
    for step in range(3):
        pos, neg = random_scores(5 * 8, 6, scale=1.0, seed=20 + step)
        pos, neg = pos.view(5, 8), neg.view(5, 8, 6).requires_grad_(True)
        loss, mi, log_average = mapped(pos, neg, log_average)
        (grad,) = torch.autograd.grad(loss.sum(), neg)
        for run in range(5):
            neg_run = neg[run].detach().clone().requires_grad_(True)
            single = runs[run](pos[run], neg_run)
            single.loss.backward()
            assert single.mi.item() == pytest.approx(mi[run].item(), rel=1e-6)
            assert torch.allclose(neg_run.grad, grad[run], atol=1e-7)
            assert runs[run].log_average.item() == pytest.approx(log_average[run].item(), rel=1e-6)


def test_takes_option_reads_the_table() -> None:
    """Which bound takes which option comes from BOUNDS alone (toy, vision sweep and the CLI ask it)."""
    taking = {name: [o for o in ("alpha", "sigma", "clip", "rate") if bounds.takes_option(name, o)]
              for name in bounds.NAMES}  # fmt: skip
    assert taking == {
        "infonce": [], "eqco": ["alpha"], "dcl": [], "dclw": ["sigma"], "nwj": [], "dv": [],
        "mine": ["rate"], "js": [], "smile": ["clip"],
    }  # fmt: skip
    assert not bounds.takes_option("ksg", "alpha")
