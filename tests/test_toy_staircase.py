"""The toy study's staircase of true-MI stages (:mod:`mitool.toy.staircase`)."""

from __future__ import annotations

import pytest

from mitool.toy.staircase import Staircase


def test_staircase_schedule() -> None:
    stairs = Staircase((2, 4, 6, 8, 10), steps_per_stage=4000)
    assert stairs.total_steps == 20_000 and len(stairs) == 5
    assert [stairs.mi_at(s) for s in (0, 3999, 4000, 19_999)] == [2, 2, 4, 10]
    uneven = Staircase((1, 3), steps_per_stage=[5, 7])
    assert [(s.start, s.stop) for s in uneven] == [(0, 5), (5, 12)]
    with pytest.raises(ValueError, match="step must be in"):
        stairs.stage_at(20_000)


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (([],), "at least one"),
        (([1, -2],), ">= 0"),
        (([1, 2], [3]), "one number or 2"),
        (([1], 0), ">= 1"),
    ],
)
def test_bad_arguments(arguments: tuple, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Staircase(*arguments)
