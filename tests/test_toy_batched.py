"""The batched (vectorised) training against the plain loop,
InfoNCE's cap, divergence handling and the summary statistics."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from mitool.toy.batched import RunRecord, train_sequential, train_vectorised
from mitool.toy.config import RunSpec, ToySettings
from mitool.toy.study import summarize

TINY = ToySettings(
    dim=3, mi_values=(1.0, 3.0), steps_per_stage=6, batch_size=8, hidden=16, embed_dim=8, lr=1e-3
)


CASES = [("separable", 3), ("separable", 7), ("separable", 12), ("cosine", 5), ("concat", 9)]


@pytest.mark.parametrize(("critic", "negatives"), CASES)
def test_vectorised_equals_sequential(critic: str, negatives: int, device: torch.device) -> None:
    settings = ToySettings(**{**TINY.as_dict(), "device": str(device)})
    estimators = ["infonce", "eqco", "dcl", "dclw", "nwj", "dv", "mine", "js", "smile"]
    specs = [RunSpec(name, critic, negatives, seed, alpha=64.0) for name in estimators for seed in (0, 1)]
    vectorised = train_vectorised(specs, settings)
    sequential = train_sequential(specs, settings)
    # bmm and mm sum in different orders; on a GPU their kernels differ more than on a CPU
    tolerance = 1e-4 if device.type == "cpu" else 1e-3
    for batched, plain in zip(vectorised, sequential, strict=True):
        assert batched.spec == plain.spec
        assert np.isfinite(plain.estimates).all()
        np.testing.assert_allclose(batched.estimates, plain.estimates, rtol=tolerance, atol=tolerance)
        np.testing.assert_allclose(batched.grad_norms, plain.grad_norms, rtol=tolerance, atol=tolerance)
    # different seeds are different runs: the check above is not comparing copies of one run
    assert not np.allclose(vectorised[0].estimates, vectorised[1].estimates)


def test_divergence_stops_only_that_run_and_matches_the_loop(device: torch.device) -> None:
    # A threshold of 0.05 nats: some runs cross it early, others later or never; the batched model
    # drops each at its own step and the others keep training exactly as in the plain loop.
    changes = {"divergence_threshold": 0.05, "steps_per_stage": 10, "device": str(device)}
    settings = ToySettings(**{**TINY.as_dict(), **changes})
    specs = [RunSpec(name, "separable", 7, seed) for name in ("nwj", "infonce", "dcl") for seed in (0, 1)]
    vectorised = train_vectorised(specs, settings)
    sequential = train_sequential(specs, settings)
    steps = [record.diverged_step for record in vectorised]
    assert steps == [record.diverged_step for record in sequential]
    assert any(step is not None for step in steps)
    assert len(set(steps)) > 1
    for batched, plain in zip(vectorised, sequential, strict=True):
        np.testing.assert_allclose(batched.estimates, plain.estimates, rtol=1e-4, atol=1e-4)
        if batched.diverged_step is not None:
            step = batched.diverged_step
            assert np.isnan(batched.estimates[step:]).all()
            if step > 0:
                assert batched.last_finite == pytest.approx(batched.estimates[step - 1])
                assert abs(batched.last_finite) <= 0.05
            assert f"step {step}" in batched.divergence_message()


@pytest.mark.parametrize("negatives", [1, 4, 20])
def test_infonce_never_above_log_k_plus_one(negatives: int) -> None:
    settings = ToySettings(**{**TINY.as_dict(), "mi_values": (8.0,), "steps_per_stage": 80, "lr": 5e-3})
    (record,) = train_vectorised([RunSpec("infonce", "separable", negatives, 0)], settings)
    cap = math.log(negatives + 1)
    assert record.estimates.max() <= cap + 1e-5
    assert record.estimates[-5:].mean() > 0.3 * cap  # it learned something: the cap is not vacuous here


def test_eqco_with_alpha_equal_to_k_is_infonce() -> None:
    specs = [RunSpec("infonce", "separable", 5, 0), RunSpec("eqco", "separable", 5, 0, alpha=5.0)]
    infonce_run, eqco_run = train_vectorised(specs, TINY)
    np.testing.assert_allclose(infonce_run.estimates, eqco_run.estimates, rtol=1e-6, atol=1e-6)


def test_summary_statistics_against_plain_numpy() -> None:
    settings = ToySettings(dim=2, mi_values=(1.0, 2.0), steps_per_stage=4)
    rng = np.random.default_rng(0)
    records = []
    for seed in range(3):
        estimates, grads = rng.normal(1.5, 0.3, 8), rng.uniform(0.1, 1.0, 8)
        records.append(RunRecord(RunSpec("nwj", "separable", 4, seed), estimates, grads, seconds=2.0))
    records[2].diverged_step = 6  # diverged in stage 2: counted in stage 1 only
    records[2].estimates[6:] = np.nan
    rows = summarize(records, settings)
    assert len(rows) == 2
    first, second = rows
    window = np.concatenate([r.estimates[2:4] for r in records])
    assert first[:6] == ["nwj", "separable", 4, "", "1", 3]
    assert float(first[6]) == pytest.approx(window.mean(), rel=1e-5)
    assert float(first[7]) == pytest.approx(window.mean() - 1.0, rel=1e-5)
    assert float(first[8]) == pytest.approx(window.std(ddof=1), rel=1e-5)
    assert float(first[9]) == pytest.approx(np.mean((window - 1.0) ** 2), rel=1e-5)
    assert float(first[10]) == pytest.approx(np.mean([r.grad_norms[0:4].mean() for r in records]), rel=1e-5)
    assert float(first[11]) == pytest.approx(8 / 2.0)
    assert first[12] == 0
    # the spread over seeds of each seed's own bias, std and gradient norm (the figures' error bars)
    own = [
        (r.estimates[2:4].mean() - 1.0, r.estimates[2:4].std(ddof=1), r.grad_norms[0:4].mean())
        for r in records
    ]
    for column, expected in zip(first[13:], np.std(own, axis=0, ddof=1), strict=True):
        assert float(column) == pytest.approx(expected, rel=1e-5)
    assert float(first[13]) > 0
    window = np.concatenate([r.estimates[6:8] for r in records[:2]])
    assert second[5] == 2 and second[12] == 1
    assert float(second[7]) == pytest.approx(window.mean() - 2.0, rel=1e-5)
    biases = [r.estimates[6:8].mean() - 2.0 for r in records[:2]]
    assert float(second[13]) == pytest.approx(np.std(biases, ddof=1), rel=1e-5)
    one_seed = summarize(records[:1], settings)
    assert one_seed[0][13:] == ["nan", "nan", "nan"]


def test_a_cell_stopped_in_its_third_stage_goes_on_from_the_second_exactly(tmp_path) -> None:
    """Stopped mid-stage (after a divergence dropped runs), a cell given its stage file goes on from
    the last finished stage and ends with the records of a run straight through."""
    changes = {"mi_values": (1.0, 2.0, 3.0), "steps_per_stage": 60, "divergence_threshold": 1.0}
    settings = ToySettings(**{**TINY.as_dict(), **changes})
    specs = [
        RunSpec(name, "separable", 5, seed) for name in ("infonce", "nwj", "mine", "dv") for seed in (0, 1)
    ]
    straight = train_vectorised(specs, settings)
    dropped = [record.diverged_step for record in straight if record.diverged_step is not None]
    assert (
        min(dropped) < 2 * settings.steps_per_stage < max(dropped)
    )  # runs dropped before and after the stop
    stages = tmp_path / "stage.pt"

    def stop_in_the_second_stage(step: int, estimate: float) -> None:
        if step > 2 * settings.steps_per_stage:  # progress comes every 50 steps: at step 150, stage 3
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        train_vectorised(specs, settings, progress=stop_in_the_second_stage, check_every=1, stages=stages)
    assert stages.is_file()
    resumed = train_vectorised(specs, settings, stages=stages)
    for again, whole in zip(resumed, straight, strict=True):
        assert again.diverged_step == whole.diverged_step
        np.testing.assert_array_equal(again.estimates, whole.estimates)
        np.testing.assert_array_equal(again.grad_norms, whole.grad_norms)


def test_the_progress_shows_an_estimate_only_once_there_is_one() -> None:
    """Not the untrained step-0 value: the first report comes after 50 steps, with their mean."""
    settings = ToySettings(**{**TINY.as_dict(), "steps_per_stage": 60})
    calls: list[tuple[int, float]] = []
    (record,) = train_vectorised(
        [RunSpec("infonce", "separable", 5, 0)], settings, progress=lambda *c: calls.append(c)
    )
    assert [step for step, _ in calls] == [50, 100]
    assert calls[0][1] == pytest.approx(np.mean(record.estimates[:50]), abs=1e-6)


def test_a_signal_after_the_last_steps_check_still_stops_the_run(monkeypatch) -> None:
    """A SIGTERM that lands after the last step's check, while the handlers are still the run's,
    raises Terminated when the loop ends instead of being dropped with the handlers (the sweep then
    exited 0 as if it had never come)."""
    import os
    import signal

    from mitool._infra.processes import Interruption, Terminated
    from mitool.toy import batched

    total = TINY.total_steps

    class LateSignal(Interruption):
        checks = 0

        def raise_if_received(self) -> None:
            super().raise_if_received()
            LateSignal.checks += 1
            if LateSignal.checks == total:  # the last step's check has passed
                os.kill(os.getpid(), signal.SIGTERM)

    monkeypatch.setattr(batched, "Interruption", LateSignal)
    before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(Terminated):
        train_vectorised([RunSpec("infonce", "separable", 3, 0)], TINY)
    assert LateSignal.checks >= total
    assert signal.getsignal(signal.SIGTERM) is before  # the handler of before the run is back
