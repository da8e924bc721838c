"""Alignment and uniformity (Wang & Isola 2020): the formulas against a plain implementation, the
fixed held-out batch, and their place in every run's records, the summary, the plot and a sweep's
summary."""

from __future__ import annotations

import csv
import json
import math

import pytest
import torch
import torch.nn.functional as F

from mitool.vision.alignment import HeldOutBatch, alignment, alignment_uniformity, uniformity
from mitool.vision.config import PretrainConfig, resolve_defaults
from mitool.vision.methods import build_method
from mitool.vision.plot import PANELS, plot_run
from mitool.vision.train import pretrain


def _plain_alignment(view_1: list[list[float]], view_2: list[list[float]]) -> float:
    """E ||f(x) - f(x+)||^2 over the pairs, with loops."""
    total = 0.0
    for a, b in zip(view_1, view_2, strict=True):
        total += sum((x - y) ** 2 for x, y in zip(a, b, strict=True))
    return total / len(view_1)


def _plain_uniformity(points: list[list[float]]) -> float:
    """log E exp(-2 ||f(x) - f(y)||^2) over the pairs i < j, with loops."""
    values = []
    for i in range(len(points)):
        for j in range(i + 1, len(points)):
            squared = sum((x - y) ** 2 for x, y in zip(points[i], points[j], strict=True))
            values.append(math.exp(-2.0 * squared))
    return math.log(sum(values) / len(values))


def test_alignment_and_uniformity_match_a_plain_implementation() -> None:
    generator = torch.Generator().manual_seed(0)
    view_1 = F.normalize(torch.randn(40, 7, generator=generator), dim=1)
    view_2 = F.normalize(view_1 + 0.3 * torch.randn(40, 7, generator=generator), dim=1)
    rows_1, rows_2 = view_1.double().tolist(), view_2.double().tolist()
    measured = alignment_uniformity(view_1, view_2)
    assert measured["alignment"] == pytest.approx(_plain_alignment(rows_1, rows_2), abs=1e-6)
    expected = (_plain_uniformity(rows_1) + _plain_uniformity(rows_2)) / 2
    assert measured["uniformity"] == pytest.approx(expected, abs=1e-6)
    assert uniformity(view_1) == pytest.approx(_plain_uniformity(rows_1), abs=1e-6)


def test_known_values() -> None:
    """Views on the same point: alignment 0; all embeddings one point: uniformity 0; two antipodal
    points: log exp(-2 * 4) = -8; antipodal views: alignment 4 (its largest value)."""
    point = F.normalize(torch.ones(5, 3), dim=1)
    assert alignment(point, point) == 0.0 and uniformity(point) == pytest.approx(0.0, abs=1e-12)
    poles = torch.tensor([[0.0, 0.0, 1.0], [0.0, 0.0, -1.0]])
    assert uniformity(poles) == pytest.approx(-8.0, abs=1e-12)
    assert alignment(poles, -poles) == pytest.approx(4.0, abs=1e-12)
    # no underflow where exp(-2 d^2) of every pair is tiny in float32: -8 of two poles, far below
    spread = F.normalize(torch.randn(300, 128, generator=torch.Generator().manual_seed(1)), dim=1)
    assert -4.1 < uniformity(spread) < -3.9  # about -2 E||x - y||^2 = -4 for random directions


def test_the_held_out_batch_is_fixed_and_leaves_the_run_alone() -> None:
    """The same pairs at every evaluation, no draw from torch's global generator (a resumed run
    stays exact), the model's training mode put back; evenly spaced over the test split."""
    held_out = HeldOutBatch.of_dataset("synthetic", None, 16, {"size": 64}, count=24)
    assert len(held_out.images) == 24 and held_out.images[0].dtype == torch.uint8
    torch.manual_seed(0)
    config = resolve_defaults(PretrainConfig(method="simclr", arch="small-cnn", embedding_dim=16), 16)
    model = build_method(config, 3, torch.device("cpu"))
    state = torch.get_rng_state()
    first = held_out.measure(model, torch.device("cpu"))
    assert torch.equal(torch.get_rng_state(), state) and model.training
    assert held_out.measure(model, torch.device("cpu")) == first
    assert set(first) == {"alignment", "uniformity"}
    assert 0 <= first["alignment"] <= 4 and first["uniformity"] <= 0
    bf16 = held_out.measure(model, torch.device("cpu"), "bf16")
    assert bf16["alignment"] == pytest.approx(first["alignment"], abs=0.05)


def _records(out) -> list[dict]:
    with open(out / "metrics.jsonl") as file:
        return [json.loads(line) for line in file]


@pytest.mark.parametrize("method", ["nnclr", "moco"])
def test_every_run_records_alignment_and_uniformity(tmp_path, method: str) -> None:
    """With the kNN monitor each epoch's record holds them; a run stopped mid-epoch (or with the
    monitor off) ends with a record of them at its last step; the summary has the last; the plot
    draws them; no extra record when the monitor already measured the last step."""
    options = dict(
        method=method, arch="small-cnn", dataset="synthetic", synthetic_size=64, image_size=16, batch_size=16,
        epochs=2, workers=0, log_every=2, knn_every=1, knn_max_samples=32, embedding_dim=16,
        **({"support_size": 32} if method == "nnclr" else {"negatives": 32, "bn_splits": 2}),
    )  # fmt: skip
    out = tmp_path / "run"
    summary = pretrain(PretrainConfig(out=str(out), max_steps=6, **options), progress=False)
    records = _records(out)
    measured = [(record["step"], "knn_top1" in record) for record in records if "alignment" in record]
    assert measured == [(4, True), (6, False)]  # the epoch's monitor, then the stop at step 6
    assert summary["alignment"] == records[-1] and records[-1]["step"] == 6
    for record in records:
        if "alignment" in record:
            assert 0 <= record["alignment"] <= 4 and record["uniformity"] <= 0
    summary = pretrain(PretrainConfig(out=str(out), **options), resume=True, progress=False)
    records = _records(out)
    measured = [(record["step"], "knn_top1" in record) for record in records if "alignment" in record]
    assert measured == [(4, True), (6, False), (8, True)]  # the last monitor measured the last step
    assert summary["alignment"]["step"] == 8 and summary["knn"] == summary["alignment"]
    path = plot_run(str(out), str(tmp_path / "curves.svg"))
    svg = open(path).read()
    assert [key for key, _ in PANELS][-2:] == ["alignment", "uniformity"] and "held out" in svg


@pytest.mark.slow
def test_a_sweep_summary_has_alignment_and_uniformity(tmp_path) -> None:
    from mitool.vision.sweep import Evaluation, Grid, expand, run_sweep
    from mitool.vision.sweep.summary import SUMMARY_COLUMNS

    base = PretrainConfig(
        arch="small-cnn", dataset="synthetic", synthetic_size=64, image_size=16, batch_size=16, epochs=1,
        workers=0, embedding_dim=16, support_size=32, knn_every=0, out=str(tmp_path),
    )  # fmt: skip
    runs = expand(Grid(method=("nnclr", "simclr"), loss=("dcl",), batch_size=(16,)), base, tmp_path)
    assert [run.name for run in runs] == ["nnclr-dcl-S32-b16-t0.1-s0", "simclr-dcl-b16-t0.1-s0"]
    assert runs[1].config["support_size"] is None  # the shared support set is nnclr's only
    run_sweep(runs, Evaluation(knn_max_samples=32), str(tmp_path), 1, None, False, lambda line: None, 1)
    assert {"alignment", "uniformity", "support_size"} <= set(SUMMARY_COLUMNS)
    with open(tmp_path / "summary.csv", newline="") as file:
        rows = {row["name"]: row for row in csv.DictReader(file)}
    for name, row in rows.items():
        assert 0 <= float(row["alignment"]) <= 4 and float(row["uniformity"]) <= 0, name
    assert rows["nnclr-dcl-S32-b16-t0.1-s0"]["support_size"] == "32"
