"""The InfoNCE family on a GPU in four Triton kernels: no (B, K) score matrix, in memory or in time.

Shared negatives only (MoCo's queue, the other keys of a batch): queries q (B, d), positive keys
k (B, d), negatives n (K, d), d <= 256, one dtype (fp32, bf16 or fp16). With tau the temperature,

    s_ik   = q_i . n_k / tau              scores, formed tile by tile in the kernels, never stored
    pos_i  = q_i . k_i / tau
    lse_i  = log sum_k e^{s_ik}
    loss   = mean_i l_i,  l_i = softplus(lse_i + log(w/K) - pos_i)   infonce (w = K), eqco (w = alpha)
                          l_i = lse_i - pos_i                         dcl
                          l_i = lse_i - v_i pos_i                     dclw, v = 2 - B softmax(pos tau / sigma)

(the formulas of :func:`mitool.bounds.from_negative_logsumexp`; ``softplus(z) = log(1 + e^z)`` is
``logaddexp(pos, lse') - pos``). The kernels:

1. ``_partial_logsumexp``: a grid of (row block, slice of the negatives); each program keeps an
   online maximum m and sum l of e^{s - m} over its slice (FlashAttention's running softmax, Dao
   et al. 2022), and the programs of the first slice also compute pos_i. Out: (B, S) maxima and
   sums, S the number of slices (chosen to fill the GPU).
2. ``_bound_totals``: one program combines the slices, lse_i = M_i + log sum_s l_is e^{m_is - M_i},
   and reduces the batch: totals = [loss, npc, mean_i(lse_i - pos_i)], npc the mean of
   q_B = sigmoid(lse_i + log(w/K) - pos_i) (Yeh et al. 2021). It also keeps the per-anchor
   derivatives dl_i/dpos_i and dl_i/dlse_i for the backward pass.
3. ``_query_gradient``: with a_i = dloss/dpos_i and b_i = dloss/dlse_i and p_ik = e^{s_ik - lse_i}
   (the scores recomputed tile by tile),
       dloss/dq_i = (a_i k_i + b_i sum_k p_ik n_k) / tau,     dloss/dk_i = a_i q_i / tau,
   per (row block, slice), the slices' partial sums added afterwards.
4. ``_negative_gradient`` (only when n requires a gradient): dloss/dn_k = sum_i b_i p_ik q_i / tau,
   a program per block of negatives looping over the rows.

Memory beyond the inputs and gradients: O(B S) floats. Time: the two matrix products q n^T and
their two gradients, read from the inputs tile by tile; two kernel launches in the forward pass,
one or two (and a sum over the slices) in the backward pass. Matrix products of fp32 inputs keep
fp32 accuracy (see :func:`_precision`) unless torch's float32 matmul precision allows TF32; bf16/fp16 products
accumulate in fp32 like cuBLAS; everything else is fp32.

Without a GPU the same kernels run in Triton's interpreter (``TRITON_INTERPRET=1`` set before
triton is imported), which is how the tests check them on CPU.
"""

from __future__ import annotations

import math
import os
import warnings

import torch
from torch import Tensor

try:
    import triton
    import triton.language as tl
except ImportError:  # pragma: no cover - torch's CUDA builds ship triton; CPU-only builds may not
    triton = None
    tl = None

__all__ = ["FORM_CODES", "MAX_DIM", "available", "supports", "contrastive_totals"]

FORM_CODES = {"coupled": 0, "decoupled": 1, "weighted": 2}
"""Kernel code of each form of the InfoNCE family (:data:`mitool.bounds.FORMS`; which bound has
which form is the table :data:`mitool.bounds.BOUNDS`): infonce and eqco are the coupled form with
the negatives' weight w = K or alpha."""

MAX_DIM = 256
"""Largest embedding dimension d of the kernels (a whole row of q is held in registers)."""

_BLOCK_ROWS = 64
_BLOCK_NEGATIVES = 64
_NEGATIVE_GRADIENT_BLOCK = 32
"""Negatives per program of the negatives' gradient (small: K = 4095 still fills the GPU)."""
_MAX_SLICES = 32
"""At most this many slices of the negatives: the query gradient keeps S partial (B, d) sums."""


def available() -> bool:
    """True when triton can be imported."""
    return triton is not None


def _interpreting() -> bool:
    return os.environ.get("TRITON_INTERPRET", "0") == "1"


def supports(query: Tensor, negative_keys: Tensor) -> bool:
    """Whether the kernels take these inputs: triton present, a CUDA device (or the interpreter on
    CPU), negatives shared by all queries (K, d) with d <= :data:`MAX_DIM`."""
    if not available() or negative_keys.dim() != 2 or query.shape[1] > MAX_DIM:
        return False
    return query.is_cuda or (_interpreting() and query.device.type == "cpu")


if triton is not None:

    @triton.jit
    def _scores_tile(
        q, negatives, start, end, column, dim, inverse_temperature,
        BLOCK_NEGATIVES: tl.constexpr, PRECISION: tl.constexpr,
    ):  # fmt: skip
        """Negatives start .. start + BLOCK_NEGATIVES - 1 (those at or past ``end`` read as zero),
        the tile n (BLOCK_NEGATIVES, BLOCK_DIM) and the scores q n^T / tau (BLOCK_ROWS, BLOCK_NEGATIVES)."""
        negative = start + tl.arange(0, BLOCK_NEGATIVES)
        n = tl.load(
            negatives + negative[:, None] * dim + column[None, :],
            mask=(negative[:, None] < end) & (column[None, :] < dim),
            other=0.0,
        )
        return negative, n, tl.dot(q, tl.trans(n), input_precision=PRECISION) * inverse_temperature

    @triton.jit
    def _partial_logsumexp(
        query, negatives, positive_key, maxima, sums, positive_scores,
        rows, count, dim, slice_length, num_slices, inverse_temperature,
        BLOCK_ROWS: tl.constexpr, BLOCK_NEGATIVES: tl.constexpr, BLOCK_DIM: tl.constexpr,
        PRECISION: tl.constexpr,
    ):  # fmt: skip
        row_block, part = tl.program_id(0), tl.program_id(1)
        row = row_block * BLOCK_ROWS + tl.arange(0, BLOCK_ROWS)
        column = tl.arange(0, BLOCK_DIM)
        row_mask = row < rows
        tile_mask = row_mask[:, None] & (column[None, :] < dim)
        q = tl.load(query + row[:, None] * dim + column[None, :], mask=tile_mask, other=0.0)
        running_max = tl.full([BLOCK_ROWS], float("-inf"), tl.float32)
        running_sum = tl.zeros([BLOCK_ROWS], tl.float32)
        begin = part * slice_length
        end = tl.minimum(begin + slice_length, count)
        for start in range(begin, end, BLOCK_NEGATIVES):
            negative, n, scores = _scores_tile(
                q, negatives, start, end, column, dim, inverse_temperature, BLOCK_NEGATIVES, PRECISION
            )
            scores = tl.where(negative[None, :] < end, scores, float("-inf"))
            new_max = tl.maximum(running_max, tl.max(scores, axis=1))
            running_sum = running_sum * tl.exp(running_max - new_max) + tl.sum(
                tl.exp(scores - new_max[:, None]), axis=1
            )
            running_max = new_max
        tl.store(maxima + row * num_slices + part, running_max, mask=row_mask)
        tl.store(sums + row * num_slices + part, running_sum, mask=row_mask)
        if part == 0:
            k = tl.load(positive_key + row[:, None] * dim + column[None, :], mask=tile_mask, other=0.0)
            positive = tl.sum(q.to(tl.float32) * k.to(tl.float32), axis=1) * inverse_temperature
            tl.store(positive_scores + row, positive, mask=row_mask)

    @triton.jit
    def _bound_totals(
        maxima, sums, positive_scores, logsumexp, derivatives, totals,
        rows, num_slices, log_weight_ratio, dclw_scale,
        FORM: tl.constexpr, BLOCK_ROWS: tl.constexpr, BLOCK_SLICES: tl.constexpr,
    ):  # fmt: skip
        part = tl.arange(0, BLOCK_SLICES)
        lanes = tl.arange(0, BLOCK_ROWS)
        # dclw's weights need softmax(pos * scale) over the whole batch first: a running maximum
        # and sum per lane, combined after the loop
        lane_max = tl.full([BLOCK_ROWS], float("-inf"), tl.float32)
        lane_sum = tl.zeros([BLOCK_ROWS], tl.float32)
        if FORM == 2:
            for start in range(0, rows, BLOCK_ROWS):
                row = start + lanes
                scaled = tl.load(positive_scores + row, mask=row < rows, other=float("-inf")) * dclw_scale
                new_max = tl.maximum(lane_max, scaled)
                safe_max = tl.where(new_max == float("-inf"), 0.0, new_max)
                lane_sum = lane_sum * tl.exp(lane_max - safe_max) + tl.exp(scaled - safe_max)
                lane_max = new_max
        softmax_max = tl.max(lane_max, axis=0)
        softmax_sum = tl.sum(lane_sum * tl.exp(lane_max - softmax_max), axis=0)
        loss_total = tl.zeros([BLOCK_ROWS], tl.float32)
        npc_total = tl.zeros([BLOCK_ROWS], tl.float32)
        decoupled_total = tl.zeros([BLOCK_ROWS], tl.float32)
        for start in range(0, rows, BLOCK_ROWS):
            row = start + lanes
            row_mask = row < rows
            mask = row_mask[:, None] & (part[None, :] < num_slices)
            offsets = row[:, None] * num_slices + part[None, :]
            slice_max = tl.load(maxima + offsets, mask=mask, other=float("-inf"))
            slice_sum = tl.load(sums + offsets, mask=mask, other=0.0)
            top = tl.where(row_mask, tl.max(slice_max, axis=1), 0.0)
            lse = top + tl.log(tl.sum(slice_sum * tl.exp(slice_max - top[:, None]), axis=1))
            positive = tl.load(positive_scores + row, mask=row_mask, other=0.0)
            decoupled = lse - positive
            if FORM == 0:
                z = decoupled + log_weight_ratio
                per_anchor = tl.maximum(z, 0.0) + tl.log(1.0 + tl.exp(-tl.abs(z)))  # softplus(z)
                coupling = 1.0 / (1.0 + tl.exp(-z))  # sigmoid(z) = q_B
                d_positive = -coupling
                d_logsumexp = coupling
            else:
                coupling = 1.0 / (1.0 + tl.exp(-decoupled))
                d_logsumexp = tl.full([BLOCK_ROWS], 1.0, tl.float32)
                if FORM == 2:
                    weight = 2.0 - rows * tl.exp(positive * dclw_scale - softmax_max) / softmax_sum
                    per_anchor = lse - weight * positive
                    d_positive = -weight
                else:
                    per_anchor = decoupled
                    d_positive = -d_logsumexp
            tl.store(logsumexp + row, lse, mask=row_mask)
            tl.store(derivatives + row, d_positive, mask=row_mask)
            tl.store(derivatives + rows + row, d_logsumexp, mask=row_mask)
            loss_total += tl.where(row_mask, per_anchor, 0.0)
            npc_total += tl.where(row_mask, coupling, 0.0)
            decoupled_total += tl.where(row_mask, decoupled, 0.0)
        tl.store(totals, tl.sum(loss_total, axis=0) / rows)
        tl.store(totals + 1, tl.sum(npc_total, axis=0) / rows)
        tl.store(totals + 2, tl.sum(decoupled_total, axis=0) / rows)

    @triton.jit
    def _row_factors(derivatives, grad_totals, row, row_mask, rows):
        """a_i = dloss/dpos_i and b_i = dloss/dlse_i, from the totals' gradients: the loss's
        (through the kept per-anchor derivatives) and mean(lse - pos)'s (the DCL estimate)."""
        grad_loss = tl.load(grad_totals) / rows
        grad_decoupled = tl.load(grad_totals + 2) / rows
        d_positive = tl.load(derivatives + row, mask=row_mask, other=0.0)
        d_logsumexp = tl.load(derivatives + rows + row, mask=row_mask, other=0.0)
        return grad_loss * d_positive - grad_decoupled, grad_loss * d_logsumexp + grad_decoupled

    @triton.jit
    def _query_gradient(
        query, negatives, positive_key, logsumexp, derivatives, grad_totals, partial_query_grad,
        positive_key_grad, rows, count, dim, slice_length, inverse_temperature,
        NEED_POSITIVE_KEY: tl.constexpr, BLOCK_ROWS: tl.constexpr, BLOCK_NEGATIVES: tl.constexpr,
        BLOCK_DIM: tl.constexpr, PRECISION: tl.constexpr,
    ):  # fmt: skip
        row_block, part = tl.program_id(0), tl.program_id(1)
        row = row_block * BLOCK_ROWS + tl.arange(0, BLOCK_ROWS)
        column = tl.arange(0, BLOCK_DIM)
        row_mask = row < rows
        tile_mask = row_mask[:, None] & (column[None, :] < dim)
        q = tl.load(query + row[:, None] * dim + column[None, :], mask=tile_mask, other=0.0)
        lse = tl.load(logsumexp + row, mask=row_mask, other=0.0)
        factor_positive, factor_logsumexp = _row_factors(derivatives, grad_totals, row, row_mask, rows)
        weighted = tl.zeros([BLOCK_ROWS, BLOCK_DIM], tl.float32)
        begin = part * slice_length
        end = tl.minimum(begin + slice_length, count)
        for start in range(begin, end, BLOCK_NEGATIVES):
            negative, n, scores = _scores_tile(
                q, negatives, start, end, column, dim, inverse_temperature, BLOCK_NEGATIVES, PRECISION
            )
            weights = tl.where(negative[None, :] < end, tl.exp(scores - lse[:, None]), 0.0)
            weighted = tl.dot(weights.to(n.dtype), n, weighted, input_precision=PRECISION)
        gradient = factor_logsumexp[:, None] * weighted
        if part == 0:
            k = tl.load(positive_key + row[:, None] * dim + column[None, :], mask=tile_mask, other=0.0)
            gradient += factor_positive[:, None] * k.to(tl.float32)
            if NEED_POSITIVE_KEY:
                key_gradient = factor_positive[:, None] * q.to(tl.float32) * inverse_temperature
                tl.store(
                    positive_key_grad + row[:, None] * dim + column[None, :],
                    key_gradient.to(positive_key_grad.dtype.element_ty),
                    mask=tile_mask,
                )
        tl.store(
            partial_query_grad + (part * rows + row[:, None]) * dim + column[None, :],
            gradient * inverse_temperature,
            mask=tile_mask,
        )

    @triton.jit
    def _negative_gradient(
        query, negatives, logsumexp, derivatives, grad_totals, negatives_grad,
        rows, count, dim, inverse_temperature,
        BLOCK_ROWS: tl.constexpr, BLOCK_NEGATIVES: tl.constexpr, BLOCK_DIM: tl.constexpr,
        PRECISION: tl.constexpr,
    ):  # fmt: skip
        negative = tl.program_id(0) * BLOCK_NEGATIVES + tl.arange(0, BLOCK_NEGATIVES)
        column = tl.arange(0, BLOCK_DIM)
        negative_mask = negative < count
        tile_mask = negative_mask[:, None] & (column[None, :] < dim)
        n = tl.load(negatives + negative[:, None] * dim + column[None, :], mask=tile_mask, other=0.0)
        gradient = tl.zeros([BLOCK_NEGATIVES, BLOCK_DIM], tl.float32)
        for start in range(0, rows, BLOCK_ROWS):
            row = start + tl.arange(0, BLOCK_ROWS)
            row_mask = row < rows
            q = tl.load(
                query + row[:, None] * dim + column[None, :],
                mask=row_mask[:, None] & (column[None, :] < dim),
                other=0.0,
            )
            lse = tl.load(logsumexp + row, mask=row_mask, other=0.0)
            factor_positive, factor_logsumexp = _row_factors(derivatives, grad_totals, row, row_mask, rows)
            scores = tl.dot(q, tl.trans(n), input_precision=PRECISION) * inverse_temperature
            weights = tl.exp(scores - lse[:, None]) * factor_logsumexp[:, None]
            weights = tl.where(row_mask[:, None] & negative_mask[None, :], weights, 0.0)
            gradient = tl.dot(tl.trans(weights.to(q.dtype)), q, gradient, input_precision=PRECISION)
        tl.store(
            negatives_grad + negative[:, None] * dim + column[None, :],
            (gradient * inverse_temperature).to(negatives_grad.dtype.element_ty),
            mask=tile_mask,
        )


_IEEE_FALLBACKS: set[tuple[int, int]] = set()
"""(kernel, BLOCK_DIM) pairs for which this Triton could not build "tf32x3" products; they launch
with "ieee" products. Seen on an H200: fp32 embeddings with 128 < d <= 256 asked for more shared
memory than there is; d <= 128 built."""


def _precision(dtype: torch.dtype) -> str | None:
    """fp32 inputs: "tf32x3", three TF32 tensor-core products (each operand split into a high and a
    low TF32 part, relative error about 2^-22, fp32 accuracy), or "tf32" where torch allows TF32
    for matrix products (``torch.set_float32_matmul_precision("high")`` or "medium"); bf16 and
    fp16 inputs: Triton's default (tensor cores, fp32 accumulation)."""
    if dtype != torch.float32:
        return None
    return "tf32x3" if torch.get_float32_matmul_precision() == "highest" else "tf32"


def _launch(kernel, grid: tuple[int, ...], *arguments, PRECISION: str | None, **options) -> None:
    """kernel[grid](...); where this Triton cannot build "tf32x3" products for the kernel at this
    BLOCK_DIM, "ieee" products (plain fp32 multiply-adds, slower), with one warning."""
    key = (id(kernel), options.get("BLOCK_DIM", 0))
    if PRECISION == "tf32x3" and key in _IEEE_FALLBACKS:
        PRECISION = "ieee"
    try:
        kernel[grid](*arguments, PRECISION=PRECISION, **options)
    except Exception as error:  # a compilation error's type differs between Triton versions
        if PRECISION != "tf32x3":
            raise
        _IEEE_FALLBACKS.add(key)
        warnings.warn(f"Triton could not build tf32x3 products, using ieee: {error}", stacklevel=2)
        kernel[grid](*arguments, PRECISION="ieee", **options)


def _slices(rows: int, count: int, device: torch.device) -> tuple[int, int]:
    """(number of slices S, negatives per slice): about two programs per multiprocessor."""
    processors = (
        torch.cuda.get_device_properties(device).multi_processor_count if device.type == "cuda" else 4
    )
    programs = 2 * processors
    row_blocks = triton.cdiv(rows, _BLOCK_ROWS)
    blocks = triton.cdiv(count, _BLOCK_NEGATIVES)
    wanted = max(1, min(_MAX_SLICES, blocks, triton.cdiv(programs, row_blocks)))
    slice_length = triton.cdiv(blocks, wanted) * _BLOCK_NEGATIVES
    return triton.cdiv(count, slice_length), slice_length


class _ContrastiveTotals(torch.autograd.Function):
    """(q, k, n) -> totals = [loss, npc, mean(lse - pos)] (3,) float32; npc carries no gradient."""

    @staticmethod
    @torch.amp.custom_fwd(device_type="cuda")
    def forward(ctx, query, positive_key, negatives, temperature, form, log_weight_ratio, dclw_scale):
        query, positive_key, negatives = (t.contiguous() for t in (query, positive_key, negatives))
        rows, dim = query.shape
        count = negatives.shape[0]
        device = query.device
        num_slices, slice_length = _slices(rows, count, device)
        maxima = torch.empty(rows, num_slices, device=device, dtype=torch.float32)
        sums = torch.empty_like(maxima)
        per_row = torch.empty(4, rows, device=device, dtype=torch.float32)  # pos, lse, dl/dpos, dl/dlse
        totals = torch.empty(3, device=device, dtype=torch.float32)
        block_dim = max(16, triton.next_power_of_2(dim))
        precision = _precision(query.dtype)
        inverse_temperature = 1.0 / temperature
        _launch(
            _partial_logsumexp, (triton.cdiv(rows, _BLOCK_ROWS), num_slices),
            query, negatives, positive_key, maxima, sums, per_row[0],
            rows, count, dim, slice_length, num_slices, inverse_temperature,
            BLOCK_ROWS=_BLOCK_ROWS, BLOCK_NEGATIVES=_BLOCK_NEGATIVES, BLOCK_DIM=block_dim,
            PRECISION=precision,
        )  # fmt: skip
        _bound_totals[(1,)](
            maxima, sums, per_row[0], per_row[1], per_row[2], totals,
            rows, num_slices, log_weight_ratio, dclw_scale,
            FORM=FORM_CODES[form], BLOCK_ROWS=256, BLOCK_SLICES=max(2, triton.next_power_of_2(num_slices)),
        )  # fmt: skip
        ctx.save_for_backward(query, positive_key, negatives, per_row)
        ctx.settings = (temperature, num_slices, slice_length, block_dim)
        return totals

    @staticmethod
    @torch.amp.custom_bwd(device_type="cuda")
    def backward(ctx, grad_totals):
        query, positive_key, negatives, per_row = ctx.saved_tensors
        temperature, num_slices, slice_length, block_dim = ctx.settings
        precision = _precision(query.dtype)
        need_query, need_key, need_negatives = ctx.needs_input_grad[:3]
        rows, dim = query.shape
        count = negatives.shape[0]
        grad_totals = grad_totals.float().contiguous()
        inverse_temperature = 1.0 / temperature
        query_grad = key_grad = negatives_grad = None
        if need_query or need_key:
            partial = torch.empty(num_slices, rows, dim, device=query.device, dtype=torch.float32)
            key_grad = torch.empty_like(positive_key) if need_key else partial
            _launch(
                _query_gradient, (triton.cdiv(rows, _BLOCK_ROWS), num_slices),
                query, negatives, positive_key, per_row[1], per_row[2], grad_totals, partial, key_grad,
                rows, count, dim, slice_length, inverse_temperature,
                NEED_POSITIVE_KEY=need_key, BLOCK_ROWS=_BLOCK_ROWS, BLOCK_NEGATIVES=_BLOCK_NEGATIVES,
                BLOCK_DIM=block_dim, PRECISION=precision,
            )  # fmt: skip
            if need_query:
                query_grad = (partial[0] if num_slices == 1 else partial.sum(0)).to(query.dtype)
            if not need_key:
                key_grad = None
        if need_negatives:
            negatives_grad = torch.empty_like(negatives)
            _launch(
                _negative_gradient, (triton.cdiv(count, _NEGATIVE_GRADIENT_BLOCK),),
                query, negatives, per_row[1], per_row[2], grad_totals, negatives_grad,
                rows, count, dim, inverse_temperature,
                BLOCK_ROWS=_BLOCK_ROWS, BLOCK_NEGATIVES=_NEGATIVE_GRADIENT_BLOCK, BLOCK_DIM=block_dim,
                PRECISION=precision,
            )  # fmt: skip
        return query_grad, key_grad, negatives_grad, None, None, None, None


def contrastive_totals(
    query: Tensor,
    positive_key: Tensor,
    negative_keys: Tensor,
    temperature: float,
    form: str,
    num_negatives_weight: float,
    sigma: float,
) -> Tensor:
    """totals (3,) float32 = [loss, npc, mean_i(lse_i - pos_i)] of the InfoNCE family's ``form``
    (a key of :data:`FORM_CODES`; arguments checked by the caller,
    :func:`mitool.fused.contrastive_bound`); ``num_negatives_weight`` is w of the coupled form
    (alpha for eqco, K for infonce), ``sigma`` the weighted form's width (dclw's sigma).
    Differentiable in loss and the last entry."""
    count = negative_keys.shape[0]
    log_weight_ratio = math.log(num_negatives_weight / count)
    return _ContrastiveTotals.apply(
        query, positive_key, negative_keys, float(temperature), form, log_weight_ratio,
        float(temperature) / sigma,
    )  # fmt: skip
