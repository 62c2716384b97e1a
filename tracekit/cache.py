"""Parquet cache: one file per source trace and table, reused while the source is unchanged.

Layout: `<run>/.tracekit/v<SCHEMA_VERSION>/<key>.<table>.parquet` and `index.json`,
where `key` names the source file and the index records each source's size,
mtime (ns) and the schema version it was ingested with. A source whose size or
mtime changed is ingested again. When the run folder is not writable the cache
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
from pathlib import Path
from typing import TYPE_CHECKING

import platformdirs

from tracekit.sqltext import sql_str

if TYPE_CHECKING:
    import duckdb

SCHEMA_VERSION = 12  # bump when any cached table changes shape or meaning

TABLES = (
    "events",
    "flows",
    "memory",
    "threads",
    "rank_info",
    "process_groups",
    "collectives",
    "steps",
    "device_activity",
    "op_flops",
)


def _writable(d: Path) -> bool:
    try:
        d.mkdir(parents=True, exist_ok=True)
    except OSError:
        return False
    return os.access(d, os.W_OK)


def cache_dir(root: Path) -> Path:
    """Where the cache of the run rooted at `root` lives (created if needed)."""
    local = root / ".tracekit" / f"v{SCHEMA_VERSION}"
    if _writable(local):
        return local
    digest = hashlib.sha1(str(root.resolve()).encode()).hexdigest()[:16]
    user = Path(platformdirs.user_cache_dir("tracekit")) / digest / f"v{SCHEMA_VERSION}"
    user.mkdir(parents=True, exist_ok=True)
    return user


def source_key(root: Path, path: Path) -> str:
    rel = os.path.relpath(path.resolve(), root.resolve())
    stem = Path(rel).name.split(".json")[0][:40]
    return f"{stem}-{hashlib.sha1(rel.encode()).hexdigest()[:10]}"


def fingerprint(path: Path) -> dict:
    st = path.stat()
    return {"size": st.st_size, "mtime_ns": st.st_mtime_ns, "schema": SCHEMA_VERSION}


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
        con.execute(
            f"COPY (SELECT * FROM {source or table}) TO {sql_str(tmp)} "
            "(FORMAT parquet, COMPRESSION zstd, COMPRESSION_LEVEL 1)"
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


def is_fresh(cdir: Path, index: dict, key: str, path: Path) -> bool:
    entry = index.get(key)
    if not entry or entry.get("fingerprint") != fingerprint(path):
        return False
    return all(table_path(cdir, key, t).exists() for t in TABLES)
