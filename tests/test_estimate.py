"""`mitool estimate X Y`: accuracy on a Gaussian with known MI, file formats, and bad files."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from click.testing import CliRunner

from mitool.cli.main import main
from mitool.tasks import CorrelatedGaussian
from mitool.toy.estimate import load_samples


@pytest.fixture(autouse=True)
def one_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MITOOL_THREADS", "1")


@pytest.fixture(scope="module")
def gaussian_files(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """5000 pairs of a 2-d correlated Gaussian with exactly 1 nat of mutual information."""
    folder = tmp_path_factory.mktemp("gaussian")
    x, y = CorrelatedGaussian(2, mi=1.0).sample(5000, generator=torch.Generator().manual_seed(123))
    np.save(folder / "x.npy", x.numpy())
    np.save(folder / "y.npy", y.numpy())
    return folder / "x.npy", folder / "y.npy"


@pytest.mark.parametrize("estimator", ["infonce", "smile"])
def test_estimate_is_within_0_15_nats_of_one_nat(gaussian_files, estimator: str) -> None:
    x_path, y_path = gaussian_files
    args = ["estimate", str(x_path), str(y_path), "--estimator", estimator, "--steps", "400",
            "--hidden", "64", "--json", "--quiet"]  # fmt: skip
    result = CliRunner().invoke(main, args, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert abs(report["estimate"] - 1.0) < 0.15
    assert 0 < report["stderr"] < 0.15
    assert report["estimator"] == estimator
    assert (report["n_train"], report["n_test"]) == (4000, 1000)


def test_sentence_output(gaussian_files) -> None:
    x_path, y_path = gaussian_files
    args = ["estimate", str(x_path), str(y_path), "--steps", "5", "--hidden", "8", "--quiet"]
    result = CliRunner().invoke(main, args, catch_exceptions=False)
    assert result.exit_code == 0 and result.stdout.startswith("I(X; Y) = ") and "nats" in result.stdout


def test_npy_npz_and_csv_load_the_same_rows(tmp_path: Path) -> None:
    data = np.arange(12, dtype=np.float64).reshape(4, 3) / 7
    np.save(tmp_path / "a.npy", data)
    np.savez(tmp_path / "a.npz", samples=data)
    np.savetxt(tmp_path / "a.csv", data, delimiter=",", header="u,v,w", comments="")
    np.savetxt(tmp_path / "b.csv", data[:, 0], delimiter=",")
    for name in ("a.npy", "a.npz", "a.csv"):
        np.testing.assert_allclose(load_samples(tmp_path / name, "X"), data)
    assert load_samples(tmp_path / "b.csv", "X").shape == (4, 1)


def write_bad_files(folder: Path) -> dict[str, Path]:
    good = np.random.default_rng(0).normal(size=(50, 2))
    np.save(folder / "good.npy", good)
    np.save(folder / "short.npy", good[:49])
    with_nan = good.copy()
    with_nan[7, 1] = np.nan
    np.save(folder / "nan.npy", with_nan)
    (folder / "garbage.npy").write_bytes(b"this is not a numpy file")
    (folder / "words.csv").write_text("a,b\n1,2\nx,y\n")
    (folder / "data.txt").write_text("1,2\n")
    np.savez(folder / "two.npz", first=good, second=good)
    return {p.stem: p for p in folder.iterdir()}


@pytest.mark.parametrize(
    ("x_name", "y_name", "extra", "expected"),
    [
        ("missing", "good", [], "no such file"),
        ("good", "short", [], "same number of rows"),
        ("nan", "good", [], "NaN"),
        ("garbage", "good", [], "cannot read"),
        ("words", "good", [], "cannot read"),
        ("data", "good", [], "allowed: .npy, .npz, .csv"),
        ("two", "good", [], "give one array per file"),
        ("good", "good", ["--estimator", "magic"], "--estimator"),
        ("good", "good", ["--critic", "magic"], "--critic"),
        ("good", "good", ["--batch-size", "1000"], "--batch-size"),
    ],
)
def test_bad_data_is_one_line_with_exit_code_2(tmp_path: Path, x_name, y_name, extra, expected) -> None:
    files = write_bad_files(tmp_path)
    x_path = files.get(x_name, tmp_path / f"{x_name}.npy")
    result = CliRunner().invoke(main, ["estimate", str(x_path), str(files[y_name]), "--quiet", *extra])
    assert result.exit_code == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: ") and expected in lines[0], result.stderr
    assert "Traceback" not in result.output


def test_defaults_do_not_overfit_a_small_data_set(tmp_path: Path) -> None:
    """3000 pairs in 5 dimensions: without early stopping the default critic (256 wide, 2000 steps)
    overfitted and reported -1.45 nats for a true 0.56; the validation split keeps it honest."""
    task = CorrelatedGaussian(5, mi=0.56)
    x, y = task.sample(3000, generator=torch.Generator().manual_seed(7))
    np.save(tmp_path / "x.npy", x.numpy())
    np.save(tmp_path / "y.npy", y.numpy())
    args = ["estimate", str(tmp_path / "x.npy"), str(tmp_path / "y.npy"), "--json", "--quiet"]
    result = CliRunner().invoke(main, args, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert abs(report["estimate"] - 0.56) < 0.2, report
    assert report["best_step"] <= report["steps"] < 2000  # stopped early
