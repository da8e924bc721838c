"""``mitool vision`` end to end on tiny data, and its answers to bad input: exit code 2 and one
``Error:`` line, no traceback."""

from __future__ import annotations

import json
import os
import sys
import warnings

import numpy as np
import pytest
import torch
from click.testing import CliRunner
from PIL import Image

from mitool.cli.main import main
from mitool.vision.loader import UnreadableImagesWarning

TINY = ["--arch", "small-cnn", "--image-size", "16", "--batch-size", "8", "--workers", "0", "--quiet"]


def _run(*arguments: str):
    return CliRunner().invoke(main, ["vision", *arguments])


def _assert_one_line_error(result, *fragments: str) -> None:
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    lines = [line for line in result.output.strip().splitlines() if line.startswith("Error:")]
    assert len(lines) == 1, result.output
    for fragment in fragments:
        assert fragment in lines[0], lines[0]


def _image_folder(root, corrupt: bool) -> str:
    """Two classes of eight 20-pixel PNG images under train/ and val/; one corrupt JPEG in train."""
    generator = np.random.default_rng(0)
    for split in ("train", "val"):
        for label in range(2):
            folder = root / split / f"class{label}"
            folder.mkdir(parents=True)
            for index in range(8):
                pixels = generator.integers(0, 80, (20, 20, 3)) + 150 * label
                Image.fromarray(pixels.astype(np.uint8)).save(folder / f"{index}.png")
    if corrupt:
        (root / "train" / "class0" / "broken.jpg").write_bytes(b"\xff\xd8\xff\xe0 not really a jpeg")
    return str(root)


def test_pretrain_knn_linear_and_plot_end_to_end(tmp_path) -> None:
    out = str(tmp_path / "run")
    result = _run("pretrain", "--method", "simo", "--negatives", "4", "--dataset", "synthetic",
                  "--synthetic-size", "32", "--epochs", "2", "--knn-every", "1", "--log-every", "1",
                  "--out", out, *TINY)  # fmt: skip
    assert result.exit_code == 0, result.output
    records = [json.loads(line) for line in open(os.path.join(out, "metrics.jsonl"))]
    assert (
        sum("loss" in record for record in records) == 8
        and sum("knn_top1" in record for record in records) == 2
    )
    checkpoint = os.path.join(out, "checkpoint.pt")
    result = _run("knn", "--checkpoint", checkpoint, "--workers", "0", "--quiet", "--json")
    assert result.exit_code == 0, result.output
    knn = json.loads(result.output)
    assert knn["knn_top1"] == pytest.approx(records[-1]["knn_top1"]) and knn["query_size"] == 32
    result = _run("linear", "--checkpoint", checkpoint, "--out", str(tmp_path / "linear"), "--epochs", "2",
                  "--no-augment", "--workers", "0", "--quiet", "--json", "--lr", "0.5")  # fmt: skip
    assert result.exit_code == 0, result.output
    linear = json.loads(result.output)
    assert 0 <= linear["top1"] <= linear["top5"] <= 1 and linear["epochs"] == 2
    linear_options = ["--no-augment", "--workers", "0", "--quiet", "--json", "--lr", "0.5", "--resume"]
    result = _run("linear", "--checkpoint", checkpoint, "--out", str(tmp_path / "linear"), "--epochs", "3",
                  *linear_options)  # fmt: skip
    assert result.exit_code == 2 and "epochs differs" in result.output
    # both evaluations are recorded in the run's folder, with the checkpoint's step and epoch
    with open(os.path.join(out, "evaluations.json")) as file:
        evaluations = json.load(file)
    assert [(e["kind"], e["step"], e["epoch"]) for e in evaluations] == [("knn", 8, 2.0), ("linear", 8, 2.0)]
    assert evaluations[0]["knn_top1"] == knn["knn_top1"] and evaluations[1]["top1"] == linear["top1"]
    result = _run("plot", out, "--quiet")
    assert result.exit_code == 0 and result.output == ""
    assert os.path.getsize(os.path.join(out, "curves.png")) > 1000
    for file_format in ("pdf", "svg"):
        result = _run("plot", out, "--format", file_format)
        assert result.exit_code == 0 and result.output.strip() == os.path.join(out, f"curves.{file_format}")
    with open(os.path.join(out, "curves.svg")) as file:
        svg = file.read()
    # the title names the method, the loss with its option, the negatives and the batch
    assert "simo, loss eqco, alpha 256, K = 4 sampled per query, batch 8" in svg
    assert "vision knn" in svg and "vision linear" in svg and "kNN monitor" in svg
    _assert_one_line_error(_run("plot", out, "--output", str(tmp_path / "x.pdf"), "--format", "svg"),
                           "--format svg does not match the output")  # fmt: skip


def test_the_printed_summary_agrees_with_the_last_record(tmp_path) -> None:
    """A 3-step run with the default --log-every 10 writes its record at the stop (then alignment and
    uniformity at that step); the printed JSON has the record's step and epoch, no empty knn, the
    count of skipped images and the alignment record."""
    out = str(tmp_path / "run")
    options = [option for option in TINY if option != "--quiet"]
    result = _run("pretrain", "--method", "simclr", "--dataset", "synthetic", "--synthetic-size", "32",
                  "--max-steps", "3", "--out", out, *options)  # fmt: skip
    assert result.exit_code == 0, result.output
    summary = json.loads(result.output.strip().splitlines()[-1])
    records = [json.loads(line) for line in open(os.path.join(out, "metrics.jsonl"))]
    assert [record["step"] for record in records] == [3, 3] and summary["alignment"] == records[-1]
    assert (summary["step"], summary["epoch"]) == (records[-1]["step"], records[-1]["epoch"]) == (3, 0.75)
    assert summary["stopped_by"] == "max_steps" and summary["skipped_images"] == 0
    assert "knn" not in summary and "every 10 epoch" in summary["knn_note"]


def test_a_corrupt_jpeg_in_an_image_folder_is_skipped_and_counted(tmp_path) -> None:
    data = _image_folder(tmp_path / "images", corrupt=True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = _run("pretrain", "--method", "simclr", "--dataset", "imagefolder", "--data", data,
                      "--epochs", "1", "--knn-every", "1", "--out", str(tmp_path / "run"), *TINY)  # fmt: skip
    assert result.exit_code == 0, result.output
    messages = [str(w.message) for w in caught if issubclass(w.category, UnreadableImagesWarning)]
    assert messages and all("skipped 1 unreadable image" in m and "broken.jpg" in m for m in messages)
    state = torch.load(tmp_path / "run" / "checkpoint.pt", weights_only=True)
    assert state["step"] == 2  # 17 files, 16 readable, batch 8: both batches trained
    # the count is in the metrics (not only in a warning, which PYTHONWARNINGS=ignore hides)
    records = [json.loads(line) for line in open(tmp_path / "run" / "metrics.jsonl")]
    assert records[-1]["skipped_images"] == 1 and state["skipped_images"] == 1


def test_gpu_augment_jpeg_decodes_on_the_device_and_counts_undecodable_files(tmp_path) -> None:
    """--gpu-augment jpeg on CPU: workers hand over JPEG bytes; a file with JPEG markers but no
    image inside passes the worker's check and is rejected by the decoder, then skipped and named."""
    generator = np.random.default_rng(1)
    for split in ("train", "val"):
        for label in range(2):
            folder = tmp_path / "images" / split / f"class{label}"
            folder.mkdir(parents=True)
            for index in range(8):
                pixels = generator.integers(0, 80, (24, 20, 3)) + 150 * label
                Image.fromarray(pixels.astype(np.uint8)).save(folder / f"{index}.jpg", quality=90)
    (tmp_path / "images" / "train" / "class1" / "empty.jpg").write_bytes(b"\xff\xd8\xff\xe0 nothing \xff\xd9")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = _run("pretrain", "--method", "simclr", "--dataset", "imagefolder", "--data",
                      str(tmp_path / "images"), "--gpu-augment", "jpeg", "--epochs", "1", "--knn-every", "0",
                      "--out", str(tmp_path / "run"), *TINY)  # fmt: skip
    assert result.exit_code == 0, result.output
    messages = [str(w.message) for w in caught if issubclass(w.category, UnreadableImagesWarning)]
    assert messages and all("skipped 1 unreadable image" in m and "empty.jpg" in m for m in messages)
    state = torch.load(tmp_path / "run" / "checkpoint.pt", weights_only=True)
    assert state["step"] == 2 and state["config"]["gpu_augment"] == "jpeg"


def test_missing_or_empty_dataset_directories_are_clear_errors(tmp_path) -> None:
    (tmp_path / "empty" / "train").mkdir(parents=True)
    for directory in (str(tmp_path / "missing"), str(tmp_path / "empty")):
        result = _run(
            "pretrain", "--dataset", "imagefolder", "--data", directory, "--out", str(tmp_path / "o"), *TINY
        )
        _assert_one_line_error(result, directory)
    assert not os.path.exists(tmp_path / "o" / "checkpoint.pt")


@pytest.mark.parametrize(
    ("arguments", "fragments"),
    [
        (["--method", "simclr", "--negatives", "16"], ["negatives does not apply to simclr"]),
        (
            ["--loss", "infonce", "--alpha", "3"],
            ["--alpha applies to the eqco loss only, not 'infonce'; got 3"],
        ),
        (["--loss", "eqco", "--sigma", "3"], ["--sigma applies to the dclw loss only, not 'eqco'; got 3"]),
        (["--batch-size", "1"], ["--batch-size must be a whole number >= 2, got 1"]),
        (["--temperature", "0"], ["--temperature must be a finite number > 0, got 0"]),
        (
            ["--method", "simo", "--negatives", "40"],
            ["--negatives must be less than the global batch (8)", "got 40"],
        ),
        (
            ["--method", "moco", "--bn-splits", "3"],
            ["--batch-size must be a multiple of moco's 3 split-BN groups"],
        ),
        (["--key-momentum", "1.5"], ["--key-momentum must be a finite number >= 0 and < 1, got 1.5"]),
        (["--method", "byol"], ["--method must be one of moco, simo, simclr, nnclr, got 'byol'"]),
        (["--precision", "fp16"], ["--precision fp16 needs device cuda"]),
        (["--gpu-augment", "jpeg"], ["--gpu-augment jpeg is for dataset imagefolder only"]),
        (["--gpu-augment", "gpu"], ["--gpu-augment must be one of off, decode, jpeg, got 'gpu'"]),
    ],
)
def test_bad_pretrain_options_give_exit_code_2_and_one_line(tmp_path, arguments, fragments) -> None:
    options = ["--dataset", "synthetic", "--synthetic-size", "32", "--out", str(tmp_path / "run"), *TINY]
    _assert_one_line_error(_run("pretrain", *options, *arguments), *fragments)


def test_bad_evaluation_inputs_give_exit_code_2_and_one_line(tmp_path) -> None:
    broken = tmp_path / "checkpoint.pt"
    broken.write_bytes(b"PK\x03\x04 half a zip file")
    _assert_one_line_error(
        _run("knn", "--checkpoint", str(broken)),
        f"--checkpoint {broken} is truncated or not a mitool checkpoint",
    )
    table = tmp_path / "metrics.csv"
    table.write_text("step,loss,mi\n1,2.5,0.3\n")
    _assert_one_line_error(
        _run("knn", "--checkpoint", str(table)),
        f"--checkpoint {table} is not a mitool checkpoint but a text file starting 'step,loss,mi' "
        "(expected a pretrain checkpoint such as OUT/checkpoint.pt of mitool vision pretrain)",
    )
    _assert_one_line_error(
        _run("knn", "--checkpoint", str(broken), "-k", "0"), "-k must be a whole number >= 1, got 0"
    )
    _assert_one_line_error(_run("knn", "--checkpoint", str(tmp_path / "none.pt")), "none.pt: no such file")
    result = _run("linear", "--checkpoint", str(broken), "--out", str(tmp_path / "l"), "--milestones", "6O")
    _assert_one_line_error(result, "--milestones must be comma-separated")
    _assert_one_line_error(_run("plot", str(tmp_path)), "no metrics.jsonl")


def test_the_resume_command_repeats_the_options_typed_and_adds_resume(monkeypatch) -> None:
    """The command starts with the program by the path that ran it (no virtual environment need be
    active); options left at their defaults are left out; flag pairs keep the side the user chose."""
    import click

    monkeypatch.setattr("sys.argv", ["/opt/env/bin/mitool", "vision", "pretrain"])
    from mitool.cli.vision import pretrain, resume_command, vision

    root = click.Context(main, info_name="python -m mitool.cli.main")
    group = click.Context(vision, parent=root, info_name="vision")
    arguments = [
        "--method",
        "simo",
        "--out",
        "runs/a b",
        "--cut-schedule",
        "--symmetric",
        "--max-minutes",
        "5",
    ]
    context = pretrain.make_context("pretrain", arguments, parent=group)
    assert resume_command(context) == (
        "/opt/env/bin/mitool vision pretrain --method simo --max-minutes 5.0 --cut-schedule --symmetric "
        "--out 'runs/a b' --resume"
    )
    monkeypatch.setattr(
        "sys.argv", ["/src/mitool/cli/main.py", "vision", "pretrain"]
    )  # python -m mitool.cli.main
    assert resume_command(context).startswith(
        f"{sys.executable} -m mitool.cli.main vision pretrain --method simo"
    )
