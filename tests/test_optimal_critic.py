"""The bounds evaluated with the analytic optimal critic of the correlated-Gaussian task, where
the truth is known: caps, tightness and EqCo's claim about gradients."""

from __future__ import annotations

import math

import pytest
import torch

from mitool import bounds
from mitool.tasks import CorrelatedGaussian

DIM = 20


def optimal_scores(task: CorrelatedGaussian, batch: int, negatives: int, generator: torch.Generator):
    """pos (B,) and neg (B, K) of the optimal critic log p(y|x)/p(y); K = B - 1 takes the other
    rows of the batch, otherwise a pool of K fresh marginal samples shared by all anchors."""
    x, y = task.sample(batch, generator=generator)
    if negatives == batch - 1:
        return bounds.split_scores(task.log_density_ratio(x[:, None, :], y[None, :, :]))
    pool = task.sample_marginal_y(negatives, generator=generator)
    return task.log_density_ratio(x, y), task.log_density_ratio(x[:, None, :], pool[None, :, :])


@pytest.mark.parametrize("mi", [2.0, 10.0])
def test_infonce_never_exceeds_log_k_plus_one_and_approaches_the_truth(mi: float) -> None:
    task = CorrelatedGaussian(DIM, mi=mi)
    generator = torch.Generator().manual_seed(0)
    estimates = {}
    for batch in (16, 128, 2048):
        pos, neg = optimal_scores(task, batch, batch - 1, generator)
        estimate = bounds.infonce(pos, neg).mi.item()
        assert estimate <= math.log(batch) + 1e-6  # K + 1 = B
        estimates[batch] = estimate
    print(
        f"\nInfoNCE, optimal critic, true MI {mi}: "
        + ", ".join(f"B={b}: {e:.3f}" for b, e in estimates.items())
    )
    assert estimates[16] < estimates[128] < estimates[2048]
    if mi == 2.0:  # log(2048) = 7.6 >> 2: the bound reaches the truth
        assert estimates[2048] == pytest.approx(2.0, abs=0.1)
    else:  # the truth is far above log(K+1): the estimate sits just under the cap
        assert math.log(2048) - 0.6 < estimates[2048] <= math.log(2048)


def test_dv_and_nwj_are_tight_at_two_nats_on_a_large_batch() -> None:
    task = CorrelatedGaussian(DIM, mi=2.0)
    generator = torch.Generator().manual_seed(1)
    pos, neg = optimal_scores(task, 4096, 1024, generator)
    dv = bounds.dv(pos, neg).mi.item()
    nwj = bounds.nwj(pos + 1, neg + 1).mi.item()  # NWJ's optimum is 1 + log p(y|x)/p(y)
    print(f"\noptimal critic at 2 nats, B=4096, K=1024: DV {dv:.3f}, NWJ {nwj:.3f}")
    assert dv == pytest.approx(2.0, abs=0.1)
    assert nwj == pytest.approx(2.0, abs=0.1)


def test_eqco_with_a_large_alpha_is_not_capped_by_log_k_plus_one() -> None:
    task = CorrelatedGaussian(DIM, mi=6.0)
    generator = torch.Generator().manual_seed(2)
    pos, neg = optimal_scores(task, 2048, 16, generator)
    infonce = bounds.infonce(pos, neg).mi.item()
    eqco = bounds.eqco(pos, neg, alpha=4096).mi.item()
    print(
        f"\n6 nats, K=16 (log(K+1) = {math.log(17):.2f}): InfoNCE {infonce:.2f}, EqCo(alpha=4096) {eqco:.2f}"
    )
    assert infonce <= math.log(17)
    assert eqco > math.log(17) + 2.0


def _gradient_sizes(name: str, negatives: int, alpha: float, mi: float = 2.0) -> tuple[float, float]:
    """Per anchor: mean_i |d loss_i / d pos_i| and mean_i sum_k |d loss_i / d neg_ik|, where
    loss = mean_i loss_i (so the gradients of the mean are multiplied by B)."""
    task = CorrelatedGaussian(DIM, mi=mi)
    generator = torch.Generator().manual_seed(3)
    batch = 2048
    pos, neg = optimal_scores(task, batch, negatives, generator)
    pos.requires_grad_(True)
    neg.requires_grad_(True)
    bound = bounds.get(name, alpha=alpha if name == "eqco" else None)
    bound(pos, neg).loss.backward()
    return (pos.grad.abs().mean() * batch).item(), (neg.grad.abs().sum(1).mean() * batch).item()


def test_eqco_gradient_size_is_steady_in_k_and_infonce_is_not() -> None:
    """EqCo's central claim at the level of gradients, at 2 nats with the optimal critic."""
    alpha = 256.0
    sizes = {(name, k): _gradient_sizes(name, k, alpha) for name in ("infonce", "eqco") for k in (16, 1024)}
    print(f"\ngradient sizes per anchor, optimal critic, 2 nats, alpha={alpha:g}:")
    for (name, k), (positive, negative) in sizes.items():
        print(
            f"  {name:8s} K={k:5d}: mean |dL/dpos_i| = {positive:.4f},"
            f" mean sum_k |dL/dneg_ik| = {negative:.4f}"
        )
    for which in (0, 1):
        eqco_ratio = sizes[("eqco", 1024)][which] / sizes[("eqco", 16)][which]
        infonce_ratio = sizes[("infonce", 1024)][which] / sizes[("infonce", 16)][which]
        assert abs(eqco_ratio - 1) < 0.15, eqco_ratio
        assert infonce_ratio > 1.4, infonce_ratio


def test_at_six_nats_eqco_is_steadier_than_infonce_but_not_steady() -> None:
    """At high MI the sum of K heavy-tailed e^{neg} is noisy at small K: calibration fixes the
    expected scale of the negatives' term, not its variance. Printed, and compared with InfoNCE."""
    alpha = 256.0
    sizes = {
        (name, k): _gradient_sizes(name, k, alpha, mi=6.0)[0]
        for name in ("infonce", "eqco")
        for k in (16, 1024)
    }
    print(
        f"\ngradient sizes per anchor, optimal critic, 6 nats, alpha={alpha:g}: "
        + ", ".join(f"{name} K={k}: {size:.4f}" for (name, k), size in sizes.items())
    )
    eqco_ratio = sizes[("eqco", 1024)] / sizes[("eqco", 16)]
    infonce_ratio = sizes[("infonce", 1024)] / sizes[("infonce", 16)]
    assert eqco_ratio < infonce_ratio / 2
