"""The InfoNCE family computed from embeddings, chunk by chunk, without the (B, K+1) logits matrix.

Contrastive pretraining scores a query q_i against its positive key k_i and K negative keys n_k
(MoCo's queue, or the other samples of the batch) with the cosine-style similarity over a
temperature tau, then feeds the scores to a bound of :mod:`mitool.bounds`:

    pos_i  = q_i . k_i / tau                                  shape (B,)
    neg_ik = q_i . n_k / tau        (shared negatives)        shape (B, K)
    neg_ik = q_i . n_ik / tau       (per-query negatives)

Every bound of the family (infonce, eqco, dcl, dclw) depends on the negatives only through the
per-anchor log-sum-exp lse_i = log sum_k e^{neg_ik}. :func:`contrastive_bound` computes lse_i
with an autograd function, :class:`NegativeLogSumExp`, that

* folds 1/tau into q once (a (B, d) product) instead of dividing the (B, K) scores;
* takes the scores in chunks of ``chunk_size`` negatives and combines the chunks' log-sum-exps
  (an online log-sum-exp), so no (B, K) score matrix and no (B, K+1) concatenation is built;
* keeps for the backward pass either the softmax weights of each chunk (one (B, K) buffer in all,
  what autograd of ``torch.logsumexp`` keeps too; ``recompute=False``, the fastest) or nothing of
  size (B, K) at all (``recompute=True``: the backward recomputes each chunk's scores, one more
  matrix product, and the memory stays O(B * chunk_size)).

The gradient of lse_i is the softmax p_ik = e^{neg_ik - lse_i}; with g_i = d loss / d lse_i,

    d loss / d q_i = (1/tau) sum_k g_i p_ik n_k          d loss / d n_k = (1/tau) sum_i g_i p_ik q_i

which the backward pass computes as two matrix products per chunk, with the row factor g_i
applied to the (B, d) operands rather than to the (B, chunk) weights.

The bound itself (the per-anchor formula, the estimate and the NPC multiplier) comes from
:mod:`mitool.bounds`, evaluated on the reduced quantities (pos, lse) by
:func:`mitool.bounds.from_negative_logsumexp`.

On a CUDA device with shared negatives, :func:`contrastive_bound` uses the Triton kernels of
:mod:`mitool.fused_triton` instead (``backend="auto"``): the same formulas in two kernel launches
forward and one or two backward,
nothing of size (B, K) kept, the scores recomputed tile by tile in the backward pass. On a GPU the
chunked operators above are bound by the host's cost of launching each small operator, not by
the arithmetic (bench/bounds.py, docs/performance.md).
"""

from __future__ import annotations

import torch
from torch import Tensor

from mitool import bounds, checks, fused_triton
from mitool.bounds import BoundResult

__all__ = [
    "BACKENDS",
    "NegativeLogSumExp",
    "chosen_backend",
    "contrastive_bound",
    "default_chunk_size",
]

BACKENDS = ("auto", "triton", "torch")
"""How :func:`contrastive_bound` computes: "triton", the kernels of :mod:`mitool.fused_triton`
(a CUDA device, shared negatives, d <= 256); "torch", the chunked :class:`NegativeLogSumExp`
(any device, shared or per-query negatives); "auto", the kernels where they apply on a CUDA
device and the chunks otherwise."""

CPU_CHUNK_SCORES = 2**20
"""On CPU a chunk holds about this many scores (4 MiB in float32, cache-sized): K / chunk matrix
products of B x chunk. Measured at B = 256, K = 16384: chunks of 2048 to 4096 were fastest."""

DEVICE_CHUNKS = 4
"""On a GPU the K negatives are split in this many chunks: few kernel launches, and a peak of
about 1.25 (B, K) float32 buffers (the kept weights and one chunk's scores). Chosen without a GPU
measurement; bench/gpu_check.sh compares four chunks with one and two."""


def default_chunk_size(batch: int, num_negatives: int, device: torch.device) -> int:
    """Negatives per chunk when ``chunk_size`` is not given: CPU_CHUNK_SCORES // B on CPU,
    K / DEVICE_CHUNKS (rounded up) elsewhere; at least 1."""
    if device.type == "cpu":
        return max(1, min(num_negatives, CPU_CHUNK_SCORES // max(1, batch)))
    return max(1, -(-num_negatives // DEVICE_CHUNKS))


_SMALLEST_SAFE_WEIGHT = 1e-30
"""Below this a softmax weight has lost relative precision (float32 denormals start at 1.2e-38)."""


# ----------------------------------------------------------------------------------------------
# chunked log-sum-exp of q @ negatives.T


def _chunk_scores(scaled_query: Tensor, negative_chunk: Tensor) -> Tensor:
    """Scores (B, C) of queries (B, d) against negatives (C, d) shared or (B, C, d) per query."""
    if negative_chunk.dim() == 2:
        return scaled_query @ negative_chunk.T
    return torch.bmm(negative_chunk, scaled_query.unsqueeze(2)).squeeze(2)


def _weighted_negatives(weights: Tensor, negative_chunk: Tensor) -> Tensor:
    """sum_k weights_ik n_k (B, d) for weights (B, C) and negatives (C, d) or (B, C, d)."""
    if negative_chunk.dim() == 2:
        return weights @ negative_chunk
    return torch.bmm(weights.unsqueeze(1), negative_chunk).squeeze(1)


def _negative_gradient(weights: Tensor, row_scaled_query: Tensor, per_query: bool) -> Tensor:
    """d/d n of sum_ik weights_ik (q_i . n_k): (C, d) shared, or (B, C, d) per query."""
    if per_query:
        return weights.unsqueeze(2) * row_scaled_query.unsqueeze(1)
    return weights.T @ row_scaled_query


class NegativeLogSumExp(torch.autograd.Function):
    """lse_i = log sum_k exp(q_i . n_k) in chunks of negatives, float32 out; shapes
    q (B, d), n (K, d) or (B, K, d) -> (B,). See the module docstring for the backward pass.

    Under CUDA autocast the backward pass runs with the forward's autocast state (its matrix
    products in bf16 or fp16 as the forward's), the weights and the result in float32."""

    @staticmethod
    @torch.amp.custom_fwd(device_type="cuda")
    def forward(ctx, scaled_query: Tensor, negatives: Tensor, chunk_size: int, recompute: bool) -> Tensor:
        num_negatives = negatives.shape[-2]
        chunk_lse = []
        first_weights = []
        kept_weights = []
        on_cpu = scaled_query.device.type == "cpu"
        for start in range(0, num_negatives, chunk_size):
            scores = _chunk_scores(scaled_query, negatives[..., start : start + chunk_size, :])
            weights = torch.softmax(scores, dim=1, dtype=torch.float32)
            if on_cpu:
                # log p_i0 = s_i0 - lse_i exactly in log space, so lse_i = s_i0 - log p_i0 (checked
                # below): no second pass over the chunk
                first_weights.append(weights[:, 0].clone())  # a copy: a view would keep the chunk alive
                chunk_lse.append(scores[:, 0].float() - torch.log(first_weights[-1]))
            else:  # a second pass rather than the check below, which waits for the device
                chunk_lse.append(torch.logsumexp(scores.float(), dim=1))
            del scores
            if not recompute:
                kept_weights.append(weights.to(negatives.dtype))
            del weights
        # where p_i0 underflowed (s_i0 far below the row's largest score) take the chunk's
        # log-sum-exp directly; one check for all chunks (one synchronisation, on CPU only)
        underflow = torch.stack(first_weights, dim=1) < _SMALLEST_SAFE_WEIGHT if on_cpu else None
        if on_cpu and bool(underflow.any()):
            for index in underflow.any(dim=0).nonzero().flatten().tolist():
                start = index * chunk_size
                scores = _chunk_scores(scaled_query, negatives[..., start : start + chunk_size, :]).float()
                chunk_lse[index] = torch.where(
                    underflow[:, index], torch.logsumexp(scores, dim=1), chunk_lse[index]
                )
        stacked = torch.stack(chunk_lse, dim=1)
        lse = torch.logsumexp(stacked, dim=1)
        ctx.chunk_size = chunk_size
        ctx.recompute = recompute
        # chunk_lse - lse turns each chunk's normalised weights into the global softmax
        ctx.save_for_backward(scaled_query, negatives, stacked, lse, *kept_weights)
        return lse

    @staticmethod
    @torch.amp.custom_bwd(device_type="cuda")
    def backward(ctx, grad_lse: Tensor):
        scaled_query, negatives, stacked, lse, *kept_weights = ctx.saved_tensors
        need_query, need_negatives = ctx.needs_input_grad[0], ctx.needs_input_grad[1]
        per_query = negatives.dim() == 3
        chunk_size = ctx.chunk_size
        grad_query = torch.zeros(scaled_query.shape, dtype=torch.float32, device=scaled_query.device)
        grad_negatives = torch.empty_like(negatives) if need_negatives else None
        # global softmax = chunk weights * exp(chunk_lse - lse); fold it and g_i into row factors
        row_factors = grad_lse.float().unsqueeze(1) * torch.exp(stacked - lse.unsqueeze(1))
        for index, start in enumerate(range(0, negatives.shape[-2], chunk_size)):
            chunk = negatives[..., start : start + chunk_size, :]
            if ctx.recompute:
                scores = _chunk_scores(scaled_query, chunk)
                weights = torch.softmax(scores, dim=1, dtype=torch.float32).to(negatives.dtype)
                del scores
            else:
                weights = kept_weights[index]
            row_factor = row_factors[:, index].unsqueeze(1)
            if need_query:
                grad_query += row_factor * _weighted_negatives(weights, chunk).float()
            if need_negatives:
                scaled_rows = (row_factor * scaled_query.float()).to(negatives.dtype)
                grad_negatives[..., start : start + chunk_size, :] = _negative_gradient(
                    weights, scaled_rows, per_query
                )
            del weights
        return (grad_query.to(scaled_query.dtype) if need_query else None), grad_negatives, None, None


# ----------------------------------------------------------------------------------------------
# the public entry point


def chosen_backend(query: Tensor, negative_keys: Tensor, backend: str = "auto") -> str:
    """The backend :func:`contrastive_bound` uses for these embeddings, "triton" or "torch":
    "auto" picks the kernels on a CUDA device where they apply (shared negatives, d <= 256).
    ValueError for an unknown name, or "triton" where the kernels do not apply."""
    checks.choice("backend", backend, BACKENDS)
    kernels_apply = fused_triton.supports(query, negative_keys)
    if backend == "triton" and not kernels_apply:
        raise ValueError(
            "backend 'triton' needs triton installed, a CUDA device (or TRITON_INTERPRET=1 on CPU) "
            f"and shared negatives (K, d) with d <= {fused_triton.MAX_DIM}; use backend 'torch' or 'auto'"
        )
    if backend == "triton" or (backend == "auto" and kernels_apply and query.is_cuda):
        return "triton"
    return "torch"


def _check_embeddings(query: Tensor, positive_key: Tensor, negative_keys: Tensor) -> None:
    for name, value in (("query", query), ("positive_key", positive_key), ("negative_keys", negative_keys)):
        if not isinstance(value, Tensor) or not value.is_floating_point():
            raise ValueError(f"{name} must be a floating-point torch tensor, got {type(value).__name__}")
    if query.dim() != 2 or query.shape[0] < 1:
        raise ValueError(f"query must have shape (B, d) with B >= 1, got {tuple(query.shape)}")
    if positive_key.shape != query.shape:
        raise ValueError(
            f"positive_key must have the shape of query {tuple(query.shape)}, got {tuple(positive_key.shape)}"
        )
    batch, dim = query.shape
    shared = negative_keys.dim() == 2 and negative_keys.shape[1] == dim
    per_query = negative_keys.dim() == 3 and negative_keys.shape[0] == batch and negative_keys.shape[2] == dim
    if not (shared or per_query) or negative_keys.shape[-2] < 1:
        raise ValueError(
            f"negative_keys must have shape (K, {dim}) (shared) or ({batch}, K, {dim}) (per query) "
            f"with K >= 1, got {tuple(negative_keys.shape)}"
        )
    dtypes = {query.dtype, positive_key.dtype, negative_keys.dtype}
    if len(dtypes) != 1:
        raise ValueError(
            f"query, positive_key and negative_keys must share one dtype, got {sorted(map(str, dtypes))}"
        )
    devices = {query.device, positive_key.device, negative_keys.device}
    if len(devices) != 1:
        raise ValueError(
            f"query, positive_key and negative_keys must be on one device, got {sorted(map(str, devices))}"
        )


@torch.compiler.disable  # runs eagerly inside a compiled model: Triton kernels, a custom backward
def contrastive_bound(
    query: Tensor,
    positive_key: Tensor,
    negative_keys: Tensor,
    temperature: float,
    bound: str = "infonce",
    chunk_size: int | None = None,
    recompute: bool = False,
    backend: str = "auto",
    **options: float,
) -> BoundResult:
    """A bound of the InfoNCE family on the scores of embeddings, never building the (B, K) logits.

    Equal (values and gradients, up to rounding) to::

        pos = (query * positive_key).sum(1) / temperature                       # (B,)
        neg = query @ negative_keys.T / temperature      # (B, K); per query: einsum("bd,bkd->bk")
        bounds.get(bound, **options)(pos, neg)

    query: (B, d) anchors q_i (usually L2-normalised); positive_key: (B, d) their positives k_i;
    negative_keys: (K, d) negatives shared by every query (MoCo's queue, the keys of a batch) or
    (B, K, d) negatives of each query. All three share one floating dtype (fp32, bf16, fp16) and
    device; gradients flow to each that requires them.
    temperature: tau > 0, the scores are similarities / tau.
    bound: a name of :data:`mitool.bounds.INFONCE_FAMILY` ("infonce", "eqco", "dcl", "dclw");
    options: its options from :data:`mitool.bounds.BOUNDS` (eqco needs ``alpha``: loss
    log(e^{pos} + (alpha/K) sum e^{neg}) - pos, Zhu et al. 2020; dclw takes ``sigma``, its
    weighting width). An option that the table marks ``score_temperature`` (dclw's temperature)
    is ``temperature`` itself, so dclw's weight uses pos * temperature / sigma = similarity / sigma.
    backend: "auto" (default), "triton" or "torch", see :data:`BACKENDS`. The Triton kernels
    keep nothing of size (B, K) and recompute the scores tile by tile in the backward pass; the
    two options below belong to the "torch" backend:
    chunk_size: negatives scored at a time (memory O(B * chunk_size) beyond the kept weights);
    None: :func:`default_chunk_size` (about 2^20 scores a chunk on CPU, K in 4 on a GPU).
    recompute: False keeps the softmax weights of all chunks for the backward pass (one (B, K)
    buffer in the dtype of the inputs, no second one); True keeps nothing of size (B, K) and
    recomputes each chunk's scores in the backward pass (one more matrix product).

    Returns a :class:`mitool.bounds.BoundResult` (loss, mi in nats, npc), as the plain bound does.
    Scores are accumulated in float32 whatever the input dtype.
    """
    _check_embeddings(query, positive_key, negative_keys)
    temperature = checks.positive("temperature", temperature)
    entry = bounds.BOUNDS[checks.choice("bound", bound, bounds.INFONCE_FAMILY)]
    tied = {option.name: temperature for option in entry.options if option.score_temperature}
    options = entry.check_options({**options, **tied})
    num_negatives = negative_keys.shape[-2]
    if chosen_backend(query, negative_keys, backend) == "triton":
        weight = entry.negatives_weight(num_negatives, options)
        totals = fused_triton.contrastive_totals(
            query, positive_key, negative_keys, temperature, entry.form, weight, options.get("sigma", 1.0)
        )
        loss = totals[0]
        mi = bounds.family_estimate(entry.form, loss, totals[2], num_negatives, weight)
        return BoundResult(loss=loss, mi=mi, npc=totals[1].detach())
    if chunk_size is None:
        chunk_size = default_chunk_size(query.shape[0], num_negatives, query.device)
    chunk_size = checks.whole_number("chunk_size", chunk_size, 1)

    scaled_query = query * (1.0 / temperature)
    pos = (scaled_query.float() * positive_key.float()).sum(dim=1)
    neg_lse = NegativeLogSumExp.apply(scaled_query, negative_keys, chunk_size, bool(recompute))
    return bounds.from_negative_logsumexp(bound, pos, neg_lse, num_negatives, **options)
