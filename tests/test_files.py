"""mitool._infra.files: the one atomic writer (old file intact on error, no temporary left, 0644, .prev)."""

from __future__ import annotations

import os
import stat

import pytest

from mitool._infra.files import (
    atomic_write_json,
    atomic_write_text,
    atomic_writer,
    previous_path,
    read_csv,
    write_csv,
)


def test_a_failed_write_leaves_the_old_file_whole_and_no_temporary(tmp_path):
    path = tmp_path / "result.txt"
    atomic_write_text(path, "old\n")
    with pytest.raises(KeyboardInterrupt):
        with atomic_writer(path, "w") as stream:
            stream.write("half of the new")
            raise KeyboardInterrupt
    assert path.read_text() == "old\n"
    assert sorted(os.listdir(tmp_path)) == ["result.txt"]


def test_written_files_have_the_umasks_mode_and_folders_are_created(tmp_path):
    path = tmp_path / "a" / "b" / "value.json"
    atomic_write_json(path, {"b": 1, "a": [1.5]})
    assert path.read_text() == '{\n  "a": [\n    1.5\n  ],\n  "b": 1\n}\n'
    umask = os.umask(0)
    os.umask(umask)
    assert stat.S_IMODE(path.stat().st_mode) == 0o666 & ~umask


def test_keep_previous_keeps_the_replaced_file(tmp_path):
    path = tmp_path / "checkpoint.pt"
    for content in (b"first", b"second", b"third"):
        with atomic_writer(path, keep_previous=True) as stream:
            stream.write(content)
    assert path.read_bytes() == b"third"
    assert open(previous_path(path), "rb").read() == b"second"
    assert sorted(os.listdir(tmp_path)) == ["checkpoint.pt", "checkpoint.pt.prev"]


def test_csv_round_trip(tmp_path):
    path = tmp_path / "table.csv"
    write_csv(path, ["name", "value"], [["x", 1], ["y, z", 2.5]])
    assert read_csv(path) == [{"name": "x", "value": "1"}, {"name": "y, z", "value": "2.5"}]
    with pytest.raises(FileNotFoundError, match="no such file"):
        read_csv(tmp_path / "missing.csv")
