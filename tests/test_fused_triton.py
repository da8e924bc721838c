"""The Triton kernels of mitool.fused_triton against the plain bounds on the full score matrix.

On a GPU (MITOOL_TEST_DEVICE=cuda) the kernels run compiled. On CPU they run in Triton's
interpreter, which must be switched on before triton is imported: the CPU test below runs this
module again in a child pytest with TRITON_INTERPRET=1, where the comparisons run on CPU tensors.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from mitool import bounds, fused_triton
from mitool.fused import contrastive_bound

INTERPRETED = os.environ.get("TRITON_INTERPRET") == "1"
TEMPERATURE = 0.2
OPTIONS = {"infonce": {}, "eqco": {"alpha": 5.0}, "dcl": {}, "dclw": {"sigma": 0.5}}


@pytest.fixture
def kernel_device(device: torch.device) -> torch.device:
    if not fused_triton.available():
        pytest.skip("triton is not installed (it comes with torch's CUDA builds: pip install triton)")
    if device.type == "cuda" or INTERPRETED:
        return device
    pytest.skip("the kernels run on CUDA, or on CPU in the interpreter (see test_kernels_in_the_interpreter)")


@pytest.mark.slow
def test_kernels_in_the_interpreter(device: torch.device) -> None:
    """This module's comparisons on CPU, in a child pytest with TRITON_INTERPRET=1."""
    if device.type != "cpu" or INTERPRETED:
        pytest.skip("the child run is for the CPU test session")
    if not fused_triton.available():
        pytest.skip("triton is not installed (it comes with torch's CUDA builds: pip install triton)")
    environment = {**os.environ, "TRITON_INTERPRET": "1", "MITOOL_TEST_DEVICE": "cpu"}
    child = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-W", "ignore", __file__],
        env=environment,
        cwd=Path(__file__).resolve().parents[1],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert child.returncode == 0, child.stdout[-4000:] + child.stderr[-2000:]
    summary = child.stdout.strip().splitlines()[-1]
    assert " passed" in summary and "failed" not in summary and "2 skipped" in summary, summary


def embeddings(batch, count, dim, device, dtype=torch.float32, scale=1.0, seed=0):
    """Unit queries, positives near them, unit negatives (times ``scale``), in float64 first."""
    generator = torch.Generator().manual_seed(seed)
    query = F.normalize(torch.randn(batch, dim, generator=generator, dtype=torch.float64), dim=1)
    positive_key = F.normalize(
        query + 0.5 * torch.randn(batch, dim, generator=generator, dtype=torch.float64), dim=1
    )
    negatives = F.normalize(torch.randn(count, dim, generator=generator, dtype=torch.float64), dim=1)
    return [(scale * tensor).to(device, dtype) for tensor in (query, positive_key, negatives)]


def reference(name, query, positive_key, negatives, temperature=TEMPERATURE):
    """Float64 scores of the given (possibly rounded) embeddings, then mitool.bounds."""
    query, positive_key, negatives = (t.double() for t in (query, positive_key, negatives))
    pos = (query * positive_key).sum(1) / temperature
    neg = query @ negatives.T / temperature
    options = dict(OPTIONS[name], **({"temperature": temperature} if name == "dclw" else {}))
    result = bounds.get(name, **options)(pos, neg)
    decoupled = (torch.logsumexp(neg, 1) - pos).mean()
    return result, decoupled


def run(name, inputs, needs, temperature=TEMPERATURE, backend="triton"):
    """The bound from the kernels and the gradients of loss + 0.3 * mi (mi's own gradient checked too)."""
    leaves = [t.detach().clone().requires_grad_(need) for t, need in zip(inputs, needs, strict=True)]
    result = contrastive_bound(*leaves, temperature, bound=name, backend=backend, **OPTIONS[name])
    (result.loss + 0.3 * result.mi).backward()
    return result, [leaf.grad for leaf in leaves]


def reference_gradients(name, inputs, needs, temperature=TEMPERATURE):
    leaves = [t.detach().double().requires_grad_(need) for t, need in zip(inputs, needs, strict=True)]
    result, _ = reference(name, *leaves, temperature=temperature)
    (result.loss + 0.3 * result.mi).backward()
    return result, [leaf.grad for leaf in leaves]


@pytest.mark.parametrize("name", list(OPTIONS))
@pytest.mark.parametrize(
    "shape",
    [(37, 1000, 24), (300, 50, 130), (5, 3, 7)],
    ids=["many-slices", "rows-over-one-block", "tiny"],
)
def test_kernels_equal_the_plain_bound_float32(name, shape, kernel_device) -> None:
    """Loss, mi, npc and all three gradients within float32 rounding of the float64 plain bound;
    shapes off every block size (B, K not multiples of 64, d not a power of 2), with K cut into
    several slices, and B over one block of the reduction."""
    inputs = embeddings(*shape, kernel_device)
    result, grads = run(name, inputs, (True, True, True))
    expected, expected_grads = reference_gradients(name, inputs, (True, True, True))
    for field in ("loss", "mi", "npc"):
        assert float(getattr(result, field).detach()) == pytest.approx(
            float(getattr(expected, field)), abs=2e-5
        ), field
    for grad, expected_grad in zip(grads, expected_grads, strict=True):
        torch.testing.assert_close(grad.double().cpu(), expected_grad.cpu(), atol=2e-5, rtol=1e-4)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_kernels_half_precision_inputs(dtype, kernel_device) -> None:
    """bf16/fp16 embeddings: the result is the exact bound of the rounded inputs within the
    rounding of the kernels' half-precision weights (products accumulate in fp32)."""
    if dtype == torch.bfloat16 and kernel_device.type == "cpu":
        pytest.skip("Triton's interpreter multiplies bfloat16 matrices wrongly (checked on CUDA)")
    inputs = embeddings(64, 300, 32, kernel_device, dtype=dtype)
    result, grads = run("infonce", inputs, (True, False, True))
    expected, expected_grads = reference_gradients("infonce", inputs, (True, False, True))
    assert result.loss.dtype == torch.float32
    assert float(result.loss) == pytest.approx(float(expected.loss), abs=2e-3)
    assert grads[1] is None and grads[0].dtype == dtype and grads[2].dtype == dtype
    for grad, expected_grad in ((grads[0], expected_grads[0]), (grads[2], expected_grads[2])):
        error = (grad.double().cpu() - expected_grad.cpu()).abs().max()
        assert float(error) <= 0.02 * float(expected_grad.abs().max()), float(error)


def test_only_the_needed_gradients_and_moco_shapes(kernel_device) -> None:
    """MoCo's case: only the queries carry a gradient; the others stay None and the query's
    gradient still equals the plain one."""
    inputs = embeddings(70, 700, 64, kernel_device)
    _, grads = run("eqco", inputs, (True, False, False))
    _, expected_grads = reference_gradients("eqco", inputs, (True, False, False))
    assert grads[1] is None and grads[2] is None
    torch.testing.assert_close(grads[0].double().cpu(), expected_grads[0].cpu(), atol=2e-5, rtol=1e-4)


def test_huge_scores_stay_exact(kernel_device) -> None:
    """Scores of magnitude ~1e3 (embeddings of norm 30, tau = 0.9): no overflow, equal to the
    float64 bound (the running maximum is subtracted before every exponential)."""
    inputs = embeddings(40, 500, 16, kernel_device, scale=30.0)
    result, grads = run("infonce", inputs, (True, True, True), temperature=0.9)
    expected, expected_grads = reference_gradients("infonce", inputs, (True, True, True), temperature=0.9)
    assert float(result.loss) == pytest.approx(float(expected.loss), rel=1e-5, abs=1e-3)
    for grad, expected_grad in zip(grads, expected_grads, strict=True):
        assert torch.isfinite(grad).all()
        torch.testing.assert_close(grad.double().cpu(), expected_grad.cpu(), atol=1e-3, rtol=1e-3)


def test_auto_backend_uses_the_kernels_on_cuda_only(kernel_device) -> None:
    """ "auto" gives the same numbers as "triton" on CUDA, and as "torch" (the chunks) on CPU."""
    inputs = embeddings(33, 200, 16, kernel_device)
    auto, _ = run("dcl", inputs, (True, True, True), backend="auto")
    backend = "triton" if kernel_device.type == "cuda" else "torch"
    chosen, _ = run("dcl", inputs, (True, True, True), backend=backend)
    assert float(auto.loss) == float(chosen.loss)


def test_per_query_negatives_are_refused_by_the_triton_backend(kernel_device) -> None:
    query, positive_key, _ = embeddings(4, 3, 8, kernel_device)
    per_query = torch.randn(4, 3, 8, device=kernel_device)
    with pytest.raises(ValueError, match="backend 'triton' needs .* shared negatives"):
        contrastive_bound(query, positive_key, per_query, TEMPERATURE, backend="triton")


def test_launch_falls_back_to_ieee_products_for_that_kernel_and_width(monkeypatch) -> None:
    """A Triton that cannot build tf32x3 products at one BLOCK_DIM: that launch is retried with
    ieee, with a warning, and later launches at that width ask for ieee directly; other widths
    keep tf32x3."""
    calls = []

    class Kernel:
        def __getitem__(self, grid):
            def launch(*arguments, PRECISION, BLOCK_DIM):
                calls.append((PRECISION, BLOCK_DIM))
                if PRECISION == "tf32x3" and BLOCK_DIM == 256:
                    raise RuntimeError("out of resource: shared memory")

            return launch

    monkeypatch.setattr(fused_triton, "_IEEE_FALLBACKS", set())
    kernel = Kernel()
    with pytest.warns(UserWarning, match="tf32x3"):
        fused_triton._launch(kernel, (1,), PRECISION="tf32x3", BLOCK_DIM=256)
    fused_triton._launch(kernel, (1,), PRECISION="tf32x3", BLOCK_DIM=256)
    fused_triton._launch(kernel, (1,), PRECISION="tf32x3", BLOCK_DIM=128)
    assert calls == [("tf32x3", 256), ("ieee", 256), ("ieee", 256), ("tf32x3", 128)]
    monkeypatch.setattr(torch, "get_float32_matmul_precision", lambda: "highest")
    assert fused_triton._precision(torch.float32) == "tf32x3"
    assert fused_triton._precision(torch.bfloat16) is None
    monkeypatch.setattr(torch, "get_float32_matmul_precision", lambda: "high")
    assert fused_triton._precision(torch.float32) == "tf32"


def test_launch_errors_of_other_precisions_are_not_retried() -> None:
    calls = []

    class Failing:
        def __getitem__(self, grid):
            def launch(*arguments, PRECISION, **options):
                calls.append(PRECISION)
                raise RuntimeError("out of resources")

            return launch

    with pytest.raises(RuntimeError, match="out of resources"):
        fused_triton._launch(Failing(), (1,), PRECISION="ieee")
    assert calls == ["ieee"]


def test_chosen_backend_on_cpu_is_the_chunked_path() -> None:
    """Outside the interpreter session, CPU tensors take the torch path under "auto"; unknown
    names are refused with the allowed ones."""
    from mitool.fused import chosen_backend

    query, _, negatives = embeddings(4, 6, 8, torch.device("cpu"))
    if not INTERPRETED:
        assert chosen_backend(query, negatives) == "torch"
    assert chosen_backend(query, negatives, "torch") == "torch"
    with pytest.raises(ValueError, match="backend must be one of auto, triton, torch"):
        chosen_backend(query, negatives, "cuda")
