"""LARS: layer-wise adaptive rate scaling for large-batch SGD, and the parameter groups it is run with.

You, Gitman, Ginsburg, "Large Batch Training of Convolutional Networks" (arXiv 1708.03888, 2017),
as SimCLR (Chen, Kornblith, Norouzi, Hinton, ICML 2020, arXiv 2002.05709) and NNCLR (Dwibedi,
Aytar, Tompson, Sermanet, Zisserman, ICCV 2021, arXiv 2104.14548) train with it: the trust
coefficient eta = 0.001, biases and BatchNorm parameters excluded from the adaptation and from the
weight decay, a linear warm-up then cosine decay of the global rate (:mod:`mitool.vision.schedule`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, ClassVar

import torch
from torch import Tensor

from mitool import checks
from mitool.vision.choices import LARS_TRUST_COEFFICIENT

__all__ = ["LARS", "lars_parameter_groups"]


class LARS(torch.optim.Optimizer):
    r"""Momentum SGD whose step for each weight tensor is scaled by that tensor's trust ratio.

    For a parameter tensor w of a group with ``adapt`` true (the weights of convolutions and
    linear layers), with gradient g, global learning rate gamma (the schedule's, ``lr``), momentum
    mu, weight decay beta and trust coefficient eta:

    .. math::

        d       &= g + \beta w \\
        \lambda &= \eta \, \|w\| / (\|g\| + \beta \|w\|)
                   \quad (1 \text{ when } \|w\| = 0 \text{ or } \|g\| = 0) \\
        v       &\leftarrow \mu v + \lambda d \\
        w       &\leftarrow w - \gamma v

    (You et al. 2017, eq. 6 and Algorithm 2; the norms are Frobenius norms of the whole tensor, one
    "layer"). In a group with ``adapt`` false (biases and BatchNorm scales and shifts, see
    :func:`lars_parameter_groups`) lambda = 1 and no weight decay is given to it there
    (:func:`lars_parameter_groups` sets beta = 0): plain momentum SGD, v <- mu v + g,
    w <- w - gamma v, as SimCLR excludes them from both. The momentum buffer v starts at 0.

    gamma multiplies the momentum buffer, as in ``torch.optim.SGD`` (and solo-learn's LARS), where
    You et al. write v <- mu v + gamma lambda d, w <- w - v; the two agree while gamma is constant
    and differ only while the schedule moves it. The trust ratio has no epsilon and no clipping
    (solo-learn's ``clip_lr`` makes it LARC); a zero norm gives lambda = 1, as SimCLR's code does.

    Non-finite gradients: when the caller sets the attribute ``found_inf`` (a 0-dim tensor on the
    parameters' device, nonzero when a gradient is not finite: the interface of torch's fused
    optimizers, which :func:`mitool.vision.step.training_step` uses) a step leaves the parameters
    and the momentum buffers untouched, decided on the device without a host read.

    Parameters
    ----------
    params : iterable of Tensor or dict
        The parameters, or parameter groups (dicts with "params" and any of the options below).
    lr : float
        gamma, the global learning rate.
    momentum : float
        mu, in [0, 1).
    weight_decay : float
        beta, >= 0: added to the gradient as beta w, and to the trust ratio's denominator.
    trust_coefficient : float
        eta, > 0 (default :data:`mitool.vision.choices.LARS_TRUST_COEFFICIENT`, 0.001).
    adapt : bool
        Whether the group's tensors take the trust ratio (True) or plain momentum SGD (False).

    References
    ----------
    Y. You, I. Gitman, B. Ginsburg, "Large Batch Training of Convolutional Networks", arXiv
    1708.03888 (2017). T. Chen et al., "A Simple Framework for Contrastive Learning of Visual
    Representations", ICML 2020. D. Dwibedi et al., "With a Little Help from My Friends:
    Nearest-Neighbor Contrastive Learning of Visual Representations", ICCV 2021.
    """

    reads_found_inf: ClassVar[bool] = True
    """The step reads ``found_inf`` (see :func:`mitool.vision.step.skips_on_device`)."""

    def __init__(
        self,
        params: Iterable[Tensor] | Iterable[dict[str, Any]],
        lr: float,
        momentum: float = 0.9,
        weight_decay: float = 0.0,
        trust_coefficient: float = LARS_TRUST_COEFFICIENT,
        adapt: bool = True,
    ) -> None:
        defaults = dict(
            lr=checks.number("lr", lr, minimum=0.0),
            momentum=checks.number("momentum", momentum, minimum=0.0, below=1.0),
            weight_decay=checks.number("weight_decay", weight_decay, minimum=0.0),
            trust_coefficient=checks.number("trust_coefficient", trust_coefficient, above=0.0),
            adapt=bool(adapt),
        )
        super().__init__(params, defaults)

    @torch.no_grad()
    def step(self, closure: Callable[[], float] | None = None) -> float | None:  # type: ignore[override]
        """One update of every parameter that has a gradient (see the class docstring)."""
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        found_inf = getattr(self, "found_inf", None)
        for group in self.param_groups:
            parameters = [parameter for parameter in group["params"] if parameter.grad is not None]
            if parameters:
                self._update_group(group, parameters, found_inf)
        return loss

    def _update_group(
        self, group: dict[str, Any], parameters: list[Tensor], found_inf: Tensor | None
    ) -> None:
        gradients = [parameter.grad for parameter in parameters]
        buffers = []
        for parameter in parameters:
            state = self.state[parameter]
            if "momentum_buffer" not in state:
                state["momentum_buffer"] = torch.zeros_like(parameter, memory_format=torch.preserve_format)
            buffers.append(state["momentum_buffer"])
        decay = group["weight_decay"]
        directions = torch._foreach_add(gradients, parameters, alpha=decay) if decay else list(gradients)
        if group["adapt"]:
            directions = torch._foreach_mul(
                directions, list(self._trust_ratios(group, parameters, gradients))
            )
        new_buffers = torch._foreach_add(torch._foreach_mul(buffers, group["momentum"]), directions)
        new_parameters = torch._foreach_add(parameters, new_buffers, alpha=-group["lr"])
        if found_inf is None:
            torch._foreach_copy_(buffers, new_buffers)
            torch._foreach_copy_(parameters, new_parameters)
            return
        skip = found_inf.to(torch.bool)
        for parameter, buffer, new_parameter, new_buffer in zip(
            parameters, buffers, new_parameters, new_buffers, strict=True
        ):
            buffer.copy_(torch.where(skip, buffer, new_buffer))
            parameter.copy_(torch.where(skip, parameter, new_parameter))

    @staticmethod
    def _trust_ratios(
        group: dict[str, Any], parameters: list[Tensor], gradients: list[Tensor]
    ) -> tuple[Tensor, ...]:
        """lambda of every tensor, (n,) 0-dim tensors on the device: no host read."""
        weight_norms = torch.stack(torch._foreach_norm(parameters))
        gradient_norms = torch.stack(torch._foreach_norm(gradients))
        ratio = (
            group["trust_coefficient"]
            * weight_norms
            / (gradient_norms + group["weight_decay"] * weight_norms)
        )
        usable = (weight_norms > 0) & (gradient_norms > 0)
        return torch.where(usable, ratio, torch.ones_like(ratio)).unbind()


def lars_parameter_groups(parameters: Iterable[Tensor], weight_decay: float) -> list[dict[str, Any]]:
    """The two groups of a LARS run: the tensors of two or more dimensions (convolution and linear
    weights) adapted and decayed; the one-dimensional ones (biases, BatchNorm scales and shifts)
    neither (``adapt`` False, weight decay 0). Either group may be empty; empty ones are left out."""
    parameters = list(parameters)
    weights = [parameter for parameter in parameters if parameter.ndim > 1]
    excluded = [parameter for parameter in parameters if parameter.ndim <= 1]
    groups = [
        {"params": weights, "weight_decay": weight_decay, "adapt": True},
        {"params": excluded, "weight_decay": 0.0, "adapt": False},
    ]
    return [group for group in groups if group["params"]]
