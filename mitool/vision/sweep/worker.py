"""One run of a vision sweep, in a process of its own: ``python -m mitool.vision.sweep.worker RUN``
pretrains (or resumes) the run described by RUN/run.json, evaluates it (kNN, and the linear probe
when asked), and writes RUN/result.json last, atomically: a run is finished when it exists (a run
whose loss diverged is finished too, with its message and no accuracy)."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from mitool._infra.files import atomic_write_json
from mitool.vision.sweep.grid import Evaluation

__all__ = ["RESULT_FILE", "RUN_FILE", "main", "run_in_this_process"]

RUN_FILE, RESULT_FILE = "run.json", "result.json"


def _pretrain_config(config: dict[str, Any]) -> Any:
    from mitool.vision.config import PretrainConfig

    return PretrainConfig(**config)


def run_in_this_process(run_directory: str | os.PathLike, progress: bool = False) -> dict[str, Any]:
    """Pretrain (or resume) the run described by RUN/run.json, evaluate it, write RUN/result.json
    last; returns the result. A diverged run is a result too (status "diverged")."""
    import torch

    from mitool.vision.evaluate import evaluate_knn, load_backbone
    from mitool.vision.step import TrainingDiverged
    from mitool.vision.train import pretrain

    directory = Path(run_directory)
    plan = json.loads((directory / RUN_FILE).read_text())
    config, evaluation = _pretrain_config(plan["config"]), Evaluation(**plan["evaluation"])
    started = time.perf_counter()
    checkpoint = directory / "checkpoint.pt"
    result: dict[str, Any] = {"name": plan["name"], "status": "done"}
    try:
        summary = pretrain(config, resume=checkpoint.is_file(), progress=progress)
        result.update(steps=summary["step"], epochs=summary["epoch"])
    except TrainingDiverged as error:
        result.update(status="diverged", message=str(error))
    if result["status"] == "done":
        backbone, _, saved, _ = load_backbone(str(checkpoint), torch.device(config.device))
        synthetic = config.synthetic_options()
        knn = evaluate_knn(
            backbone, config.dataset, config.data_dir, saved["image_size"], torch.device(config.device),
            evaluation.knn_k, evaluation.knn_temperature, batch_size=max(config.batch_size, 256),
            workers=config.workers, max_samples=evaluation.knn_max_samples, synthetic_options=synthetic,
        )  # fmt: skip
        result.update(knn_top1=knn["knn_top1"], knn_top5=knn["knn_top5"])
        if evaluation.linear_epochs:
            result["linear_top1"] = _linear_top1(config, str(checkpoint), directory, evaluation.linear_epochs)
    result["wall_seconds"] = time.perf_counter() - started
    atomic_write_json(directory / RESULT_FILE, result)
    return result


def _linear_top1(config: Any, checkpoint: str, directory: Path, epochs: int) -> float:
    """Top-1 of the linear probe on cached features (no augmentation), decay at 60% and 80%."""
    from mitool.vision.linear import LinearConfig, linear_evaluation

    milestones = tuple(sorted({max(1, round(epochs * 0.6)), max(1, round(epochs * 0.8))}))
    linear = LinearConfig(
        checkpoint=checkpoint, out=str(directory / "linear"), epochs=epochs, milestones=milestones,
        augment=False, workers=config.workers, device=config.device, seed=config.seed,
    )  # fmt: skip
    resume = (directory / "linear" / "linear.pt").is_file()
    return float(linear_evaluation(linear, resume=resume, progress=False)["top1"])


def main(argv: list[str] | None = None) -> int:
    """``python -m mitool.vision.sweep.worker RUN_DIR``: one run of a sweep, in this process."""
    from mitool.runtime import set_threads_to_free_cores

    arguments = sys.argv[1:] if argv is None else argv
    if len(arguments) != 1:
        print("usage: python -m mitool.vision.sweep.worker OUT/runs/NAME", file=sys.stderr)
        return 2
    set_threads_to_free_cores()
    result = run_in_this_process(arguments[0])
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
