"""mitool._infra.progress: in place on a terminal, plain lines every N% elsewhere, honest rates on resume."""

from __future__ import annotations

import io
import re

from mitool._infra.progress import Progress


def test_off_a_terminal_a_plain_line_every_ten_percent_and_no_carriage_return():
    stream = io.StringIO()
    with Progress(200, "toy sweep", stream=stream, terminal=False) as bar:
        for _ in range(200):
            bar.update(note="estimate 1.0")
    text = stream.getvalue()
    assert "\r" not in text and "\x1b" not in text
    lines = text.splitlines()
    counts = [int(re.search(r"  (\d+)/200", line).group(1)) for line in lines]
    assert counts == [1, *range(20, 201, 20)]  # the first step, then every 10%


def test_a_stopped_run_says_so_off_a_terminal():
    stream = io.StringIO()
    bar = Progress(100, "pretrain", stream=stream, terminal=False)
    bar.update(35)
    bar.close()
    assert stream.getvalue().splitlines()[-1].startswith("pretrain  35/100")
    assert stream.getvalue().splitlines()[-1].endswith("stopped")


def test_on_a_terminal_one_line_rewritten_in_place():
    stream = io.StringIO()
    with Progress(5, "epoch 1/2", stream=stream, terminal=True, interval=0.0) as bar:
        for _ in range(5):
            bar.update()
    text = stream.getvalue()
    assert text.count("\r") == 5 and text.endswith("\n") and text.count("\n") == 1


def test_the_rate_of_a_resumed_run_counts_only_its_own_steps():
    stream = io.StringIO()
    bar = Progress(1000, "epoch 3/10", stream=stream, terminal=False, done=900)
    bar.started -= 10.0  # ten seconds for the 50 steps made after the resume
    bar.update(50)
    rate = float(re.search(r"([\d.]+) it/s", bar.line()).group(1))
    assert 4.0 < rate < 5.1


def test_disabled_draws_nothing():
    stream = io.StringIO()
    with Progress(10, "quiet", enabled=False, stream=stream) as bar:
        bar.update(10)
    assert stream.getvalue() == ""
