"""What faults do to ``mitool matrix``: the command killed with SIGKILL (its local workers, forked,
from a fork server or spawned, die with it, and the next run takes the lock over and resumes), a
local worker killed, the Dask scheduler or workers lost (one line with the command that resumes),
``tls://`` with and without Dask's TLS settings, damaged block files (computed again) and a Z of
the wrong length. Real processes and real signals; the blocks are slowed by a module on
PYTHONPATH that sleeps before each block of pairs (the numbers are the same), so that a run is
still going when the fault comes."""

from __future__ import annotations

import contextlib
import os
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from mitool.checks import ParameterError
from mitool.cli.main import main
from mitool.matrix import MatrixResult, _load, mi_matrix

MITOOL = [sys.executable, "-m", "mitool.cli.main"]
SETTINGS = ["--permutations", "99", "--quiet"]

SLOW_BLOCKS = """
import time
from mitool.matrix import _pair_block

def slow_pair_block(*arguments):
    time.sleep(0.3)
    return _pair_block(*arguments)
"""

DRIVER = """
import multiprocessing, sys, threading, time
method = sys.argv[1]
if method != "fork":  # a second thread: the pool starts its workers from a fork server, or fresh
    threading.Thread(target=time.sleep, args=(3600,), daemon=True).start()
if method == "spawn":
    multiprocessing.get_all_start_methods = lambda: ["spawn"]
import slowblocks, mitool.matrix
mitool.matrix._pair_block = slowblocks.slow_pair_block
from mitool.cli.main import main
sys.argv = ["main.py", *sys.argv[2:]]  # the resume command: python -m mitool.cli.main ...
main()
"""


@pytest.fixture(autouse=True)
def one_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MITOOL_THREADS", "1")


@pytest.fixture(scope="module")
def slow(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, dict[str, str]]:
    """The data (10 columns of 200 rows: 45 blocks of one pair), the matrix.csv of an uninterrupted
    run, and the environment of a slowed run."""
    folder = tmp_path_factory.mktemp("slow")
    (folder / "slowblocks.py").write_text(SLOW_BLOCKS)
    data = folder / "data.npy"
    table = np.random.default_rng(3).normal(size=(200, 10))
    table[:, 1] += table[:, 0]
    np.save(data, table)
    run = CliRunner().invoke(main, ["matrix", str(data), "--out", str(folder / "whole"), "--workers", "1",
                                    *SETTINGS])  # fmt: skip
    assert run.exit_code == 0, run.output
    path = os.pathsep.join(filter(None, [str(folder), os.environ.get("PYTHONPATH")]))
    environment = {**os.environ, "MITOOL_THREADS": "1", "PYTHONPATH": path}
    return data, folder / "whole" / "matrix.csv", environment


def _driver(method: str, *arguments: str, env: dict[str, str], stderr: Path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", DRIVER, method, *arguments], env=env,
                            stdout=subprocess.DEVNULL, stderr=stderr.open("w"))  # fmt: skip


def _state(pid: int) -> str | None:
    """The process's state letter (Z: a zombie, as good as gone), None when it is gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return None


def _tree(pid: int) -> dict[int, int]:
    """The living processes below ``pid`` (children, their children, ...), each with its parent."""
    parents = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, IndexError, ValueError):
            fields = stat.read_text().rsplit(")", 1)[1].split()
            if fields[0] != "Z":
                parents[int(stat.parent.name)] = int(fields[1])
    found, frontier = {}, {pid}
    while frontier:
        below = {child: parent for child, parent in parents.items() if parent in frontier}
        found.update(below)
        frontier = set(below)
    return found


def _descendants(pid: int) -> list[int]:
    return sorted(_tree(pid))


def _workers(pid: int) -> list[int]:
    """The pool's workers below ``pid``: not its fork server (a child of ``pid`` whose forks, the
    workers, share its command line) or resource tracker."""
    found = []
    for child, parent in _tree(pid).items():
        with contextlib.suppress(OSError):
            command = Path(f"/proc/{child}/cmdline").read_text()
            if "resource_tracker" not in command and not ("forkserver" in command and parent == pid):
                found.append(child)
    return sorted(found)


def _wait_for(condition, seconds: float, what: str) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, f"no {what} within {seconds} s"
        time.sleep(0.05)


def _blocks(out: Path) -> int:
    return len(list((out / "pairs").glob("block-*.npz")))


def _one_line(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in stderr, stderr
    return lines[0]


def _resumes(line: str, out: Path, whole: Path, env: dict[str, str]) -> None:
    """``line`` ends with the command that resumes; it does, and gives the uninterrupted numbers."""
    assert f"; finished blocks are saved in {out}; resume with the same command: " in line, line
    command = shlex.split(line.split("resume with the same command: ", 1)[1])
    plain = {**env, "PYTHONPATH": os.environ.get("PYTHONPATH", "")}  # the blocks no longer slowed
    resumed = subprocess.run(command, capture_output=True, text=True, env=plain, timeout=300)
    assert resumed.returncode == 0, resumed.stderr
    assert "finished block(s) read back" in resumed.stderr
    assert (out / "matrix.csv").read_text() == whole.read_text()


@pytest.mark.parametrize("method", ["fork", "forkserver", "spawn"])
@pytest.mark.slow
def test_local_workers_die_with_a_killed_command_and_the_next_run_resumes(slow, tmp_path, method) -> None:
    data, whole, environment = slow
    out = tmp_path / "out"
    arguments = ["matrix", str(data), "--out", str(out), "--workers", "2", *SETTINGS]
    run = _driver(method, *arguments, env=environment, stderr=tmp_path / "stderr")
    below: list[int] = []
    try:
        _wait_for(lambda: len(_workers(run.pid)) == 2 and _blocks(out) >= 1, 120, "two workers and a block")
        below = _descendants(run.pid)
        run.send_signal(signal.SIGKILL)
        run.wait()
        deadline = time.monotonic() + 10
        while any(_state(pid) not in (None, "Z") for pid in below) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert [pid for pid in below if _state(pid) not in (None, "Z")] == [], f"{method}: outlived the kill"
    finally:
        run.kill()
        for pid in {*below, *_descendants(run.pid)}:  # what outlived it, adopted by now
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
    assert _blocks(out) < 45  # stopped midway
    again = subprocess.run(
        [*MITOOL, *arguments], capture_output=True, text=True, env=environment, timeout=300
    )
    assert again.returncode == 0, again.stderr
    assert "finished block(s) read back" in again.stderr
    assert (out / "matrix.csv").read_text() == whole.read_text()


def test_a_killed_local_worker_is_one_line_with_the_command_that_resumes(slow, tmp_path) -> None:
    data, whole, environment = slow
    out = tmp_path / "out"
    run = _driver("fork", "matrix", str(data), "--out", str(out), "--workers", "2", *SETTINGS,
                  env=environment, stderr=tmp_path / "stderr")  # fmt: skip
    try:
        _wait_for(lambda: len(_workers(run.pid)) == 2 and _blocks(out) >= 1, 120, "two workers and a block")
        os.kill(_workers(run.pid)[0], signal.SIGKILL)  # as the out-of-memory killer does
        assert run.wait(timeout=60) == 1
    finally:
        run.kill()
        run.wait()
    line = _one_line((tmp_path / "stderr").read_text())
    assert line.startswith("Error: matrix stopped: a worker process was killed (SIGKILL: by hand, or by the "
                           "out-of-memory killer)"), line  # fmt: skip
    assert _descendants(run.pid) == []
    _resumes(line, out, whole, environment)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@contextlib.contextmanager
def _dask_cluster(folder: Path, env: dict[str, str], tls: list[str] = ()) -> Iterator[tuple[str, list]]:
    """A ``dask scheduler`` on 127.0.0.1 and a ``dask worker`` of two processes, each in its own
    process group; yields the address and the two Popen objects."""
    pytest.importorskip("distributed")
    dask = shutil.which("dask", path=os.path.dirname(sys.executable)) or pytest.skip("no dask command")
    protocol = "tls" if tls else "tcp"
    address = f"{protocol}://127.0.0.1:{_free_port()}"
    port = address.rsplit(":", 1)[1]
    common = dict(env=env, start_new_session=True, stdout=subprocess.DEVNULL)
    processes = [subprocess.Popen([dask, "scheduler", "--protocol", protocol, "--host", "127.0.0.1", "--port",
                                   port, "--no-dashboard", *tls], stderr=(folder / "scheduler.log").open("w"),
                                  **common)]  # fmt: skip
    try:
        processes.append(subprocess.Popen([dask, "worker", address, "--nworkers", "2", "--nthreads", "1",
                                           "--no-dashboard", *tls], stderr=(folder / "worker.log").open("w"),
                                          **common))  # fmt: skip
        _wait_for(
            lambda: (folder / "worker.log").read_text().count("Registered to") >= 2, 120, "Dask workers"
        )
        yield address, processes
    finally:
        for process in processes:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait()


@pytest.mark.parametrize("lost", ["scheduler", "workers"])
@pytest.mark.slow
def test_a_lost_dask_scheduler_or_its_workers_is_one_line_with_the_command_that_resumes(
    slow, tmp_path, lost
) -> None:
    data, whole, environment = slow
    out = tmp_path / "out"
    with _dask_cluster(tmp_path, environment) as (address, (scheduler, workers)):
        run = _driver("fork", "matrix", str(data), "--out", str(out), "--scheduler", address, *SETTINGS,
                      env=environment, stderr=tmp_path / "stderr")  # fmt: skip
        try:
            _wait_for(lambda: _blocks(out) >= 1, 120, "block")
            os.killpg((scheduler if lost == "scheduler" else workers).pid, signal.SIGKILL)
            assert run.wait(timeout=90) == 1
        finally:
            run.kill()
            run.wait()
    line = _one_line((tmp_path / "stderr").read_text())
    expected = {
        "scheduler": f"the connection to the Dask scheduler at {address} was lost",
        "workers": "the Dask cluster lost its workers, and with them the data and the blocks under way",
    }
    assert line.startswith(f"Error: matrix stopped: {expected[lost]}"), line  # fmt: skip
    assert f"; finished blocks are saved in {out}; resume with the same command: " in line
    assert f"--scheduler {address}" in line
    # the cluster is gone: the same folder resumed on this machine gives the same numbers
    local = subprocess.run([*MITOOL, "matrix", str(data), "--out", str(out), "--workers", "1", *SETTINGS],
                           capture_output=True, text=True, env=environment, timeout=300)  # fmt: skip
    assert local.returncode == 0 and "finished block(s) read back" in local.stderr, local.stderr
    assert (out / "matrix.csv").read_text() == whole.read_text()


def test_tls_without_dasks_settings_is_one_line_exit_2(slow, tmp_path) -> None:
    pytest.importorskip("distributed")
    data, _, _ = slow
    run = CliRunner().invoke(main, ["matrix", str(data), "--out", str(tmp_path / "out"), "--scheduler",
                                    "tls://127.0.0.1:9", *SETTINGS])  # fmt: skip
    assert run.exit_code == 2
    assert run.output.strip().startswith(
        "Error: --scheduler 'tls://127.0.0.1:9' needs Dask's TLS settings: the CA file and this client's "
        "certificate and key (DASK_DISTRIBUTED__COMM__TLS__CA_FILE,"
    ), run.output
    assert len(run.output.strip().splitlines()) == 1


@pytest.mark.slow
def test_tls_as_the_docs_show_it_gives_the_local_numbers(slow, tmp_path) -> None:
    """docs/independence.md's three commands, with one self-signed certificate for all."""
    openssl = shutil.which("openssl") or pytest.skip("no openssl to make a certificate")
    data, whole, environment = slow
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    names = "subjectAltName=IP:127.0.0.1,DNS:localhost"
    make = [openssl, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(cert),
            "-days", "2", "-subj", "/CN=localhost", "-addext", names]  # fmt: skip
    subprocess.run(make, check=True, capture_output=True)
    tls = ["--tls-ca-file", str(cert), "--tls-cert", str(cert), "--tls-key", str(key)]
    settings = {"DASK_DISTRIBUTED__COMM__TLS__CA_FILE": str(cert),
                "DASK_DISTRIBUTED__COMM__TLS__CLIENT__CERT": str(cert),
                "DASK_DISTRIBUTED__COMM__TLS__CLIENT__KEY": str(key)}  # fmt: skip
    out = tmp_path / "out"
    with _dask_cluster(tmp_path, environment, tls) as (address, _):
        assert address.startswith("tls://")
        command = [*MITOOL, "matrix", str(data), "--out", str(out), "--scheduler", address, *SETTINGS]
        run = subprocess.run(
            command, capture_output=True, text=True, env={**environment, **settings}, timeout=300
        )
    assert run.returncode == 0, run.stderr
    assert (out / "matrix.csv").read_text() == whole.read_text()


def _same(one: MatrixResult, other: MatrixResult) -> None:
    for name in ("statistic", "ci_low", "ci_high", "pvalue", "qvalue", "null_values"):
        np.testing.assert_array_equal(getattr(one, name), getattr(other, name), err_msg=name)


def test_damaged_block_files_are_computed_again(tmp_path) -> None:
    table = np.random.default_rng(5).normal(size=(150, 6))
    table[:, 1] += table[:, 0]
    whole = mi_matrix(table, permutations=99, workers=1, out=tmp_path / "whole")
    out = tmp_path / "out"
    shutil.copytree(tmp_path / "whole", out)
    blocks = sorted(out.glob("*/block-*"))
    damaged = {
        blocks[0]: b"",  # the null block, emptied
        blocks[1]: blocks[1].read_bytes()[: blocks[1].stat().st_size // 2],  # cut short
        blocks[2]: b"",
        blocks[3]: blocks[3].read_bytes()[:-1],
    }
    for path, content in damaged.items():
        path.write_bytes(content)
    again = mi_matrix(table, permutations=99, workers=1, out=out)
    assert again.reused_blocks == len(blocks) - len(damaged)
    _same(again, whole)
    for path in damaged:  # written anew, whole
        assert path.read_bytes() == (tmp_path / "whole" / path.relative_to(out)).read_bytes()
    for path in damaged:  # the command line too: no "Aborted!", no traceback
        path.write_bytes(b"")
    np.save(tmp_path / "table.npy", table)
    run = CliRunner().invoke(main, ["matrix", str(tmp_path / "table.npy"), "--out", str(out), "--workers",
                                    "1", *SETTINGS])  # fmt: skip
    assert run.exit_code == 0, run.output
    assert "Wrote" in run.output and "Aborted" not in run.output


@pytest.mark.slow
def test_a_block_file_cut_anywhere_or_of_another_length_is_not_read(tmp_path) -> None:
    table = np.random.default_rng(6).normal(size=(120, 4))
    mi_matrix(table, permutations=99, workers=1, out=tmp_path)
    for path, rows in (
        (tmp_path / "pairs" / "block-00000.npz", 1),
        (tmp_path / "null" / "block-00000.npy", 99),
    ):
        content = path.read_bytes()
        assert _load(path, rows) is not None and _load(path, rows + 1) is None
        for cut in range(len(content)):
            path.write_bytes(content[:cut])
            assert _load(path, rows) is None, (path.name, cut)


def test_a_given_of_the_wrong_length_names_the_given(tmp_path) -> None:
    rng = np.random.default_rng(7)
    table, z = rng.normal(size=(50, 3)), rng.normal(size=(40, 1))
    with pytest.raises(
        ParameterError, match=r"^given must have one row per row of data: 40 rows against 50$"
    ):
        mi_matrix(table, given=z, permutations=19, workers=1)
    np.save(tmp_path / "x.npy", table)
    np.save(tmp_path / "z.npy", z)
    run = CliRunner().invoke(main, ["matrix", str(tmp_path / "x.npy"), "--given", str(tmp_path / "z.npy"),
                                    "--out", str(tmp_path / "out"), *SETTINGS])  # fmt: skip
    assert run.exit_code == 2
    assert run.output.strip() == "Error: --given must have one row per row of DATA: 40 rows against 50"


def test_each_dask_loss_has_its_words() -> None:
    """The errors a lost cluster raises where the blocks run, in the words of the one line."""
    distributed = pytest.importorskip("distributed")
    from distributed.client import FutureCancelledError

    from mitool.matrix import _dask_loss

    class Client:
        class scheduler:  # the attribute of a distributed.Client
            address = "tcp://10.0.0.5:8786"

    killed = distributed.KilledWorker("pairs", None, 3)
    assert _dask_loss(killed, Client) == (
        "Dask workers died running a block, 4 times (killed, or out of memory: see their logs)"
    )
    lost = "the connection to the Dask scheduler at tcp://10.0.0.5:8786 was lost"
    assert _dask_loss(FutureCancelledError("pairs", "scheduler-connection-lost"), Client) == lost
    assert _dask_loss(OSError("Timed out trying to connect"), Client) == lost
    forgotten = _dask_loss(FutureCancelledError("pairs", "already forgotten"), Client)
    words = "the Dask cluster lost its workers, and with them the data and the blocks under way"
    assert forgotten == f"{words} (already forgotten)"
