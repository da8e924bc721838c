"""Thread sizing: free cores shared among the processes of a launcher, $MITOOL_THREADS wins."""

from __future__ import annotations

import pytest
import torch


def test_threads_are_shared_among_the_processes_of_a_launcher(monkeypatch: pytest.MonkeyPatch) -> None:
    import mitool.runtime as runtime

    monkeypatch.delenv("MITOOL_THREADS", raising=False)
    monkeypatch.setattr(runtime, "free_cores", lambda sample_seconds=0.1: 16)
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "4")
    before = torch.get_num_threads()
    try:
        assert runtime.set_threads_to_free_cores() == 4
        monkeypatch.setenv("MITOOL_THREADS", "3")
        assert runtime.set_threads_to_free_cores() == 3
    finally:
        torch.set_num_threads(before)
