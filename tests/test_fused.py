"""mitool.fused.contrastive_bound against the plain bounds of mitool.bounds on the full score matrix.

Every comparison is against an independent computation: the plain path builds the (B, K) scores
q @ n.T / tau and calls mitool.bounds; the fused path never builds them. Sizes are tiny (CPU CI).
"""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from mitool import bounds
from mitool.fused import (
    CPU_CHUNK_SCORES,
    NegativeLogSumExp,
    contrastive_bound,
    default_chunk_size,
)

TEMPERATURE = 0.2
OPTIONS = {"infonce": {}, "eqco": {"alpha": 5.0}, "dcl": {}, "dclw": {"sigma": 0.5}}


def make_embeddings(batch, count, dim, per_query, device, dtype=torch.float32, seed=0):
    generator = torch.Generator().manual_seed(seed)
    query = F.normalize(torch.randn(batch, dim, generator=generator, dtype=torch.float64), dim=1)
    positive_key = F.normalize(
        query + 0.5 * torch.randn(batch, dim, generator=generator, dtype=torch.float64), dim=1
    )
    shape = (batch, count, dim) if per_query else (count, dim)
    negatives = F.normalize(torch.randn(*shape, generator=generator, dtype=torch.float64), dim=-1)
    return [tensor.to(device, dtype).requires_grad_(True) for tensor in (query, positive_key, negatives)]


def plain(name, query, positive_key, negatives, temperature=TEMPERATURE):
    """The reference: full (B, K) scores, then the bound of mitool.bounds."""
    pos = (query * positive_key).sum(1) / temperature
    if negatives.dim() == 2:
        neg = query @ negatives.T / temperature
    else:
        neg = torch.einsum("bd,bkd->bk", query, negatives) / temperature
    options = dict(OPTIONS[name])
    if name == "dclw":
        options["temperature"] = temperature
    return bounds.get(name, **options)(pos, neg)


def fused(name, query, positive_key, negatives, temperature=TEMPERATURE, **keywords):
    options = dict(OPTIONS[name])
    return contrastive_bound(query, positive_key, negatives, temperature, bound=name, **options, **keywords)


def value(tensor):
    return float(tensor.detach())


def gradients(result, inputs):
    return torch.autograd.grad(result.loss, inputs)


def relative_error(actual, expected):
    return float((actual.double() - expected.double()).norm() / expected.double().norm().clamp_min(1e-30))


@pytest.mark.parametrize("name", list(OPTIONS))
@pytest.mark.parametrize("per_query", [False, True], ids=["shared", "per-query"])
@pytest.mark.parametrize("recompute", [False, True], ids=["kept", "recompute"])
def test_fused_equals_plain_float32(name, per_query, recompute, device):
    # K = 37 with chunks of 8: four full chunks and a ragged one
    inputs = make_embeddings(6, 37, 5, per_query, device)
    expected = plain(name, *inputs)
    actual = fused(name, *inputs, chunk_size=8, recompute=recompute)
    for field in ("loss", "mi", "npc"):
        assert value(getattr(actual, field)) == pytest.approx(
            value(getattr(expected, field)), abs=2e-6, rel=2e-6
        )
    for got, want in zip(gradients(actual, inputs), gradients(expected, inputs), strict=True):
        assert relative_error(got, want) < 2e-6


@pytest.mark.parametrize("name", ["infonce", "dclw"])
@pytest.mark.parametrize("per_query", [False, True], ids=["shared", "per-query"])
def test_fused_bfloat16_matches_the_exact_value_of_its_inputs(name, per_query, device):
    """bf16 embeddings: the fused result is within bf16 rounding of the float64 result on the same
    (bf16-representable) values, and no further from it than the plain path run in bf16."""
    inputs = make_embeddings(8, 50, 16, per_query, device, dtype=torch.bfloat16, seed=1)
    exact_inputs = [tensor.detach().double().requires_grad_(True) for tensor in inputs]
    exact = plain(name, *exact_inputs)
    exact_gradients = gradients(exact, exact_inputs)
    actual = fused(name, *inputs, chunk_size=16)
    actual_gradients = gradients(actual, inputs)
    plain_bf16 = plain(name, *inputs)
    plain_gradients = gradients(plain_bf16, inputs)
    loss_error = abs(value(actual.loss) - value(exact.loss))
    assert loss_error < 2e-2
    assert loss_error <= 2 * abs(value(plain_bf16.loss) - value(exact.loss)) + 1e-3
    for got, reference, want in zip(actual_gradients, plain_gradients, exact_gradients, strict=True):
        assert got.dtype == torch.bfloat16
        assert relative_error(got, want) < 3e-2
        assert relative_error(got, want) <= 2 * relative_error(reference, want) + 5e-3


def test_under_autocast_the_result_is_the_float32_one_within_bf16_rounding(device):
    inputs = make_embeddings(16, 100, 32, False, device, seed=5)
    reference = fused("infonce", *inputs)
    reference_gradients = gradients(reference, inputs)
    with torch.autocast(device.type, dtype=torch.bfloat16):
        result = fused("infonce", *inputs, chunk_size=30)
    assert result.loss.dtype == torch.float32
    assert value(result.loss) == pytest.approx(value(reference.loss), abs=1e-2)
    for got, want in zip(gradients(result, inputs), reference_gradients, strict=True):
        assert got.dtype == torch.float32
        assert relative_error(got, want) < 3e-2


def test_chunk_size_does_not_change_the_result(device):
    inputs = make_embeddings(5, 23, 4, False, device)
    reference = fused("infonce", *inputs, chunk_size=23)
    reference_gradients = gradients(reference, inputs)
    for chunk_size in (1, 7, 100):
        result = fused("infonce", *inputs, chunk_size=chunk_size)
        assert value(result.loss) == pytest.approx(value(reference.loss), abs=1e-6)
        for got, want in zip(gradients(result, inputs), reference_gradients, strict=True):
            assert relative_error(got, want) < 1e-5


@pytest.mark.parametrize("bad_negative", [0, 4])
def test_underflowing_first_weight_and_huge_scores(bad_negative, device):
    """Scores of magnitude ~1e3 where the first negative of a chunk (chunks of 4) lies ~2e3 below
    the others: its softmax weight underflows (the fallback path) and nothing overflows; equal to
    the plain bound."""
    query, positive_key, negatives = (tensor.detach() for tensor in make_embeddings(4, 9, 3, False, device))
    negatives = negatives.clone()
    negatives[bad_negative] = -query.mean(0) / query.mean(0).norm()
    inputs = [tensor.requires_grad_(True) for tensor in (query, positive_key, negatives)]
    temperature = 1e-3
    expected = plain("infonce", *inputs, temperature=temperature)
    actual = fused("infonce", *inputs, temperature=temperature, chunk_size=4)
    assert math.isfinite(value(actual.loss))
    assert value(actual.loss) == pytest.approx(value(expected.loss), rel=1e-5)
    for got, want in zip(gradients(actual, inputs), gradients(expected, inputs), strict=True):
        assert torch.isfinite(got).all()
        assert relative_error(got, want) < 1e-4


def test_default_chunk_size():
    cpu, gpu = torch.device("cpu"), torch.device("cuda")
    assert default_chunk_size(256, 65536, cpu) == CPU_CHUNK_SCORES // 256
    assert default_chunk_size(4096, 4095, cpu) * 4096 <= CPU_CHUNK_SCORES
    assert default_chunk_size(8, 100, cpu) == 100  # never more than K
    assert default_chunk_size(2**21, 10, cpu) == 1
    assert default_chunk_size(256, 65537, gpu) == 16385  # K in 4, rounded up


def test_negative_logsumexp_against_torch_logsumexp(device):
    generator = torch.Generator().manual_seed(3)
    query = torch.randn(7, 6, generator=generator).to(device)
    negatives = torch.randn(30, 6, generator=generator).to(device)
    lse = NegativeLogSumExp.apply(query, negatives, 4, False)
    torch.testing.assert_close(lse, torch.logsumexp(query @ negatives.T, dim=1), rtol=1e-6, atol=1e-6)


def saved_tensor_sizes(function):
    """The element counts of every tensor autograd saves while ``function`` builds its graph."""
    sizes = []

    def pack(tensor):
        sizes.append(tensor.numel())
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        result = function()
    return sizes, result


def test_saved_tensors_hold_no_score_matrix_when_recomputing():
    """Memory invariant: with recompute=True nothing of B * K elements is saved for the backward
    pass; with the kept weights exactly B * K elements of weights are saved; the plain path saves
    at least one full (B, K) matrix."""
    batch, count, dim, chunk = 24, 50, 3, 16  # B * K = 1200 > every input's size
    query, positive_key, negatives = make_embeddings(batch, count, dim, False, torch.device("cpu"))
    plain_sizes, _ = saved_tensor_sizes(lambda: plain("infonce", query, positive_key, negatives).loss)
    assert max(plain_sizes) >= batch * count
    lean_sizes, lean = saved_tensor_sizes(
        lambda: fused("infonce", query, positive_key, negatives, chunk_size=chunk, recompute=True).loss
    )
    assert max(lean_sizes) < batch * chunk
    kept_sizes, kept = saved_tensor_sizes(
        lambda: fused("infonce", query, positive_key, negatives, chunk_size=chunk).loss
    )
    chunk_sizes = [
        size for size in kept_sizes if size % batch == 0 and size // batch in (chunk, count % chunk)
    ]
    assert sum(chunk_sizes) == batch * count
    assert value(lean) == pytest.approx(value(kept), abs=1e-6)


def test_backward_twice_with_retain_graph_gives_the_same_gradients():
    inputs = make_embeddings(4, 10, 3, False, torch.device("cpu"))
    result = fused("eqco", *inputs, chunk_size=3)
    first = torch.autograd.grad(result.loss, inputs, retain_graph=True)
    second = torch.autograd.grad(result.loss, inputs)
    for a, b in zip(first, second, strict=True):
        torch.testing.assert_close(a, b, rtol=0, atol=0)


def test_only_the_needed_gradients_are_computed():
    query, positive_key, negatives = make_embeddings(4, 10, 3, False, torch.device("cpu"))
    frozen = negatives.detach()
    result = contrastive_bound(query, positive_key.detach(), frozen, TEMPERATURE)
    (grad_query,) = torch.autograd.grad(result.loss, [query])
    reference = plain("infonce", query, positive_key.detach(), frozen)
    (expected,) = torch.autograd.grad(reference.loss, [query])
    assert relative_error(grad_query, expected) < 2e-6


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"bound": "nwj"}, "bound must be one of infonce, eqco, dcl, dclw"),
        ({"bound": "eqco"}, "alpha must be given for bound 'eqco'"),
        ({"alpha": 3.0}, "alpha is not an option of bound 'infonce'"),
        ({"temperature": 0.0}, "temperature must be a finite number > 0"),
        ({"chunk_size": 0}, "chunk_size must be a whole number >= 1"),
        ({"negatives": torch.zeros(5, 4)}, "negative_keys must have shape (K, 3)"),
        ({"negatives": torch.zeros(3, 5, 3)}, "or (2, K, 3) (per query)"),
        ({"positive_key": torch.zeros(4, 3)}, "positive_key must have the shape of query"),
        ({"positive_key": torch.zeros(2, 3, dtype=torch.float64)}, "share one dtype"),
        ({"query": torch.zeros(2, 3, dtype=torch.long)}, "query must be a floating-point torch tensor"),
    ],
)
def test_bad_input_is_a_one_line_value_error(change, message):
    arguments = {
        "query": torch.zeros(2, 3),
        "positive_key": torch.zeros(2, 3),
        "negatives": torch.zeros(5, 3),
        "temperature": 0.1,
        "bound": "infonce",
    }
    arguments.update(change)
    with pytest.raises(ValueError, match="^[^\n]+$") as error:
        contrastive_bound(
            arguments.pop("query"),
            arguments.pop("positive_key"),
            arguments.pop("negatives"),
            arguments.pop("temperature"),
            **arguments,
        )
    assert message in str(error.value)


# ----------------------------------------------------------------------------------------------
# the benchmark's measures (bench/harness.py, bench/bounds.py): the figures of docs/performance.md


def _bench_module(name):
    import importlib
    import sys
    from pathlib import Path

    bench = str(Path(__file__).resolve().parent.parent / "bench")
    if bench not in sys.path:
        sys.path.insert(0, bench)
    return importlib.import_module(name)


def test_peak_memory_counts_live_tensors_and_not_views_or_inputs():
    harness = _bench_module("harness")
    existing = torch.ones(1000)

    def allocate():
        first = torch.ones(1000)  # 4000 bytes
        second = torch.ones(500)  # 2000 bytes, alive with the first: peak 6000
        del first, second
        view = existing[:10].view(2, 5)  # a view of an input: no new memory
        third = torch.ones(1200) * 2  # ones (4800) and the product (4800) alive together
        return view, third

    assert harness.peak_extra_bytes(allocate, torch.device("cpu")) == 9600


def test_interleaved_ratios_of_a_call_against_itself_twice():
    harness = _bench_module("harness")
    calls = []

    def baseline():
        calls.append("a")

    def candidate():
        calls.append("b")

    figures = harness.interleaved_ratios(baseline, {"b": candidate}, torch.device("cpu"), rounds=4)
    assert calls == ["a", "b", "b", "a", "a", "b", "b", "a"]  # pairs, the order alternating
    assert len(figures["b"]["ratios"]) == 4
    assert figures["b"]["ratio_low"] <= figures["b"]["ratio"] <= figures["b"]["ratio_high"]


def test_bounds_bench_tiny_run_writes_consistent_figures(tmp_path):
    bench_bounds = _bench_module("bounds")
    path = tmp_path / "bounds.json"
    arguments = [
        "--shapes",
        "32x512x16",
        "--chunk-size",
        "128",
        "--rounds",
        "1",
        "--quiet",
        "--json",
        str(path),
    ]
    code = bench_bounds.main(arguments)
    assert code == 0
    import json

    record = json.loads(path.read_text())["records"][0]
    rows = record["candidates"]
    scores_bytes = 32 * 512 * 4
    # (a) holds several (B, K+1) float32 matrices at once; the recomputing fused loss only
    # chunks of (B, 128)
    assert rows["baseline"]["peak_extra_bytes"] >= 2 * scores_bytes
    assert rows["fused-recompute-infonce"]["peak_extra_bytes"] < scores_bytes
    assert rows["fused-infonce"]["peak_extra_bytes"] < rows["baseline"]["peak_extra_bytes"]


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["--shapes", "256x16384"], "--shapes takes BxKxd"),
        (["--shapes", "0x10x4"], "every size must be >= 1"),
        (["--device", "tpu"], "--device must be cpu or cuda"),
        (["--rounds", "0"], "--rounds must be >= 1"),
    ],
)
def test_bounds_bench_bad_arguments_are_one_line_errors(arguments, message, capsys):
    bench_bounds = _bench_module("bounds")
    assert bench_bounds.main(arguments) == 2
    error = capsys.readouterr().err.strip()
    assert error.startswith("Error: ") and message in error and "\n" not in error


@pytest.mark.parametrize(
    ("script", "arguments", "message"),
    [
        ("step", ["--arch", "vgg16"], "--arch must be one of small-cnn, resnet18, resnet34, resnet50"),
        ("step", ["--methods", "byol"], "--methods takes names from moco, simo, simclr"),
        ("step", ["--batch-size", "4"], "--batch-size must be >= 8"),
        ("run_all", ["--only", "bounds,speed"], "--only takes names from bounds, step, data, toy_speed"),
    ],
)
def test_other_bench_scripts_bad_arguments_are_one_line_errors(script, arguments, message, capsys):
    module = _bench_module(script)
    assert module.main(arguments) == 2
    error = capsys.readouterr().err.strip()
    assert error.startswith("Error: ") and message in error and "\n" not in error
