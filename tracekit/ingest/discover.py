"""Find the trace files of a run: a folder scanned recursively, or files listed.

Kept free of heavy imports: a warm open (everything cached) runs only this, the
cache check and DuckDB.
"""

from __future__ import annotations

import gzip
import os
import re
import zlib
from pathlib import Path

from tracekit.errors import TracekitError

TRACE_SUFFIXES = (".json", ".json.gz")

# here, not in `tracefile` (msgspec, isal): discovery reads names on every open
_RANK_IN_NAME = re.compile(r"rank[-_.]?(\d+)", re.IGNORECASE)


def rank_from_name(path: Path) -> int | None:
    """The rank a file's name gives (`rank-3.json`, `trace_rank_12.json.gz`), else None."""
    m = _RANK_IN_NAME.search(path.name)
    return int(m.group(1)) if m else None


_LOOKED: dict[tuple[str, int, int], bool] = {}  # (path, size, mtime_ns) → looks_like_trace


def _looks_like_trace_once(path: Path) -> bool:
    """`looks_like_trace`, probed once per process while the file is unchanged (a command
    may find a run's files twice: its options and its open). A file named like a rank's
    trace is one whatever it holds (`looks_like_trace`'s last test): not opened (1,024
    small ranks: 1,024 opens and gunzips of 4 KiB, 0.06 s before the ingest starts)."""
    if rank_from_name(path) is not None:
        return True
    try:
        st = path.stat()
    except OSError:
        return looks_like_trace(path)
    key = (str(path), st.st_size, st.st_mtime_ns)
    if key not in _LOOKED:
        _LOOKED[key] = looks_like_trace(path)
    return _LOOKED[key]


def looks_like_trace(path: Path, probe_bytes: int = 1 << 20) -> bool:
    """Cheap check used when scanning a folder: is this a trace, or meant to be one?

    Yes when `traceEvents` appears near the start; also when the file cannot be what
    else a run folder holds (other JSON): empty, not gzip-readable, not starting like
    JSON, or named like a rank's trace (`rank-3.json`). Those are read for real and,
    when damaged, named as unreadable instead of silently passed over."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(2)
            fh.seek(0)
            if head == b"\x1f\x8b":
                with gzip.open(fh) as gz:
                    chunk = _probe(gz, probe_bytes)
            else:
                chunk = _probe(fh, probe_bytes)
    except (OSError, EOFError, ValueError, zlib.error):
        return True  # let the real read report the problem in one line
    if chunk is None:
        return True
    if chunk.lstrip()[:1] not in (b"{", b"["):
        return True  # empty or not JSON at all
    return rank_from_name(path) is not None


def _probe(fh, limit: int, step: int = 1 << 12) -> bytes | None:
    """None once `"traceEvents"` is seen (Kineto writes it within the first kilobytes),
    else the first `limit` bytes: every open of a run probes every file, so a trace
    costs one small read, not a megabyte of gunzip (blocks of 4 KiB, doubling: the
    first holds the key in a trace without device properties)."""
    key = b'"traceEvents"'
    data = b""
    while len(data) < limit:
        block = fh.read(min(step, limit - len(data)))
        if not block:
            break
        if key in data[-len(key) :] + block:
            return None
        data += block
        step *= 2
    return data


def find_trace_files(inputs: list[Path]) -> tuple[Path, list[Path]]:
    """The run root and its trace files, from a folder or a list of files.

    A folder is scanned recursively for `*.json` / `*.json.gz` (skipping `.tracekit/`
    caches and `job.json`); files whose start holds no `traceEvents` are skipped.
    """
    files: list[Path] = []
    roots: list[Path] = []
    for raw in inputs:
        p = Path(raw)
        if not p.exists():
            raise TracekitError(f"{p} does not exist; pass a run folder or trace files")
        if p.is_dir():
            roots.append(p)
            found = sorted(
                (
                    f
                    for f in p.rglob("*")
                    if f.name.endswith(TRACE_SUFFIXES)
                    and f.name != "job.json"
                    and ".tracekit" not in f.relative_to(p).parts
                    and f.is_file()
                ),
                key=lambda f: f.parts,  # Paths' own order, without a comparison's parsing
            )
            files.extend(f for f in found if _looks_like_trace_once(f))
        else:
            if not p.name.endswith(TRACE_SUFFIXES):
                raise TracekitError(f"{p} is not a .json or .json.gz trace file")
            roots.append(p.parent)
            files.append(p)
    if not files:
        where = ", ".join(str(r) for r in roots)
        raise TracekitError(
            f"no Kineto traces (*.json, *.json.gz with traceEvents) found in {where}"
        )
    root = Path(os.path.commonpath([str(r.resolve()) for r in roots]))
    # one file listed twice is one file
    seen: dict[Path, None] = {}
    real_dirs: dict[str, str] = {}  # each folder resolved once, not once per file
    for f in files:
        p = os.path.abspath(f)
        if os.path.islink(p):
            seen.setdefault(Path(os.path.realpath(p)), None)
            continue
        head, name = os.path.split(p)
        if head not in real_dirs:
            real_dirs[head] = os.path.realpath(head)
        seen.setdefault(Path(real_dirs[head], name), None)
    return root, list(seen)
