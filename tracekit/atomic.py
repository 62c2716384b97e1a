"""Atomic file writes: a temporary file in the destination's folder, flushed to disk,
then renamed over the destination. A reader sees the old file or the new one, never
half of one; a writer killed midway leaves at most a hidden `.NAME.*.tmp` beside it,
which the next writer of that name removes once stale."""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path

STALE_TMP_S = 3600.0  # a temporary file this old belongs to a writer that died


def _mode() -> int:
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask


def write_bytes(dest: Path, data: bytes) -> None:
    dest = Path(dest)
    if dest.exists() and not dest.is_file():
        # a device, a FIFO (`-o /dev/null`, `-o /dev/stdout`): renaming over it would
        # replace the device with a regular file, so write into it
        with open(dest, "wb") as fh:
            fh.write(data)
        return
    fd, tmp = tempfile.mkstemp(dir=dest.parent, prefix=f".{dest.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, _mode())  # mkstemp makes it private; the file is for sharing
        os.replace(tmp, dest)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_text(dest: Path, text: str) -> None:
    write_bytes(dest, text.encode())


def remove_stale_tmp(folder: Path, older_than_s: float = STALE_TMP_S) -> int:
    """Delete hidden `*.tmp` files older than `older_than_s` (left by killed writers)."""
    now = time.time()
    n = 0
    for p in Path(folder).glob(".*.tmp"):
        try:
            if now - p.stat().st_mtime > older_than_s:
                p.unlink()
                n += 1
        except OSError:
            continue
    return n
