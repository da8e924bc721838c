"""One optimizer step of a pretraining run: both views forward under autocast, the backward pass
queued, the loss and the gradient norm checked, the step taken (:func:`training_step`).

A NaN or infinite loss or gradient norm stops the run before the optimizer step with
:class:`TrainingDiverged`, naming the step; under DDP the step's scalars (loss, mi, npc and the
stop flags of every rank) travel in one all-reduce.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.distributed as dist
from torch import Tensor, nn

from mitool.vision import distributed

__all__ = ["StepResult", "TrainingDiverged", "training_step"]


class TrainingDiverged(RuntimeError):
    """The loss or the gradient norm became NaN or infinite; the message names the step."""


@dataclass(frozen=True)
class StepResult:
    """Scalars of one optimizer step, averaged over ranks: loss, mi, npc (NaN when the bound has
    none), grad_norm (of all trained parameters, after DDP's averaging); flags: the step's
    ``flags``, each true when it was true on any rank."""

    loss: float
    mi: float
    npc: float
    grad_norm: float
    flags: tuple[bool, ...] = ()


def training_step(
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    scaler: torch.amp.GradScaler,
    view_1: Tensor,
    view_2: Tensor,
    lr: float,
    precision: str,
    step: int,
    flags: tuple[bool, ...] = (),
) -> StepResult:
    """Forward both views, queue the backward pass, check the loss, step. Raises
    :class:`TrainingDiverged` before the parameters change when a value is not finite.

    ``flags`` (e.g. "stop now") travel with the step's scalars: under DDP they are summed over the
    ranks in the same all-reduce, so every rank learns whether any rank raised one without a
    synchronisation of its own."""
    for group in optimizer.param_groups:
        group["lr"] = lr
    device_type = view_1.device.type
    with torch.autocast(device_type, dtype=_AUTOCAST[precision], enabled=precision != "fp32"):
        result = model(view_1, view_2)
    npc = result.npc if result.npc is not None else torch.full((), float("nan"), device=view_1.device)
    values = [result.loss.detach(), result.mi.detach(), npc]
    several = distributed.is_distributed()
    if several:
        values += [torch.full((), float(flag), device=view_1.device) for flag in flags]
    scalars = torch.stack(values).float()
    if several:
        dist.all_reduce(scalars)
        scalars[:3] /= distributed.world_size()
    optimizer.zero_grad(set_to_none=True)
    scaler.scale(result.loss).backward()
    # read the scalars only once the backward pass is queued, so that on a GPU the host does not
    # wait for the forward pass before launching the backward kernels; the parameters are still
    # untouched here, so a non-finite loss stops the run before they change
    loss, mi, npc_value, *summed = scalars.tolist()
    agreed = tuple(value > 0 for value in summed) if several else tuple(bool(flag) for flag in flags)
    if not math.isfinite(loss):
        raise TrainingDiverged(f"loss is {loss} at step {step + 1}")
    scaler.unscale_(optimizer)
    parameters = [p for group in optimizer.param_groups for p in group["params"] if p.grad is not None]
    grad_norm = float(_total_norm([p.grad for p in parameters]))
    if not math.isfinite(grad_norm) and not scaler.is_enabled():
        raise TrainingDiverged(f"gradient norm is {grad_norm} at step {step + 1}")
    scaler.step(optimizer)
    scaler.update()
    return StepResult(loss, mi, npc_value, grad_norm, agreed)


def _total_norm(gradients: list[Tensor]) -> Tensor:
    """The 2-norm of all gradients together (without clip_grad_norm_'s extra scaling pass)."""
    get_total_norm = getattr(torch.nn.utils, "get_total_norm", None)  # torch >= 2.6
    if get_total_norm is not None:
        return get_total_norm(gradients)
    return torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g.float()) for g in gradients]))


_AUTOCAST = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
