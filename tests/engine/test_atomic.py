"""Atomic writes replace regular files only: `-o /dev/null` or a FIFO is written into,
never renamed over (a rename turned the machine's /dev/null into a regular file)."""

from __future__ import annotations

import os
import stat
import threading

import pytest

from tracekit.atomic import write_text


def test_a_fifo_is_written_into_not_replaced(tmp_path):
    fifo = tmp_path / "out.fifo"
    os.mkfifo(fifo)
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()), daemon=True)
    reader.start()
    write_text(fifo, "report\n")
    reader.join(timeout=10)
    assert got == [b"report\n"]
    assert stat.S_ISFIFO(fifo.stat().st_mode)  # still a FIFO
    assert list(tmp_path.iterdir()) == [fifo]  # no temporary file left


@pytest.mark.skipif(
    not (os.path.exists("/dev/null") and stat.S_ISCHR(os.stat("/dev/null").st_mode)),
    reason="/dev/null is not a device here",
)
def test_dev_null_stays_a_device():
    write_text("/dev/null", "x")
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)


def test_a_regular_file_is_replaced_whole(tmp_path):
    dest = tmp_path / "r.json"
    dest.write_text("old")
    write_text(dest, "new")
    assert dest.read_text() == "new" and list(tmp_path.iterdir()) == [dest]
