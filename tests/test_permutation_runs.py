"""How a permutation test runs its null (mitool.independence.permutation_test.Draws): the same
numbers in threads as in one, progress reported to the end, and the command line's bar only for
work that lasts."""

from __future__ import annotations

import io

import numpy as np
import pytest

import mitool
from mitool import runtime


@pytest.fixture
def data() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(5)
    x = rng.normal(size=600)
    return x, np.cos(2 * x) + rng.normal(size=600)


@pytest.mark.parametrize("given", [None, "continuous", "discrete"])
def test_threads_change_no_number(data, monkeypatch, given) -> None:
    """The draws are made in order in the calling thread; the statistics of a block in threads:
    the null and the p-value are those of one thread, to the last bit."""
    x, y = data
    z = {None: None, "continuous": x + np.random.default_rng(1).normal(size=600),
         "discrete": np.arange(600) % 3}[given]  # fmt: skip
    monkeypatch.setattr(runtime, "_chosen", 1)
    alone = mitool.independence_test(x, y, z, permutations=37)
    monkeypatch.setattr(runtime, "_chosen", 2)
    shared = mitool.independence_test(x, y, z, permutations=37)
    assert np.array_equal(alone.null_values, shared.null_values)
    assert (alone.statistic, alone.pvalue) == (shared.statistic, shared.pvalue)


def test_progress_reaches_the_end_in_order(data) -> None:
    x, y = data
    seen: list[tuple[int, int]] = []
    mitool.independence_test(x, y, permutations=50, progress=lambda done, total: seen.append((done, total)))
    assert seen[-1] == (50, 50)
    assert all(total == 50 for _, total in seen)
    assert [done for done, _ in seen] == sorted({done for done, _ in seen})


def test_the_bar_appears_only_for_work_that_lasts(monkeypatch) -> None:
    from mitool.cli import common

    stream = io.StringIO()
    monkeypatch.setattr(common.sys, "stderr", stream)
    quick = common.PermutationProgress("test", enabled=True)
    quick(50, 100)
    quick(100, 100)
    quick.close()
    assert stream.getvalue() == ""
    monkeypatch.setattr(common, "QUIET_SECONDS", 0.0)
    slow = common.PermutationProgress("test", enabled=True)
    slow(50, 100)
    slow(100, 100)
    slow.close()
    assert "test permutations" in stream.getvalue() and "100/100" in stream.getvalue()
