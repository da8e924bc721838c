"""What a fault probe does to the commands: two writers on one folder, kills, full, read-only and
looped disks, a rank that never comes, damaged checkpoints, leftovers of a killed write, and a
Ctrl-C while the program starts. Real processes and real signals wherever the fault is one."""

from __future__ import annotations

import contextlib
import errno
import json
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from mitool._infra.files import TEMPORARY_SUFFIX, atomic_write_text, remove_leftovers
from mitool._infra.locks import hold_folder, lock_path

MITOOL = [sys.executable, "-m", "mitool.cli.main"]
TOY = ["toy", "sweep", "--estimators", "infonce", "--negatives", "4", "--seeds", "1", "--mi", "2", "--quiet"]
VISION = ["--arch", "small-cnn", "--dataset", "synthetic", "--synthetic-size", "32", "--image-size", "16",
          "--batch-size", "8", "--epochs", "1", "--workers", "0", "--quiet"]  # fmt: skip
COMMANDS = {
    "toy sweep": [*TOY, "--steps-per-stage", "5"],
    "benchmark": [
        "benchmark",
        "--suite",
        "quick",
        "--estimators",
        "gaussian",
        "--sizes",
        "200",
        "--seeds",
        "1",
        "--quiet",
    ],  # fmt: skip
    "vision pretrain": ["vision", "pretrain", *VISION],
    "vision sweep": ["vision", "sweep", *VISION[:-1], "--method", "simclr"],
}


def _mitool(
    *arguments: str, env: dict[str, str] | None = None, timeout: float = 300
) -> subprocess.CompletedProcess:
    environment = {**os.environ, "MITOOL_THREADS": "1", **(env or {})}
    return subprocess.run(
        [*MITOOL, *arguments], capture_output=True, text=True, timeout=timeout, env=environment
    )


def _one_line(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in stderr, stderr
    return lines[0]


@contextlib.contextmanager
def _holder(out: Path):
    """Another process holding the lock of ``out`` until the block ends (then killed with SIGKILL)."""
    code = (
        "import sys, time; from pathlib import Path; from mitool._infra.locks import hold_folder\n"
        "with hold_folder(Path(sys.argv[1])):\n    print('held', flush=True); time.sleep(120)"
    )
    process = subprocess.Popen([sys.executable, "-c", code, str(out)], stdout=subprocess.PIPE, text=True)
    try:
        assert process.stdout.readline().strip() == "held"
        yield process
    finally:
        process.kill()
        process.wait()


@pytest.mark.parametrize("command", COMMANDS)
def test_a_second_writer_of_a_folder_is_refused_with_one_line_naming_the_owner(tmp_path, command) -> None:
    out = tmp_path / "out"
    with _holder(out) as holder:
        result = _mitool(*COMMANDS[command], "--out", str(out))
    assert result.returncode == 2
    line = _one_line(result.stderr)
    assert f"is being written by process {holder.pid} on " in line and str(out) in line
    assert not (out / "config.json").exists() and not (out / "summary.csv").exists()


@pytest.mark.slow
def test_two_real_sweeps_on_one_folder_and_the_lock_of_a_killed_one_taken_over(tmp_path) -> None:
    out = tmp_path / "out"
    environment = {**os.environ, "MITOOL_THREADS": "1"}
    command = [*MITOOL, *TOY, "--steps-per-stage", "100000", "--out", str(out)]
    first = subprocess.Popen(command, stderr=subprocess.PIPE, text=True, env=environment)
    try:
        for _ in range(600):
            if lock_path(out).exists() and lock_path(out).read_text():
                break
            time.sleep(0.05)
        second = _mitool(*TOY, "--steps-per-stage", "5", "--out", str(out))
        assert second.returncode == 2 and f"process {first.pid}" in _one_line(second.stderr)
    finally:
        first.kill()
        first.wait()
    assert lock_path(out).exists()  # SIGKILL: no clean-up, the record stays
    third = subprocess.Popen(command, stderr=subprocess.PIPE, text=True, env=environment)
    try:
        note = third.stderr.readline()
    finally:
        third.kill()
        third.wait()
    assert f"took over the lock of {out} left by process {first.pid}" in note and "no longer running" in note


def _state(pid: int) -> str | None:
    """The process's state letter from /proc (Z: a zombie, as good as gone), None when it is gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return None


def test_run_processes_end_when_their_launcher_is_killed_with_sigkill(tmp_path) -> None:
    """The runner's spawn (what ``vision sweep`` starts its runs with): a launcher killed with
    SIGKILL takes its run processes with it."""
    code = ("import sys, time; from mitool._infra.processes import spawn\n"
            "child = spawn([sys.executable, '-c', 'import time; time.sleep(120)'], open(sys.argv[1], 'w'))\n"
            "print(child.pid, flush=True); time.sleep(120)")  # fmt: skip
    launcher = subprocess.Popen(
        [sys.executable, "-c", code, str(tmp_path / "log")], stdout=subprocess.PIPE, text=True
    )
    child = int(launcher.stdout.readline())
    assert _state(child) not in (None, "Z")
    launcher.send_signal(signal.SIGKILL)
    launcher.wait()
    for _ in range(100):
        if _state(child) in (None, "Z"):
            break
        time.sleep(0.05)
    assert _state(child) in (None, "Z")


def _dead_pid() -> int:
    return int(subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                              text=True).stdout)  # fmt: skip


def test_a_pool_worker_whose_owner_died_before_it_asked_ends_at_once() -> None:
    """die_with_parent (a pool worker's first step): the parent-death signal covers only a parent
    that ends after the request, so a worker whose owner is gone already ends there."""
    code = (
        "import sys; from mitool._infra.processes import die_with_parent as die; "
        "die(int(sys.argv[1])); print('on')"
    )
    worker = subprocess.run([sys.executable, "-c", code, str(_dead_pid())], capture_output=True, text=True)
    assert worker.returncode == -signal.SIGKILL and worker.stdout == ""


def test_a_pool_worker_that_is_not_its_owners_child_ends_with_the_owner() -> None:
    """A worker started by a fork server is the fork server's child, and the fork server outlives
    the owner while a worker holds its pipe: the worker watches the owner itself."""
    owner = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    code = ("import sys, time; from mitool._infra.processes import die_with_parent as die; "
            "die(int(sys.argv[1]))\nprint('on', flush=True); time.sleep(120)")  # fmt: skip
    worker = subprocess.Popen([sys.executable, "-c", code, str(owner.pid)], stdout=subprocess.PIPE, text=True)
    try:
        assert worker.stdout.readline().strip() == "on"
        assert _state(worker.pid) not in (None, "Z")
        owner.kill()
        owner.wait()
        assert worker.wait(timeout=10) == -signal.SIGKILL
    finally:
        for process in (owner, worker):
            process.kill()
            process.wait()


def test_a_forked_child_does_not_keep_the_lock_of_its_dead_owner(tmp_path) -> None:
    """A process forked while the lock is held (a local pool's worker) and left running after its
    owner's SIGKILL does not hold the folder's lock: the next run takes it over."""
    out = tmp_path / "out"
    code = ("import os, sys, time; from pathlib import Path; from mitool._infra.locks import hold_folder\n"
            "with hold_folder(Path(sys.argv[1])):\n"
            "    child = os.fork()\n"
            "    if child == 0:\n        time.sleep(120); os._exit(0)\n"
            "    print(child, flush=True); time.sleep(120)")  # fmt: skip
    owner = subprocess.Popen([sys.executable, "-c", code, str(out)], stdout=subprocess.PIPE, text=True)
    child = int(owner.stdout.readline())
    try:
        owner.kill()
        owner.wait()
        assert _state(child) not in (None, "Z")  # alive, adopted
        notes: list[str] = []
        with hold_folder(out, note=notes.append):
            assert json.loads(lock_path(out).read_text())["pid"] == os.getpid()
        assert f"took over the lock of {out} left by process {owner.pid}" in notes[0]
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(child, signal.SIGKILL)


def test_a_lock_still_held_by_what_a_dead_owner_left_names_those_processes(tmp_path, monkeypatch) -> None:
    """Processes that hold the flock of an owner that is gone (forked by other code) are waited for
    a moment, then named, rather than the dead owner said to be writing."""
    import socket

    from mitool._infra import locks

    monkeypatch.setattr(locks, "ORPHANS_WAIT", 0.5)
    out, dead = tmp_path / "out", _dead_pid()
    out.mkdir()
    record = {"pid": dead, "host": socket.gethostname(), "started": time.time(), "command": "mitool matrix"}
    code = ("import fcntl, json, os, sys, time\n"
            "handle = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT)\n"
            "fcntl.flock(handle, fcntl.LOCK_EX); os.write(handle, sys.argv[2].encode())\n"
            "print('held', flush=True); time.sleep(120)")  # fmt: skip
    holder = subprocess.Popen([sys.executable, "-c", code, str(lock_path(out)), json.dumps(record)],
                              stdout=subprocess.PIPE, text=True)  # fmt: skip
    try:
        assert holder.stdout.readline().strip() == "held"
        started = time.monotonic()
        with pytest.raises(locks.FolderInUse) as refused:
            with hold_folder(out):
                pass
        assert time.monotonic() - started >= 0.5
        expected = (f"{out} is still locked by process(es) {holder.pid}, left by process {dead}, which is no "
                    "longer running; end them, or use another folder")  # fmt: skip
        assert expected in str(refused.value)
    finally:
        holder.kill()
        holder.wait()
    with hold_folder(out):  # the holder gone, the lock is free
        pass


@pytest.mark.parametrize("umask", [0o077, 0o002])
def test_outputs_and_the_lock_have_the_mode_the_umask_gives(tmp_path, umask: int) -> None:
    previous = os.umask(umask)
    try:
        atomic_write_text(tmp_path / "result.txt", "one")
        atomic_write_text(tmp_path / "result.txt", "two")  # replaced: the new file's mode
        with hold_folder(tmp_path / "out"):
            lock_mode = lock_path(tmp_path / "out").stat().st_mode & 0o777
    finally:
        os.umask(previous)
    assert (tmp_path / "result.txt").stat().st_mode & 0o777 == 0o666 & ~umask
    assert lock_mode == 0o666 & ~umask


def test_the_lightly_comparison_runs_in_a_private_folder_of_its_own(monkeypatch) -> None:
    pytest.importorskip("torch")
    bench = Path(__file__).resolve().parent.parent / "bench"
    monkeypatch.syspath_prepend(str(bench))
    import importlib

    lightly_compare = importlib.import_module("lightly_compare")
    folders = []
    for _ in range(2):
        arguments = lightly_compare._parser().parse_args([])
        assert lightly_compare.scratch_folder(arguments)
        folders.append(Path(arguments.scratch))
    try:
        assert folders[0] != folders[1] and all(folder.is_dir() for folder in folders)
        assert all(folder.stat().st_mode & 0o777 == 0o700 for folder in folders)
        named = lightly_compare._parser().parse_args(["--scratch", "runs/here"])
        assert not lightly_compare.scratch_folder(named) and named.scratch == "runs/here"
    finally:
        for folder in folders:
            folder.rmdir()


def _can_mount() -> bool:
    return os.geteuid() == 0 and sys.platform.startswith("linux")


@contextlib.contextmanager
def _tmpfs(where: Path, options: str):
    where.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(where)], capture_output=True
    )
    if mounted.returncode != 0:
        pytest.skip(
            f"cannot mount a tmpfs here ({mounted.stderr.decode().strip()}); the injected ENOSPC test runs"
        )
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


@pytest.mark.skipif(not _can_mount(), reason="mounting a small tmpfs needs root on Linux (CI runs as root)")
@pytest.mark.parametrize(("number", "raised"), [("SIGTERM", "Terminated"), ("SIGINT", "KeyboardInterrupt")])
def test_a_signal_inside_a_step_stops_the_loop_after_it(number: str, raised: str) -> None:
    """Interruption.raise_if_received (the toy's vmapped loop): a real signal in the middle of a step
    lets the step finish, then stops with the signal's exception."""
    import os
    import signal

    from mitool._infra.processes import Interruption

    finished = []
    with pytest.raises(KeyboardInterrupt) as stopped, Interruption() as interruption:
        for step in range(3):
            if step == 1:
                os.kill(os.getpid(), getattr(signal, number))
            finished.append(step)
            interruption.raise_if_received()
    assert finished == [0, 1] and type(stopped.value).__name__ == raised


def test_a_full_disk_is_one_line_exit_1(tmp_path) -> None:
    with _tmpfs(tmp_path / "small", "size=96k") as small:
        result = _mitool(*COMMANDS["toy sweep"], "--out", str(small / "out"))
    assert result.returncode == 1
    line = _one_line(result.stderr)
    assert line.startswith("Error: cannot store results: ") and "No space left on device" in line
    assert str(small / "out") in line


@pytest.mark.skipif(
    not _can_mount(), reason="mounting a read-only tmpfs needs root on Linux (CI runs as root)"
)
@pytest.mark.parametrize("command", ["toy sweep", "vision pretrain"])
def test_a_read_only_folder_is_one_line_exit_1(tmp_path, command) -> None:
    with _tmpfs(tmp_path / "ro", "size=1m,ro") as read_only:
        result = _mitool(*COMMANDS[command], "--out", str(read_only / "out"))
    assert result.returncode == 1
    assert "Read-only file system" in _one_line(result.stderr) and str(read_only / "out") in result.stderr


def test_a_symlink_loop_as_out_is_one_line_exit_1(tmp_path) -> None:
    loop = tmp_path / "loop"
    loop.symlink_to(loop)
    result = _mitool(*COMMANDS["toy sweep"], "--out", str(loop))
    assert result.returncode == 1
    assert (
        _one_line(result.stderr) == f"Error: cannot store results: {loop}: Too many levels of symbolic links"
    )


def test_an_injected_enospc_in_a_checkpoint_write_is_one_line_and_keeps_the_old_checkpoint(
    tmp_path, monkeypatch
) -> None:
    from click.testing import CliRunner

    from mitool.cli.main import main

    out = tmp_path / "run"
    first = CliRunner().invoke(main, ["vision", "pretrain", *VISION, "--negatives", "16", "--epochs", "2",
                                      "--max-steps", "2", "--out", str(out)])  # fmt: skip
    assert first.exit_code == 0, first.output
    before = (out / "checkpoint.pt").read_bytes()

    def full(descriptor: int) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr("mitool._infra.files.os.fsync", full)
    result = CliRunner().invoke(
        main,
        ["vision", "pretrain", *VISION, "--negatives", "16", "--epochs", "2", "--resume", "--out", str(out)],
    )
    assert result.exit_code == 1, result.output
    line = _one_line(result.output)
    assert line.startswith(f"Error: cannot store results: {out}") and line.endswith("No space left on device")
    assert (out / "checkpoint.pt").read_bytes() == before
    assert not [path for path in out.rglob(f"*{TEMPORARY_SUFFIX}*")]


@pytest.mark.slow
def test_rank_zero_names_the_rank_it_waits_for_then_stops_at_the_deadline(tmp_path) -> None:
    started = time.monotonic()
    result = _mitool(*TOY, "--negatives", "4,16", "--steps-per-stage", "5", "--out", str(tmp_path / "out"),
                     env={"RANK": "0", "WORLD_SIZE": "2", "MITOOL_RANK_TIMEOUT": "4"})  # fmt: skip
    assert result.returncode == 1 and time.monotonic() - started < 120
    assert "waiting for the other ranks' cells (rank 1: 1 cells)" in result.stderr
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("Error: rank 1 has not started after") and "Traceback" not in result.stderr


def test_resume_uses_the_previous_checkpoint_when_the_latest_is_missing_or_damaged(tmp_path) -> None:
    from mitool.vision import checkpoint

    path = str(tmp_path / "checkpoint.pt")
    checkpoint.save(path, {"kind": "pretrain", "step": 10})
    checkpoint.save(path, {"kind": "pretrain", "step": 20})
    notes: list[str] = []
    assert checkpoint.load_latest(path, "pretrain", "resume", notes.append)["step"] == 20 and not notes
    Path(path).write_bytes(Path(path).read_bytes()[:100])  # damaged
    assert checkpoint.load_latest(path, "pretrain", "resume", notes.append)["step"] == 10
    os.unlink(path)
    assert checkpoint.load_latest(path, "pretrain", "resume", notes.append)["step"] == 10
    assert ["cannot be read" in notes[0], "is missing" in notes[1]] == [True, True]
    assert "previous checkpoint" in notes[0] and "(step 10)" in notes[1]


def test_leftovers_of_a_killed_write_are_removed_at_the_next_start_and_a_living_writers_kept(
    tmp_path,
) -> None:
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    )
    pid = int(dead.stdout)
    stale = [tmp_path / f".summary.csv.{pid}.ab12{TEMPORARY_SUFFIX}",
             tmp_path / "cells" / f".x.json.{pid}.cd34{TEMPORARY_SUFFIX}.prev"]  # fmt: skip
    living = tmp_path / f".other.csv.{os.getpid()}.ef56{TEMPORARY_SUFFIX}"
    for path in (*stale, living):
        path.parent.mkdir(exist_ok=True)
        path.write_text("half")
    atomic_write_text(tmp_path / "kept.txt", "whole")
    notes: list[str] = []
    with hold_folder(tmp_path, note=notes.append):
        pass
    assert [path.exists() for path in stale] == [False, False] and living.exists()
    assert (tmp_path / "kept.txt").read_text() == "whole" and "removed 2 temporary file(s)" in notes[0]
    assert remove_leftovers(tmp_path) == []


@pytest.mark.parametrize("delay", [0.05, 0.3])
def test_ctrl_c_while_the_program_starts_is_one_line_and_exit_130(tmp_path, delay: float) -> None:
    """The interrupt comes ``delay`` after the package mitool.cli is imported (its line of -X
    importtime on stderr): importing the command, reading, or training. Before that, and while
    runpy compiles the module it runs, Python itself is starting, which no code of mitool answers
    (a sleep from the start, 0.6 s, once landed there on a loaded machine)."""
    x = tmp_path / "x.npy"
    np.save(x, np.random.default_rng(0).normal(size=(2000, 1)))
    command = [
        sys.executable,
        "-X",
        "importtime",
        *MITOOL[1:],
        "estimate",
        str(x),
        str(x),
        "--estimator",
        "infonce",
    ]
    process = subprocess.Popen(command, stderr=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    seen = []
    for line in process.stderr:  # the import lines, until the package's own
        seen.append(line)
        if line.rstrip().endswith("| mitool.cli"):
            break
    time.sleep(delay)
    process.send_signal(signal.SIGINT)
    _, rest = process.communicate(timeout=60)
    stderr = "".join(seen) + rest
    assert process.returncode == 130, stderr[-2000:]
    lines = [line for line in stderr.splitlines() if line.strip() and not line.startswith("import time:")]
    lines = [line for line in lines if "estimate " not in line]
    assert len(lines) == 1 and "Traceback" not in stderr and "interrupted" in lines[0], lines


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("a,b,c\n1,2,cat\n3,4,5\n", "line 2, column 3: 'cat' is not a number"),
        ("1,2,3\n4,dog,6\n", "line 2, column 2: 'dog' is not a number"),
        ("x,1\n2,3\n", "line 1, column 1: 'x' is not a number"),
        ("1,2\n3\n", "line 2 has 1 fields, the first data line 2"),
    ],
)
def test_csv_errors_name_the_line_and_column_as_the_file_counts_them(tmp_path, content, message) -> None:
    from mitool.cli.io import load_samples

    path = tmp_path / "data.csv"
    path.write_text(content)
    with pytest.raises(ValueError, match=message):
        load_samples(path, "X")


def test_a_csv_header_is_a_first_line_without_numbers(tmp_path) -> None:
    from mitool.cli.io import load_samples

    (tmp_path / "h.csv").write_text("x, y\n1,2\n3,4\n")
    (tmp_path / "n.csv").write_text("1,2\n3,4\n")
    assert load_samples(tmp_path / "h.csv", "X").values.tolist() == [[1, 2], [3, 4]]
    assert load_samples(tmp_path / "n.csv", "X").values.tolist() == [[1, 2], [3, 4]]


def test_a_npy_that_is_no_array_says_so(tmp_path) -> None:
    (tmp_path / "x.npy").write_text("hello")
    result = _mitool("estimate", str(tmp_path / "x.npy"), str(tmp_path / "x.npy"))
    assert result.returncode == 2
    assert (
        _one_line(result.stderr)
        == f"Error: X: {tmp_path / 'x.npy'} is not a numpy array file (no .npy header)"
    )


def test_the_json_value_has_one_name_in_json_and_python(tmp_path) -> None:
    rng = np.random.default_rng(0)
    x = rng.normal(size=(400, 1))
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "y.npy", x + rng.normal(size=(400, 1)))
    result = _mitool("estimate", str(tmp_path / "x.npy"), str(tmp_path / "y.npy"), "--json", "--quiet")
    record = json.loads(result.stdout)
    from mitool.estimation import estimate

    value = estimate(x, np.load(tmp_path / "y.npy")).value
    assert record["value"] == pytest.approx(value) and record["estimate"] == record["value"]


def test_ksg_reports_its_progress_from_the_first_subset_and_ends_with_its_value() -> None:
    """The progress that gives a time estimate: after the first of the ten subsets, and the value last."""
    from mitool.estimation import estimate

    rng = np.random.default_rng(0)
    x = rng.normal(size=(20_000, 1))
    calls: list[tuple[int, int, float]] = []
    result = estimate(x, x + rng.normal(size=(20_000, 1)), progress=lambda *call: calls.append(call))
    steps = [2000 * subset for subset in range(1, 11)]  # ten subsets of 2000 pairs, then all 20000
    total = 20_000 + round(2 * 20_000 * math.log(20_000) / math.log(2000))  # n log n for all of them
    assert result.estimator == "ksg" and [done for done, _, _ in calls] == [*steps, total]
    assert {total for _, total, _ in calls} == {total} and calls[-1][2] == result.value


def test_a_long_quiet_estimate_states_its_time_once(monkeypatch, capsys) -> None:
    """Under --quiet no bar, but a run that will take more than 10 s says so in one line, at its
    second report, from the rate between its first two; a short one says nothing, nor does one
    with its bar."""
    import time

    from mitool.cli.common import EstimateProgress

    clock = [100.0]
    monkeypatch.setattr(time, "perf_counter", lambda: clock[0])
    long_run, short_run = EstimateProgress("ksg", enabled=False), EstimateProgress("ksg", enabled=False)
    with_bar = EstimateProgress("ksg", enabled=True)
    reports = {long_run: (1000, 2000, 3000), short_run: (5000, 9000, 9500), with_bar: (1000, 2000, 3000)}
    for report in range(3):
        clock[0] += 2.0
        for progress, done in reports.items():
            progress(done[report], 10_000, math.nan)
    for progress in reports:
        progress.close()
    lines = capsys.readouterr().err.splitlines()
    # 4 s in, 2 s per 1000 units, 8000 left: 4 + 16 s; the short run: 4 + 0.5 s
    assert [line for line in lines if "expected to take" in line] == [
        "ksg: expected to take up to about 20 s (2000 of 10000 units done in 4 s)"
    ]


def test_the_synthetic_images_knn_says_it_is_a_smoke_test() -> None:
    from mitool.vision.choices import smoke_test_note

    assert "smoke test" in smoke_test_note("synthetic") and smoke_test_note("fashion-mnist") == ""
