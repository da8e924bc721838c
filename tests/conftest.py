"""Shared test settings: one torch thread per free core (at most 2), divided among the workers of
``pytest -n`` (pytest-xdist: `make test` runs one worker per core), Ctrl-C deliverable to the
children the tests start, and the device under test.

Set MITOOL_TEST_DEVICE=cuda to run the device-aware tests on a GPU (bench/gpu_check.sh does).
"""

from __future__ import annotations

import os
import signal

import pytest
import torch

from mitool.runtime import set_threads_to_free_cores

set_threads_to_free_cores(maximum=max(1, 2 // int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))))

# Started in the background by a shell without job control (`(make test &)`), pytest inherits
# SIGINT ignored, and so would every child it starts, so that the tests sending a child Ctrl-C saw
# it run on to exit 0. At exec a caught signal goes back to its default; an ignored one stays.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.fixture(scope="session")
def device() -> torch.device:
    name = os.environ.get("MITOOL_TEST_DEVICE", "cpu")
    if name.startswith("cuda") and not torch.cuda.is_available():
        pytest.skip("MITOOL_TEST_DEVICE asks for CUDA but none is available")
    return torch.device(name)
