"""One optimizer step of a pretraining run: both views forward under autocast, the backward pass
queued, the loss and the gradient norm checked, the step taken (:func:`training_step`); the
optimizer, momentum SGD or LARS (:func:`make_optimizer`).

A NaN or infinite loss or gradient norm stops the run before the parameters take it, with
:class:`TrainingDiverged` naming the step; under DDP the step's scalars (loss, mi, npc and the
stop flags of every rank) travel in one all-reduce.

Host synchronisations: on a GPU the host reads a device value only by waiting for the kernels that
compute it. A step reads one thing, the step's scalars (and the previous step's gradient norm) in
one transfer, once its backward pass is queued, so that the device is busy with the backward pass
while the host waits for the forward's scalars. The gradient norm of a step is not read in that
step: with an optimizer that can skip a step on the device (a fused SGD or
:class:`~mitool.vision.lars.LARS`, :func:`make_optimizer`) a non-finite norm makes the optimizer
leave the parameters and its state untouched (the ``found_inf`` input of torch's fused kernels, as
GradScaler uses it), and the host learns of it with the next step's scalars (or before the next
checkpoint, :func:`check_gradient_norm`), then stops the run naming the step. With another
optimizer the norm is read in the step, before the optimizer takes it (one more synchronisation).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

import torch
import torch.distributed as dist
from torch import Tensor, nn

from mitool import checks
from mitool.vision import distributed

__all__ = [
    "StepResult",
    "TrainingDiverged",
    "check_gradient_norm",
    "make_optimizer",
    "skips_on_device",
    "training_step",
]


class TrainingDiverged(RuntimeError):
    """The loss or the gradient norm became NaN or infinite; the message names the step."""


@dataclass(frozen=True)
class StepResult:
    """Scalars of one optimizer step, averaged over ranks: loss, mi, npc (NaN when the bound has
    none); grad_norm (of all trained parameters, after DDP's averaging): a 0-dim tensor on the
    device, read only when logged (``float(result.grad_norm)``); grad_norm_checked: whether the
    step already checked that it is finite (else the next step, or :func:`check_gradient_norm`,
    does); flags: the step's ``flags``, each true when it was true on any rank."""

    loss: float
    mi: float
    npc: float
    grad_norm: Tensor
    flags: tuple[bool, ...] = ()
    grad_norm_checked: bool = True


def make_optimizer(
    parameters: Iterable[Tensor],
    lr: float,
    momentum: float,
    weight_decay: float,
    device: torch.device,
    optimizer: str = "sgd",
    trust_coefficient: float | None = None,
) -> torch.optim.Optimizer:
    """The run's optimizer, one of :data:`mitool.vision.choices.OPTIMIZERS`.

    "sgd": momentum SGD with weight decay on every parameter, fused where torch has fused SGD
    kernels for ``device`` (CPU and CUDA): one kernel launch per group of tensors, and a step that a
    non-finite gradient norm can cancel on the device (see the module docstring). "lars":
    :class:`~mitool.vision.lars.LARS` with ``trust_coefficient`` (default
    :data:`~mitool.vision.choices.LARS_TRUST_COEFFICIENT`), the weights adapted and decayed, biases and
    BatchNorm parameters neither (:func:`~mitool.vision.lars.lars_parameter_groups`)."""
    from mitool.vision.choices import LARS_TRUST_COEFFICIENT, OPTIMIZERS
    from mitool.vision.lars import LARS, lars_parameter_groups

    checks.choice("optimizer", optimizer, OPTIMIZERS)
    if optimizer == "lars":
        coefficient = LARS_TRUST_COEFFICIENT if trust_coefficient is None else trust_coefficient
        return LARS(
            lars_parameter_groups(parameters, weight_decay), lr=lr, momentum=momentum,
            weight_decay=weight_decay, trust_coefficient=coefficient,
        )  # fmt: skip
    from torch.optim.optimizer import _get_fused_kernels_supported_devices

    fused = device.type in _get_fused_kernels_supported_devices()
    return torch.optim.SGD(
        parameters, lr=lr, momentum=momentum, weight_decay=weight_decay, fused=fused or None
    )


def skips_on_device(optimizer: torch.optim.Optimizer) -> bool:
    """Whether ``optimizer`` takes a ``found_inf`` flag that cancels its step on the device (torch's
    fused optimizers, and :class:`~mitool.vision.lars.LARS`)."""
    if getattr(optimizer, "reads_found_inf", False):
        return True
    return bool(getattr(optimizer, "_step_supports_amp_scaling", False)) and all(
        group.get("fused") for group in optimizer.param_groups
    )


def check_gradient_norm(grad_norm: Tensor | None, step: int) -> None:
    """TrainingDiverged when ``grad_norm`` (of step ``step``, counted from 1) is not finite; None
    passes. Reads the value: a synchronisation on a GPU."""
    if grad_norm is not None:
        _check_norm_value(float(grad_norm), step)


def _check_norm_value(value: float, step: int) -> None:
    if not math.isfinite(value):
        raise TrainingDiverged(f"gradient norm is {value} at step {step}")


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
    previous_grad_norm: Tensor | None = None,
) -> StepResult:
    """Forward both views, queue the backward pass, check the loss, step. Raises
    :class:`TrainingDiverged` before the parameters change when a value is not finite.

    ``flags`` (e.g. "stop now") travel with the step's scalars: under DDP they are summed over the
    ranks in the same all-reduce, so every rank learns whether any rank raised one without a
    synchronisation of its own. ``previous_grad_norm``: the previous step's ``grad_norm`` when
    that step left it unchecked (``grad_norm_checked`` False); it is read with this step's scalars
    and a non-finite one raises TrainingDiverged naming that step (step ``step``, counted from 1),
    before this step changes anything."""
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
    if previous_grad_norm is not None:  # the same for every rank (DDP averaged the gradients)
        scalars = torch.cat([scalars, previous_grad_norm.detach().float().view(1).to(scalars.device)])
    optimizer.zero_grad(set_to_none=True)
    scaler.scale(result.loss).backward()
    # read the scalars only once the backward pass is queued, so that on a GPU the host does not
    # wait for the forward pass before launching the backward kernels; the parameters are still
    # untouched here, so a non-finite loss stops the run before they change
    read = scalars.tolist()
    if previous_grad_norm is not None:
        *read, previous = read
        _check_norm_value(previous, step)
    loss, mi, npc_value, *summed = read
    agreed = tuple(value > 0 for value in summed) if several else tuple(bool(flag) for flag in flags)
    if not math.isfinite(loss):
        raise TrainingDiverged(f"loss is {loss} at step {step + 1}")
    scaler.unscale_(optimizer)
    parameters = [p for group in optimizer.param_groups for p in group["params"] if p.grad is not None]
    grad_norm = _total_norm([p.grad for p in parameters])
    checked = True
    if scaler.is_enabled():  # fp16: GradScaler skips steps with non-finite gradients and lowers its scale
        scaler.step(optimizer)
        scaler.update()
    elif skips_on_device(optimizer):
        optimizer.found_inf = (~torch.isfinite(grad_norm)).float()  # read by torch's fused kernels
        try:
            optimizer.step()
        finally:
            del optimizer.found_inf
        checked = False
    else:
        check_gradient_norm(grad_norm, step + 1)
        optimizer.step()
    return StepResult(loss, mi, npc_value, grad_norm.detach(), agreed, checked)


def _total_norm(gradients: list[Tensor]) -> Tensor:
    """The 2-norm of all gradients together (without clip_grad_norm_'s extra scaling pass)."""
    get_total_norm = getattr(torch.nn.utils, "get_total_norm", None)  # torch >= 2.6
    if get_total_norm is not None:
        return get_total_norm(gradients)
    return torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g.float()) for g in gradients]))


_AUTOCAST = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
