"""Shared test settings: one torch thread per free core (at most 2), and the device under test.

Set MITOOL_TEST_DEVICE=cuda to run the device-aware tests on a GPU (bench/gpu_check.sh does).
"""

from __future__ import annotations

import os

import pytest
import torch

from mitool.runtime import set_threads_to_free_cores

set_threads_to_free_cores(maximum=2)


@pytest.fixture(scope="session")
def device() -> torch.device:
    name = os.environ.get("MITOOL_TEST_DEVICE", "cpu")
    if name.startswith("cuda") and not torch.cuda.is_available():
        pytest.skip("MITOOL_TEST_DEVICE asks for CUDA but none is available")
    return torch.device(name)
