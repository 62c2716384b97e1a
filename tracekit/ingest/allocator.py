"""DuckDB's allocator told to keep the pages a batch frees until the batch ends.

DuckDB's Linux builds allocate through their own jemalloc, which returns freed pages to
the system within about a second (`dirty_decay_ms` 1000). An ingest batch frees its
largest tables (the raw events, the base tables' working copies) midway and then builds
the derived tables: those pages came back from the system again, one page fault each.
Kept for the batch (`dirty_decay_ms` −1, restored after), 128 small ranks took 96,000
page faults instead of 130,000 and 0.05–0.11 s less CPU (of 2.3 s), at +40 MB of peak
RSS; one big rank, level CPU at +54 MB (so `ingest_batch` keeps them for batches of
several traces only).

jemalloc is reached through `mallctl`, which the DuckDB extension module exports as
`duckdb_je_mallctl`; where it is not there (another build, another platform) nothing is
changed. The setting is the allocator's only: what DuckDB computes is the same.
"""

from __future__ import annotations

import ctypes
import functools
from collections.abc import Iterator
from contextlib import contextmanager


@functools.cache
def _mallctl():
    try:
        import _duckdb

        fn = ctypes.CDLL(_duckdb.__file__).duckdb_je_mallctl
    except (ImportError, OSError, AttributeError):
        return None
    fn.argtypes = [
        ctypes.c_char_p,
        ctypes.c_void_p,
        ctypes.POINTER(ctypes.c_size_t),
        ctypes.c_void_p,
        ctypes.c_size_t,
    ]
    fn.restype = ctypes.c_int
    return fn


def _read(fn, name: bytes, ctype):
    value, size = ctype(0), ctypes.c_size_t(ctypes.sizeof(ctype))
    return value.value if fn(name, ctypes.byref(value), ctypes.byref(size), None, 0) == 0 else None


def _set_decay(fn, arenas: int, ms: int) -> None:
    value = ctypes.c_ssize_t(ms)
    names = [b"arenas.dirty_decay_ms"] + [
        f"arena.{i}.dirty_decay_ms".encode() for i in range(arenas)
    ]
    for name in names:  # an arena not yet in use refuses (it takes the default above)
        fn(name, None, None, ctypes.byref(value), ctypes.sizeof(value))


@contextmanager
def keep_freed_pages() -> Iterator[None]:
    """Within the block, DuckDB's jemalloc keeps freed pages (no decay); the decay it had
    is restored after. A no-op where DuckDB's jemalloc cannot be reached."""
    fn = _mallctl()
    old = _read(fn, b"arenas.dirty_decay_ms", ctypes.c_ssize_t) if fn else None
    arenas = _read(fn, b"arenas.narenas", ctypes.c_uint) if fn else None
    if old is None or arenas is None or old < 0:
        yield
        return
    _set_decay(fn, arenas, -1)
    try:
        yield
    finally:
        _set_decay(fn, arenas, old)
