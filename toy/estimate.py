"""MI of the user's own paired samples: train a critic on a training split, report the bound on a
held-out split.

Data: X (n, dx) and Y (n, dy), row i of X paired with row i of Y, from .npy, .npz (one array) or
.csv files (comma-separated numbers, an optional header line). Both are standardised with the
training split's mean and standard deviation (an invertible map per coordinate: the MI does not
change).

Training: Adam on the chosen bound's loss (:func:`mitool.bounds.get`), each step a random batch of B
training pairs scored all-pairs, K = B - 1 in-batch negatives (``split_scores``). A validation part
of the training split (``validation_fraction``) is scored every ``eval_every`` steps as the test
split is; the critic is kept at its best validation value and training stops after ``patience``
evaluations without improvement (a flexible critic otherwise overfits small data sets and its
held-out estimate falls, even below zero). The test split is used once, at the end.

Evaluation: the test split is cut into blocks of at most ``eval_block`` pairs; in each block every
anchor is scored against all the other rows of the block (K = block - 1), and the anchors are
grouped into chunks of about ``chunk`` anchors. The bound evaluated on each chunk gives one value
e_c; the estimate is mean_c(e_c) and its standard error std(e_c) / sqrt(C). Chunks of one block
share their negatives, so the standard error is approximate (a little optimistic).
InfoNCE-type bounds are capped by log(K + 1) of the evaluation (and trained under log(B)).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from mitool import bounds, critics
from mitool.toy.config import DEFAULT_ALPHA, check_alpha, check_critic, check_estimator

__all__ = ["EstimateResult", "estimate_mi", "load_samples"]


def load_samples(path: str | Path, name: str) -> np.ndarray:
    """A (n, d) float64 array from a .npy, .npz (one array) or .csv file; 1-D data becomes (n, 1).

    ``name`` ("X" or "Y") is used in the error messages."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"{name}: no such file: {path}")
    if not path.is_file():
        raise ValueError(f"{name}: not a file: {path}")
    suffix = path.suffix.lower()
    try:
        if suffix == ".npy":
            data = np.load(path, allow_pickle=False)
        elif suffix == ".npz":
            with np.load(path, allow_pickle=False) as archive:
                keys = list(archive.keys())
                if len(keys) != 1:
                    raise ValueError(
                        f"{name}: {path} holds {len(keys)} arrays ({', '.join(keys) or 'none'}); "
                        "give one array per file"
                    )
                data = archive[keys[0]]
        elif suffix == ".csv":
            data = _load_csv(path)
        else:
            raise ValueError(
                f"{name}: unsupported file type {suffix or '(none)'!r}; allowed: .npy, .npz, .csv"
            )
    except ValueError as error:
        if str(error).startswith(f"{name}:"):
            raise
        raise ValueError(
            f"{name}: cannot read {path} as {suffix} numbers: {str(error).splitlines()[0]}"
        ) from None
    except (OSError, EOFError) as error:
        raise ValueError(f"{name}: cannot read {path}: {error}") from None
    data = np.asarray(data)
    if data.dtype.kind not in "biuf":
        raise ValueError(f"{name}: {path} must hold numbers, got dtype {data.dtype}")
    if data.ndim == 1:
        data = data[:, None]
    if data.ndim != 2 or data.shape[0] < 1 or data.shape[1] < 1:
        raise ValueError(f"{name}: expected one row per sample (a 1-D or 2-D array), got shape {data.shape}")
    data = data.astype(np.float64)
    bad = ~np.isfinite(data)
    if bad.any():
        row = int(np.argwhere(bad)[0][0])
        raise ValueError(
            f"{name}: {path} holds NaN or infinite values (first in row {row}); remove or fill them"
        )
    return data


def _load_csv(path: Path) -> np.ndarray:
    with open(path) as stream:
        first = stream.readline()
    try:
        [float(field) for field in first.strip().split(",") if field.strip()]
        skip = 0
    except ValueError:
        skip = 1  # a header line
    return np.loadtxt(path, delimiter=",", skiprows=skip, ndmin=1)


@dataclass(frozen=True)
class EstimateResult:
    """estimate: nats on the held-out split; stderr: its standard error (approximate, see module)."""

    estimate: float
    stderr: float
    estimator: str
    critic: str
    n_train: int
    n_test: int
    negatives_train: int
    negatives_test: int
    steps: int
    best_step: int
    n_validation: int

    def as_dict(self) -> dict:
        return dict(self.__dict__)


def estimate_mi(
    x: np.ndarray,
    y: np.ndarray,
    estimator: str = "infonce",
    critic: str = "separable",
    steps: int = 2000,
    batch_size: int = 128,
    lr: float = 5e-4,
    test_fraction: float = 0.2,
    seed: int = 0,
    hidden: int = 256,
    hidden_layers: int = 2,
    embed_dim: int = 32,
    alpha: float = DEFAULT_ALPHA,
    eval_block: int = 1024,
    chunk: int = 50,
    validation_fraction: float = 0.15,
    eval_every: int = 50,
    patience: int = 10,
    device: str = "cpu",
    progress: Callable[[int, float], None] | None = None,
) -> EstimateResult:
    """Train ``critic`` with ``estimator`` on (1 - test_fraction) of the pairs, evaluate on the rest."""
    check_estimator(estimator, option="--estimator")
    check_critic(critic)
    if estimator == "eqco":
        check_alpha(alpha)
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    if x.ndim == 1:
        x = x[:, None]
    if y.ndim == 1:
        y = y[:, None]
    if x.shape[0] != y.shape[0]:
        raise ValueError(
            f"X and Y must have the same number of rows (samples), got {x.shape[0]} and {y.shape[0]}"
        )
    if not (0 < test_fraction < 1):
        raise ValueError(f"--test-fraction: must be between 0 and 1 (exclusive), got {test_fraction}")
    if isinstance(steps, bool) or not isinstance(steps, int) or steps < 1:
        raise ValueError(f"--steps: must be a whole number >= 1, got {steps!r}")
    if not (math.isfinite(lr) and lr > 0):
        raise ValueError(f"--lr: must be a finite number > 0, got {lr}")
    total = x.shape[0]
    n_test = int(round(total * test_fraction))
    n_train = total - n_test
    if n_test < 2 or n_train < 2:
        raise ValueError(
            f"X, Y: {total} samples leave {n_train} for training and {n_test} for testing; need >= 2 of each"
        )
    if not (0 < validation_fraction < 1):
        raise ValueError(
            f"--validation-fraction: must be between 0 and 1 (exclusive), got {validation_fraction}"
        )
    # early stopping scores a validation part of the training split; the rest trains the critic
    n_validation = max(2, int(round(n_train * validation_fraction)))
    n_fit = n_train - n_validation
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or not 2 <= batch_size <= n_fit:
        raise ValueError(
            f"--batch-size: must be a whole number from 2 to the {n_fit} training pairs left after "
            f"the validation split, got {batch_size!r}"
        )
    if eval_block < 2:
        raise ValueError(f"eval_block must be >= 2, got {eval_block}")
    for option, value in (("--eval-every", eval_every), ("--patience", patience)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{option}: must be a whole number >= 1, got {value!r}")

    order = np.random.default_rng(seed).permutation(total)
    train, test = order[:n_train], order[n_train:]
    x_mean, x_std = x[train].mean(0), x[train].std(0) + 1e-12
    y_mean, y_std = y[train].mean(0), y[train].std(0) + 1e-12

    def to_tensor(array: np.ndarray) -> torch.Tensor:
        return torch.as_tensor(array, dtype=torch.float32, device=device)

    x_train, y_train = to_tensor((x[train] - x_mean) / x_std), to_tensor((y[train] - y_mean) / y_std)
    x_test, y_test = to_tensor((x[test] - x_mean) / x_std), to_tensor((y[test] - y_mean) / y_std)

    options: dict[str, object] = {}
    if critic in ("separable", "cosine"):
        options = {"embed_dim": embed_dim, "hidden": hidden, "hidden_layers": hidden_layers}
    elif critic == "concat":
        options = {"hidden": hidden, "hidden_layers": hidden_layers}
    bound_options = {"alpha": alpha} if estimator == "eqco" else {}
    generator = torch.Generator().manual_seed(seed)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = critics.make_critic(critic, x.shape[1], y.shape[1], **options).to(device)
    bound = bounds.get(estimator, **bound_options)
    evaluation = bounds.get(estimator, **bound_options)  # a second object: MINE's average is state
    # the critic is kept at its best validation estimate, so a long run cannot overfit the pairs
    # it trains on
    x_fit, y_fit = x_train[:n_fit], y_train[:n_fit]
    x_validation, y_validation = x_train[n_fit:], y_train[n_fit:]
    optimiser = torch.optim.Adam(model.parameters(), lr=lr)
    best_value, best_state, best_step, stale = -math.inf, None, 0, 0
    step = 0
    for step in range(1, steps + 1):
        rows = torch.randperm(n_fit, generator=generator)[:batch_size].to(device)
        pos, neg = bounds.split_scores(model(x_fit[rows], y_fit[rows]))
        result = bound(pos, neg)
        optimiser.zero_grad(set_to_none=True)
        result.loss.backward()
        optimiser.step()
        if step % eval_every == 0 or step == steps:
            value = float(
                np.mean(_held_out_values(model, x_validation, y_validation, evaluation, eval_block, chunk)[0])
            )
            if value > best_value:
                best_value, best_step, stale = value, step, 0
                best_state = {name: tensor.detach().clone() for name, tensor in model.state_dict().items()}
            else:
                stale += 1
            if progress is not None:
                progress(step, value)
            if stale >= patience:
                break
    if best_state is not None:
        model.load_state_dict(best_state)
    if progress is not None:
        progress(steps, best_value)

    chunk_values, negatives_test = _held_out_values(model, x_test, y_test, evaluation, eval_block, chunk)
    values = np.array(chunk_values)
    stderr = float(values.std(ddof=1) / math.sqrt(len(values))) if len(values) > 1 else math.nan
    return EstimateResult(
        estimate=float(values.mean()),
        stderr=stderr,
        estimator=estimator,
        critic=critic,
        n_train=n_train,
        n_test=n_test,
        negatives_train=batch_size - 1,
        negatives_test=negatives_test,
        steps=step,
        best_step=best_step,
        n_validation=n_validation,
    )


def _held_out_values(
    model: torch.nn.Module,
    x: torch.Tensor,
    y: torch.Tensor,
    evaluation: Callable,
    eval_block: int,
    chunk: int,
) -> tuple[list[float], int]:
    """The bound on held-out pairs: blocks of at most ``eval_block`` pairs scored all-pairs, the
    anchors of a block grouped in chunks of about ``chunk``; one value per chunk, and the smallest
    number of negatives K used."""
    rows = x.shape[0]
    values, negatives = [], rows - 1
    with torch.no_grad():
        for block in np.array_split(np.arange(rows), max(1, math.ceil(rows / eval_block))):
            block_index = torch.as_tensor(block, device=x.device)
            pos, neg = bounds.split_scores(model(x[block_index], y[block_index]))
            negatives = min(negatives, neg.shape[1])
            for anchors in np.array_split(np.arange(len(block)), max(1, len(block) // chunk)):
                index = torch.as_tensor(anchors, device=x.device)
                values.append(float(evaluation(pos[index], neg[index]).mi))
    return values, negatives
