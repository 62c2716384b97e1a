"""Memory for ingest: a trace too big for this machine fails with a message naming it,
not with the kernel's OOM killer; parallel ingest runs only as many batches at once as
fit in memory (a batch of small traces holds all of them: `batch_need_bytes`).

An ingest holds one trace's JSON text (gunzipped) and DuckDB's columns built from it;
measured on `v100_ddp_rank1` (54 MB of JSON) the worker peaks near 5× the text
(`benchmarks/ingest.py`), so the need of one file is estimated as
`BYTES_PER_JSON_BYTE × text + BASE_BYTES`. Available memory is the smaller of
`MemAvailable` (/proc/meminfo) and the cgroup's limit minus its usage; where neither can
be read (not Linux) nothing is checked.
"""

from __future__ import annotations

import os
import struct
from functools import lru_cache
from pathlib import Path

BYTES_PER_JSON_BYTE = 5
BASE_BYTES = 200 * 2**20


def text_bytes(path: Path) -> int:
    """Size of the JSON text: a gzip file's stored size (ISIZE, mod 4 GiB: at least the
    compressed size), else the file size."""
    st = path.stat()
    try:
        return _text_bytes(str(path), st.st_size, st.st_mtime_ns)
    except OSError:  # not cached: read again next time
        return st.st_size


# by path, size and mtime: one ingest asks for each file's size up to four times (the
# memory check, the batches, the workers that fit them), and a file's trailer is a read
@lru_cache(maxsize=65536)
def _text_bytes(path: str, size: int, _mtime_ns: int) -> int:
    with open(path, "rb") as fh:
        if fh.read(2) != b"\x1f\x8b" or size < 18:
            return size
        fh.seek(-4, os.SEEK_END)
        isize = struct.unpack("<I", fh.read(4))[0]
    # ISIZE wraps at 4 GiB; deflate rarely shrinks JSON below 1/20
    while isize < size:
        isize += 2**32
    return isize


def need_bytes(path: Path) -> int:
    return BYTES_PER_JSON_BYTE * text_bytes(path) + BASE_BYTES


def _read_int(path: str) -> int | None:
    try:
        text = Path(path).read_text().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


def available_bytes() -> int | None:
    """Memory this process can still use, or None when the system does not say."""
    avail = None
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                avail = int(line.split()[1]) * 1024
                break
    except (OSError, ValueError, IndexError):
        avail = None
    limit = _read_int("/sys/fs/cgroup/memory.max")  # cgroup v2; "max" reads as None
    used = _read_int("/sys/fs/cgroup/memory.current")
    if limit is not None and used is not None:
        left = max(limit - used, 0)
        avail = left if avail is None else min(avail, left)
    return avail


def _gb(n: float) -> str:
    return f"{n / 1e9:.1f} GB"


def too_big(files: list[Path]) -> dict[Path, str]:
    """{file: why} for the files whose ingest would not fit in memory now."""
    avail = available_bytes()
    if avail is None:
        return {}
    out = {}
    for f in files:
        need = need_bytes(f)
        if need > avail:
            out[f] = (
                f"{f} is {_gb(text_bytes(f))} of JSON; ingesting it needs about {_gb(need)} "
                f"of memory and {_gb(avail)} is available — free memory or use a bigger machine"
            )
    return out


def batch_need_bytes(batch: list[Path]) -> int:
    """Memory a worker needs for a batch of traces read together (`need_bytes` of their
    summed text): its tables hold every rank of the batch at once."""
    return BYTES_PER_JSON_BYTE * sum(text_bytes(f) for f in batch) + BASE_BYTES


def workers_that_fit(batches: list[list[Path]], wanted: int) -> int:
    """At most `wanted` ingest processes, and no more than the largest batches' needs fit."""
    avail = available_bytes()
    if avail is None or not batches:
        return wanted
    needs = sorted((batch_need_bytes(b) for b in batches), reverse=True)
    n, total = 0, 0
    for need in needs[:wanted]:
        if total + need > avail and n >= 1:
            break
        total += need
        n += 1
    return max(1, n)


__all__ = [
    "available_bytes",
    "batch_need_bytes",
    "need_bytes",
    "text_bytes",
    "too_big",
    "workers_that_fit",
]
