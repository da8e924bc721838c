"""Variational bounds and estimators of mutual information, as pure functions of critic scores.

Every bound takes the scores of a critic f(x, y):

* ``pos``: shape (B,), the scores f(x_i, y_i) of B positive pairs drawn from the joint p(x, y);
* ``neg``: shape (B, K), the scores f(x_i, y'_ik) of the same B anchors against K samples
  y'_ik of the marginal p(y), i.e. pairs from the product of marginals p(x)p(y);

and returns a :class:`BoundResult`: ``loss``, a differentiable scalar to minimise (training the
critic tightens the bound); ``mi``, the estimate of I(X; Y) in nats at the current critic; ``npc``,
for the InfoNCE family only, the DCL paper's mean negative-positive-coupling multiplier
q_B = 1 - e^{pos} / (e^{pos} + sum_k e^{neg_k}), detached (``None`` elsewhere).

Leading dimensions are independent sets of scores, as in torch.nn.functional: ``pos`` (..., B) and
``neg`` (..., B, K) give results of shape (...), each the bound of its own scores alone (R critics
trained together, as :mod:`mitool.stacked` stacks them, take one call and sum their R losses).

Arithmetic is in float32 whatever the scores' dtype (bf16 and fp16 are upcast once) and in log
space: scores of magnitude 1e3 with K = 65536 neither overflow nor give NaN. The InfoNCE family
never builds the (B, K+1) concatenation of ``pos`` and ``neg``: the negatives' log-sum-exp is taken
once and combined with the positive by ``logaddexp``.

Notation below: lse is log-sum-exp; means run over anchors i (and negatives k where written).

``get(name, **options)`` gives a bound by name. :data:`BOUNDS` is the one table of the bounds, which
the rest of mitool reads: for each name its function, options (defaults, checks), InfoNCE-family
form, what its ``mi`` is, what training makes the critic converge to and which bounds may evaluate
such a critic. Why a table, and why leading dimensions rather than vmap: docs/bounds.md,
"Notes on mitool.bounds".
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from mitool import checks
from mitool._infra.lazy import lazy_import

if TYPE_CHECKING:
    from torch import Tensor

torch = lazy_import("torch")  # loaded at the first bound computed: the table below needs no torch

__all__ = [
    "BOUNDS",
    "CRITIC_OPTIMA",
    "DEFAULT_ALPHA",
    "DIVERGENCE_THRESHOLD",
    "INFONCE_FAMILY",
    "NAMES",
    "Bound",
    "BoundOption",
    "BoundResult",
    "Mine",
    "dcl",
    "dclw",
    "dv",
    "eqco",
    "evaluators_for",
    "family_estimate",
    "from_negative_logsumexp",
    "get",
    "infonce",
    "js",
    "mine",
    "nwj",
    "smile",
    "split_scores",
]


@dataclass(frozen=True)
class BoundResult:
    """What a bound returns: scalars, or tensors of the scores' leading shape (...) (see the module).

    loss: to minimise (differentiable with respect to the scores).
    mi: the estimate of the mutual information in nats (differentiable, but train on ``loss``).
    npc: for the InfoNCE family, the mean negative-positive-coupling multiplier (Yeh et al. 2021)
        q_B = 1 - the positive's softmax weight among [pos, neg], detached; ``None`` elsewhere.
    """

    loss: Tensor
    mi: Tensor
    npc: Tensor | None = None


_SCORES = """Parameters
    ----------
    pos : Tensor, shape (B,) or (..., B)
        The critic's scores f(x_i, y_i) of B positive pairs, drawn from the joint p(x, y).
    neg : Tensor, shape (B, K) or (..., B, K)
        The scores f(x_i, y'_ik) of the same anchors against K samples y'_ik of the marginal p(y)."""
_FAMILY_NPC = "InfoNCE's mean coupling multiplier q_B (detached)"
_DECOUPLED_NPC = "InfoNCE's q_B at these scores (detached)"


def _documented(npc: str = "None") -> Callable[[Callable], Callable]:
    """Fill in a bound's docstring, written once for all: ``{scores}``, the Parameters section with pos
    and neg (the bound's options follow it); ``{result}``, the Returns section (``npc``: what it is)."""
    result = (
        "Returns\n    -------\n    BoundResult\n        ``loss``, the scalar to minimise; ``mi``, the scalar "
        f"estimate in nats;\n        ``npc``, {npc}."
    )

    def document(function: Callable) -> Callable:
        if function.__doc__:  # None under python -OO
            function.__doc__ = function.__doc__.replace("{scores}", _SCORES).replace("{result}", result)
        return function

    return document


# ----------------------------------------------------------------------------------------------
# argument checks


def _check_scores(pos: Tensor, neg: Tensor) -> tuple[Tensor, Tensor]:
    """Validate shapes and dtypes; return both as float32 (no copy when already float32)."""
    if not isinstance(pos, torch.Tensor) or not isinstance(neg, torch.Tensor):
        raise ValueError(
            f"pos and neg must be torch tensors, got {type(pos).__name__} and {type(neg).__name__}"
        )
    if pos.dim() < 1:
        raise ValueError("pos must have shape (B,) or (..., B), got a scalar")
    if neg.dim() != pos.dim() + 1 or neg.shape[:-1] != pos.shape:
        expected = ", ".join(map(str, (*pos.shape, "K")))
        raise ValueError(
            f"neg must have shape ({expected}): pos's shape {tuple(pos.shape)} (the same B anchors) and "
            f"K negatives, got shape {tuple(neg.shape)}"
        )
    if pos.shape[-1] < 1:
        raise ValueError("B (the number of anchors) must be >= 1, got 0")
    if neg.shape[-1] < 1:
        raise ValueError(f"K (neg.shape[-1], the number of negatives) must be >= 1, got {neg.shape[-1]}")
    if not (pos.is_floating_point() and neg.is_floating_point()):
        raise ValueError(f"pos and neg must be floating point, got {pos.dtype} and {neg.dtype}")
    return pos.float(), neg.float()


def _log_mean_exp(scores: Tensor) -> Tensor:
    """log mean_ik exp(s_ik) over the last two dimensions (the anchors and their negatives), stable."""
    return torch.logsumexp(scores, dim=(-2, -1)) - math.log(scores.shape[-2] * scores.shape[-1])


def _mean_over_pairs(scores: Tensor) -> Tensor:
    """mean_ik over the last two dimensions (the anchors and their negatives)."""
    return scores.mean(dim=(-2, -1))


@functools.cache
def _row_logsumexp_function() -> type:
    """lse_i = log sum_k e^{s_ik} over the last dimension, an autograd Function (made at first use: the
    table loads without torch) whose backward builds the gradient in place in one (B, K) buffer, where
    torch.logsumexp's makes three (B, K) temporaries: a bound's (B, K) memory is the scores and their
    gradient. Works under torch.func.vmap and for double backward."""

    class RowLogSumExp(torch.autograd.Function):
        generate_vmap_rule = True

        @staticmethod
        def forward(scores: Tensor) -> Tensor:
            return torch.logsumexp(scores, dim=-1)

        @staticmethod
        def setup_context(ctx, inputs: tuple[Tensor], output: Tensor) -> None:
            ctx.save_for_backward(inputs[0], output)

        @staticmethod
        def backward(ctx, grad_lse: Tensor) -> Tensor:
            scores, lse = ctx.saved_tensors
            if torch.is_grad_enabled():  # double backward: out-of-place, differentiable
                return torch.exp(scores - lse.unsqueeze(-1)) * grad_lse.unsqueeze(-1)
            return torch.sub(scores, lse.unsqueeze(-1)).exp_().mul_(grad_lse.unsqueeze(-1))

    return RowLogSumExp


def _row_logsumexp(scores: Tensor) -> Tensor:
    return _row_logsumexp_function().apply(scores)


# ----------------------------------------------------------------------------------------------
# the InfoNCE family


def split_scores(scores: Tensor) -> tuple[Tensor, Tensor]:
    """Split a (B, B) all-pairs score matrix S[i, j] = f(x_i, y_j) into ``(pos, neg)``.

    K = B - 1: every other row of the batch is a negative of anchor i. Leading dimensions (R runs'
    matrices) are kept.

    Parameters
    ----------
    scores : Tensor, shape (B, B) or (..., B, B)
        S[i, j] = f(x_i, y_j), with B >= 2.

    Returns
    -------
    pos : Tensor, shape (B,) or (..., B)
        The diagonal, the matched pairs.
    neg : Tensor, shape (B, B - 1) or (..., B, B - 1)
        Each row without its diagonal entry, S[i, j != i] in order.

    Examples
    --------
    >>> import torch
    >>> from mitool import bounds
    >>> pos, neg = bounds.split_scores(torch.arange(9.0).reshape(3, 3))
    >>> pos.tolist(), neg.tolist()
    ([0.0, 4.0, 8.0], [[1.0, 2.0], [3.0, 5.0], [6.0, 7.0]])
    """
    if not isinstance(scores, torch.Tensor) or scores.dim() < 2 or scores.shape[-2] != scores.shape[-1]:
        shape = tuple(scores.shape) if isinstance(scores, torch.Tensor) else type(scores).__name__
        raise ValueError(f"scores must be a square (B, B) tensor, or (..., B, B), got {shape}")
    batch = scores.shape[-1]
    if batch < 2:
        raise ValueError(f"scores must have B >= 2 to leave at least one negative, got B = {batch}")
    lead = scores.shape[:-2]
    pos = scores.diagonal(dim1=-2, dim2=-1)
    # Drop the diagonal without a boolean mask: in the flattened matrix the diagonal sits every
    # B+1 elements, so rows of length B+1 starting after element 0 end with it.
    flat = scores.reshape(*lead, batch * batch)[..., 1:]
    neg = flat.reshape(*lead, batch - 1, batch + 1)[..., :-1].reshape(*lead, batch, batch - 1)
    return pos, neg


@_documented(_FAMILY_NPC)
def infonce(pos: Tensor, neg: Tensor) -> BoundResult:
    """InfoNCE (van den Oord et al. 2018, arXiv 1807.03748; Poole et al. 2019, arXiv 1905.06922).

        loss = mean_i [ lse(pos_i, neg_i1, ..., neg_iK) - pos_i ]
        mi   = log(K + 1) - loss

    A lower bound on I(X; Y) in expectation over the samples, for any critic, capped at log(K + 1)
    nats whatever the true MI (the loss is >= 0).

    {scores}

    {result}

    Examples
    --------
    A critic that scores the positives far above the negatives reaches the cap log(K + 1):

    >>> import math, torch
    >>> from mitool import bounds
    >>> result = bounds.infonce(torch.full((4,), 5.0), torch.zeros(4, 7))
    >>> round(result.mi.item(), 2), round(math.log(7 + 1), 2)
    (2.03, 2.08)
    """
    pos, neg = _check_scores(pos, neg)
    return _family("coupled", pos, _row_logsumexp(neg), neg.shape[-1], weight=neg.shape[-1])


@_documented(_FAMILY_NPC)
def eqco(pos: Tensor, neg: Tensor, alpha: float) -> BoundResult:
    """EqCo: InfoNCE calibrated to the number of negatives (Zhu et al. 2020, arXiv 2010.01929).

        loss = mean_i [ lse(pos_i, neg_ik + log(alpha / K)) - pos_i ]
             = mean_i [ log(e^{pos_i} + (alpha / K) * sum_k e^{neg_ik}) - pos_i ]
        mi   = log(alpha + 1) - loss

    In the paper's margin form (similarities s = q.k / tau) this is InfoNCE with the margin
    m = tau * log(alpha / K) subtracted from the positive. As sum_k e^{neg_ik} is about K E[e^{neg}],
    the loss, its gradient and the estimate depend on alpha, not on K: the cap is log(alpha + 1).
    An estimate, not a strict bound at finite K (it is InfoNCE when alpha = K).

    {scores}
    alpha : float
        The fixed number of negatives the loss is calibrated to (> 0); the cap is log(alpha + 1).

    {result}

    Examples
    --------
    Twice the negatives (the same scores repeated) leave the estimate as it was:

    >>> import torch
    >>> from mitool import bounds
    >>> pos, neg = torch.full((4,), 5.0), torch.zeros(4, 7)
    >>> few = bounds.eqco(pos, neg, alpha=64.0).mi
    >>> many = bounds.eqco(pos, torch.cat([neg, neg], dim=1), alpha=64.0).mi
    >>> round(few.item(), 2), bool(torch.isclose(few, many))
    (3.82, True)
    """
    alpha = checks.positive("alpha", alpha)
    pos, neg = _check_scores(pos, neg)
    return _family("coupled", pos, _row_logsumexp(neg), neg.shape[-1], weight=alpha)


@_documented(_DECOUPLED_NPC)
def dcl(pos: Tensor, neg: Tensor) -> BoundResult:
    """Decoupled contrastive loss (Yeh et al. 2021, arXiv 2110.06848).

        loss = mean_i [ lse_k(neg_ik) - pos_i ]          (the positive left out of the denominator)
        mi   = log(K) - loss

    An estimate, not a bound, and not capped. With an unbounded critic the loss has no lower bound
    (it can run away); with a bounded one (cosine / temperature) it is well posed, negative losses
    being normal. ``npc`` is InfoNCE's q_B at these scores, the multiplier DCL removes.

    {scores}

    {result}

    Examples
    --------
    Not capped: the same scores that put InfoNCE at its cap log(8) = 2.08 give 5 nats here.

    >>> import torch
    >>> from mitool import bounds
    >>> result = bounds.dcl(torch.full((4,), 5.0), torch.zeros(4, 7))
    >>> round(result.mi.item(), 2), round(result.loss.item(), 2)
    (5.0, -3.05)
    """
    pos, neg = _check_scores(pos, neg)
    return _family("decoupled", pos, _row_logsumexp(neg), neg.shape[-1])


@_documented(_DECOUPLED_NPC)
def dclw(pos: Tensor, neg: Tensor, sigma: float = 0.5, temperature: float = 1.0) -> BoundResult:
    """Weighted decoupled contrastive loss, DCLW (Yeh et al. 2021, arXiv 2110.06848).

        w_i  = 2 - B * softmax_i(pos_i * temperature / sigma)        (detached, mean_i w_i = 1)
        loss = mean_i [ lse_k(neg_ik) - w_i * pos_i ]
        mi   = log(K) - mean_i [ lse_k(neg_ik) - pos_i ]              (the unweighted DCL estimate)

    With vision scores pos = cosine / temperature, the weight is the paper's von Mises-Fisher
    weighting of cosine / sigma: easy positives weigh below one, hard ones above; no gradient flows
    through it. ``mi`` is the DCL estimate (not a bound).

    {scores}
    sigma : float
        Width of the positive's weighting (> 0).
    temperature : float
        The temperature of the scores, pos * temperature being the similarity (> 0).

    {result}

    Examples
    --------
    Positives of one score all weigh 1, and DCLW is DCL:

    >>> import torch
    >>> from mitool import bounds
    >>> pos, neg = torch.full((4,), 5.0), torch.zeros(4, 7)
    >>> bool(torch.isclose(bounds.dclw(pos, neg).loss, bounds.dcl(pos, neg).loss))
    True
    """
    sigma = checks.positive("sigma", sigma)
    temperature = checks.positive("temperature", temperature)
    pos, neg = _check_scores(pos, neg)
    return _family("weighted", pos, _row_logsumexp(neg), neg.shape[-1], sigma=sigma, temperature=temperature)


FORMS: tuple[str, ...] = ("coupled", "decoupled", "weighted")
"""The three forms of the InfoNCE family, by how the positive enters the loss (see :func:`_family`)."""


def family_estimate(
    form: str, loss: Tensor | None, decoupled_mean: Tensor | None, num_negatives: int, weight: float
) -> Tensor:
    """The MI estimate in nats, a scalar tensor, of a bound of the InfoNCE family from its batch means,
    w being K (infonce) or alpha (eqco):

        coupled (infonce, eqco):           log(w + 1) - loss, capped at log(w + 1)
        decoupled, weighted (dcl, dclw):   log K - mean_i(lse_i - pos_i), DCL's (dclw: unweighted)

    Parameters
    ----------
    form : str
        One of :data:`FORMS`: "coupled", "decoupled" or "weighted".
    loss : Tensor or None
        The coupled form's batch loss (None for the other forms).
    decoupled_mean : Tensor or None
        mean_i(lse_i - pos_i), for the decoupled and weighted forms (None for the coupled form).
    num_negatives : int
        K.
    weight : float
        w, the negatives' weight of the coupled form: K, or eqco's alpha.

    Examples
    --------
    >>> import torch
    >>> from mitool import bounds
    >>> result = bounds.infonce(torch.full((4,), 5.0), torch.zeros(4, 7))
    >>> bool(torch.isclose(bounds.family_estimate("coupled", result.loss, None, 7, 7.0), result.mi))
    True
    """
    if form == "coupled":
        return math.log(weight + 1) - loss
    return math.log(num_negatives) - decoupled_mean


def _family(
    form: str,
    pos: Tensor,
    neg_lse: Tensor,
    num_negatives: int,
    weight: float = 1.0,
    sigma: float = 0.5,
    temperature: float = 1.0,
) -> BoundResult:
    """The one place where the InfoNCE family's formulas are written (arguments already checked):
    lse_i = log sum_k e^{neg_ik}, w the negatives' weight (K for infonce, alpha for eqco),

        coupled:    loss = mean_i [log(e^{pos_i} + (w / K) e^{lse_i}) - pos_i]
        decoupled:  loss = mean_i [lse_i - pos_i]
        weighted:   loss = mean_i [lse_i - v_i pos_i],  v = 2 - B softmax(pos * temperature / sigma) detached
    """
    if form == "coupled":
        log_weight = 0.0 if weight == num_negatives else math.log(weight / num_negatives)
        per_anchor = torch.logaddexp(pos, neg_lse + log_weight) - pos
        loss = per_anchor.mean(-1)
        # q_B = 1 - e^{pos} / (e^{pos} + w sum_k e^{neg_k}) = 1 - exp(-per_anchor)
        npc = (-torch.expm1(-per_anchor.detach())).mean(-1)
        return BoundResult(loss=loss, mi=family_estimate(form, loss, None, num_negatives, weight), npc=npc)
    decoupled = neg_lse - pos
    mi = family_estimate(form, None, decoupled.mean(-1), num_negatives, weight)
    npc = torch.sigmoid(decoupled.detach()).mean(-1)  # InfoNCE's q_B at the same scores
    if form == "decoupled":
        return BoundResult(loss=decoupled.mean(-1), mi=mi, npc=npc)
    positive_weight = 2.0 - pos.shape[-1] * torch.softmax(pos.detach() * (temperature / sigma), dim=-1)
    return BoundResult(loss=(neg_lse - positive_weight * pos).mean(-1), mi=mi, npc=npc)


def from_negative_logsumexp(
    name: str, pos: Tensor, neg_lse: Tensor, num_negatives: int, **options: float
) -> BoundResult:
    """The :class:`BoundResult` of a bound of the InfoNCE family from the positives and the
    log-sum-exp of the negatives, the same as from the negatives themselves.

    The family depends on anchor i's K negatives only through lse_i = log sum_k e^{neg_ik}:
    ``from_negative_logsumexp(name, pos, logsumexp(neg, 1), K, **options)`` equals
    ``get(name, **options)(pos, neg)``. Chunked or fused computations of lse (:mod:`mitool.fused`)
    use it to reach the same formulas.

    Parameters
    ----------
    name : str
        One of :data:`INFONCE_FAMILY`.
    pos : Tensor, shape (B,) or (..., B)
        The scores of the positive pairs.
    neg_lse : Tensor, shape of pos
        lse_i = log sum_k e^{neg_ik} of each anchor's negative scores.
    num_negatives : int
        K >= 1, the negatives behind each lse_i.
    **options : float
        As for :func:`get`: alpha for eqco; sigma and temperature for dclw.

    Examples
    --------
    >>> import torch
    >>> from mitool import bounds
    >>> pos, neg = torch.full((4,), 5.0), torch.zeros(4, 7)
    >>> fused = bounds.from_negative_logsumexp("infonce", pos, torch.logsumexp(neg, dim=1), 7)
    >>> bool(torch.isclose(fused.mi, bounds.infonce(pos, neg).mi))
    True
    """
    checks.choice("name", name, INFONCE_FAMILY)
    bound = BOUNDS[name]
    checks.whole_number("num_negatives", num_negatives, 1)
    shape_of_pos = getattr(pos, "shape", None)
    if not isinstance(neg_lse, torch.Tensor) or neg_lse.dim() < 1 or neg_lse.shape != shape_of_pos:
        got = tuple(neg_lse.shape) if isinstance(neg_lse, torch.Tensor) else type(neg_lse).__name__
        raise ValueError(f"neg_lse must be a tensor of pos's shape, (B,) or (..., B), got {got}")
    pos, neg_lse_column = _check_scores(pos, neg_lse.unsqueeze(-1))
    options = bound.check_options(options)
    weight = bound.negatives_weight(num_negatives, options)
    extra = {key: options[key] for key in ("sigma", "temperature") if key in options}
    return _family(bound.form, pos, neg_lse_column.squeeze(-1), num_negatives, weight, **extra)


# ----------------------------------------------------------------------------------------------
# the classic variational bounds (Poole et al. 2019, arXiv 1905.06922)


@_documented()
def nwj(pos: Tensor, neg: Tensor) -> BoundResult:
    """NWJ, also called f-MINE or the Nguyen-Wainwright-Jordan bound (Nguyen et al. 2010).

        mi   = mean_i(pos_i) - e^{-1} * mean_ik(e^{neg_ik})
        loss = -mi

    A lower bound on I(X; Y) for every critic, tight at f = 1 + log p(y|x)/p(y); unbiased in the
    samples but its variance grows like e^{I}. Not capped. When e^{neg} overflows float32
    (scores above ~88 plus log(BK)) the value is -inf, never NaN.

    {scores}

    {result}

    Examples
    --------
    Independent X and Y have the log density ratio 0, at which NWJ's optimal critic is 1:

    >>> import torch
    >>> from mitool import bounds
    >>> round(bounds.nwj(torch.ones(4), torch.ones(4, 3)).mi.item(), 4)
    0.0
    """
    pos, neg = _check_scores(pos, neg)
    mi = pos.mean(-1) - torch.exp(_log_mean_exp(neg) - 1.0)
    return BoundResult(loss=-mi, mi=mi)


@_documented()
def dv(pos: Tensor, neg: Tensor) -> BoundResult:
    """Donsker-Varadhan bound (Donsker & Varadhan 1983; used by MINE, Belghazi et al. 2018).

        mi   = mean_i(pos_i) - log mean_ik(e^{neg_ik})
        loss = -mi

    The true DV quantity is a lower bound on I(X; Y), tight at f = log p(y|x)/p(y) + c; with the
    log of a sample mean it is a biased estimate (biased upwards for small batches), not a strict
    bound. Not capped. Its plain gradient is biased; :class:`Mine` corrects it.

    {scores}

    {result}

    Examples
    --------
    A constant added to every score leaves the value as it was:

    >>> import torch
    >>> from mitool import bounds
    >>> pos, neg = torch.full((4,), 5.0), torch.zeros(4, 7)
    >>> bounds.dv(pos, neg).mi.item(), bounds.dv(pos + 3, neg + 3).mi.item()
    (5.0, 5.0)
    """
    pos, neg = _check_scores(pos, neg)
    mi = pos.mean(-1) - _log_mean_exp(neg)
    return BoundResult(loss=-mi, mi=mi)


def _check_rate(parameter: str, rate: float) -> float:
    return checks.number(parameter, rate, above=0.0, maximum=1.0)


@_documented()
def mine(
    pos: Tensor, neg: Tensor, log_average: Tensor | None, rate: float = 0.01
) -> tuple[BoundResult, Tensor]:
    """MINE (Belghazi et al. 2018, arXiv 1801.04062) as a pure function: the DV value with a
    bias-corrected gradient, and the updated moving average.

    The gradient of log mean(e^{neg}) is mean(e^{neg} grad neg) / mean(e^{neg}); MINE replaces the
    denominator by an exponential moving average of mean(e^{neg}) over the training batches,

        ema_t = (1 - rate) * ema_{t-1} + rate * mean_ik(e^{neg_ik})      (ema_1 = the first batch mean)

    so ``loss`` has the value -DV but the gradient -grad mean(pos) + grad mean(e^{neg}) / ema_t;
    ``mi`` is the DV value (:func:`dv`). Kept in log space (no overflow); one average per set of
    scores (leading dimensions). :class:`Mine` holds the average for you.

    {scores}
    log_average : Tensor or None
        log ema_{t-1}, a scalar (of the scores' leading shape (...), one per set); None or NaN
        before the first batch.
    rate : float
        The moving average's rate, in (0, 1].

    Returns
    -------
    result : BoundResult
        ``loss`` (value -DV, corrected gradient) and ``mi`` (the DV value); ``npc`` is None.
    log_average : Tensor
        log ema_t (detached), to pass to the next call.

    Examples
    --------
    >>> import torch
    >>> from mitool import bounds
    >>> pos, neg = torch.full((4,), 5.0), torch.zeros(4, 7)
    >>> result, log_average = bounds.mine(pos, neg, None)
    >>> result.mi.item() == bounds.dv(pos, neg).mi.item(), log_average.item()
    (True, 0.0)
    """
    rate = _check_rate("rate", rate)
    pos, neg = _check_scores(pos, neg)
    log_mean = _log_mean_exp(neg)
    batch_log_mean = log_mean.detach()
    if log_average is None or rate == 1:
        updated = batch_log_mean
    else:
        log_average = torch.as_tensor(log_average, dtype=batch_log_mean.dtype, device=batch_log_mean.device)
        blended = torch.logaddexp(log_average + math.log1p(-rate), batch_log_mean + math.log(rate))
        updated = torch.where(torch.isnan(log_average), batch_log_mean, blended)
    # ratio = mean(e^neg) / ema: value ratio.detach(), gradient grad(mean e^neg) / ema
    ratio = torch.exp(log_mean - updated)
    surrogate = ratio - ratio.detach() + log_mean.detach()
    loss = -(pos.mean(-1) - surrogate)
    return BoundResult(loss=loss, mi=pos.mean(-1) - log_mean), updated


class Mine:
    """MINE with its moving average held for you: ``Mine(rate)(pos, neg)`` is the BoundResult of
    :func:`mine` with the average of the previous training calls (value -DV, corrected gradient;
    ``mi`` is the DV value).

    Holds state: create one per critic trained; ``reset()`` (or a new object) forgets the average,
    e.g. when the data distribution changes. Calls whose scores do not require gradients
    (evaluation) leave the average as it was.

    Parameters
    ----------
    rate : float
        The moving average's rate, in (0, 1].

    Examples
    --------
    >>> import torch
    >>> from mitool import bounds
    >>> mine = bounds.Mine(rate=0.01)
    >>> neg = torch.zeros(4, 7, requires_grad=True)
    >>> result = mine(torch.full((4,), 5.0), neg)       # a training call: the average starts
    >>> round(result.mi.item(), 2), mine.log_average.item()
    (5.0, 0.0)
    """

    def __init__(self, rate: float = 0.01) -> None:
        self.rate = _check_rate("rate", rate)
        self.log_average: Tensor | None = None

    def reset(self) -> None:
        """Forget the moving average; the next training call starts it afresh."""
        self.log_average = None

    def __call__(self, pos: Tensor, neg: Tensor) -> BoundResult:
        result, updated = mine(pos, neg, self.log_average, self.rate)
        if neg.requires_grad:
            self.log_average = updated
        return result


@_documented()
def js(pos: Tensor, neg: Tensor) -> BoundResult:
    """Jensen-Shannon (f-GAN) training objective (Nowozin et al. 2016; Poole et al. 2019).

        loss = mean_i softplus(-pos_i) + mean_ik softplus(neg_ik)
        mi   = mean_i(pos_i) + 1 - mean_ik(e^{neg_ik})

    The loss trains the critic towards f = log p(y|x)/p(y) (a JS-divergence lower bound, not an MI
    bound); ``mi`` evaluates that critic with the NWJ bound shifted by one (NWJ of f + 1), which is
    tight at the JS optimum. It is a lower bound for any critic, with high variance at high MI.

    {scores}

    {result}

    Examples
    --------
    At the critic f = 0 (the log density ratio of independent X and Y) the value is 0, as
    :func:`nwj` of f + 1:

    >>> import torch
    >>> from mitool import bounds
    >>> pos, neg = torch.zeros(4), torch.zeros(4, 3)
    >>> bounds.js(pos, neg).mi.item(), bounds.nwj(pos + 1, neg + 1).mi.item()
    (0.0, 0.0)
    """
    pos, neg = _check_scores(pos, neg)
    loss = torch.nn.functional.softplus(-pos).mean(-1) + _mean_over_pairs(torch.nn.functional.softplus(neg))
    mi = pos.mean(-1) + 1.0 - torch.exp(_log_mean_exp(neg))
    return BoundResult(loss=loss, mi=mi)


@_documented()
def smile(pos: Tensor, neg: Tensor, clip: float = 5.0) -> BoundResult:
    """SMILE (Song & Ermon 2020, arXiv 1910.06222): the critic is trained with the JS loss and
    evaluated with a DV estimate whose negative scores are clipped,

        loss = mean_i softplus(-pos_i) + mean_ik softplus(neg_ik)       (as :func:`js`)
        mi   = mean_i(pos_i) - log mean_ik(e^{clamp(neg_ik, -clip, clip)})

    Clipping trades a small bias for a variance bounded in terms of e^{clip}; it is an estimate,
    not a bound. As clip goes to infinity it becomes :func:`dv`.

    {scores}
    clip : float
        The negative scores are clipped to [-clip, clip] (> 0).

    {result}

    Examples
    --------
    Negative scores of 10 count as 5 with the default clip; DV takes them as they are:

    >>> import torch
    >>> from mitool import bounds
    >>> pos, neg = torch.full((4,), 5.0), torch.full((4, 3), 10.0)
    >>> bounds.smile(pos, neg).mi.item(), bounds.dv(pos, neg).mi.item()
    (0.0, -5.0)
    """
    clip = checks.positive("clip", clip)
    pos, neg = _check_scores(pos, neg)
    loss = torch.nn.functional.softplus(-pos).mean(-1) + _mean_over_pairs(torch.nn.functional.softplus(neg))
    mi = pos.mean(-1) - _log_mean_exp(neg.clamp(-clip, clip))
    return BoundResult(loss=loss, mi=mi)


# ----------------------------------------------------------------------------------------------
# the table of bounds: every name, option and default of a bound is written here and only here

DIVERGENCE_THRESHOLD = 1000.0
"""An estimate that is NaN, infinite or beyond this many nats has run away (no data set of this
world holds 1000 nats): the toy study stops such a run, the estimators raise DivergenceError."""

CRITIC_OPTIMA: dict[str, str] = {
    "per-anchor shift": "log p(y|x)/p(y) + c(x), any function c of the anchor",
    "constant shift": "log p(y|x)/p(y) + c, any constant c",
    "plus one": "1 + log p(y|x)/p(y)",
    "exact": "log p(y|x)/p(y)",
}
"""What training with a bound makes an unrestricted critic converge to (the keys are the values of
:attr:`Bound.critic_optimum`)."""


@dataclass(frozen=True)
class BoundOption:
    """An option of a bound: its name, default (None: it must be given), check and meaning.
    ``score_temperature``: the contrastive methods (:mod:`mitool.fused`, :mod:`mitool.vision`) set
    it to the temperature of their scores rather than taking it from the user."""

    name: str
    default: float | None
    meaning: str
    check: Callable[[str, object], float] = checks.positive
    score_temperature: bool = False


@dataclass(frozen=True)
class Bound:
    """One row of :data:`BOUNDS`.

    name: the bound's name. function: ``function(pos, neg, **options) -> BoundResult`` (for mine the
    class :class:`Mine`, which holds the moving average; the pure form is :func:`mine`). summary: one
    line for help texts. estimate: what ``mi`` is (bound or estimate, its ceiling). options: its
    :class:`BoundOption` s. form: for the InfoNCE family "coupled", "decoupled" or "weighted" (how the
    positive enters, :data:`FORMS`; what the fused paths compute), else None. weight_option: the
    coupled form's option replacing K as the negatives' weight (eqco's alpha); K when None.
    critic_optimum: a key of :data:`CRITIC_OPTIMA`, where training with this bound drives the critic.
    tight_for: the critic optima at which ``mi`` equals the MI (up to sampling and its ceiling): a
    critic trained with bound A is evaluated with a bound B whose tight_for holds A's critic_optimum
    (:func:`evaluators_for`). stateful: its ``get`` object carries state between calls (MINE's moving
    average). lower_bound: for any fixed critic, the expectation of ``mi`` over batches is at most the
    MI (InfoNCE, NWJ, JS evaluated with NWJ), so a one-sided confidence bound on that expectation from
    held-out pairs is one on the MI.
    """

    name: str
    function: Callable[..., BoundResult]
    summary: str
    estimate: str
    critic_optimum: str
    tight_for: tuple[str, ...]
    options: tuple[BoundOption, ...] = ()
    form: str | None = None
    weight_option: str | None = None
    stateful: bool = False
    lower_bound: bool = False

    @property
    def infonce_family(self) -> bool:
        """Built from a log-sum-exp over the negatives (the contrastive losses of vision)."""
        return self.form is not None

    @property
    def option_names(self) -> tuple[str, ...]:
        return tuple(option.name for option in self.options)

    def check_options(self, given: Mapping[str, object]) -> dict[str, float]:
        """The bound's options: those ``given`` (None counts as not given) checked, the others at
        their defaults. ValueError for an option the bound does not take or a required one missing."""
        given = {key: value for key, value in given.items() if value is not None}
        unknown = sorted(set(given) - set(self.option_names))
        if unknown:
            accepted = ", ".join(self.option_names) or "none"
            raise checks.ParameterError(
                unknown[0], f"is not an option of bound {self.name!r} (its options: {accepted})"
            )
        return self.pick_options(given)

    def pick_options(self, settings: Mapping[str, object]) -> dict[str, float]:
        """The bound's options taken from ``settings``, a mapping that may hold other settings too
        (a run's alpha, sigma, clip, ...): each option present and not None is checked, the others
        take their defaults. ValueError when a required option (eqco's alpha) is missing."""
        options = {}
        for option in self.options:
            value = settings.get(option.name)
            if value is None:
                if option.default is None:
                    raise checks.ParameterError(
                        option.name, f"must be given for bound {self.name!r} ({option.meaning})"
                    )
                value = option.default
            options[option.name] = option.check(option.name, value)
        return options

    def negatives_weight(self, num_negatives: int, options: Mapping[str, float]) -> float:
        """w of the coupled form: K, or the option named by :attr:`weight_option` (eqco's alpha)."""
        return float(options[self.weight_option]) if self.weight_option else float(num_negatives)

    def ceiling(self, num_negatives: int, options: Mapping[str, float] | None = None) -> float | None:
        """The largest value ``mi`` can take: log(w + 1) for the coupled form (w = K, or alpha for
        eqco); None for bounds without a ceiling."""
        if self.form != "coupled":
            return None
        return math.log(self.negatives_weight(num_negatives, self.check_options(options or {})) + 1.0)


_ANY_OPTIMUM = tuple(CRITIC_OPTIMA)
_UP_TO_A_CONSTANT = ("constant shift", "plus one", "exact")

BOUNDS: dict[str, Bound] = {
    bound.name: bound
    for bound in (
        Bound(
            "infonce", infonce, "InfoNCE (CPC), the contrastive lower bound",
            "a lower bound, capped at log(K + 1)", "per-anchor shift", _ANY_OPTIMUM, form="coupled",
            lower_bound=True,
        ),
        Bound(
            "eqco", eqco, "EqCo: InfoNCE with the negatives' weight alpha / K (Zhu et al. 2020)",
            "an estimate steady in K, capped at log(alpha + 1)", "per-anchor shift", _ANY_OPTIMUM,
            options=(BoundOption("alpha", None, "the fixed number of negatives the loss is calibrated to"),),
            form="coupled", weight_option="alpha",
        ),
        Bound(
            "dcl", dcl, "DCL: InfoNCE with the positive out of the denominator (Yeh et al. 2021)",
            "an estimate, not capped; unbounded below with unbounded critics", "per-anchor shift",
            _ANY_OPTIMUM, form="decoupled",
        ),
        Bound(
            "dclw", dclw, "DCLW: DCL with the positive weighted by 2 - B softmax(pos / sigma)",
            "DCL's estimate (unweighted)", "per-anchor shift", _ANY_OPTIMUM,
            options=(
                BoundOption("sigma", 0.5, "width of the positive's von Mises-Fisher weighting"),
                BoundOption(
                    "temperature", 1.0, "the temperature of the scores (pos * temperature = similarity)",
                    score_temperature=True,
                ),
            ),
            form="weighted",
        ),
        Bound(
            "nwj", nwj, "NWJ (f-MINE), tight at the critic 1 + log-ratio",
            "a lower bound, not capped; variance grows like e^I", "plus one", ("plus one",),
            lower_bound=True,
        ),
        Bound(
            "dv", dv, "Donsker-Varadhan with a sample mean inside the log",
            "an estimate (biased upwards for small batches), not capped", "constant shift",
            _UP_TO_A_CONSTANT,
        ),
        Bound(
            "mine", Mine, "MINE: the DV value with a moving-average corrected gradient",
            "as dv", "constant shift", _UP_TO_A_CONSTANT,
            options=(
                BoundOption(
                    "rate", 0.01, "the moving average's rate, in (0, 1]",
                    check=lambda name, value: _check_rate(name, value),
                ),
            ),
            stateful=True,
        ),
        Bound(
            "js", js, "Jensen-Shannon training, evaluated with NWJ at the critic + 1",
            "a lower bound, not capped; high variance at high MI", "exact", ("exact",),
            lower_bound=True,
        ),
        Bound(
            "smile", smile, "SMILE: JS training, DV evaluation with clipped negative scores",
            "an estimate with bounded variance, not capped", "exact", _UP_TO_A_CONSTANT,
            options=(BoundOption("clip", 5.0, "the negative scores are clipped to [-clip, clip]"),),
        ),
    )
}  # fmt: skip
"""The table of bounds, by name."""

NAMES: tuple[str, ...] = tuple(BOUNDS)
"""The names accepted by :func:`get`."""

INFONCE_FAMILY: tuple[str, ...] = tuple(name for name, bound in BOUNDS.items() if bound.infonce_family)
"""The bounds built from a log-sum-exp over the negatives (the contrastive losses of vision)."""

DEFAULT_ALPHA = 1024.0
"""EqCo's alpha where the estimator (:mod:`mitool.estimators.neural`) or the toy study is given none
(:func:`get` requires it); cap log(1025) = 6.93 nats. Why this value: docs/bounds.md, "DEFAULT_ALPHA"."""


def _bound(name: str) -> Bound:
    return BOUNDS[checks.choice("name", name, NAMES)]


def takes_option(name: str, option: str) -> bool:
    """Whether the bound called ``name`` takes the option ``option``.

    Parameters
    ----------
    name : str
        A bound's name; a name outside :data:`BOUNDS` (a baseline estimator such as ksg) gives False.
    option : str
        An option's name (eqco's ``alpha``, smile's ``clip``, ...).

    Examples
    --------
    >>> from mitool import bounds
    >>> bounds.takes_option("eqco", "alpha"), bounds.takes_option("infonce", "alpha")
    (True, False)
    >>> bounds.takes_option("ksg", "alpha")
    False
    """
    return name in BOUNDS and option in BOUNDS[name].option_names


def get(name: str, **options: float) -> Callable[[Tensor, Tensor], BoundResult]:
    """The bound called ``name`` as a function ``(pos, neg) -> BoundResult``, its options fixed.

    Every call of ``get("mine")`` returns a new :class:`Mine` with its own moving average.

    Parameters
    ----------
    name : str
        One of :data:`NAMES`.
    **options : float
        The bound's parameters (:data:`BOUNDS` lists them with their defaults): ``alpha`` for
        eqco (required), ``sigma`` and ``temperature`` for dclw, ``clip`` for smile, ``rate`` for
        mine. Options a bound does not take are ignored when they are None and rejected otherwise.

    Examples
    --------
    >>> import torch
    >>> from mitool import bounds
    >>> pos, neg = torch.full((4,), 5.0), torch.zeros(4, 7)
    >>> eqco = bounds.get("eqco", alpha=64.0)
    >>> eqco(pos, neg).mi.item() == bounds.eqco(pos, neg, alpha=64.0).mi.item()
    True
    """
    bound = _bound(name)
    options = bound.check_options(options)
    if bound.stateful:
        return bound.function(**options)
    if not options:
        return bound.function

    def with_options(pos: Tensor, neg: Tensor) -> BoundResult:
        return bound.function(pos, neg, **options)

    with_options.__name__ = name
    with_options.__doc__ = bound.function.__doc__
    return with_options


def evaluators_for(trained_with: str) -> tuple[str, ...]:
    """The names of the bounds whose ``mi`` is tight at the critic that training with ``trained_with``
    converges to, in the table's order.

    A critic trained with infonce (optimal only up to a function of the anchor) is scored with the
    InfoNCE family; one trained with js (the log-ratio itself) also with dv, smile and js (NWJ at
    f + 1), not with nwj, which needs the critic 1 + log-ratio. A bound outside this list still gives
    a valid number where it is a lower bound, but a loose one: docs/bounds.md, "evaluators_for".

    Parameters
    ----------
    trained_with : str
        The name of the bound the critic was trained with (one of :data:`NAMES`).

    Examples
    --------
    >>> from mitool import bounds
    >>> bounds.evaluators_for("infonce")
    ('infonce', 'eqco', 'dcl', 'dclw')
    >>> "nwj" in bounds.evaluators_for("js")
    False
    """
    optimum = _bound(trained_with).critic_optimum
    return tuple(name for name, bound in BOUNDS.items() if optimum in bound.tight_for)
