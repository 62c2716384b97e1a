"""Parquet cache: one file per table and ingest batch, reused while its sources are unchanged.

Layout: `<run>/.tracekit/v<SCHEMA_VERSION>/<batch>.<table>.parquet` and `index.json`.
An ingest reads its traces in batches (`tracekit.ingest.batchplan.plan_batches`: a big trace
alone, many small ones together); a batch's tables hold its ranks one after another
(each row has its `rank`). The index has an entry per source file, keyed by `key` (its
name), recording its size, mtime (ns), the schema version it was ingested with and the
user's communication-kernel patterns, and its `parts`: one per rank it holds (a merged
TraceFusion trace holds several, `<key>.r<rank>`), each naming its `batch` and how many
parts that batch holds (`batch_parts`). A source whose size or mtime changed, or a run
opened with other patterns, is ingested again, into a new batch; the store then reads
from an older batch only the ranks whose entries still name it (`tracekit.store.Run`),
and batches no entry names are removed. When the run folder is not writable the cache
lives in the per-user cache directory (`platformdirs.user_cache_dir("tracekit")`),
under a hash of the run's absolute path.

Writes are atomic (temporary file + rename): an interrupted ingest leaves the
previous cache or none, never a half-written table.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import secrets
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import platformdirs

from tracekit.errors import TracekitError
from tracekit.ingest.steptables import STEP_TABLES
from tracekit.sql.text import sql_str

try:
    import fcntl
except ImportError:  # Windows: no lock; writes stay atomic, two ingests may both work
    fcntl = None  # type: ignore[assignment]

if TYPE_CHECKING:
    import duckdb

SCHEMA_VERSION = 32  # bump when any cached table changes shape or meaning

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
    "device_steps",
    "device_activity",
    "activity_islands",
    "activity_segments",
    "op_flops",
    "regions",
    "kernel_ops",
    "step_device",
    "step_host",
    "step_marks",
)
# what a fresh entry's batches must hold: the step model's inputs are built only for a run
# the model can cover (`tracekit.ingest.steptables`); the store computes them otherwise
REQUIRED = tuple(t for t in TABLES if t not in STEP_TABLES)


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


@functools.lru_cache(maxsize=4096)
def _real_dir(d: str) -> str:
    return os.path.realpath(d)


def _real(path: Path) -> str:
    """`path.resolve()` as a string, its folder resolved once for all its files (a run of
    1,024 traces resolved each, component by component, in 1.7 s)."""
    p = os.path.abspath(path)
    if os.path.islink(p):
        return os.path.realpath(p)
    head, name = os.path.split(p)
    return os.path.join(_real_dir(head), name)


def source_key(root: Path, path: Path) -> str:
    real, base = _real(path), _real_dir(os.path.abspath(root))
    # a file under the root (every one a folder's discovery finds) is its path past the
    # root's: `relpath`'s answer without its walk over both (20 ms for 1,024 traces)
    if base != os.sep and real.startswith(base + os.sep):
        rel = real[len(base) + 1 :]
    else:
        rel = os.path.relpath(real, base)
    stem = os.path.basename(rel).split(".json")[0][:40]
    return f"{stem}-{hashlib.sha1(rel.encode()).hexdigest()[:10]}"


def fingerprint(path: Path, comm_kernels: tuple[str, ...] = ()) -> dict:
    """What must be unchanged for a cached ingest to stand: the file, the schema, and the
    user's communication-kernel patterns (they decide device_activity and collectives)."""
    st = path.stat()
    fp = {"size": st.st_size, "mtime_ns": st.st_mtime_ns, "schema": SCHEMA_VERSION}
    if comm_kernels:
        fp["comm_kernels"] = list(comm_kernels)
    return fp


def table_path(cdir: Path, batch: str, table: str) -> Path:
    return cdir / f"{batch}.{table}.parquet"


def batch_name(items: list[tuple[str, dict]]) -> str:
    """The name of the batch of these (source key, fingerprint) pairs: the same sources,
    unchanged, make the same batch (an ingest done again rewrites it, never adds one)."""
    h = hashlib.sha1(json.dumps(items, sort_keys=True).encode()).hexdigest()[:16]
    return f"b-{h}"


def batches(index: dict) -> set[str]:
    return {p["batch"] for e in index.values() for p in e.get("parts", ())}


def prune(cdir: Path, index: dict) -> None:
    """Remove the tables of batches no entry of `index` names (every rank in them was
    ingested again elsewhere). Called under the lock."""
    keep = batches(index)
    for p in cdir.glob("*.parquet"):
        if p.name.split(".", 1)[0] not in keep:
            p.unlink(missing_ok=True)


def write_table(
    con: duckdb.DuckDBPyConnection, cdir: Path, key: str, table: str, source: str | None = None
) -> None:
    """Write `source` (a table or view of `con`) as the cached `table` of `key`."""
    dest = table_path(cdir, key, table)
    # a name of this process (the cache is locked, a batch is written once), not mkstemp:
    # its extra create of the file was 0.6 ms of CPU a table, 20 tables a batch
    # and a random part: a Dask worker on another host (or container) may have this pid
    tmp = str(cdir / f".{key}.{table}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
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
    cdir: Path,
    index: dict,
    key: str,
    path: Path,
    comm_kernels: tuple[str, ...] = (),
    present: set[str] | None = None,
) -> bool:
    """Is the cache entry of `key` (the source `path`) there and up to date? `present`:
    the names of the files in `cdir`, when the caller listed them once for many sources."""
    entry = index.get(key)
    if not entry or entry.get("fingerprint") != fingerprint(path, comm_kernels):
        return False
    names = {p.get("batch") for p in entry.get("parts", ())}
    if not names or None in names:
        return False
    if present is None:
        return all(table_path(cdir, b, t).exists() for b in names for t in REQUIRED)
    return all(f"{b}.{t}.parquet" in present for b in names for t in REQUIRED)
