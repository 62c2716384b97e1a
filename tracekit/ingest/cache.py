"""Parquet cache: one file per source trace and table, reused while the source is unchanged.

Layout: `<run>/.tracekit/v<SCHEMA_VERSION>/<key>.<table>.parquet` and `index.json`,
where `key` names the source file and the index records each source's size,
mtime (ns), the schema version it was ingested with and the user's
communication-kernel patterns. A source whose size or mtime changed, or a run
opened with other patterns, is ingested again. A file holding several ranks (a
merged TraceFusion trace) has one key per rank, `<key>.r<rank>`, listed under its
index entry's `parts`. When the run folder is not writable the cache
lives in the per-user cache directory (`platformdirs.user_cache_dir("tracekit")`),
under a hash of the run's absolute path.

Writes are atomic (temporary file + rename): an interrupted ingest leaves the
previous cache or none, never a half-written table.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import platformdirs

from tracekit.errors import TracekitError
from tracekit.sql.text import sql_str

try:
    import fcntl
except ImportError:  # Windows: no lock; writes stay atomic, two ingests may both work
    fcntl = None  # type: ignore[assignment]

if TYPE_CHECKING:
    import duckdb

SCHEMA_VERSION = 21  # bump when any cached table changes shape or meaning

TABLES = (
    "events",
    "flows",
    "memory",
    "threads",
    "rank_info",
    "process_groups",
    "collectives",
    "collective_groups",
    "kernel_classes",
    "steps",
    "device_activity",
    "activity_islands",
    "activity_segments",
    "op_flops",
)


def _writable(d: Path) -> bool:
    """Can we keep a cache in `d` (created if needed)? Decided by trying to write there,
    since root passes every `os.access`; and a run folder whose mode has no write bit
    (a shared, read-only data folder) is not ours to write, even for root."""
    run_folder = d.parent.parent
    try:
        if not run_folder.stat().st_mode & 0o222:
            return False
        d.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=d, prefix=".probe.", suffix=".probe"):
            pass
    except OSError:
        return False
    return True


def cache_dir(root: Path) -> Path:
    """Where the cache of the run rooted at `root` lives (created if needed)."""
    local = root / ".tracekit" / f"v{SCHEMA_VERSION}"
    if _writable(local):
        return local
    digest = hashlib.sha1(str(root.resolve()).encode()).hexdigest()[:16]
    user = Path(platformdirs.user_cache_dir("tracekit")) / digest / f"v{SCHEMA_VERSION}"
    try:
        user.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise TracekitError(
            f"cannot write a cache in {root} or in {user} ({exc.strerror or exc}); set "
            "XDG_CACHE_HOME to a folder you can write"
        ) from exc
    return user


@contextmanager
def locked(cdir: Path) -> Iterator[None]:
    """Hold the cache's lock: one process ingests into `cdir` at a time, the others wait
    and then find its work done. Under the lock, temporary files are leftovers of a
    writer that was killed, and are removed."""
    with open(cdir / ".lock", "a+b") as fh:
        if fcntl is not None:
            fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
        try:
            for tmp in cdir.glob(".*.tmp"):
                tmp.unlink(missing_ok=True)
            yield
        finally:
            if fcntl is not None:
                fcntl.flock(fh.fileno(), fcntl.LOCK_UN)


def source_key(root: Path, path: Path) -> str:
    rel = os.path.relpath(path.resolve(), root.resolve())
    stem = Path(rel).name.split(".json")[0][:40]
    return f"{stem}-{hashlib.sha1(rel.encode()).hexdigest()[:10]}"


def fingerprint(path: Path, comm_kernels: tuple[str, ...] = ()) -> dict:
    """What must be unchanged for a cached ingest to stand: the file, the schema, and the
    user's communication-kernel patterns (they decide device_activity and collectives)."""
    st = path.stat()
    fp = {"size": st.st_size, "mtime_ns": st.st_mtime_ns, "schema": SCHEMA_VERSION}
    if comm_kernels:
        fp["comm_kernels"] = list(comm_kernels)
    return fp


def table_path(cdir: Path, key: str, table: str) -> Path:
    return cdir / f"{key}.{table}.parquet"


def write_table(
    con: duckdb.DuckDBPyConnection, cdir: Path, key: str, table: str, source: str | None = None
) -> None:
    """Write `source` (a table or view of `con`) as the cached `table` of `key`."""
    dest = table_path(cdir, key, table)
    fd, tmp = tempfile.mkstemp(dir=cdir, prefix=f".{key}.{table}.", suffix=".tmp")
    os.close(fd)
    try:
        # snappy, by measurement (one rank of v100_ddp_rank1, events table, one thread):
        # write 0.079 s / 1.4 MB against zstd level 1's 0.126 s / 0.6 MB, reads as fast;
        # the cache is rewritten on every cold ingest and read back a few times
        con.execute(
            f"COPY (SELECT * FROM {source or table}) TO {sql_str(tmp)} "
            "(FORMAT parquet, COMPRESSION snappy)"
        )
        os.chmod(tmp, 0o644)
        os.replace(tmp, dest)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def load_index(cdir: Path) -> dict:
    try:
        return json.loads((cdir / "index.json").read_text())
    except (OSError, ValueError):
        return {}


def save_index(cdir: Path, index: dict) -> None:
    from tracekit.atomic import write_text

    write_text(cdir / "index.json", json.dumps(index, indent=1, sort_keys=True))


def is_fresh(
    cdir: Path, index: dict, key: str, path: Path, comm_kernels: tuple[str, ...] = ()
) -> bool:
    entry = index.get(key)
    if not entry or entry.get("fingerprint") != fingerprint(path, comm_kernels):
        return False
    keys = [p["key"] for p in entry.get("parts", [])] or [key]
    return all(table_path(cdir, k, t).exists() for k in keys for t in TABLES)
