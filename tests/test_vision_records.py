"""The run's records (mitool.vision.records): metrics lines that a crash cut short are skipped and
dropped on resume, evaluations are added one by one (atomically), the config is kept."""

from __future__ import annotations

import json
import os

import pytest

from mitool.vision.records import (
    Interval,
    add_evaluation,
    keep_records_up_to,
    read_config,
    read_evaluations,
    read_records,
    write_config,
)


def test_records_skip_a_cut_line_and_resume_keeps_the_earlier_steps(tmp_path) -> None:
    path = tmp_path / "metrics.jsonl"
    path.write_text('{"step": 10, "loss": 1.5}\n{"step": 20, "knn_top1": 0.4}\n{"step": 30, "lo')
    assert [record["step"] for record in read_records(str(tmp_path))] == [10, 20]
    kept = keep_records_up_to(str(path), 15)
    assert kept == [{"step": 10, "loss": 1.5}] and path.read_text() == '{"step": 10, "loss": 1.5}\n'
    with pytest.raises(FileNotFoundError, match="no metrics.jsonl in"):
        read_records(str(tmp_path / "elsewhere"))


def test_resume_drops_the_partial_record_and_the_interval_goes_on_from_its_saved_state(tmp_path) -> None:
    """The record written at a stop mid-interval is dropped on resume; the interval saved in the
    checkpoint gives the resumed run the whole interval's means; an older checkpoint's (none): an
    empty interval."""
    path = tmp_path / "metrics.jsonl"
    path.write_text(
        '{"step": 10, "loss": 1.5}\n{"step": 13, "loss": 1.0, "partial": true}\n'
        '{"step": 13, "alignment": 1}\n'
    )
    assert keep_records_up_to(str(path), 13) == [{"step": 10, "loss": 1.5}, {"step": 13, "alignment": 1}]

    class Step:
        def __init__(self, value: float) -> None:
            self.loss = self.mi = self.npc = self.grad_norm = value

    whole, first, resumed = Interval(), Interval(), Interval()
    for value in (1.0, 2.0):
        whole.add(Step(value))
        first.add(Step(value))
    resumed.load_state_dict(first.state_dict())
    whole.add(Step(6.0))
    resumed.add(Step(6.0))
    assert resumed.record(20, 2.0, 0.1, 16)["loss"] == whole.record(20, 2.0, 0.1, 16)["loss"] == 3.0
    resumed.load_state_dict(None)
    assert resumed.steps == 0 and set(resumed.sums.values()) == {0.0}
    assert first.record(12, 1.2, 0.1, 16, partial=True)["partial"] is True


def test_evaluations_are_added_and_the_config_is_kept(tmp_path) -> None:
    out = str(tmp_path)
    assert read_evaluations(out) == [] and read_config(out) is None
    first = add_evaluation(out, {"kind": "knn", "step": 4, "knn_top1": 0.5})
    add_evaluation(out, {"kind": "linear", "step": 4, "top1": 0.6})
    assert first == os.path.join(out, "evaluations.json")
    assert [entry["kind"] for entry in read_evaluations(out)] == ["knn", "linear"]
    assert not [name for name in os.listdir(out) if name.endswith(".tmp")]
    write_config(out, {"method": "simo", "negatives": 16})
    assert read_config(out) == {"method": "simo", "negatives": 16}
    with open(os.path.join(out, "config.json")) as file:
        assert json.load(file)["negatives"] == 16
